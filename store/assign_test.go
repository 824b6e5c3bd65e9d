package store_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
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
