package placement

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// TestHostTableMatchesMap runs random puts and deletes on the table and on a
// Go map, over few enough names that probe chains collide and wrap, and
// checks every name after each step (deletion moves entries back into the
// hole, which must never hide one).
func TestHostTableMatchesMap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var tab hostTable
		model := map[string]*entry{}
		names := rapid.IntRange(1, 300).Draw(t, "names")
		for range rapid.IntRange(1, 2000).Draw(t, "ops") {
			name := fmt.Sprintf("h%d", rapid.IntRange(0, names-1).Draw(t, "name"))
			if _, ok := model[name]; ok {
				tab.del(name)
				delete(model, name)
			} else {
				e := &entry{h: Host{Name: name}}
				tab.put(e)
				model[name] = e
			}
			if tab.n != len(model) {
				t.Fatalf("n = %d, want %d", tab.n, len(model))
			}
		}
		for i := range names {
			name := fmt.Sprintf("h%d", i)
			if got, want := tab.get(name), model[name]; got != want {
				t.Fatalf("get(%q) = %p, want %p", name, got, want)
			}
		}
	})
}
