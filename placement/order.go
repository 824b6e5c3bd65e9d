package placement

import (
	"slices"
	"strings"
)

// order is how a tree of the index sorts its entries. Every order ends with
// the host name (query order), so keys are unique.
type order uint8

const (
	byName         order = iota // query order
	bySessionsAsc               // BreadthFirst rank (R-BF2)
	bySessionsDesc              // DepthFirst rank (R-DF2)
	byLoad                      // load index, connecting, name (R-LI4 buckets 2, 3)
)

// maxConnectingKey is the largest connecting count byLoad keys tell apart;
// larger counts (no host has 33 million connecting sessions) sort as equal,
// then by name.
const maxConnectingKey = 1<<25 - 1

// key is e's position in order o as one integer: the ordering figures in
// the high 32 bits, e's name label (labels.go) in the low 32. Trees compare
// integers, never names, and hold keys inline: at 100,000 hosts the cache
// misses, not the comparisons, are the cost.
func (o order) key(e *entry) uint64 {
	var hi uint32
	switch o {
	case bySessionsAsc:
		hi = uint32(int32(e.h.Sessions)) ^ 1<<31
	case bySessionsDesc:
		hi = uint32(-int32(e.h.Sessions)) ^ 1<<31
	case byLoad:
		// load index −1..100 in 7 bits, connecting clamped in 25.
		hi = uint32(e.li+1)<<25 | uint32(min(max(e.h.Connecting, 0), maxConnectingKey))
	}
	return uint64(hi)<<32 | uint64(e.label)
}

// labels gives every host a uint32 label whose order is the order of the
// names (query order), so tree keys compare as integers. A new name takes
// the middle of the gap between its neighbours; when there is none, every
// host is relabelled (spread evenly, the upper half left free for names that
// sort last, the common case) and the caller re-files every entry: rare.
type labels struct {
	// sorted holds every entry by name.
	sorted []*entry
}

// labelSpace is the exclusive upper bound of labels; 0 is never a label,
// so it can stand for "before every name".
const labelSpace = 1 << 32

// pos returns how many entries have a name ≤ name.
func (l *labels) pos(name string) int {
	i, found := slices.BinarySearchFunc(l.sorted, name, func(e *entry, n string) int { return strings.Compare(e.h.Name, n) })
	if found {
		i++
	}
	return i
}

// atOrBefore returns the label of the last name ≤ name, 0 when none: every
// entry whose label is above it has a name above name.
func (l *labels) atOrBefore(name string) uint64 {
	if p := l.pos(name); p > 0 {
		return uint64(l.sorted[p-1].label)
	}
	return 0
}

// add labels e (a name not yet present) and reports whether every other
// label changed too.
func (l *labels) add(e *entry) (relabelled bool) {
	p := l.pos(e.h.Name)
	l.sorted = slices.Insert(l.sorted, p, e)
	lo, hi := uint64(0), uint64(labelSpace)
	if p > 0 {
		lo = uint64(l.sorted[p-1].label)
	}
	if p+1 < len(l.sorted) {
		hi = uint64(l.sorted[p+1].label)
	} else if step := l.spacing(); lo+step < hi {
		// Names that sort last (host0001, host0002, ...) are the usual
		// arrivals: step by an even spacing, not half the free space.
		e.label = uint32(lo + step)
		return false
	}
	if hi-lo >= 2 {
		e.label = uint32(lo + (hi-lo)/2)
		return false
	}
	l.relabel()
	return true
}

// build labels a whole set of entries at once (distinct names).
func (l *labels) build(entries []*entry) {
	l.sorted = slices.SortedFunc(slices.Values(entries), func(a, b *entry) int { return strings.Compare(a.h.Name, b.h.Name) })
	l.relabel()
}

// spacing is the gap between labels after a relabel of the current count.
func (l *labels) spacing() uint64 {
	return max(labelSpace/2/uint64(len(l.sorted)+1), 1)
}

// relabel spreads the labels evenly over the lower half of the space.
func (l *labels) relabel() {
	step := l.spacing()
	for i, e := range l.sorted {
		e.label = uint32(uint64(i+1) * step)
	}
}

// moved re-collects the entries after the name table moved them all
// (labels move with them, so their order is unchanged); skip, the entry
// being added, has no label yet.
func (l *labels) moved(t *hostTable, skip *entry) {
	l.sorted = l.sorted[:0]
	t.all(func(e *entry) {
		if e != skip {
			l.sorted = append(l.sorted, e)
		}
	})
	slices.SortFunc(l.sorted, byLabel)
}

// remove forgets e.
func (l *labels) remove(e *entry) {
	p := l.pos(e.h.Name)
	if p > 0 && l.sorted[p-1] == e {
		l.sorted = slices.Delete(l.sorted, p-1, p)
	}
}
