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

func (o order) compare(a, b *entry) int {
	switch o {
	case bySessionsAsc:
		if c := cmp.Compare(a.h.Sessions, b.h.Sessions); c != 0 {
			return c
		}
	case bySessionsDesc:
		if c := cmp.Compare(b.h.Sessions, a.h.Sessions); c != 0 {
			return c
		}
	case byIndexName:
		if c := cmp.Compare(a.li, b.li); c != 0 {
			return c
		}
	case byLoad:
		if c := cmp.Or(cmp.Compare(a.li, b.li), cmp.Compare(a.h.Connecting, b.h.Connecting)); c != 0 {
			return c
		}
	}
	return cmp.Compare(a.h.Name, b.h.Name)
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
	e           *entry
	left, right *node
	prio        uint64
	size        int
	minLI       int
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
	n.minLI = n.e.li
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
	n.e, n.prio = e, t.rand()
	n.fix()
	t.root = t.insert(t.root, n)
}

func (t *treap) insert(root, n *node) *node {
	if root == nil {
		return n
	}
	if n.prio > root.prio {
		n.left, n.right = t.split(root, n.e)
		n.fix()
		return n
	}
	if t.order.compare(n.e, root.e) < 0 {
		root.left = t.insert(root.left, n)
	} else {
		root.right = t.insert(root.right, n)
	}
	root.fix()
	return root
}

// split divides root into the entries before e and the rest.
func (t *treap) split(root *node, e *entry) (*node, *node) {
	if root == nil {
		return nil, nil
	}
	if t.order.compare(root.e, e) < 0 {
		l, r := t.split(root.right, e)
		root.right = l
		root.fix()
		return root, r
	}
	l, r := t.split(root.left, e)
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
	t.root = t.delete(t.root, e)
}

func (t *treap) delete(root *node, e *entry) *node {
	if root == nil {
		panic("placement: treap delete of a missing host " + e.h.Name)
	}
	if root.e == e {
		n := merge(root.left, root.right)
		root.e, root.left, root.right = nil, nil, t.free
		t.free = root
		return n
	}
	if t.order.compare(e, root.e) < 0 {
		root.left = t.delete(root.left, e)
	} else {
		root.right = t.delete(root.right, e)
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
		if n.e.li < limit {
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
	if n.e.h.Name > after {
		if e := nextBelow(n.left, after, limit); e != nil {
			return e
		}
		if n.e.li < limit {
			return n.e
		}
	}
	return nextBelow(n.right, after, limit)
}
