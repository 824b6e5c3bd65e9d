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
// levels; here a path is 3 or 4 nodes, and only the leaf at its end is
// usually out of cache. Leaves are therefore small and hold no pointers: an
// item is its key and its entry's slot in the name table (entry.slot), 12
// bytes, so a leaf's keys fit in a few cache lines, a shift moves plain
// bytes (no write barriers), and the garbage collector never scans a leaf.
type btree struct {
	order  order
	withLI bool
	// ents is the name table's entry array (hostTable.ents) the leaves'
	// slots index; the table's rebuild moves every entry, after which the
	// caller files them all again in new trees.
	ents *[]entry
	// height is 0 while the tree is one leaf (leafRoot, nil when empty),
	// else the number of inner levels above the leaves (innerRoot).
	height    int
	leafRoot  *leaf
	innerRoot *inner
}

// fanout is the most children an inner node holds, leafFanout the most
// items a leaf holds; nodes are split one above and merged with a
// neighbour when both fit in one.
const (
	fanout     = 64
	leafFanout = 64
)

// leaf holds items in key order: keys, their entries' slots and (withLI)
// load indexes. Pointer-free.
type leaf struct {
	n int32
	// lis is kept only in trees made withLI; it comes first so that the
	// round robin search reads it in the lines it reads the keys from.
	lis  [leafFanout + 1]int8
	keys [leafFanout + 1]uint64
	ids  [leafFanout + 1]int32
}

// inner routes to its children: either all inner nodes (kids) or all
// leaves (leaves), by the tree level. Inner nodes are few (one per ~40
// leaves) and stay in cache.
type inner struct {
	n     int32
	total int32 // the subtree's entry count
	// lis[i] is child i's lowest load index (withLI trees only).
	lis [fanout + 1]int8
	// keys[i] is child i's largest key, cnt[i] its size.
	keys   [fanout + 1]uint64
	cnt    [fanout + 1]int32
	kids   [fanout + 1]*inner
	leaves [fanout + 1]*leaf
}

func newTree(o order, withLI bool, ents *[]entry) *btree {
	return &btree{order: o, withLI: withLI, ents: ents}
}

// Len returns the number of entries.
func (t *btree) Len() int {
	switch {
	case t.height > 0:
		return int(t.innerRoot.total)
	case t.leafRoot != nil:
		return int(t.leafRoot.n)
	}
	return 0
}

func (t *btree) at(id int32) *entry { return &(*t.ents)[id] }

// route returns the slot of the first key ≥ k, or n when none.
//
// A linear scan, not a binary search: at 100,000 hosts the keys are not in
// cache, and a scan reads them in order (the hardware prefetches the next
// lines) where a binary search waits for one miss after another. The shift
// that usually follows reads the same lines.
func route(keys []uint64, k uint64) int {
	i := 0
	for i < len(keys) && keys[i] < k {
		i++
	}
	return i
}

func minLI(lis []int8) int8 {
	m := lis[0]
	for _, v := range lis[1:] {
		m = min(m, v)
	}
	return m
}

// recount recomputes an inner node's total after slots moved.
func (n *inner) recount() {
	n.total = 0
	for _, c := range n.cnt[:n.n] {
		n.total += c
	}
}

// summarize refreshes slot i of inner node n from its child (a leaf when
// leafKids).
func (t *btree) summarize(n *inner, leafKids bool, i int) {
	var size int32
	if leafKids {
		c := n.leaves[i]
		n.keys[i], size = c.keys[c.n-1], c.n
		if t.withLI {
			n.lis[i] = minLI(c.lis[:c.n])
		}
	} else {
		c := n.kids[i]
		n.keys[i], size = c.keys[c.n-1], c.total
		if t.withLI {
			n.lis[i] = minLI(c.lis[:c.n])
		}
	}
	n.total += size - n.cnt[i]
	n.cnt[i] = size
}

