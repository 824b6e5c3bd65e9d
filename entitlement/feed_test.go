package entitlement

import (
	"context"
	"testing"

	"github.com/vdibroker/vdibroker"
)

// fedStore is downStore with a federation document.
type fedStore struct {
	downStore
	doc *vdibroker.Federation
}

func (s *fedStore) GetFederation(context.Context) (*vdibroker.Federation, error) { return s.doc, nil }

// TestFeedReconnectsHereAsItsConnect_RG1_RU5: a global entitlement's
// reconnectsHere is whether the connect its feed describes (connectUrl,
// connectBody) looks in this pod: an end user's connect starts at the
// home site of her groups (R-G3), so her feed's does; the connect of a
// principal that is not an end user takes the groups its body names,
// and the feed's body names none, so its start site is not its groups'.
func TestFeedReconnectsHereAsItsConnect_RG1_RU5(t *testing.T) {
	doc := &vdibroker.Federation{Generation: 1, Sites: []vdibroker.Site{{Name: "s0"}, {Name: "s1"}},
		Pods:      []vdibroker.Pod{{Name: "pod0", Site: "s0"}, {Name: "pod1", Site: "s1"}},
		HomeSites: []vdibroker.HomeSite{{Group: "Sales", Site: "s1"}},
		GlobalEntitlements: []vdibroker.GlobalEntitlement{{Name: "office", Scope: vdibroker.ScopeWithinSite, UseHomeSite: true,
			AllUsers: true, Members: []vdibroker.Member{{Pod: "pod0", HostPool: "p0"}, {Pod: "pod1", HostPool: "p1"}}}}}
	s := New(Config{Store: &fedStore{doc: doc}, Pod: "pod0"})
	for _, c := range []struct {
		role string
		want bool
	}{{vdibroker.RoleUser, false}, {vdibroker.RoleContributor, true}} {
		p := &vdibroker.Principal{Kind: vdibroker.PrincipalOIDC, Role: c.role, Subject: "carol", Groups: []string{"Sales"}}
		f, err := s.Feed(vdibroker.WithPrincipal(context.Background(), p))
		if err != nil {
			t.Fatal(err)
		}
		if len(f.Resources) != 1 || f.Resources[0].ReconnectsHere != c.want || len(f.Resources[0].ConnectBody) != 1 {
			t.Errorf("%s carol of Sales (home site s1) at pod0 (s0), WithinSite: %+v; want reconnectsHere %v", c.role, f.Resources, c.want)
		}
	}
}
