package placement

import "hash/maphash"

// hostTable is the index's name → entry map: open addressing with linear
// probing over one flat array. At 100,000 hosts a lookup costs one cache
// miss for the slot (and the entry, which the caller reads anyway), where a
// Go map walks its directory, a table and a group: two or three misses. It
// fills up to 80% (probes stay short: a hit reads 2.6 slots on average, one
// cache line), so 100,000 hosts take 2 MB.
type hostTable struct {
	seed  maphash.Seed
	slots []hostSlot // a power of two long; e == nil marks an empty slot
	n     int
}

type hostSlot struct {
	hash uint64
	e    *entry
}

func (t *hostTable) hash(name string) uint64 {
	if t.slots == nil {
		t.seed = maphash.MakeSeed()
		t.slots = make([]hostSlot, 8)
	}
	return maphash.String(t.seed, name)
}

// get returns the entry named name, nil when none.
func (t *hostTable) get(name string) *entry {
	if t.n == 0 {
		return nil
	}
	h := t.hash(name)
	mask := len(t.slots) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.e == nil {
			return nil
		}
		if s.hash == h && s.e.h.Name == name {
			return s.e
		}
	}
}

// put adds e, whose name must not be in the table.
func (t *hostTable) put(e *entry) {
	h := t.hash(e.h.Name)
	if (t.n+1)*5 > len(t.slots)*4 {
		t.grow(2 * len(t.slots))
	}
	t.place(hostSlot{h, e})
	t.n++
}

func (t *hostTable) place(s hostSlot) {
	mask := len(t.slots) - 1
	i := int(s.hash) & mask
	for t.slots[i].e != nil {
		i = (i + 1) & mask
	}
	t.slots[i] = s
}

// grow rehashes into size slots (a power of two).
func (t *hostTable) grow(size int) {
	old := t.slots
	t.slots = make([]hostSlot, size)
	for _, s := range old {
		if s.e != nil {
			t.place(s)
		}
	}
}

// reserve makes room for n entries without growing on the way.
func (t *hostTable) reserve(n int) {
	t.hash("")
	size := len(t.slots)
	for n*5 > size*4 {
		size *= 2
	}
	if size > len(t.slots) {
		t.grow(size)
	}
}

// del removes the entry named name, if any. Linear probing needs no
// tombstones: the entries after the hole that would probe past it move
// back into it.
func (t *hostTable) del(name string) {
	if t.n == 0 {
		return
	}
	h := t.hash(name)
	mask := len(t.slots) - 1
	i := int(h) & mask
	for {
		s := &t.slots[i]
		if s.e == nil {
			return
		}
		if s.hash == h && s.e.h.Name == name {
			break
		}
		i = (i + 1) & mask
	}
	for j := (i + 1) & mask; t.slots[j].e != nil; j = (j + 1) & mask {
		// Move j into the hole at i unless j's home lies cyclically in (i, j].
		home := int(t.slots[j].hash) & mask
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = hostSlot{}
	t.n--
}
