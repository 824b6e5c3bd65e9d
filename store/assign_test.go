package store_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// assignment is a first connect to a Personal, Automatic pool: a new
// session that assigns its host to the user (R-PE1).
func assignment(pool, host, user string) *vdibroker.PlacementCommit {
	c := placement(pool, host, user, vdibroker.NoSessionLimit)
	c.Pooled, c.Assign = false, true
	return c
}

// assignedTo lists the pool's hosts assigned to user.
func assignedTo(t testing.TB, s *store.DB, pool, user string) []string {
	t.Helper()
	hosts, err := s.ListSessionHosts(t.Context(), pool)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, h := range hosts {
		if slices.Contains(h.AssignedUsers, user) {
			names = append(names, h.Name)
		}
	}
	return names
}

// TestAssignIsEnforcedByTheDatabase_RPE1_RC2_RD3: a new assignment takes a
// host only if it is unassigned and not drained, and only for a user with
// no host in the pool yet, whatever the committing server believed; a
// refused one changes nothing (no session, no count, no assignment).
func TestAssignIsEnforcedByTheDatabase_RPE1_RC2_RD3(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		mustPool(t, s, pool("pers", vdibroker.Personal))
		for _, h := range []string{"pd1", "pd2", "pd3"} {
			mustHost(t, s, "pers", h)
		}
		if _, err := s.UpdateSessionHost(t.Context(), "pers", "pd3", func(h *vdibroker.SessionHost) error {
			h.AllowNewSession = false
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		mustCommit(t, s, assignment("pers", "pd1", "alice"))

		for _, c := range []struct {
			name, host, user string
		}{
			{"alice already has pd1", "pd2", "alice"},
			{"pd1 is alice's", "pd1", "bob"},
			{"pd3 is drained", "pd3", "bob"},
		} {
			if err := s.CommitPlacement(t.Context(), assignment("pers", c.host, c.user)); !errors.Is(err, vdibroker.ErrHostTaken) {
				t.Errorf("%s: assigning %s to %s: %v, want ErrHostTaken", c.name, c.host, c.user, err)
			}
			wantCounts(t, s, "pers", c.host, map[string]int{"pd1": 1}[c.host], map[string]int{"pd1": 1}[c.host])
		}
		if got := assignedTo(t, s, "pers", "alice"); !slices.Equal(got, []string{"pd1"}) {
			t.Errorf("alice is assigned %v, want [pd1]", got)
		}
		if got := assignedTo(t, s, "pers", "bob"); len(got) != 0 {
			t.Errorf("bob is assigned %v after refusals, want none", got)
		}
		mustCommit(t, s, assignment("pers", "pd2", "bob"))
		if got := assignedTo(t, s, "pers", "bob"); !slices.Equal(got, []string{"pd2"}) {
			t.Errorf("bob is assigned %v, want [pd2]", got)
		}
	})
}

// TestAssignConcurrentOneHostPerUser_RPE1_RD3: one user's first connects
// race through two store handles (replicas), each aimed at a different
// free host: exactly one assignment lands.
func TestAssignConcurrentOneHostPerUser_RPE1_RD3(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		replicas := []*store.DB{tg.open(t, store.Options{}), tg.open(t, store.Options{})}
		s := replicas[0]
		mustPool(t, s, pool("pers", vdibroker.Personal))
		const n = 12
		for i := range n {
			mustHost(t, s, "pers", fmt.Sprintf("pd%02d", i))
		}
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				errs[i] = replicas[i%2].CommitPlacement(t.Context(), assignment("pers", fmt.Sprintf("pd%02d", i), "alice"))
			})
		}
		wg.Wait()
		ok := 0
		for i, err := range errs {
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, vdibroker.ErrHostTaken):
				t.Errorf("pd%02d: %v", i, err)
			}
		}
		if got := assignedTo(t, s, "pers", "alice"); ok != 1 || len(got) != 1 {
			t.Errorf("%d assignments committed, alice is assigned %v; want exactly one", ok, got)
		}
	})
}

