package store_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// TestAutoscaleLease: of two replicas on one database exactly one holds
// the lease; the holder renews it; the other takes it once it expired
// (the holder stopped renewing: killed) or was released.
func TestAutoscaleLease(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		a, b := tg.open(t, store.Options{}), tg.open(t, store.Options{})
		ctx := t.Context()
		ttl := 2 * time.Minute
		acquire := func(s *store.DB, holder string, at time.Time) bool {
			t.Helper()
			ok, err := s.AcquireAutoscaleLease(ctx, holder, at, ttl)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		if !acquire(a, "a", t0) {
			t.Fatal("a did not get the free lease")
		}
		if acquire(b, "b", t0.Add(time.Second)) {
			t.Fatal("b got the lease a holds")
		}
		// a renews at +1m: the lease now runs to +3m.
		if !acquire(a, "a", t0.Add(time.Minute)) {
			t.Fatal("a could not renew its lease")
		}
		if acquire(b, "b", t0.Add(2*time.Minute+30*time.Second)) {
			t.Fatal("b took the lease before it expired (renewed to +3m)")
		}
		// a stops renewing; at +3m the lease has expired.
		if !acquire(b, "b", t0.Add(3*time.Minute)) {
			t.Fatal("b did not take the expired lease")
		}
		if acquire(a, "a", t0.Add(3*time.Minute+time.Second)) {
			t.Fatal("a got the lease back while b holds it")
		}
		// Release: a's release of b's lease does nothing; b's frees it.
		if err := a.ReleaseAutoscaleLease(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		if acquire(a, "a", t0.Add(3*time.Minute+2*time.Second)) {
			t.Fatal("a's release freed b's lease")
		}
		if err := b.ReleaseAutoscaleLease(ctx, "b"); err != nil {
			t.Fatal(err)
		}
		if !acquire(a, "a", t0.Add(3*time.Minute+3*time.Second)) {
			t.Fatal("a did not get the released lease")
		}
	})
}

// TestAutoscaleLeaseRace: replicas racing for a free lease: exactly one wins.
func TestAutoscaleLeaseRace(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		const n = 4
		stores := make([]*store.DB, n)
		for i := range stores {
			stores[i] = tg.open(t, store.Options{})
		}
		won := make(chan string, n)
		errs := make(chan error, n)
		for i, s := range stores {
			go func() {
				holder := string(rune('a' + i))
				ok, err := s.AcquireAutoscaleLease(t.Context(), holder, t0, time.Minute)
				if err != nil {
					errs <- err
					return
				}
				if ok {
					won <- holder
				}
				errs <- nil
			}()
		}
		for range n {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		close(won)
		var winners []string
		for w := range won {
			winners = append(winners, w)
		}
		if len(winners) != 1 {
			t.Fatalf("winners = %v, want exactly one", winners)
		}
	})
}