// Insert adds e under key k (order.key(e); keys are unique).
func (t *btree) Insert(k uint64, e *entry) {
	if t.height == 0 {
		if t.leafRoot == nil {
			t.leafRoot = new(leaf)
		}
		if right := t.leafInsert(t.leafRoot, k, e); right != nil {
			root := &inner{n: 2}
			root.leaves[0], root.leaves[1] = t.leafRoot, right // cnt 0: summarize adds them
			t.summarize(root, true, 0)
			t.summarize(root, true, 1)
			t.innerRoot, t.leafRoot, t.height = root, nil, 1
		}
		return
	}
	if right := t.innerInsert(t.innerRoot, t.height, k, e); right != nil {
		root := &inner{n: 2}
		root.kids[0], root.kids[1] = t.innerRoot, right
		t.summarize(root, false, 0)
		t.summarize(root, false, 1)
		t.innerRoot = root
		t.height++
	}
}

// leafInsert adds e to leaf l and returns l's new right sibling if l split.
func (t *btree) leafInsert(l *leaf, k uint64, e *entry) *leaf {
	i := route(l.keys[:l.n], k)
	copy(l.keys[i+1:l.n+1], l.keys[i:l.n])
	copy(l.ids[i+1:l.n+1], l.ids[i:l.n])
	l.keys[i], l.ids[i] = k, e.slot
	if t.withLI {
		copy(l.lis[i+1:l.n+1], l.lis[i:l.n])
		l.lis[i] = e.li
	}
	l.n++
	if l.n <= leafFanout {
		return nil
	}
	// Split: the upper half moves to a new right sibling.
	half := l.n / 2
	r := &leaf{n: l.n - half}
	copy(r.keys[:], l.keys[half:l.n])
	copy(r.ids[:], l.ids[half:l.n])
	copy(r.lis[:], l.lis[half:l.n])
	l.n = half
	return r
}

// innerInsert adds e under n (height levels above the leaves) and returns
// n's new right sibling if n split.
func (t *btree) innerInsert(n *inner, height int, k uint64, e *entry) *inner {
	i := route(n.keys[:n.n], k)
	if i == int(n.n) {
		i-- // a new largest key goes to the last child
	}
	leafKids := height == 1
	var split bool
	if leafKids {
		if r := t.leafInsert(n.leaves[i], k, e); r != nil {
			n.shiftRight(i + 1)
			n.leaves[i+1] = r
			split = true
		}
	} else if r := t.innerInsert(n.kids[i], height-1, k, e); r != nil {
		n.shiftRight(i + 1)
		n.kids[i+1] = r
		split = true
	}
	t.summarize(n, leafKids, i)
	if split {
		t.summarize(n, leafKids, i+1)
	}
	if n.n <= fanout {
		return nil
	}
	half := n.n / 2
	r := &inner{n: n.n - half}
	copy(r.keys[:], n.keys[half:n.n])
	copy(r.lis[:], n.lis[half:n.n])
	copy(r.cnt[:], n.cnt[half:n.n])
	copy(r.kids[:], n.kids[half:n.n])
	copy(r.leaves[:], n.leaves[half:n.n])
	clear(n.kids[half:n.n])
	clear(n.leaves[half:n.n])
	clear(n.cnt[half:n.n])
	n.n = half
	n.recount()
	r.recount()
	return r
}

// shiftRight opens slot i of n for a new child (cnt 0: summarize adds it).
func (n *inner) shiftRight(i int) {
	copy(n.keys[i+1:n.n+1], n.keys[i:n.n])
	copy(n.lis[i+1:n.n+1], n.lis[i:n.n])
	copy(n.cnt[i+1:n.n+1], n.cnt[i:n.n])
	copy(n.kids[i+1:n.n+1], n.kids[i:n.n])
	copy(n.leaves[i+1:n.n+1], n.leaves[i:n.n])
	n.cnt[i] = 0
	n.n++
}

