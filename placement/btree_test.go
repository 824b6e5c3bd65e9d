package placement

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// TestBtreeMatchesSortedSlice checks the tree against a sorted slice through
// enough entries (up to 1,500, fanout 32) to split and merge nodes on
// several levels, in every order the index uses.
func TestBtreeMatchesSortedSlice(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		o := rapid.SampledFrom([]order{byName, bySessionsAsc, bySessionsDesc, byIndexName, byLoad}).Draw(t, "order")
		tree := newTree(o)
		var model []*entry
		entries := map[string]*entry{}
		long := rapid.Bool().Draw(t, "longNames")
		sorted := func() {
			slices.SortFunc(model, func(a, b *entry) int { return cmp3(o, a, b) })
		}
		ops := rapid.IntRange(500, 3000).Draw(t, "ops")
		for range ops {
			i := rapid.IntRange(0, 1499).Draw(t, "host")
			name := fmt.Sprintf("h%04d", i)
			if long {
				// Names of 16 bytes or more sharing their first 16, and one of
				// exactly 16 that is a prefix of the others.
				name = fmt.Sprintf("a-long-host-name%04d", i)
				if i == 0 {
					name = "a-long-host-name"
				}
			}
			if e, ok := entries[name]; ok && rapid.IntRange(0, 2).Draw(t, "delete") == 0 {
				tree.Delete(e)
				model = slices.DeleteFunc(model, func(x *entry) bool { return x == e })
				delete(entries, name)
				continue
			} else if ok {
				tree.Delete(e)
				model = slices.DeleteFunc(model, func(x *entry) bool { return x == e })
			}
			e := &entry{h: Host{Name: name, Sessions: rapid.IntRange(0, 20).Draw(t, "sessions"), Connecting: rapid.IntRange(0, 3).Draw(t, "conn")},
				li: rapid.IntRange(-1, 100).Draw(t, "li"), words: nameWords(name)}
			entries[name] = e
			tree.Insert(e)
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
		if o == byIndexName {
			want := 0
			for _, e := range model {
				if e.li < limit {
					want++
				}
			}
			if got := tree.CountBelow(limit); got != want {
				t.Fatalf("CountBelow(%d) = %d, want %d", limit, got, want)
			}
		}
		if o == byName {
			after := ""
			if len(model) > 0 && rapid.Bool().Draw(t, "afterExisting") {
				after = rapid.SampledFrom(model).Draw(t, "after").h.Name
			}
			var want *entry
			for _, e := range model {
				if e.h.Name > after && e.li < limit {
					want = e
					break
				}
			}
			if got := tree.NextBelow(after, limit); got != want {
				t.Fatalf("NextBelow(%q, %d) = %v, want %v", after, limit, got, want)
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
	case byIndexName:
		c = cmp.Compare(a.li, b.li)
	case byLoad:
		c = cmp.Or(cmp.Compare(a.li, b.li), cmp.Compare(a.h.Connecting, b.h.Connecting))
	}
	return cmp.Or(c, strings.Compare(a.h.Name, b.h.Name))
}
