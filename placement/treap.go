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

func (o order) compare(a, b *entry) int { ka := o.key(a); return ka.compare(o.key(b)) }

// key is an entry's position in one order, held inline in the tree nodes so
// a descent does not chase pointers to the entry (at 100,000 hosts the
// cache misses, not the comparisons, are the cost).
type key struct {
	a, b int
	// words is the name's first 24 bytes, big-endian, zero-padded: comparing
	// them compares the names byte-wise (names hold no zero byte).
	words [3]uint64
	name  string
}

// nameWords packs name's first 24 bytes for key.words.
func nameWords(name string) (w [3]uint64) {
	for i := 0; i < 24 && i < len(name); i++ {
		w[i/8] |= uint64(name[i]) << (56 - 8*(i%8))
	}
	return w
}

func (o order) key(e *entry) key {
	k := key{words: e.words, name: e.h.Name}
	switch o {
	case bySessionsAsc:
		k.a = e.h.Sessions
	case bySessionsDesc:
		k.a = -e.h.Sessions
	case byIndexName:
		k.a = e.li
	case byLoad:
		k.a, k.b = e.li, e.h.Connecting
	}
	return k
}

func (k *key) compare(o key) int {
	if c := cmp.Or(cmp.Compare(k.a, o.a), cmp.Compare(k.b, o.b)); c != 0 {
		return c
	}
	for i := range k.words {
		if c := cmp.Compare(k.words[i], o.words[i]); c != 0 {
			return c
		}
	}
	if len(k.name) <= 24 && len(o.name) <= 24 {
		return 0
	}
	return cmp.Compare(k.name, o.name)
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
	prio        uint64
	size        int
	li, minLI   int
}

func newTreap(o order) *treap { return &treap{order: o, seed: 0x2545f4914f6cdd1d} }

func (t *treap) Len() int { return t.root.len() }

func (n *node) len() int {
	if n == nil {
		return 0
	}
	return n.size
}

func (n *node) fix() {
	n.size = 1 + n.left.len() + n.right.len()
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
func (t *treap) rand() uint64 {
	t.seed ^= t.seed << 13
	t.seed ^= t.seed >> 7
	t.seed ^= t.seed << 17
	return t.seed
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
	n.e, n.k, n.li, n.prio = e, t.order.key(e), e.li, t.rand()
	n.fix()
	t.root = t.insert(t.root, n)
}

func (t *treap) insert(root, n *node) *node {
	if root == nil {
		return n
	}
	if n.prio > root.prio {
		n.left, n.right = split(root, &n.k)
		n.fix()
		return n
	}
	if n.k.compare(root.k) < 0 {
		root.left = t.insert(root.left, n)
	} else {
		root.right = t.insert(root.right, n)
	}
	root.fix()
	return root
}

// split divides root into the entries before k and the rest.
func split(root *node, k *key) (*node, *node) {
	if root == nil {
		return nil, nil
	}
	if root.k.compare(*k) < 0 {
		l, r := split(root.right, k)
		root.right = l
		root.fix()
		return root, r
	}
	l, r := split(root.left, k)
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
	if k.compare(root.k) < 0 {
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
		if n.li < limit {
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
	if n == nil || n.minLI >= limit {
		return nil
	}
	if n.k.name > after {
		if e := nextBelow(n.left, after, limit); e != nil {
			return e
		}
		if n.li < limit {
			return n.e
		}
	}
	return nextBelow(n.right, after, limit)
}
