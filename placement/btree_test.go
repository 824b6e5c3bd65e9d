package placement

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"pgregory.net/rapid"
)

// TestBtreeMatchesSortedSlice checks the tree against a sorted slice through
// enough entries (up to 8,000, fanout 64) to split and merge nodes on
// three levels, in every order the index uses, with load index updates in
// place (SetLI) and the round robin search (NextBelow).
func TestBtreeMatchesSortedSlice(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		o := rapid.SampledFrom([]order{byName, bySessionsAsc, bySessionsDesc, byLoad}).Draw(t, "order")
		// The tree's leaves hold table slots: entry i lives at slot i.
		ents := make([]entry, 8000)
		tree := newTree(o, o == byName, &ents)
		var model []*entry
		entries := map[string]*entry{}
		var names labels
		sorted := func() {
			slices.SortFunc(model, func(a, b *entry) int { return cmp3(o, a, b) })
		}
		ops := rapid.IntRange(500, 15000).Draw(t, "ops")
		for range ops {
			i := rapid.IntRange(0, 7999).Draw(t, "host")
			name := fmt.Sprintf("h%04d", i)
			e, ok := entries[name]
			switch {
			case ok && rapid.IntRange(0, 2).Draw(t, "delete") == 0:
				tree.Delete(e.key, e)
				model = slices.DeleteFunc(model, func(x *entry) bool { return x == e })
				delete(entries, name)
				names.remove(e)
				continue
			case ok && o == byName && rapid.Bool().Draw(t, "setLI"):
				e.li = int8(rapid.IntRange(-1, 100).Draw(t, "li"))
				tree.SetLI(e.key, e)
				continue
			case ok:
				tree.Delete(e.key, e)
				model = slices.DeleteFunc(model, func(x *entry) bool { return x == e })
			default:
				e = &ents[i]
				*e = entry{slot: int32(i), h: Host{Name: name}}
				if names.add(e) {
					// Relabelled: every key changes, so file everything again.
					tree = newTree(o, o == byName, &ents)
					for _, m := range model {
						m.key = o.key(m)
						tree.Insert(m.key, m)
					}
				}
				entries[name] = e
			}
			e.h.Sessions = rapid.IntRange(0, 20).Draw(t, "sessions")
			e.h.Connecting = rapid.IntRange(0, 3).Draw(t, "conn")
			e.li = int8(rapid.IntRange(-1, 100).Draw(t, "li"))
			e.key = o.key(e)
			tree.Insert(e.key, e)
			model = append(model, e)
		}
		sorted()
		if tree.Len() != len(model) {
			t.Fatalf("Len %d, want %d", tree.Len(), len(model))
		}
		var got []*entry
		tree.Ascend(func(e *entry) bool { got = append(got, e); return true })
		if !slices.Equal(got, model) {
			t.Fatalf("Ascend order differs")
		}
		for k := range model {
			if tree.Kth(k) != model[k] {
				t.Fatalf("Kth(%d) = %v, want %v", k, tree.Kth(k).h.Name, model[k].h.Name)
			}
		}
		limit := rapid.IntRange(-1, 101).Draw(t, "limit")
		if o == byName {
			after := ""
			if rapid.Bool().Draw(t, "afterSome") {
				after = fmt.Sprintf("h%04d", rapid.IntRange(0, 7999).Draw(t, "after"))
			}
			var want *entry
			for _, e := range model {
				if e.h.Name > after && int(e.li) < limit {
					want = e
					break
				}
			}
			if got := tree.NextBelow(names.atOrBefore(after), limit); got != want {
				t.Fatalf("NextBelow(%q, %d) = %v, want %v", after, limit, got, want)
			}
		}
	})
}

// TestLabelsFollowNameOrder adds names in every order (ascending, the usual
// arrival, descending, random) and checks labels stay in name order,
// relabelling when a gap runs out.
func TestLabelsFollowNameOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var l labels
		n := rapid.IntRange(1, 3000).Draw(t, "n")
		mode := rapid.IntRange(0, 2).Draw(t, "mode")
		seen := map[string]bool{}
		for i := range n {
			var name string
			switch mode {
			case 0:
				name = fmt.Sprintf("h%06d", i)
			case 1:
				name = fmt.Sprintf("h%06d", n-i)
			default:
				name = fmt.Sprintf("h%06d", rapid.IntRange(0, 5000).Draw(t, "name"))
			}
			if seen[name] {
				continue
			}
			seen[name] = true
			l.add(&entry{h: Host{Name: name}})
		}
		for i := 1; i < len(l.sorted); i++ {
			a, b := l.sorted[i-1], l.sorted[i]
			if a.h.Name >= b.h.Name || a.label >= b.label || a.label == 0 {
				t.Fatalf("labels out of order: %s=%d, %s=%d", a.h.Name, a.label, b.h.Name, b.label)
			}
		}
	})
}

// cmp3 is the orders written plainly, independent of the inline keys.
func cmp3(o order, a, b *entry) int {
	var c int
	switch o {
	case bySessionsAsc:
		c = cmp.Compare(a.h.Sessions, b.h.Sessions)
	case bySessionsDesc:
		c = cmp.Compare(b.h.Sessions, a.h.Sessions)
	case byLoad:
		c = cmp.Or(cmp.Compare(a.li, b.li), cmp.Compare(a.h.Connecting, b.h.Connecting))
	}
	return cmp.Or(c, strings.Compare(a.h.Name, b.h.Name))
}

// TestBtreeThreeLevels fills a tree past two levels (64 × 64 slots), then
// empties it in a shuffled order, checking ranks on the way: the splits and
// merges of inner nodes.
func TestBtreeThreeLevels(t *testing.T) {
	ents := make([]entry, 10000)
	tree := newTree(bySessionsAsc, false, &ents)
	var l labels
	var all []*entry
	for i := range ents {
		e := &ents[i]
		*e = entry{slot: int32(i), h: Host{Name: fmt.Sprintf("h%05d", i), Sessions: i % 7}}
		all = append(all, e)
	}
	l.build(all)
	for _, e := range all {
		e.key = tree.order.key(e)
		tree.Insert(e.key, e)
	}
	if depth := tree.height; depth < 2 {
		t.Fatalf("tree of 10000 has %d inner levels, want ≥ 2", depth)
	}
	model := slices.Clone(all)
	slices.SortFunc(model, func(a, b *entry) int { return cmp3(bySessionsAsc, a, b) })
	shuffled := slices.Clone(all)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	for i, e := range shuffled {
		tree.Delete(e.key, e)
		model = slices.DeleteFunc(model, func(x *entry) bool { return x == e })
		if i%997 == 0 {
			for k := range model {
				if tree.Kth(k) != model[k] {
					t.Fatalf("after %d deletes: Kth(%d) = %s, want %s", i+1, k, tree.Kth(k).h.Name, model[k].h.Name)
				}
			}
		}
	}
	if tree.Len() != 0 || tree.height != 0 || tree.leafRoot != nil {
		t.Fatalf("emptied tree has Len %d", tree.Len())
	}
}

// TestEntryIsThreeCacheLines keeps the entry at 192 bytes (its hot fields in
// the first 64, the Host in the next 128): a host touched at random costs
// three cache lines, not four or five.
func TestEntryIsThreeCacheLines(t *testing.T) {
	if got := unsafe.Sizeof(entry{}); got != 192 {
		t.Errorf("entry is %d bytes, want 192", got)
	}
	if got := unsafe.Offsetof(entry{}.h); got != 64 {
		t.Errorf("entry.h at offset %d, want 64", got)
	}
}
