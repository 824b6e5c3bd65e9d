package vdibroker

import "testing"

// TestGrants (R-E2, R-E9): the user's own assignment first, then a group,
// then all users, in any case; a global entitlement naming nobody
// entitles everyone.
func TestGrants(t *testing.T) {
	a := Assignments{Users: []string{"Alice@Contoso.com"}, Groups: []string{"Sales", "HR", "Kiosk"}, AllUsers: true}
	for _, c := range []struct {
		who       UserIdentity
		via, whom string
	}{
		{UserIdentity{User: "alice@contoso.com", Groups: []string{"hr"}}, ViaUser, "Alice@Contoso.com"},
		{UserIdentity{User: "bob", Groups: []string{"x", "SALES"}}, ViaGroup, "Sales"},
		{UserIdentity{User: "carol"}, ViaAllUsers, ""},
		// As SameUser compares: the Kelvin sign is a k (Grants finds
		// groups by FoldUser's keys).
		{UserIdentity{User: "dan", Groups: []string{"\u212aIOSK"}}, ViaGroup, "Kiosk"},
	} {
		g := a.Grants(c.who)
		if g == nil || g.Via != c.via || g.Principal != c.whom {
			t.Errorf("%+v: %+v, want via %s %q", c.who, g, c.via, c.whom)
		}
	}
	a.AllUsers = false
	if g := a.Grants(UserIdentity{User: "carol", Groups: []string{"Sales Team"}}); g != nil {
		t.Errorf("carol: %+v, want none", g)
	}

	ge := GlobalEntitlement{Name: "office"}
	if g := ge.Grants(UserIdentity{User: "anyone"}); g == nil || g.Via != ViaEveryone || g.GlobalEntitlement != "office" {
		t.Errorf("an entitlement naming nobody: %+v", g)
	}
	ge.Groups = []string{"us-staff"}
	if g := ge.Grants(UserIdentity{User: "anyone"}); g != nil {
		t.Errorf("an entitlement of us-staff, to anyone: %+v", g)
	}
	if g := ge.Grants(UserIdentity{User: "eve", Groups: []string{"US-STAFF"}}); g == nil || g.Via != ViaGroup || g.GlobalEntitlement != "office" {
		t.Errorf("eve of US-STAFF: %+v", g)
	}
}
