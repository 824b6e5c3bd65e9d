package placement

import "cmp"

// order is how a treap sorts its entries. Every order ends with the host
// name (query order), so keys are unique.
type order uint8

const (
	byName         order = iota // query order
	bySessionsAsc               // BreadthFirst rank (R-BF2)
	bySessionsDesc              // DepthFirst rank (R-DF2)
	byIndexName                 // load index, then name: R-LI3's M-th lowest
	byLoad                      // load index, connecting, name (R-LI4 buckets 2, 3)
)

func (o order) compare(a, b *entry) int { return compareKeys(o.key(a), a, o.key(b), b) }

// key is an entry's position in one order, held inline in the tree nodes so
// a descent does not chase pointers to the entry: at 100,000 hosts the
// cache misses, not the comparisons, are the cost, and key and node are
// sized so a node fills one 64-byte cache line.
type key struct {
	a, b int32
	// words is the name's first 16 bytes, big-endian, zero-padded: comparing
	// them compares the names byte-wise (names hold no zero byte). Only
	// names longer than that and equal so far are compared in full.
	words [2]uint64
}

// nameWords packs name's first 16 bytes for key.words.
func nameWords(name string) (w [2]uint64) {
	for i := 0; i < 16 && i < len(name); i++ {
		w[i/8] |= uint64(name[i]) << (56 - 8*(i%8))
	}
	return w
}

func (o order) key(e *entry) key {
	k := key{words: e.words}
	switch o {
	case bySessionsAsc:
		k.a = int32(e.h.Sessions)
	case bySessionsDesc:
		k.a = -int32(e.h.Sessions)
	case byIndexName:
		k.a = int32(e.li)
	case byLoad:
		k.a, k.b = int32(e.li), int32(e.h.Connecting)
	}
	return k
}

// compareKeys orders two entries by their keys, reading the entries' names
// only when the inline part ties and both names are longer than 16 bytes.
func compareKeys(k key, ke *entry, o key, oe *entry) int {
	if c := cmp.Or(cmp.Compare(k.a, o.a), cmp.Compare(k.b, o.b),
		cmp.Compare(k.words[0], o.words[0]), cmp.Compare(k.words[1], o.words[1])); c != 0 {
		return c
	}
	if ke == oe || len(ke.h.Name) <= 16 || len(oe.h.Name) <= 16 {
		return 0
	}
	return cmp.Compare(ke.h.Name, oe.h.Name)
}

// treap is an order-statistic tree (a randomized balanced binary search
// tree) of entries: insert, delete, k-th and rank in O(log n). Each node
// also keeps its subtree's lowest load index, so "next host in query order
// after X whose load index is below T" (R-LI4 round robin) is O(log n) too.
//
// An entry's key fields must not change while it is in a treap: callers
// delete, change, then insert.
type treap struct {
	root  *node
	order order
	seed  uint64
	free  *node
}

type node struct {
	k           key
	e           *entry
	left, right *node
	prio        uint32
	size        int32
	li, minLI   int32
}

func newTreap(o order) *treap { return &treap{order: o, seed: 0x2545f4914f6cdd1d} }

func (t *treap) Len() int { return t.root.len() }

func (n *node) len() int {
	if n == nil {
		return 0
	}
	return int(n.size)
}

func (n *node) fix() {
	n.size = int32(1 + n.left.len() + n.right.len())
	n.minLI = n.li
	if n.left != nil && n.left.minLI < n.minLI {
		n.minLI = n.left.minLI
	}
	if n.right != nil && n.right.minLI < n.minLI {
		n.minLI = n.right.minLI
	}
}

// rand is xorshift64: tree shape only, never a decision, so it does not
// touch the engine's injected Rand.
func (t *treap) rand() uint32 {
	t.seed ^= t.seed << 13
	t.seed ^= t.seed >> 7
	t.seed ^= t.seed << 17
	return uint32(t.seed >> 32)
}

// Insert adds e.
func (t *treap) Insert(e *entry) {
	n := t.free
	if n != nil {
		t.free = n.right
		*n = node{}
	} else {
		n = &node{}
	}
	n.e, n.k, n.li, n.prio = e, t.order.key(e), int32(e.li), t.rand()
	n.fix()
	t.root = t.insert(t.root, n)
}

func (t *treap) insert(root, n *node) *node {
	if root == nil {
		return n
	}
	if n.prio > root.prio {
		n.left, n.right = split(root, &n.k, n.e)
		n.fix()
		return n
	}
	if compareKeys(n.k, n.e, root.k, root.e) < 0 {
		root.left = t.insert(root.left, n)
	} else {
		root.right = t.insert(root.right, n)
	}
	root.fix()
	return root
}

// split divides root into the entries before k and the rest.
func split(root *node, k *key, e *entry) (*node, *node) {
	if root == nil {
		return nil, nil
	}
	if compareKeys(root.k, root.e, *k, e) < 0 {
		l, r := split(root.right, k, e)
		root.right = l
		root.fix()
		return root, r
	}
	l, r := split(root.left, k, e)
	root.left = r
	root.fix()
	return l, root
}

func merge(a, b *node) *node {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case a.prio > b.prio:
		a.right = merge(a.right, b)
		a.fix()
		return a
	default:
		b.left = merge(a, b.left)
		b.fix()
		return b
	}
}

// Delete removes e, which must be in the treap under its current key.
func (t *treap) Delete(e *entry) {
	k := t.order.key(e)
	t.root = t.delete(t.root, e, &k)
}

func (t *treap) delete(root *node, e *entry, k *key) *node {
	if root == nil {
		panic("placement: treap delete of a missing host " + e.h.Name)
	}
	if root.e == e {
		n := merge(root.left, root.right)
		*root = node{right: t.free}
		t.free = root
		return n
	}
	if compareKeys(*k, e, root.k, root.e) < 0 {
		root.left = t.delete(root.left, e, k)
	} else {
		root.right = t.delete(root.right, e, k)
	}
	root.fix()
	return root
}

// Kth returns the entry of 0-based rank k.
func (t *treap) Kth(k int) *entry {
	n := t.root
	for n != nil {
		l := n.left.len()
		switch {
		case k < l:
			n = n.left
		case k == l:
			return n.e
		default:
			k -= l + 1
			n = n.right
		}
	}
	return nil
}

// CountBelow returns how many entries have a load index below limit; the
// treap must be ordered by load index first.
func (t *treap) CountBelow(limit int) int {
	count := 0
	for n := t.root; n != nil; {
		if int(n.li) < limit {
			count += n.left.len() + 1
			n = n.right
		} else {
			n = n.left
		}
	}
	return count
}

// Ascend calls f on the entries in order until f returns false.
func (t *treap) Ascend(f func(*entry) bool) { ascend(t.root, f) }

func ascend(n *node, f func(*entry) bool) bool {
	if n == nil {
		return true
	}
	return ascend(n.left, f) && f(n.e) && ascend(n.right, f)
}

// NextBelow returns the first entry, in a treap ordered by name, whose name
// is after `after` and whose load index is below limit; nil when none.
func (t *treap) NextBelow(after string, limit int) *entry {
	return nextBelow(t.root, after, limit)
}

func nextBelow(n *node, after string, limit int) *entry {
	if n == nil || int(n.minLI) >= limit {
		return nil
	}
	if n.e.h.Name > after {
		if e := nextBelow(n.left, after, limit); e != nil {
			return e
		}
		if int(n.li) < limit {
			return n.e
		}
	}
	return nextBelow(n.right, after, limit)
}
