package placement

// btree is an order-statistic B+tree of entries, the index's ordered set:
// insert, delete, k-th and rank in O(log n), with few cache misses per
// operation. Each child slot of an inner node keeps its subtree's size,
// largest key and lowest load index, so k-th (R-BF2), "how many below T"
// and "M-th lowest" (R-LI3) and "next host in query order after X whose
// load index is below T" (R-LI4 round robin) all descend one path.
//
// Why a B+tree and not a binary tree: at 100,000 hosts the cost of a
// decision is cache misses. A balanced binary tree misses on most of its ~20
// levels; here a path is 3 or 4 nodes, each scanned linearly (which the
// hardware prefetches).
//
// An entry's key fields must not change while it is in a tree: callers
// delete, change, then insert.
type btree struct {
	root  *bnode
	order order
}

// fanout is the most items (leaf) or children (inner) a node holds; nodes
// are split at fanout+1 and merged with a neighbour when both fit in one.
const fanout = 32

type bnode struct {
	leaf bool
	n    int
	// total is the subtree's entry count (inner nodes; a leaf's is n).
	total int
	// keys[i] is item i's key (leaf) or child i's largest key (inner);
	// ents[i] the entry it belongs to (for full-name ties).
	keys [fanout + 1]key
	ents [fanout + 1]*entry
	// lis[i] is item i's load index (leaf) or child i's lowest (inner).
	lis [fanout + 1]int32
	// inner only: child i and its size.
	cnt  [fanout + 1]int32
	kids [fanout + 1]*bnode
}

func newTree(o order) *btree { return &btree{order: o} }

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

func (n *bnode) minLI() int32 {
	m := n.lis[0]
	for i := 1; i < n.n; i++ {
		m = min(m, n.lis[i])
	}
	return m
}

// summarize refreshes slot i of inner node n from its child.
func (n *bnode) summarize(i int) {
	c := n.kids[i]
	n.keys[i], n.ents[i] = c.keys[c.n-1], c.ents[c.n-1]
	size := int32(c.size())
	n.total += int(size - n.cnt[i])
	n.cnt[i] = size
	n.lis[i] = c.minLI()
}

