package entitlement

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker"
)

// downStore answers AssignedApplicationGroups from groups, or
// StoreUnavailable while down (a unit test of R-E11's rule; the HTTP tests
// run the service on both real stores).
type downStore struct {
	vdibroker.EntitlementStore
	groups []*vdibroker.ApplicationGroup
	down   bool
}

func (s *downStore) AssignedApplicationGroups(_ context.Context, q vdibroker.AssignmentQuery) ([]*vdibroker.ApplicationGroup, error) {
	if s.down {
		return nil, vdibroker.Errorf(vdibroker.EStoreUnavailable, "store down")
	}
	var out []*vdibroker.ApplicationGroup
	for _, g := range s.groups {
		if (q.HostPool == "" || g.HostPool == q.HostPool) && (q.Type == "" || g.ApplicationGroupType == q.Type) {
			out = append(out, g)
		}
	}
	return out, nil
}

func (s *downStore) ListHostPools(context.Context) ([]*vdibroker.HostPool, error) { return nil, nil }

func (s *downStore) GetHostPool(_ context.Context, name string) (*vdibroker.HostPool, error) {
	return &vdibroker.HostPool{Name: name}, nil
}

func (s *downStore) ListHostStates(context.Context, string) ([]*vdibroker.SessionHost, error) {
	return nil, nil
}

func (s *downStore) PoolsWithoutRemoteApps(context.Context, []string) ([]string, error) {
	return nil, nil
}

func (s *downStore) GetFederation(context.Context) (*vdibroker.Federation, error) {
	return nil, vdibroker.Errorf(vdibroker.ENotFound, "none")
}

// TestEntitledDuringOutage (R-E11): while the store is down, an
// identity's entitlement is what was last read for it while it was up,
// grant or refusal, in any spelling of the user and groups (R-E5); one
// never read is StoreUnavailable.
func TestEntitledDuringOutage(t *testing.T) {
	st := &downStore{groups: []*vdibroker.ApplicationGroup{{Name: "p1-dag", HostPool: "p1", ApplicationGroupType: vdibroker.AppGroupDesktop,
		Assignments: vdibroker.Assignments{Users: []string{"alice"}, Groups: []string{"Sales"}}}}}
	s := New(Config{Store: st})
	ctx := context.Background()
	desk := vdibroker.Resource{HostPool: "p1"}
	alice := vdibroker.UserIdentity{User: "Alice"}
	bob := vdibroker.UserIdentity{User: "bob", Groups: []string{"Eng", "sales"}}
	carol := vdibroker.UserIdentity{User: "carol"}
	for _, who := range []vdibroker.UserIdentity{alice, bob} {
		if _, err := s.Entitled(ctx, who, desk); err != nil {
			t.Fatalf("%s while up: %v", who.User, err)
		}
	}
	if _, err := s.Entitled(ctx, carol, desk); vdibroker.ErrorCode(err) != vdibroker.ENotEntitled {
		t.Fatalf("carol while up: %v", err)
	}
	st.down = true
	for _, c := range []struct {
		who  vdibroker.UserIdentity
		r    vdibroker.Resource
		code string
		via  string
	}{
		{vdibroker.UserIdentity{User: "ALICE"}, desk, "", vdibroker.ViaUser},
		{vdibroker.UserIdentity{User: "Bob", Groups: []string{"SALES", "eng"}}, desk, "", vdibroker.ViaGroup},
		{carol, desk, vdibroker.ENotEntitled, ""},
		{alice, vdibroker.Resource{HostPool: "p2"}, vdibroker.EStoreUnavailable, ""},
		{vdibroker.UserIdentity{User: "bob"}, desk, vdibroker.EStoreUnavailable, ""}, // other groups: never asked
	} {
		g, err := s.Entitled(ctx, c.who, c.r)
		if vdibroker.ErrorCode(err) != c.code || (c.via != "" && (g == nil || g.Via != c.via || g.ApplicationGroup != "p1-dag")) {
			t.Errorf("%+v on %v while down: %+v, %v; want %q via %q", c.who, c.r, g, err, c.code, c.via)
		}
	}
}