func (n *inner) removeAt(i int) {
	n.total -= n.cnt[i]
	copy(n.keys[i:], n.keys[i+1:n.n])
	copy(n.lis[i:], n.lis[i+1:n.n])
	copy(n.cnt[i:], n.cnt[i+1:n.n])
	copy(n.kids[i:], n.kids[i+1:n.n])
	copy(n.leaves[i:], n.leaves[i+1:n.n])
	n.n--
	n.kids[n.n], n.leaves[n.n], n.cnt[n.n] = nil, nil, 0
}

func (l *leaf) removeAt(i int) {
	copy(l.keys[i:], l.keys[i+1:l.n])
	copy(l.ids[i:], l.ids[i+1:l.n])
	copy(l.lis[i:], l.lis[i+1:l.n])
	l.n--
}

// Delete removes e, which must be in the tree under key k.
func (t *btree) Delete(k uint64, e *entry) {
	ok := false
	switch {
	case t.height > 0:
		ok = t.innerDelete(t.innerRoot, t.height, k)
		for t.height > 0 && t.innerRoot.n == 1 {
			if t.height == 1 {
				t.leafRoot, t.innerRoot = t.innerRoot.leaves[0], nil
			} else {
				t.innerRoot = t.innerRoot.kids[0]
			}
			t.height--
		}
	case t.leafRoot != nil:
		ok = leafDelete(t.leafRoot, k)
	}
	if !ok {
		panic("placement: tree delete of a missing host " + e.h.Name)
	}
	if t.height == 0 && t.leafRoot != nil && t.leafRoot.n == 0 {
		t.leafRoot = nil
	}
}

// leafDelete removes key k from l. Keys are unique (they end with the name
// label): the key confirms the entry without a read of its slot.
func leafDelete(l *leaf, k uint64) bool {
	i := route(l.keys[:l.n], k)
	if i == int(l.n) || l.keys[i] != k {
		return false
	}
	l.removeAt(i)
	return true
}

func (t *btree) innerDelete(n *inner, height int, k uint64) bool {
	i := route(n.keys[:n.n], k)
	if i == int(n.n) {
		return false
	}
	var size, low int32
	if height == 1 {
		c := n.leaves[i]
		if !leafDelete(c, k) {
			return false
		}
		size, low = c.n, leafFanout/4
	} else {
		c := n.kids[i]
		if !t.innerDelete(c, height-1, k) {
			return false
		}
		size, low = c.n, fanout/4
	}
	switch {
	case size == 0:
		n.removeAt(i)
	case size < low:
		t.summarize(n, height == 1, i)
		t.mergeAround(n, height == 1, i)
	default:
		t.summarize(n, height == 1, i)
	}
	return true
}

// mergeAround merges the small child i of n into a neighbour when both fit.
func (t *btree) mergeAround(n *inner, leafKids bool, i int) {
	size, limit := func(i int) int32 { return n.kids[i].n }, int32(fanout)
	if leafKids {
		size, limit = func(i int) int32 { return n.leaves[i].n }, leafFanout
	}
	j := i + 1
	if j == int(n.n) || size(i)+size(j) > limit {
		j = i - 1
		if j < 0 || size(i)+size(j) > limit {
			return
		}
		i, j = j, i
	}
	if leafKids {
		l, r := n.leaves[i], n.leaves[j]
		copy(l.keys[l.n:], r.keys[:r.n])
		copy(l.ids[l.n:], r.ids[:r.n])
		copy(l.lis[l.n:], r.lis[:r.n])
		l.n += r.n
	} else {
		l, r := n.kids[i], n.kids[j]
		copy(l.keys[l.n:], r.keys[:r.n])
		copy(l.lis[l.n:], r.lis[:r.n])
		copy(l.cnt[l.n:], r.cnt[:r.n])
		copy(l.kids[l.n:], r.kids[:r.n])
		copy(l.leaves[l.n:], r.leaves[:r.n])
		l.n += r.n
		l.recount()
	}
	n.removeAt(j)
	t.summarize(n, leafKids, i)
}