// TestAutoscaleEvaluations: records come back newest first per pool, page
// with before, and are pruned with the history.
func TestAutoscaleEvaluations(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		max := 3
		for i := range 5 {
			for _, p := range []string{"p1", "p2"} {
				e := &vdibroker.AutoscaleEvaluation{
					HostPool: p, Time: t0.Add(time.Duration(i) * time.Minute), Holder: "a", Plan: "plan", Schedule: "weekdays",
					Phase: vdibroker.PhaseRampDown, Hosts: 4, RunningHosts: 3, AvailableCapacity: 30, UsedCapacityPct: 40,
					ThresholdPct: 60, MinimumHosts: 1, MaximumHosts: &max,
					Actions: []vdibroker.AutoscaleAction{{Action: vdibroker.ActionDrain, Host: "h1", Reason: "fewest sessions"}},
				}
				if err := s.AppendAutoscaleEvaluation(ctx, e); err != nil {
					t.Fatal(err)
				}
				if e.Seq == 0 {
					t.Fatal("no seq")
				}
			}
		}
		got, err := s.ListAutoscaleEvaluations(ctx, "p1", 0, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || !got[0].Time.Equal(t0.Add(4*time.Minute)) || !got[1].Time.Equal(t0.Add(3*time.Minute)) {
			t.Fatalf("first page = %+v", got)
		}
		want := &vdibroker.AutoscaleEvaluation{
			Seq: got[0].Seq, HostPool: "p1", Time: t0.Add(4 * time.Minute), Holder: "a", Plan: "plan", Schedule: "weekdays",
			Phase: vdibroker.PhaseRampDown, Hosts: 4, RunningHosts: 3, AvailableCapacity: 30, UsedCapacityPct: 40,
			ThresholdPct: 60, MinimumHosts: 1, MaximumHosts: &max,
			Actions: []vdibroker.AutoscaleAction{{Action: vdibroker.ActionDrain, Host: "h1", Reason: "fewest sessions"}},
		}
		if d := cmp.Diff(want, got[0]); d != "" {
			t.Errorf("record (-want +got):\n%s", d)
		}
		rest, err := s.ListAutoscaleEvaluations(ctx, "p1", got[1].Seq, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(rest) != 3 || rest[0].Seq >= got[1].Seq {
			t.Fatalf("second page = %d records", len(rest))
		}
		for _, e := range rest {
			if e.HostPool != "p1" {
				t.Fatalf("p2's record in p1's list: %+v", e)
			}
		}
		// PruneHistory removes those older than +2m: 0 and 1 of each pool.
		if _, err := s.PruneHistory(ctx, t0.Add(2*time.Minute)); err != nil {
			t.Fatal(err)
		}
		left, err := s.ListAutoscaleEvaluations(ctx, "p2", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) != 3 {
			t.Fatalf("after the prune p2 has %d evaluations, want 3", len(left))
		}
	})
}

// TestAutoscaleState: a pool's state round-trips, is replaced, deleted.
func TestAutoscaleState(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		drain := t0.Add(time.Minute)
		st := &vdibroker.AutoscaleState{
			HostPool: "p1", OriginalLoadBalancer: vdibroker.BreadthFirst, AppliedLoadBalancer: vdibroker.DepthFirst,
			Hosts:      map[string]*vdibroker.AutoscaleHostState{"h1": {DrainTime: &drain, MinSessions: 2, Notified: true}},
			UpdateTime: t0,
		}
		if err := s.PutAutoscaleState(ctx, st); err != nil {
			t.Fatal(err)
		}
		if err := s.PutAutoscaleState(ctx, &vdibroker.AutoscaleState{HostPool: "p2", UpdateTime: t0}); err != nil {
			t.Fatal(err)
		}
		got, err := s.ListAutoscaleStates(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff([]*vdibroker.AutoscaleState{st, {HostPool: "p2", UpdateTime: t0}}, got); d != "" {
			t.Errorf("states (-want +got):\n%s", d)
		}
		st.Hosts = nil
		if err := s.PutAutoscaleState(ctx, st); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteAutoscaleState(ctx, "p2"); err != nil {
			t.Fatal(err)
		}
		got, err = s.ListAutoscaleStates(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Hosts != nil || got[0].HostPool != "p1" {
			t.Fatalf("after replace and delete: %+v", got)
		}
	})
}

// TestAutoscaleEvaluationsCap: a pool keeps its last evaluations (here 5),
// and trimming one pool leaves another's alone.
func TestAutoscaleEvaluationsCap(t *testing.T) {
	store.SetEvaluationTrim(t, 5, 1)
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		for i := range 12 {
			for _, p := range []string{"p1", "p2"} {
				if p == "p2" && i >= 3 {
					continue
				}
				if err := s.AppendAutoscaleEvaluation(ctx, &vdibroker.AutoscaleEvaluation{HostPool: p, Time: t0.Add(time.Duration(i) * time.Minute), RunningHosts: i}); err != nil {
					t.Fatal(err)
				}
			}
		}
		got, err := s.ListAutoscaleEvaluations(ctx, "p1", 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 5 || got[0].RunningHosts != 11 || got[4].RunningHosts != 7 {
			t.Fatalf("p1 keeps %d evaluations (newest %+v)", len(got), got[0])
		}
		if p2, err := s.ListAutoscaleEvaluations(ctx, "p2", 0, 100); err != nil || len(p2) != 3 {
			t.Fatalf("p2 keeps %d, err %v; want its 3", len(p2), err)
		}
	})
}