// TestDecisionKeyBounded (R-E11, R-SEC): an outage answer's key is the
// same size whatever the groups a user carries, so maxDecisions bounds
// the memory the answers take; identities differing in one group, in the
// resource or in a separator's place get different keys, and spellings
// and orders of the same identity (R-E5) the same one.
func TestDecisionKeyBounded(t *testing.T) {
	many := make([]string, 500)
	for i := range many {
		many[i] = strings.Repeat("g", 200) + strconv.Itoa(i)
	}
	desk := vdibroker.Resource{HostPool: "p1"}
	big := decisionKey(vdibroker.UserIdentity{User: "alice", Groups: many}, desk)
	small := decisionKey(vdibroker.UserIdentity{User: "alice"}, desk)
	if len(big) != len(small) || len(big) > 64 {
		t.Fatalf("key sizes: %d bytes for 500 groups, %d for none; want the same, at most 64", len(big), len(small))
	}
	same := [][2]vdibroker.UserIdentity{
		{{User: "Alice", Groups: []string{"Sales", "eng"}}, {User: "alice", Groups: []string{"ENG", "sales"}}},
	}
	for _, c := range same {
		if decisionKey(c[0], desk) != decisionKey(c[1], desk) {
			t.Errorf("%+v and %+v: different keys, want one", c[0], c[1])
		}
	}
	keys := map[string]string{}
	for name, k := range map[string]string{
		"500 groups":            big,
		"no group":              small,
		"499 groups":            decisionKey(vdibroker.UserIdentity{User: "alice", Groups: many[1:]}, desk),
		"other pool":            decisionKey(vdibroker.UserIdentity{User: "alice"}, vdibroker.Resource{HostPool: "p2"}),
		"application group":     decisionKey(vdibroker.UserIdentity{User: "alice"}, vdibroker.Resource{HostPool: "p1", ApplicationGroup: "apps"}),
		"user a, group lice":    decisionKey(vdibroker.UserIdentity{User: "a", Groups: []string{"lice"}}, desk),
		"user alice, group x":   decisionKey(vdibroker.UserIdentity{User: "alice", Groups: []string{"x"}}, desk),
		"user alice, groups xy": decisionKey(vdibroker.UserIdentity{User: "alice", Groups: []string{"x", "y"}}, desk),
	} {
		if other, ok := keys[k]; ok {
			t.Errorf("%s and %s share a key", name, other)
		}
		keys[k] = name
	}
}

// TestRefusalsKeepGrants (R-E11, R-SEC): an end user's connects to
// resources that are not hers, or do not exist, fill the outage answers'
// refusals, never its grants: during the outage that follows, another
// user's grant read before them is still answered, and a grant that
// became a refusal (her assignment removed) is refused, not granted.
func TestRefusalsKeepGrants(t *testing.T) {
	st := &downStore{groups: []*vdibroker.ApplicationGroup{{Name: "p1-dag", HostPool: "p1", ApplicationGroupType: vdibroker.AppGroupDesktop,
		Assignments: vdibroker.Assignments{Users: []string{"alice", "carol"}}}}}
	s := New(Config{Store: st})
	s.decisions.max = 50
	ctx := context.Background()
	desk := vdibroker.Resource{HostPool: "p1"}
	for _, u := range []string{"alice", "carol"} {
		if _, err := s.Entitled(ctx, vdibroker.UserIdentity{User: u}, desk); err != nil {
			t.Fatalf("%s while up: %v", u, err)
		}
	}
	for i := range 3 * s.decisions.max { // mallory's made-up pools
		s.Entitled(ctx, vdibroker.UserIdentity{User: "mallory"}, vdibroker.Resource{HostPool: "x" + strconv.Itoa(i)})
	}
	st.groups[0].Assignments.Users = []string{"alice"} // carol's taken away
	if _, err := s.Entitled(ctx, vdibroker.UserIdentity{User: "carol"}, desk); vdibroker.ErrorCode(err) != vdibroker.ENotEntitled {
		t.Fatalf("carol while up, after her assignment went: %v, want NotEntitled", err)
	}
	st.down = true
	if g, err := s.Entitled(ctx, vdibroker.UserIdentity{User: "alice"}, desk); err != nil || g == nil {
		t.Errorf("alice while down, after %d refusals of mallory: %v, %v; want her grant", 3*s.decisions.max, g, err)
	}
	if _, err := s.Entitled(ctx, vdibroker.UserIdentity{User: "carol"}, desk); vdibroker.ErrorCode(err) != vdibroker.ENotEntitled {
		t.Errorf("carol while down: %v, want NotEntitled (her grant became a refusal)", err)
	}
}