// TestAssignLocksBeforeRows_RPE1 (PostgreSQL): two replicas' batches that
// each assign alice a host and also write on the other's host must not
// deadlock. With the user's advisory lock taken in the middle of a batch,
// one batch held host hA and waited for alice's lock while the other held
// alice's lock and waited for hA: PostgreSQL broke the cycle after its
// deadlock_timeout and the batch ran again. The batch now takes every
// assignee's lock first, before any row.
func TestAssignLocksBeforeRows_RPE1(t *testing.T) {
	// Batches run in host key order: A writes on hA (carol's connect)
	// before it assigns alice hB; B assigns alice h0, then writes on hA
	// (dave's connect).
	unpooled := func(p, host, user string) *vdibroker.PlacementCommit {
		c := placement(p, host, user, vdibroker.NoSessionLimit)
		c.Pooled = false
		return c
	}
	batchesAtOnce(t, "lk", vdibroker.Personal, []string{"h0", "hA", "hB"},
		func(a *store.DB, p string) []error {
			return a.CommitBatch([]*vdibroker.PlacementCommit{unpooled(p, "hA", "carol"), assignment(p, "hB", "alice")})
		},
		func(b *store.DB, p string) []error {
			return b.CommitBatch([]*vdibroker.PlacementCommit{assignment(p, "h0", "alice"), unpooled(p, "hA", "dave")})
		},
		func(a *store.DB, round int, p string, errs []error) {
			for _, err := range errs {
				if err != nil && !errors.Is(err, vdibroker.ErrHostTaken) {
					t.Errorf("round %d: %v", round, err)
				}
			}
			if got := assignedTo(t, a, p, "alice"); len(got) != 1 {
				t.Errorf("round %d: alice is assigned %v, want one host", round, got)
			}
		})
}

// batchesAtOnce runs 8 rounds of two batches at once, onA's on one
// replica and onB's on another of one PostgreSQL database, each round in
// a new pool (named prefix and the round) of typ with hosts; check gets
// both batches' results. Any batch run again after a deadlock or a
// serialization failure fails the test.
func batchesAtOnce(t *testing.T, prefix, typ string, hosts []string, onA, onB func(s *store.DB, p string) []error,
	check func(a *store.DB, round int, p string, errs []error)) {
	t.Helper()
	a, b, retries := twoReplicas(t)
	for round := range 8 {
		p := fmt.Sprintf("%s%d", prefix, round)
		mustPool(t, a, pool(p, typ))
		mustHost(t, a, p, hosts...)
		var errsA, errsB []error
		var wg sync.WaitGroup
		wg.Go(func() { errsA = onA(a, p) })
		wg.Go(func() { errsB = onB(b, p) })
		wg.Wait()
		check(a, round, p, append(errsA, errsB...))
	}
	if n := retries.count.Load(); n != 0 {
		t.Errorf("%d batches were run again after a deadlock or serialization failure, want none: %s", n, retries.first.Load())
	}
}

// twoReplicas opens two handles on one fresh PostgreSQL database, as two
// replicas, whose logs go to retries.
func twoReplicas(t *testing.T) (a, b *store.DB, retries *retryLog) {
	t.Helper()
	return twoReplicasOn(t, postgresSchemaDSN(t))
}

// twoReplicasOn is twoReplicas on the schema of dsn, which the test
// also reaches by connections of its own.
func twoReplicasOn(t *testing.T, dsn string) (a, b *store.DB, retries *retryLog) {
	t.Helper()
	retries = &retryLog{}
	open := func() *store.DB {
		s, err := store.OpenWith(t.Context(), dsn, "", slog.New(retries), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	return open(), open(), retries
}

// retryLog counts the store's "retrying transaction" log records, and
// of them those after a deadlock or a serialization failure (locks).
type retryLog struct {
	count, locks atomic.Int64
	first        atomic.Value
}

func (h *retryLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *retryLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *retryLog) WithGroup(string) slog.Handler            { return h }
func (h *retryLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "retrying transaction" {
		var err string
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "err" {
				err = a.Value.String()
			}
			return true
		})
		if h.count.Add(1) == 1 {
			h.first.Store(err)
		}
		if strings.Contains(err, "40P01") || strings.Contains(err, "40001") {
			h.locks.Add(1)
		}
	}
	return nil
}
