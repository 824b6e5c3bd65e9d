package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// TestCommitRefusesChangedPoolSettings_RP1: a placement decided with pool
// settings another replica has since changed is refused with
// ErrPoolChanged, changing nothing, so the server decides again with the
// new settings (R-P1: a change applies to the next placement). A commit
// with the stored settings, or without PoolUpdateTime, goes through.
func TestCommitRefusesChangedPoolSettings_RP1(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		p := pool("p", vdibroker.Pooled)
		mustPool(t, s, p)
		mustHost(t, s, "p", "h1")
		seen := p.UpdateTime // the settings a server's view read

		c := placement("p", "h1", "alice", 10)
		c.PoolUpdateTime = seen
		mustCommit(t, s, c)

		// Another replica switches the pool to DepthFirst.
		p2 := *p
		p2.LoadBalancerType, p2.MaxSessionLimit, p2.UpdateTime = vdibroker.DepthFirst, 10, seen.Add(time.Second)
		if _, err := s.PutHostPool(ctx, &p2, vdibroker.Precondition{}); err != nil {
			t.Fatal(err)
		}
		c = placement("p", "h1", "bob", 10)
		c.PoolUpdateTime = seen
		if err := s.CommitPlacement(ctx, c); !errors.Is(err, vdibroker.ErrPoolChanged) {
			t.Errorf("commit decided with the old settings: %v, want ErrPoolChanged", err)
		}
		wantCounts(t, s, "p", "h1", 1, 1)

		c = placement("p", "h1", "bob", 10)
		c.PoolUpdateTime = p2.UpdateTime
		mustCommit(t, s, c)
		mustCommit(t, s, placement("p", "h1", "carol", 10)) // no PoolUpdateTime: not checked
		wantCounts(t, s, "p", "h1", 3, 3)
	})
}

// TestPoolUpdateTimeAlwaysMoves_RP1: every write of a pool's settings gives
// it a later updateTime, even when the writer's clock is at or behind the
// last writer's (another replica's clock, a clock stepped back), or a
// placement decided with the old settings would pass the check of
// TestCommitRefusesChangedPoolSettings_RP1.
func TestPoolUpdateTimeAlwaysMoves_RP1(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		p := pool("p", vdibroker.Pooled)
		mustPool(t, s, p)
		mustHost(t, s, "p", "h1")
		last := p.UpdateTime
		for i, clock := range []time.Time{last, last.Add(-10 * time.Second)} {
			p2 := *p
			p2.LoadBalancerType, p2.MaxSessionLimit, p2.UpdateTime = []string{vdibroker.DepthFirst, vdibroker.BreadthFirst}[i], 10, clock
			if _, err := s.PutHostPool(ctx, &p2, vdibroker.Precondition{}); err != nil {
				t.Fatal(err)
			}
			stored, err := s.GetHostPool(ctx, "p")
			if err != nil {
				t.Fatal(err)
			}
			if !stored.UpdateTime.After(last) {
				t.Errorf("write %d with the clock at %s: stored updateTime %s, not after the previous %s", i+1, clock, stored.UpdateTime, last)
			}
			c := placement("p", "h1", "u", 10)
			c.PoolUpdateTime = last
			if err := s.CommitPlacement(ctx, c); !errors.Is(err, vdibroker.ErrPoolChanged) {
				t.Errorf("write %d: a commit decided with the previous settings: %v, want ErrPoolChanged", i+1, err)
			}
			last = stored.UpdateTime
		}
	})
}
