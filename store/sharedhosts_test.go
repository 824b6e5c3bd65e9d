package store_test

import (
	"fmt"
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

// TestListSharedHostsLists_RP1: ListSharedHosts counts the entries of
// every list the store writes, on both engines: commas, quotes,
// backslashes and brackets inside names are one entry, as are unicode
// and the escapes Go's encoder writes (\u2028, \u003c); an empty list
// '[]' is none; a list of 1,000 names is 1,000. A name with a NUL, which
// the API refuses but the store writes as "\u0000", is counted too:
// PostgreSQL's jsonb cannot hold it, so a cast to jsonb failed the whole
// read and the warning said the hosts could not be read.
func TestListSharedHostsLists_RP1(t *testing.T) {
	long := make([]string, 1000)
	for i := range long {
		long[i] = fmt.Sprintf("user%04d, of a long list", i)
	}
	tests := []struct {
		name   string
		users  []string
		shared bool
	}{
		{"empty", []string{}, false},
		{"one", []string{"solo"}, false},
		{"one with commas and brackets", []string{`a, "b", [c], {d}`}, false},
		{"one with escaped quotes and backslashes", []string{`x\",\"y\\`}, false},
		{"one unicode", []string{"Jürgen, Müller 東京 \u2028 <&>"}, false},
		{"one with a NUL", []string{"nul\x00, here"}, false},
		{"two with commas", []string{"a,b", "c,d"}, true},
		{"two unicode", []string{"Zoë", "日本語"}, true},
		{"two with a NUL", []string{"nul\x00", "other"}, true},
		{"two with escaped quotes", []string{`"`, `\`}, true},
		{"long", long, true},
	}
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("p", vdibroker.Personal))
		var want []*vdibroker.SessionHost
		for i, tc := range tests {
			h := &vdibroker.SessionHost{HostPool: "p", Name: fmt.Sprintf("h%02d", i), AssignedUsers: tc.users,
				Address: "h:3389", Protocols: []string{"RDP"}, CreateTime: t0}
			if _, err := s.PutSessionHost(ctx, h); err != nil {
				t.Fatalf("put %s (%s): %v", h.Name, tc.name, err)
			}
			if tc.shared {
				want = append(want, &vdibroker.SessionHost{HostPool: "p", Name: h.Name, AssignedUsers: tc.users})
			}
		}
		got, err := s.ListSharedHosts(ctx, "p")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("shared hosts of p (-want +got):\n%s", diff)
		}
	})
}
