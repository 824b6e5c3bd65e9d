package placement

// btree is an order-statistic B+tree of entries, the index's ordered set:
// insert, delete, k-th in O(log n), with few cache misses per operation.
// Keys are uint64 (order.key: the ordering fields and the host's name label
// packed so that integer order is the tree's order), held in a dense array
// per node, so a leaf's search and shift read a few cache lines. Each child
// slot of an inner node keeps its subtree's size and largest key, so k-th
// (R-BF2) descends one path; trees made withLI also keep each slot's lowest
// load index, so "next host in query order after X whose load index is
// below T" (R-LI4 round robin) descends one path too.
//
// Why a B+tree and not a binary tree: at 100,000 hosts the cost of a
// decision is cache misses. A balanced binary tree misses on most of its ~20
// levels; here a path is 3 or 4 nodes.
type btree struct {
	root   *bnode
	order  order
	withLI bool
}

// fanout is the most items (leaf) or children (inner) a node holds; nodes
// are split at fanout+1 and merged with a neighbour when both fit in one.
const fanout = 64

// bnode is a leaf or an inner node. The header, lis and the first keys
// share the node's first 128 bytes (the pair of cache lines the hardware
// fetches together): a descent that stops early in a node, or a load index
// update, reads one pair.
type bnode struct {
	leaf bool
	// withLI: the node keeps lis (its tree is withLI).
	withLI bool
	n      int
	// total is the subtree's entry count (inner nodes; a leaf's is n).
	total int
	// lis[i] is item i's load index (leaf) or child i's lowest (inner);
	// kept only in trees made withLI.
	lis [fanout + 1]int8
	// keys[i] is item i's key (leaf) or child i's largest key (inner).
	keys [fanout + 1]uint64
	// inner only: child i's size.
	cnt [fanout + 1]int32
	// ents[i] is item i (leaf only); kids[i] child i (inner only).
	ents [fanout + 1]*entry
	kids [fanout + 1]*bnode
}

func newTree(o order, withLI bool) *btree { return &btree{order: o, withLI: withLI} }

// Len returns the number of entries.
func (t *btree) Len() int {
	if t.root == nil {
		return 0
	}
	return t.root.size()
}

func (n *bnode) size() int {
	if n.leaf {
		return n.n
	}
	return n.total
}

// recount recomputes an inner node's total after slots moved.
func (n *bnode) recount() {
	n.total = 0
	for i := 0; i < n.n; i++ {
		n.total += int(n.cnt[i])
	}
}

func (n *bnode) minLI() int8 {
	m := n.lis[0]
	for _, v := range n.lis[1:n.n] {
		m = min(m, v)
	}
	return m
}

// summarize refreshes slot i of inner node n from its child.
func (t *btree) summarize(n *bnode, i int) {
	c := n.kids[i]
	n.keys[i] = c.keys[c.n-1]
	size := int32(c.size())
	n.total += int(size - n.cnt[i])
	n.cnt[i] = size
	if t.withLI {
		n.lis[i] = c.minLI()
	}
}

// route returns the slot of the first key ≥ k, or n.n when none.
//
// A linear scan, not a binary search: at 100,000 hosts the keys are not in
// cache, and a scan reads them in order (the hardware prefetches the next
// lines) where a binary search waits for one miss after another. The shift
// that usually follows reads the same lines.
func (n *bnode) route(k uint64) int {
	i := 0
	for i < n.n && n.keys[i] < k {
		i++
	}
	return i
}

// Insert adds e under key k (order.key(e); keys are unique).
func (t *btree) Insert(k uint64, e *entry) {
	if t.root == nil {
		t.root = &bnode{leaf: true, withLI: t.withLI}
	}
	if right := t.insert(t.root, k, e); right != nil {
		left := t.root
		t.root = &bnode{n: 2, withLI: t.withLI}
		t.root.kids[0], t.root.kids[1] = left, right // cnt 0: summarize adds them
		t.summarize(t.root, 0)
		t.summarize(t.root, 1)
	}
}