// SetLI records e's new load index (a withLI tree; e stays under key k):
// one descent instead of a delete and an insert.
func (t *btree) SetLI(k uint64, e *entry) {
	ok := false
	switch {
	case t.height > 0:
		_, ok = t.innerSetLI(t.innerRoot, t.height, k, e.li)
	case t.leafRoot != nil:
		_, ok = leafSetLI(t.leafRoot, k, e.li)
	}
	if !ok {
		panic("placement: tree update of a missing host " + e.h.Name)
	}
}

// leafSetLI sets the load index of key k in l and reports whether l's
// lowest changed (the parents above need no update when it did not).
func leafSetLI(l *leaf, k uint64, li int8) (moved, ok bool) {
	i := route(l.keys[:l.n], k)
	if i == int(l.n) || l.keys[i] != k {
		return false, false
	}
	before := l.lis[i]
	l.lis[i] = li
	return lowestMoved(l.lis[:l.n], i, before), true
}

func (t *btree) innerSetLI(n *inner, height int, k uint64, li int8) (moved, ok bool) {
	i := route(n.keys[:n.n], k)
	if i == int(n.n) {
		return false, false
	}
	before := n.lis[i]
	if height == 1 {
		c := n.leaves[i]
		if moved, ok = leafSetLI(c, k, li); moved {
			n.lis[i] = minLI(c.lis[:c.n])
		}
	} else {
		c := n.kids[i]
		if moved, ok = t.innerSetLI(c, height-1, k, li); moved {
			n.lis[i] = minLI(c.lis[:c.n])
		}
	}
	return ok && lowestMoved(n.lis[:n.n], i, before), ok
}

// lowestMoved reports whether the lowest of lis changed when slot i went
// from before to its current value: only when slot i was or is the lowest.
func lowestMoved(lis []int8, i int, before int8) bool {
	if lis[i] == before {
		return false
	}
	return lis[i] < before || before <= minLI(lis)
}

// Kth returns the entry of 0-based rank k, nil when out of range.
func (t *btree) Kth(k int) *entry {
	if k < 0 || k >= t.Len() {
		return nil
	}
	l := t.leafRoot
	if t.height > 0 {
		n, kk := t.innerRoot, int32(k)
		for h := t.height; ; h-- {
			i := 0
			for ; kk >= n.cnt[i]; i++ {
				kk -= n.cnt[i]
			}
			if h == 1 {
				l = n.leaves[i]
				break
			}
			n = n.kids[i]
		}
		k = int(kk)
	}
	return t.at(l.ids[k])
}

// Ascend calls f on the entries in order until f returns false.
func (t *btree) Ascend(f func(*entry) bool) {
	t.ascend(walk{t: t, noLI: true, f: f})
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
	t.ascend(walk{t: t, after: after, limit: int8(max(min(limit, 127), -128)), f: f})
}

func (t *btree) ascend(w walk) {
	switch {
	case t.height > 0:
		w.inner(t.innerRoot, t.height)
	case t.leafRoot != nil:
		w.leaf(t.leafRoot)
	}
}

// walk is one AscendBelow in progress.
type walk struct {
	t *btree
	// noLI: every entry (Ascend), else only those below limit.
	noLI  bool
	after uint64
	limit int8
	f     func(*entry) bool
}

// start is the first slot of keys whose key is above w.after: slots
// before it hold only keys at or before after.
func (w *walk) start(keys []uint64) int { return route(keys, w.after+1) }

func (w *walk) leaf(l *leaf) bool {
	for i := w.start(l.keys[:l.n]); i < int(l.n); i++ {
		if !w.noLI && l.lis[i] >= w.limit {
			continue // not low enough
		}
		if !w.f(w.t.at(l.ids[i])) {
			return false
		}
	}
	return true
}

func (w *walk) inner(n *inner, height int) bool {
	for i := w.start(n.keys[:n.n]); i < int(n.n); i++ {
		if !w.noLI && n.lis[i] >= w.limit {
			continue // nothing low enough
		}
		var more bool
		if height == 1 {
			more = w.leaf(n.leaves[i])
		} else {
			more = w.inner(n.kids[i], height-1)
		}
		if !more {
			return false
		}
	}
	return true
}