// route returns the slot of the first key ≥ k, or n.n when none.
func (n *bnode) route(k *key, e *entry) int {
	lo, hi := 0, n.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if compareKeys(n.keys[m], n.ents[m], *k, e) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// Insert adds e.
func (t *btree) Insert(e *entry) {
	k := t.order.key(e)
	if t.root == nil {
		t.root = &bnode{leaf: true}
	}
	if right := t.insert(t.root, &k, e); right != nil {
		left := t.root
		t.root = &bnode{n: 2}
		t.root.kids[0], t.root.kids[1] = left, right // cnt 0: summarize adds them
		t.root.summarize(0)
		t.root.summarize(1)
	}
}

// insert adds e under n and returns n's new right sibling if n split.
func (t *btree) insert(n *bnode, k *key, e *entry) *bnode {
	i := n.route(k, e)
	if n.leaf {
		n.shiftRight(i)
		n.keys[i], n.ents[i], n.lis[i] = *k, e, int32(e.li)
	} else {
		if i == n.n {
			i-- // a new largest key goes to the last child
		}
		right := t.insert(n.kids[i], k, e)
		n.summarize(i)
		if right != nil {
			n.shiftRight(i + 1)
			n.kids[i+1] = right
			n.summarize(i + 1)
		}
	}
	if n.n <= fanout {
		return nil
	}
	// Split: the upper half moves to a new right sibling.
	half := n.n / 2
	right := &bnode{leaf: n.leaf, n: n.n - half}
	copy(right.keys[:], n.keys[half:n.n])
	copy(right.ents[:], n.ents[half:n.n])
	copy(right.lis[:], n.lis[half:n.n])
	copy(right.cnt[:], n.cnt[half:n.n])
	copy(right.kids[:], n.kids[half:n.n])
	clear(n.ents[half:n.n])
	clear(n.kids[half:n.n])
	clear(n.cnt[half:n.n])
	n.n = half
	if !n.leaf {
		n.recount()
		right.recount()
	}
	return right
}

func (n *bnode) shiftRight(i int) {
	copy(n.keys[i+1:n.n+1], n.keys[i:n.n])
	copy(n.ents[i+1:n.n+1], n.ents[i:n.n])
	copy(n.lis[i+1:n.n+1], n.lis[i:n.n])
	if !n.leaf {
		copy(n.cnt[i+1:n.n+1], n.cnt[i:n.n])
		copy(n.kids[i+1:n.n+1], n.kids[i:n.n])
		n.cnt[i] = 0 // the slot's child is summarized next
	}
	n.n++
}

func (n *bnode) removeAt(i int) {
	copy(n.keys[i:], n.keys[i+1:n.n])
	copy(n.ents[i:], n.ents[i+1:n.n])
	copy(n.lis[i:], n.lis[i+1:n.n])
	if !n.leaf {
		n.total -= int(n.cnt[i])
		copy(n.cnt[i:], n.cnt[i+1:n.n])
		copy(n.kids[i:], n.kids[i+1:n.n])
		n.kids[n.n-1] = nil
		n.cnt[n.n-1] = 0
	}
	n.ents[n.n-1] = nil
	n.n--
}

// Delete removes e, which must be in the tree under its current key.
func (t *btree) Delete(e *entry) {
	k := t.order.key(e)
	if t.root == nil || !t.delete(t.root, &k, e) {
		panic("placement: tree delete of a missing host " + e.h.Name)
	}
	for !t.root.leaf && t.root.n == 1 {
		t.root = t.root.kids[0]
	}
	if t.root.n == 0 {
		t.root = nil
	}
}

func (t *btree) delete(n *bnode, k *key, e *entry) bool {
	i := n.route(k, e)
	if i == n.n {
		return false
	}
	if n.leaf {
		if n.ents[i] != e {
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
		n.summarize(i)
		n.mergeAround(i)
	default:
		n.summarize(i)
	}
	return true
}

// mergeAround merges the small child i into a neighbour when both fit.
func (n *bnode) mergeAround(i int) {
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
	copy(l.ents[l.n:], r.ents[:r.n])
	copy(l.lis[l.n:], r.lis[:r.n])
	copy(l.cnt[l.n:], r.cnt[:r.n])
	copy(l.kids[l.n:], r.kids[:r.n])
	l.n += r.n
	if !l.leaf {
		l.recount()
	}
	n.removeAt(j)
	n.summarize(i)
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

// CountBelow returns how many entries have a load index below limit; the
// tree must be ordered by load index first.
func (t *btree) CountBelow(limit int) int {
	count := 0
	for n := t.root; n != nil; {
		i := 0
		for ; i < n.n && int(n.keys[i].a) < limit; i++ {
			if n.leaf {
				count++
			} else {
				count += int(n.cnt[i])
			}
		}
		if n.leaf || i == n.n {
			break
		}
		n = n.kids[i] // holds the first key at or over limit; some below may precede it
	}
	return count
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

// NextBelow returns the first entry, in a tree ordered by name, whose name
// is after `after` and whose load index is below limit; nil when none.
func (t *btree) NextBelow(after string, limit int) *entry {
	if t.root == nil {
		return nil
	}
	probe := &entry{h: Host{Name: after}, words: nameWords(after)}
	k := byName.key(probe)
	return t.root.nextBelow(&k, probe, int32(limit))
}

func (n *bnode) nextBelow(k *key, probe *entry, limit int32) *entry {
	for i := 0; i < n.n; i++ {
		if n.lis[i] >= limit || compareKeys(n.keys[i], n.ents[i], *k, probe) <= 0 {
			continue // nothing low enough, or everything at or before `after`
		}
		if n.leaf {
			return n.ents[i]
		}
		if e := n.kids[i].nextBelow(k, probe, limit); e != nil {
			return e
		}
	}
	return nil
}