// insert adds e under n and returns n's new right sibling if n split.
func (t *btree) insert(n *bnode, k uint64, e *entry) *bnode {
	i := n.route(k)
	if n.leaf {
		n.shiftRight(i)
		n.keys[i], n.ents[i] = k, e
		if t.withLI {
			n.lis[i] = e.li
		}
	} else {
		if i == n.n {
			i-- // a new largest key goes to the last child
		}
		right := t.insert(n.kids[i], k, e)
		t.summarize(n, i)
		if right != nil {
			n.shiftRight(i + 1)
			n.kids[i+1] = right
			t.summarize(n, i+1)
		}
	}
	if n.n <= fanout {
		return nil
	}
	// Split: the upper half moves to a new right sibling.
	half := n.n / 2
	right := &bnode{leaf: n.leaf, withLI: n.withLI, n: n.n - half}
	copy(right.keys[:], n.keys[half:n.n])
	copy(right.lis[:], n.lis[half:n.n])
	if n.leaf {
		copy(right.ents[:], n.ents[half:n.n])
		clear(n.ents[half:n.n])
	} else {
		copy(right.cnt[:], n.cnt[half:n.n])
		copy(right.kids[:], n.kids[half:n.n])
		clear(n.kids[half:n.n])
		clear(n.cnt[half:n.n])
	}
	n.n = half
	if !n.leaf {
		n.recount()
		right.recount()
	}
	return right
}

func (n *bnode) shiftRight(i int) {
	copy(n.keys[i+1:n.n+1], n.keys[i:n.n])
	if n.withLI {
		copy(n.lis[i+1:n.n+1], n.lis[i:n.n])
	}
	if n.leaf {
		copy(n.ents[i+1:n.n+1], n.ents[i:n.n])
	} else {
		copy(n.cnt[i+1:n.n+1], n.cnt[i:n.n])
		copy(n.kids[i+1:n.n+1], n.kids[i:n.n])
		n.cnt[i] = 0 // the slot's child is summarized next
	}
	n.n++
}

func (n *bnode) removeAt(i int) {
	copy(n.keys[i:], n.keys[i+1:n.n])
	if n.withLI {
		copy(n.lis[i:], n.lis[i+1:n.n])
	}
	if n.leaf {
		copy(n.ents[i:], n.ents[i+1:n.n])
		n.ents[n.n-1] = nil
	} else {
		n.total -= int(n.cnt[i])
		copy(n.cnt[i:], n.cnt[i+1:n.n])
		copy(n.kids[i:], n.kids[i+1:n.n])
		n.kids[n.n-1] = nil
		n.cnt[n.n-1] = 0
	}
	n.n--
}

// Delete removes e, which must be in the tree under key k.
func (t *btree) Delete(k uint64, e *entry) {
	if t.root == nil || !t.delete(t.root, k, e) {
		panic("placement: tree delete of a missing host " + e.h.Name)
	}
	for !t.root.leaf && t.root.n == 1 {
		t.root = t.root.kids[0]
	}
	if t.root.n == 0 {
		t.root = nil
	}
}

func (t *btree) delete(n *bnode, k uint64, e *entry) bool {
	i := n.route(k)
	if i == n.n {
		return false
	}
	if n.leaf {
		// Keys are unique (they end with the name label): the key confirms
		// the entry without a read of the leaf's entry slots.
		if n.keys[i] != k {
			return false
		}
		n.removeAt(i)
		return true
	}
	c := n.kids[i]
	if !t.delete(c, k, e) {
		return false
	}
	switch {
	case c.n == 0:
		n.removeAt(i)
	case c.n < fanout/4:
		t.summarize(n, i)
		t.mergeAround(n, i)
	default:
		t.summarize(n, i)
	}
	return true
}

