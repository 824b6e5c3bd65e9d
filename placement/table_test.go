package placement

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// TestHostTableMatchesMap runs random adds and deletes on the table and on a
// Go map, over few enough names that probe chains collide, wrap and leave
// tombstones, and checks every name after each step. An entry keeps its
// address until add reports that the table moved.
func TestHostTableMatchesMap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var tab hostTable
		model := map[string]*entry{}
		names := rapid.IntRange(1, 300).Draw(t, "names")
		for range rapid.IntRange(1, 2000).Draw(t, "ops") {
			name := fmt.Sprintf("h%d", rapid.IntRange(0, names-1).Draw(t, "name"))
			if e, ok := model[name]; ok {
				tab.del(e)
				delete(model, name)
			} else {
				e, moved := tab.add(Host{Name: name})
				if moved {
					for n := range model {
						model[n] = tab.get(n)
					}
				}
				model[name] = e
			}
			if tab.n != len(model) {
				t.Fatalf("n = %d, want %d", tab.n, len(model))
			}
			for n, want := range model {
				if got := tab.get(n); got != want || got.h.Name != n {
					t.Fatalf("get(%q) = %p, want %p", n, got, want)
				}
			}
		}
		for i := range names {
			name := fmt.Sprintf("h%d", i)
			if got, want := tab.get(name), model[name]; got != want {
				t.Fatalf("get(%q) = %p, want %p", name, got, want)
			}
		}
		count := 0
		tab.all(func(*entry) { count++ })
		if count != len(model) {
			t.Fatalf("all visits %d, want %d", count, len(model))
		}
	})
}
