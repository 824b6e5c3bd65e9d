package store_test

import (
	"sync"
	"testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// TestCreateHostPoolNeverReplaces: PutHostPool with If-None-Match: *
// (Absent) creates a pool once; a second create, or creates racing
// through two replicas, is refused with PreconditionFailed (R-E13) and
// leaves the first one's settings.
func TestCreateHostPoolNeverReplaces(t *testing.T) {
	createOnly := vdibroker.Precondition{Absent: true}
	run(t, func(t *testing.T, tg target) {
		replicas := []*store.DB{tg.open(t, store.Options{}), tg.open(t, store.Options{})}
		s := replicas[0]
		first := pool("once", vdibroker.Pooled)
		first.MaxSessionLimit = 7
		if _, err := s.PutHostPool(t.Context(), first, createOnly); err != nil {
			t.Fatal(err)
		}
		second := pool("once", vdibroker.Pooled)
		second.MaxSessionLimit = 9
		if _, err := s.PutHostPool(t.Context(), second, createOnly); vdibroker.ErrorCode(err) != vdibroker.EPreconditionFailed {
			t.Errorf("second create: %v, want PreconditionFailed", err)
		}
		if got, err := s.GetHostPool(t.Context(), "once"); err != nil || got.MaxSessionLimit != 7 {
			t.Errorf("after the refused create: %+v, %v; want maxSessionLimit 7 kept", got, err)
		}

		const n = 10
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				p := pool("race", vdibroker.Pooled)
				p.MaxSessionLimit = 100 + i
				_, errs[i] = replicas[i%2].PutHostPool(t.Context(), p, createOnly)
			})
		}
		wg.Wait()
		created, winner := 0, -1
		for i, err := range errs {
			switch {
			case err == nil:
				created++
				winner = i
			case vdibroker.ErrorCode(err) != vdibroker.EPreconditionFailed:
				t.Errorf("create %d: %v", i, err)
			}
		}
		got, err := s.GetHostPool(t.Context(), "race")
		if created != 1 || err != nil || got.MaxSessionLimit != 100+winner {
			t.Errorf("%d of %d racing creates succeeded; stored %+v, %v; want one, and its settings", created, n, got, err)
		}
	})
}
