package placement

import "cmp"

// order is how a tree of the index sorts its entries. Every order ends with the host
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
// only when the inline part ties and both names are 16 bytes or longer.
func compareKeys(k key, ke *entry, o key, oe *entry) int {
	switch {
	case k.a != o.a:
		return cmp.Compare(k.a, o.a)
	case k.b != o.b:
		return cmp.Compare(k.b, o.b)
	case k.words[0] != o.words[0]:
		return cmp.Compare(k.words[0], o.words[0])
	case k.words[1] != o.words[1]:
		return cmp.Compare(k.words[1], o.words[1])
	}
	// Equal prefixes: a name shorter than 16 bytes is then the same name
	// (its zero padding matched); only two names of 16 bytes or more may
	// still differ after it.
	if ke == oe || len(ke.h.Name) < 16 || len(oe.h.Name) < 16 {
		return 0
	}
	return cmp.Compare(ke.h.Name, oe.h.Name)
}
