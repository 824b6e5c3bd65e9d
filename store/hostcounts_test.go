package store_test

import (
	"testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// TestHostCountsMigrationKeepsCounts: migration 00007 moves every host's
// R-S1 counts from its row into host_counts. A store with open sessions,
// taken back to 00006 (whose Down puts the counts back on the host rows)
// and opened again, must count exactly what it did before, and go on
// counting.
func TestHostCountsMigrationKeepsCounts(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		s := tg.open(t, store.Options{})
		mustPool(t, s, pool("p", vdibroker.Pooled))
		mustHost(t, s, "p", "h1")
		mustHost(t, s, "p", "h2")
		mustCommit(t, s, placement("p", "h1", "alice", 10))
		mustCommit(t, s, placement("p", "h1", "bob", 10))
		mustCommit(t, s, placement("p", "h2", "carol", 10))
		if err := s.MigrateDownTo(t.Context(), 6); err != nil {
			t.Fatal(err)
		}
		s.Close()

		s = tg.open(t, store.Options{})
		wantCounts(t, s, "p", "h1", 2, 2)
		wantCounts(t, s, "p", "h2", 1, 1)
		mustCommit(t, s, placement("p", "h2", "dave", 10))
		wantCounts(t, s, "p", "h2", 2, 2)
		bad, err := s.CheckCounts(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(bad) > 0 {
			t.Errorf("counts differ from the sessions after the migration: %v", bad)
		}
	})
}