// mergeAround merges the small child i of n into a neighbour when both fit.
func (t *btree) mergeAround(n *bnode, i int) {
	j := i + 1
	if j == n.n || n.kids[i].n+n.kids[j].n > fanout {
		j = i - 1
		if j < 0 || n.kids[i].n+n.kids[j].n > fanout {
			return
		}
		i, j = j, i
	}
	l, r := n.kids[i], n.kids[j]
	copy(l.keys[l.n:], r.keys[:r.n])
	copy(l.lis[l.n:], r.lis[:r.n])
	if l.leaf {
		copy(l.ents[l.n:], r.ents[:r.n])
	} else {
		copy(l.cnt[l.n:], r.cnt[:r.n])
		copy(l.kids[l.n:], r.kids[:r.n])
	}
	l.n += r.n
	if !l.leaf {
		l.recount()
	}
	n.removeAt(j)
	t.summarize(n, i)
}

// SetLI records e's new load index (a withLI tree; e stays under key k):
// one descent instead of a delete and an insert.
func (t *btree) SetLI(k uint64, e *entry) {
	if t.root == nil {
		panic("placement: tree update of a missing host " + e.h.Name)
	}
	t.setLI(t.root, k, e)
}

// setLI sets e's load index under n and reports whether n's lowest changed
// (the parents above need no update when it did not).
func (t *btree) setLI(n *bnode, k uint64, e *entry) (moved bool) {
	i := n.route(k)
	if i == n.n || (n.leaf && n.keys[i] != k) {
		panic("placement: tree update of a missing host " + e.h.Name)
	}
	before := n.lis[i]
	if n.leaf {
		n.lis[i] = e.li
	} else if t.setLI(n.kids[i], k, e) {
		n.lis[i] = n.kids[i].minLI()
	}
	if n.lis[i] == before {
		return false
	}
	// n's lowest moves only when slot i was or is the lowest.
	return n.lis[i] < before || before <= n.minLI()
}

// Kth returns the entry of 0-based rank k, nil when out of range.
func (t *btree) Kth(k int) *entry {
	if k < 0 || k >= t.Len() {
		return nil
	}
	n := t.root
	for !n.leaf {
		i := 0
		for ; k >= int(n.cnt[i]); i++ {
			k -= int(n.cnt[i])
		}
		n = n.kids[i]
	}
	return n.ents[k]
}

// Ascend calls f on the entries in order until f returns false.
func (t *btree) Ascend(f func(*entry) bool) {
	if t.root != nil {
		t.root.ascend(f)
	}
}

func (n *bnode) ascend(f func(*entry) bool) bool {
	for i := 0; i < n.n; i++ {
		if n.leaf {
			if !f(n.ents[i]) {
				return false
			}
		} else if !n.kids[i].ascend(f) {
			return false
		}
	}
	return true
}

// NextBelow returns the first entry, in a withLI tree, whose key is above
// after and whose load index is below limit; nil when none. In a tree
// ordered by name, after is a name label (0: from the start).
func (t *btree) NextBelow(after uint64, limit int) *entry {
	var found *entry
	t.AscendBelow(after, limit, func(e *entry) bool { found = e; return false })
	return found
}

// AscendBelow calls f, in order, on the entries of a withLI tree whose key
// is above after and whose load index is below limit, until f returns
// false. It walks one path down to the first and then only the subtrees
// that hold such entries.
func (t *btree) AscendBelow(after uint64, limit int, f func(*entry) bool) {
	if t.root != nil {
		t.root.ascendBelow(after, int8(max(min(limit, 127), -128)), f)
	}
}

func (n *bnode) ascendBelow(after uint64, limit int8, f func(*entry) bool) bool {
	// Slots before route(after+1) hold only keys at or before after.
	for i := n.route(after + 1); i < n.n; i++ {
		if n.lis[i] >= limit {
			continue // nothing low enough
		}
		if n.leaf {
			if !f(n.ents[i]) {
				return false
			}
		} else if !n.kids[i].ascendBelow(after, limit, f) {
			return false
		}
	}
	return true
}
