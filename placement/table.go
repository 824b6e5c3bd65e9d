package placement

import "hash/maphash"

// hostTable is the index's name → entry map, and where the entries live:
// open addressing with linear probing, the entries themselves in ents,
// slot for slot beside their hashes. A lookup computes the home slot from
// the name's hash and reads the slot's hash and the entry's name together,
// so at 100,000 hosts it waits for one round trip to memory, where a table
// of pointers costs two in a row (slot, then entry) and a Go map two or
// three.
//
// Entries never move while they live: a removed host leaves a tombstone,
// and the table is rebuilt into a new array only when it fills up (add
// reports it: the caller must then re-file every entry, like a relabel).
// Up to 80% of the slots are used (live or tombstone), so probes stay
// short and 100,000 hosts take 26 MB (the entries' 19 MB, and room).
type hostTable struct {
	seed   maphash.Seed
	hashes []uint64 // slotEmpty, slotDeleted, or a live name's hash|slotLive
	ents   []entry
	n      int // live entries
	used   int // live entries and tombstones
}

const (
	slotEmpty   = 0
	slotDeleted = 1
	slotLive    = 2 // set in every live slot's hash, so it is neither of the above
)

func (t *hostTable) hash(name string) uint64 {
	if t.hashes == nil {
		t.seed = maphash.MakeSeed()
		t.hashes = make([]uint64, 8)
		t.ents = make([]entry, 8)
	}
	return maphash.String(t.seed, name)
}

// get returns the entry named name, nil when none.
func (t *hostTable) get(name string) *entry {
	if t.n == 0 {
		return nil
	}
	h := t.hash(name)
	mask := len(t.hashes) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		// Read the entry's name before the slot's hash is known: the two
		// loads go out together, so a lookup at 100,000 hosts waits for one
		// round trip to memory, not two in a row (with the hash tested
		// first, the CPU guesses the probe goes on and fetches the entry
		// only once the hash has arrived).
		e := &t.ents[i]
		en := e.h.Name
		hv := t.hashes[i]
		if hv == h|slotLive && en == name {
			return e
		}
		if hv == slotEmpty {
			return nil
		}
	}
}

// add puts a new entry holding h, whose name must not be in the table, and
// returns it. moved reports that the table was rebuilt: every other entry
// now lives elsewhere (the old copies are detached: tree nil).
func (t *hostTable) add(h Host) (e *entry, moved bool) {
	t.hash("")
	if (t.used+1)*5 > len(t.hashes)*4 {
		size := len(t.hashes)
		if (t.n+1)*5 > size*2 { // more than 40% live: double, else drop tombstones
			size *= 2
		}
		t.rebuild(size)
		moved = true
	}
	e = t.place(h)
	t.n++
	t.used++
	return e, moved
}

// place stores h in the first free slot of its probe sequence.
func (t *hostTable) place(h Host) *entry {
	hash := t.hash(h.Name)
	mask := len(t.hashes) - 1
	i := int(hash) & mask
	for t.hashes[i] >= slotLive {
		i = (i + 1) & mask
	}
	if t.hashes[i] == slotDeleted {
		t.used-- // the caller counts the slot as newly used
	}
	t.hashes[i] = hash | slotLive
	e := &t.ents[i]
	*e = entry{heapAt: -1, slot: int32(i), nf: nfStale, h: cloneHost(h)}
	return e
}

// rebuild moves the live entries into size slots (a power of two). Old
// copies are left detached, so a Decision that still carries one makes
// Apply look the host up by name.
func (t *hostTable) rebuild(size int) {
	oldHashes, oldEnts := t.hashes, t.ents
	t.hashes, t.ents = make([]uint64, size), make([]entry, size)
	t.used = 0
	for i, hv := range oldHashes {
		if hv >= slotLive {
			old := &oldEnts[i]
			e := t.place(old.h)
			slot := e.slot
			*e = *old
			e.slot = slot
			t.used++
			old.tree = nil
		}
	}
}

// reserve makes room for n entries without a rebuild on the way; called
// on an empty table.
func (t *hostTable) reserve(n int) {
	t.hash("")
	size := len(t.hashes)
	for n*5 > size*4 {
		size *= 2
	}
	if size > len(t.hashes) {
		t.rebuild(size)
	}
}

// del removes e (the table's entry for its name): its slot becomes a
// tombstone and the entry is zeroed (tree nil, so a Decision that still
// carries it makes Apply look the host up by name).
func (t *hostTable) del(e *entry) {
	if t.n == 0 {
		return
	}
	h := t.hash(e.h.Name)
	mask := len(t.hashes) - 1
	for i := int(h) & mask; t.hashes[i] != slotEmpty; i = (i + 1) & mask {
		if &t.ents[i] == e {
			t.hashes[i] = slotDeleted
			*e = entry{}
			t.n--
			return
		}
	}
}

// all calls f on every live entry.
func (t *hostTable) all(f func(*entry)) {
	for i, hv := range t.hashes {
		if hv >= slotLive {
			f(&t.ents[i])
		}
	}
}
