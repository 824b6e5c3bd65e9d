package store_test

import (
	"errors"
	"testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// TestRoundRobinCursor: R-LI4's bucket 1 goes round robin "from the host
// after the one last chosen in this pool". The commit that chose a host
// records it, so every replica and a restarted broker go on from there; it
// must not move the pool's updateTime, which commits compare to refuse
// decisions made with old settings (R-P1, ErrPoolChanged).
func TestRoundRobinCursor(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		ctx := t.Context()
		a, b := tg.open(t, store.Options{}), tg.open(t, store.Options{}) // two replicas
		p := pool("rr", vdibroker.Pooled)
		mustPool(t, a, p)
		for _, h := range []string{"h1", "h2", "h3"} {
			mustHost(t, a, "rr", h)
		}
		cursor := func(s *store.DB) string {
			t.Helper()
			h, err := s.RoundRobinHost(ctx, "rr")
			if err != nil {
				t.Fatal(err)
			}
			return h
		}
		if got := cursor(a); got != "" {
			t.Fatalf("new pool's cursor = %q, want none", got)
		}
		_, err := a.RoundRobinHost(ctx, "no-such-pool")
		wantCode(t, err, vdibroker.ENotFound)

		rr := func(host, user string) *vdibroker.PlacementCommit {
			c := placement("rr", host, user, 2)
			c.RoundRobinHost, c.PoolUpdateTime = host, p.UpdateTime
			return c
		}
		mustCommit(t, a, rr("h1", "u1"))
		if got := cursor(b); got != "h1" {
			t.Errorf("the other replica reads cursor %q, want h1", got)
		}
		// The pool's updateTime did not move: a commit decided with the
		// same settings still goes through.
		if got, err := b.GetHostPool(ctx, "rr"); err != nil || !got.UpdateTime.Equal(p.UpdateTime) {
			t.Errorf("pool updateTime after a cursor write: %v (%v), want %v", got.UpdateTime, err, p.UpdateTime)
		}
		mustCommit(t, b, rr("h2", "u2")) // last commit wins, from any replica
		if got := cursor(a); got != "h2" {
			t.Errorf("cursor = %q, want h2", got)
		}
		mustCommit(t, a, placement("rr", "h3", "u3", 2)) // no cursor: kept
		if got := cursor(a); got != "h2" {
			t.Errorf("a commit without RoundRobinHost moved the cursor to %q", got)
		}

		// A refused commit records nothing: h1 is at its limit of 1 here.
		full := rr("h1", "u4")
		full.MaxSessionLimit = 1
		if err := a.CommitPlacement(ctx, full); !errors.Is(err, vdibroker.ErrHostFull) {
			t.Fatalf("commit on a full host: %v, want ErrHostFull", err)
		}
		bad := rr("h3", "u5")
		bad.RoundRobinHost = "h1"
		err = a.CommitPlacement(ctx, bad)
		wantCode(t, err, vdibroker.EInvalid)
		if got := cursor(a); got != "h2" {
			t.Errorf("a refused commit moved the cursor to %q", got)
		}

		// One group commit: the last queued wins (the batch runs in host
		// order, h1 before h3), and a failed one counts for nothing.
		failing := rr("h2", "u8")
		failing.MaxSessionLimit = 1 // h2 has u2
		errs := a.CommitBatch([]*vdibroker.PlacementCommit{rr("h3", "u6"), rr("h1", "u7"), failing})
		if errs[0] != nil || errs[1] != nil || !errors.Is(errs[2], vdibroker.ErrHostFull) {
			t.Fatalf("batch: %v", errs)
		}
		if got := cursor(b); got != "h1" {
			t.Errorf("after the batch: cursor %q, want h1 (the last queued that committed)", got)
		}

		// A restart keeps it.
		a.Close()
		if got := cursor(tg.open(t, store.Options{})); got != "h1" {
			t.Errorf("after a restart: cursor %q, want h1", got)
		}
		// Deleting the pool deletes its cursor.
		if _, err := b.DeleteHostPool(ctx, "rr", true, vdibroker.Precondition{}); err != nil {
			t.Fatal(err)
		}
		mustPool(t, b, pool("rr", vdibroker.Pooled))
		if got := cursor(b); got != "" {
			t.Errorf("a new pool of a deleted one's name has cursor %q", got)
		}
	})
}
