package store_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// TestListSharedHosts_RP1: ListSharedHosts answers, by name, the hosts of
// a pool whose lists hold more than one entry, with their lists as
// stored (two spellings of a user are two entries: the caller folds
// them), and nothing of other pools; a comma inside a user's name is one
// entry. A pool that does not exist is NotFound.
func TestListSharedHosts_RP1(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("p", vdibroker.Personal))
		mustPool(t, s, pool("other", vdibroker.Personal))
		for _, h := range []*vdibroker.SessionHost{
			{HostPool: "p", Name: "h1"},
			{HostPool: "p", Name: "h2", AssignedUsers: []string{`ann, "the second"`}},
			{HostPool: "p", Name: "h3", AssignedUsers: []string{"dora", "DORA"}},
			{HostPool: "p", Name: "H9", AssignedUsers: []string{"u1", "u2", "u3"}},
			{HostPool: "p", Name: "h4", AssignedUsers: []string{"solo"}},
			{HostPool: "other", Name: "h5", AssignedUsers: []string{"x", "y"}},
		} {
			h.Address, h.Protocols, h.CreateTime = h.Name+":3389", []string{"RDP"}, t0
			if _, err := s.PutSessionHost(ctx, h); err != nil {
				t.Fatalf("put %s: %v", h.Name, err)
			}
		}
		got, err := s.ListSharedHosts(ctx, "p")
		if err != nil {
			t.Fatal(err)
		}
		want := []*vdibroker.SessionHost{
			{HostPool: "p", Name: "H9", AssignedUsers: []string{"u1", "u2", "u3"}}, // byte-wise name order
			{HostPool: "p", Name: "h3", AssignedUsers: []string{"dora", "DORA"}},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("shared hosts of p (-want +got):\n%s", diff)
		}
		_, err = s.ListSharedHosts(ctx, "nope")
		wantCode(t, err, vdibroker.ENotFound)
	})
}
