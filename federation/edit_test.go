package federation

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vdibroker/vdibroker"
)

// editDoc is a valid document: site emea with pods fra1 and ams1;
// entitlement office (member fra1/pool-a, user bob, group Sales) and
// apps (Application calc, member ams1/pool-b, all users); group Sales's
// home site emea.
func editDoc() *vdibroker.Federation {
	return &vdibroker.Federation{
		Generation: 1,
		Sites:      []vdibroker.Site{{Name: "emea"}, {Name: "apac"}},
		Pods:       []vdibroker.Pod{{Name: "fra1", Site: "emea", URL: "https://fra1"}, {Name: "ams1", Site: "emea", URL: "https://ams1"}},
		GlobalEntitlements: []vdibroker.GlobalEntitlement{
			{Name: "office", Scope: "AllSites", SessionDistribution: "None", Members: []vdibroker.Member{{Pod: "fra1", HostPool: "pool-a"}},
				Users: []string{"bob"}, Groups: []string{"Sales"}},
			{Name: "apps", Kind: vdibroker.KindApplication, Application: "calc", Scope: "WithinSite", SessionDistribution: "LoadIndex",
				Members: []vdibroker.Member{{Pod: "ams1", HostPool: "pool-b"}}, AllUsers: true},
		},
		HomeSites: []vdibroker.HomeSite{{Group: "Sales", Site: "emea"}},
	}
}

// TestEdits: each edit of the document, as the console's Federation
// page makes them (R-E9, R-G3): done (changed, and the document after it
// still passes Validate), already so (nothing changed), refused naming
// the argument (the document untouched), and a missing entitlement
// (NotFound).
func TestEdits(t *testing.T) {
	long := strings.Repeat("x", vdibroker.MaxUserLen+1)
	for _, tc := range []struct {
		name    string
		edit    func(*vdibroker.Federation) (bool, error)
		changed bool
		code    string // "" none
		field   string // the refused argument
		after   func(*vdibroker.Federation) bool
	}{
		{"add entitlement", func(d *vdibroker.Federation) (bool, error) {
			return true, AddEntitlement(d, vdibroker.GlobalEntitlement{Name: "sales", Kind: vdibroker.KindDesktop, Scope: "AllSites", SessionDistribution: "None",
				Members: []vdibroker.Member{{Pod: "ams1", HostPool: "pool-a"}}, Users: []string{"carol"}})
		}, true, "", "", func(d *vdibroker.Federation) bool {
			g := d.Entitlement("sales")
			return g != nil && g.Kind == "" && g.Users[0] == "carol" // Desktop stored as the default
		}},
		{"add entitlement: name taken", func(d *vdibroker.Federation) (bool, error) {
			return true, AddEntitlement(d, vdibroker.GlobalEntitlement{Name: "office", Scope: "AllSites", SessionDistribution: "None",
				Members: []vdibroker.Member{{Pod: "ams1", HostPool: "pool-a"}}, AllUsers: true})
		}, false, vdibroker.EInvalid, "name", nil},
		{"add entitlement: unknown pod", func(d *vdibroker.Federation) (bool, error) {
			return true, AddEntitlement(d, vdibroker.GlobalEntitlement{Name: "sales", Scope: "AllSites", SessionDistribution: "None",
				Members: []vdibroker.Member{{Pod: "par1", HostPool: "pool-a"}}, AllUsers: true})
		}, false, vdibroker.EInvalid, "pod", nil},
		{"add entitlement: bad scope", func(d *vdibroker.Federation) (bool, error) {
			return true, AddEntitlement(d, vdibroker.GlobalEntitlement{Name: "sales", Scope: "Everywhere", SessionDistribution: "None",
				Members: []vdibroker.Member{{Pod: "ams1", HostPool: "pool-a"}}, AllUsers: true})
		}, false, vdibroker.EInvalid, "scope", nil},
		{"add entitlement: application without its name", func(d *vdibroker.Federation) (bool, error) {
			return true, AddEntitlement(d, vdibroker.GlobalEntitlement{Name: "sales", Kind: vdibroker.KindApplication, Scope: "AllSites", SessionDistribution: "None",
				Members: []vdibroker.Member{{Pod: "ams1", HostPool: "pool-a"}}, AllUsers: true})
		}, false, vdibroker.EInvalid, "application", nil},
		{"delete entitlement", func(d *vdibroker.Federation) (bool, error) { return true, DeleteEntitlement(d, "apps") },
			true, "", "", func(d *vdibroker.Federation) bool {
				return d.Entitlement("apps") == nil && len(d.GlobalEntitlements) == 1
			}},
		{"delete entitlement: missing", func(d *vdibroker.Federation) (bool, error) { return true, DeleteEntitlement(d, "nothere") },
			false, vdibroker.ENotFound, "", nil},
		{"delete entitlement: bad name", func(d *vdibroker.Federation) (bool, error) { return true, DeleteEntitlement(d, "a/b") },
			false, vdibroker.EInvalid, "entitlement", nil},

		{"add member", func(d *vdibroker.Federation) (bool, error) {
			return AddMember(d, "office", vdibroker.Member{Pod: "ams1", HostPool: "pool-a"})
		}, true, "", "", func(d *vdibroker.Federation) bool { return len(d.Entitlement("office").Members) == 2 }},
		{"add member: there already", func(d *vdibroker.Federation) (bool, error) {
			return AddMember(d, "office", vdibroker.Member{Pod: "fra1", HostPool: "pool-a"})
		}, false, "", "", nil},
		{"add member: unknown pod", func(d *vdibroker.Federation) (bool, error) {
			return AddMember(d, "office", vdibroker.Member{Pod: "par1", HostPool: "pool-a"})
		}, false, vdibroker.EInvalid, "pod", nil},
		{"add member: bad host pool", func(d *vdibroker.Federation) (bool, error) {
			return AddMember(d, "office", vdibroker.Member{Pod: "ams1", HostPool: "p"}) // pool names are 3..64
		}, false, vdibroker.EInvalid, "hostPool", nil},
		{"add member: missing entitlement", func(d *vdibroker.Federation) (bool, error) {
			return AddMember(d, "nothere", vdibroker.Member{Pod: "ams1", HostPool: "pool-a"})
		}, false, vdibroker.ENotFound, "", nil},
		{"remove member", func(d *vdibroker.Federation) (bool, error) {
			if _, err := AddMember(d, "office", vdibroker.Member{Pod: "ams1", HostPool: "pool-a"}); err != nil {
				return false, err
			}
			return RemoveMember(d, "office", vdibroker.Member{Pod: "fra1", HostPool: "pool-a"})
		}, true, "", "", func(d *vdibroker.Federation) bool {
			return cmp.Equal(d.Entitlement("office").Members, []vdibroker.Member{{Pod: "ams1", HostPool: "pool-a"}})
		}},
		{"remove member: not a member", func(d *vdibroker.Federation) (bool, error) {
			return RemoveMember(d, "office", vdibroker.Member{Pod: "ams1", HostPool: "pool-a"})
		}, false, "", "", nil},
		{"remove member: the only one", func(d *vdibroker.Federation) (bool, error) {
			return RemoveMember(d, "office", vdibroker.Member{Pod: "fra1", HostPool: "pool-a"})
		}, false, vdibroker.EInvalid, "", nil},
		{"remove member: bad pod", func(d *vdibroker.Federation) (bool, error) {
			return RemoveMember(d, "office", vdibroker.Member{Pod: "", HostPool: "pool-a"})
		}, false, vdibroker.EInvalid, "pod", nil},

		{"entitle group", func(d *vdibroker.Federation) (bool, error) { return Entitle(d, "office", "group", "Finance") },
			true, "", "", func(d *vdibroker.Federation) bool {
				return cmp.Equal(d.Entitlement("office").Groups, []string{"Sales", "Finance"})
			}},
		{"entitle user: there already, in another case", func(d *vdibroker.Federation) (bool, error) { return Entitle(d, "office", "user", "BOB") },
			false, "", "", nil},
		{"entitle: bad kind", func(d *vdibroker.Federation) (bool, error) { return Entitle(d, "office", "robot", "bob") },
			false, vdibroker.EInvalid, "kind", nil},
		{"entitle: too long a name", func(d *vdibroker.Federation) (bool, error) { return Entitle(d, "office", "user", long) },
			false, vdibroker.EInvalid, "principal", nil},
		{"entitle: missing entitlement", func(d *vdibroker.Federation) (bool, error) { return Entitle(d, "nothere", "user", "bob") },
			false, vdibroker.ENotFound, "", nil},
		{"unentitle user, in another case", func(d *vdibroker.Federation) (bool, error) { return Unentitle(d, "office", "user", "Bob") },
			true, "", "", func(d *vdibroker.Federation) bool { return len(d.Entitlement("office").Users) == 0 }},
		{"unentitle: not entitled", func(d *vdibroker.Federation) (bool, error) { return Unentitle(d, "office", "group", "Finance") },
			false, "", "", nil},
		{"unentitle: the last one", func(d *vdibroker.Federation) (bool, error) {
			if _, err := Unentitle(d, "office", "user", "bob"); err != nil {
				return false, err
			}
			return Unentitle(d, "office", "group", "Sales") // it would name nobody: everyone (R-E9)
		}, false, vdibroker.EInvalid, "principal", func(d *vdibroker.Federation) bool {
			return cmp.Equal(d.Entitlement("office").Groups, []string{"Sales"})
		}},
		{"unentitle: bad name", func(d *vdibroker.Federation) (bool, error) { return Unentitle(d, "office", "user", "bob\x00") },
			false, vdibroker.EInvalid, "principal", nil},
		{"all users on", func(d *vdibroker.Federation) (bool, error) { return SetAllUsers(d, "office", true) },
			true, "", "", func(d *vdibroker.Federation) bool { return d.Entitlement("office").AllUsers }},
		{"all users: so already", func(d *vdibroker.Federation) (bool, error) { return SetAllUsers(d, "apps", true) },
			false, "", "", nil},
		{"all users off naming nobody", func(d *vdibroker.Federation) (bool, error) { return SetAllUsers(d, "apps", false) },
			false, vdibroker.EInvalid, "", func(d *vdibroker.Federation) bool { return d.Entitlement("apps").AllUsers }},

		{"settings", func(d *vdibroker.Federation) (bool, error) {
			_, changed, err := ChangeSettings(d, "apps", Settings{Kind: vdibroker.KindApplication, Application: "notepad", Scope: "WithinPod", SessionDistribution: "None", UseHomeSite: true})
			return changed, err
		}, true, "", "", func(d *vdibroker.Federation) bool {
			g := d.Entitlement("apps")
			return g.Application == "notepad" && g.Scope == "WithinPod" && g.SessionDistribution == "None" && g.UseHomeSite
		}},
		{"settings: as they are", func(d *vdibroker.Federation) (bool, error) {
			_, changed, err := ChangeSettings(d, "office", Settings{Scope: "AllSites", SessionDistribution: "None"})
			return changed, err
		}, false, "", "", nil},
		{"settings: another kind", func(d *vdibroker.Federation) (bool, error) {
			_, changed, err := ChangeSettings(d, "office", Settings{Kind: vdibroker.KindApplication, Scope: "AllSites", SessionDistribution: "None"})
			return changed, err
		}, false, vdibroker.EInvalid, "kind", nil},
		{"settings: application of a desktop entitlement", func(d *vdibroker.Federation) (bool, error) {
			_, changed, err := ChangeSettings(d, "office", Settings{Application: "calc", Scope: "AllSites", SessionDistribution: "None"})
			return changed, err
		}, false, vdibroker.EInvalid, "application", nil},
		{"settings: bad distribution", func(d *vdibroker.Federation) (bool, error) {
			_, changed, err := ChangeSettings(d, "office", Settings{Scope: "AllSites", SessionDistribution: "RoundRobin"})
			return changed, err
		}, false, vdibroker.EInvalid, "sessionDistribution", nil},
		{"settings: missing entitlement", func(d *vdibroker.Federation) (bool, error) {
			_, changed, err := ChangeSettings(d, "nothere", Settings{Scope: "AllSites", SessionDistribution: "None"})
			return changed, err
		}, false, vdibroker.ENotFound, "", nil},

		{"add home site", func(d *vdibroker.Federation) (bool, error) { return true, AddHomeSite(d, "user", "alice", "apac") },
			true, "", "", func(d *vdibroker.Federation) bool {
				return d.HomeSites[1] == vdibroker.HomeSite{User: "alice", Site: "apac"}
			}},
		{"add home site: a second, in another case", func(d *vdibroker.Federation) (bool, error) { return true, AddHomeSite(d, "group", "SALES", "apac") },
			false, vdibroker.EInvalid, "principal", nil},
		{"add home site: unknown site", func(d *vdibroker.Federation) (bool, error) { return true, AddHomeSite(d, "user", "alice", "amer") },
			false, vdibroker.EInvalid, "site", nil},
		{"add home site: bad kind", func(d *vdibroker.Federation) (bool, error) { return true, AddHomeSite(d, "robot", "alice", "emea") },
			false, vdibroker.EInvalid, "kind", nil},
		{"remove home site, in another case", func(d *vdibroker.Federation) (bool, error) {
			h, changed, err := RemoveHomeSite(d, "group", "sales")
			return changed && h.Site == "emea", err
		}, true, "", "", func(d *vdibroker.Federation) bool { return len(d.HomeSites) == 0 }},
		{"remove home site: none", func(d *vdibroker.Federation) (bool, error) {
			_, changed, err := RemoveHomeSite(d, "user", "Sales") // Sales is a group
			return changed, err
		}, false, "", "", nil},
		{"remove home site: bad name", func(d *vdibroker.Federation) (bool, error) {
			_, changed, err := RemoveHomeSite(d, "user", long)
			return changed, err
		}, false, vdibroker.EInvalid, "principal", nil},
		{"change home site, in another case", func(d *vdibroker.Federation) (bool, error) {
			h, changed, err := ChangeHomeSite(d, "group", "SALES", "apac")
			return changed && h.Site == "emea", err
		}, true, "", "", func(d *vdibroker.Federation) bool {
			return cmp.Equal(d.HomeSites, []vdibroker.HomeSite{{Group: "Sales", Site: "apac"}}) // its name as it was
		}},
		{"change home site: the same", func(d *vdibroker.Federation) (bool, error) {
			_, changed, err := ChangeHomeSite(d, "group", "Sales", "emea")
			return changed, err
		}, false, "", "", nil},
		{"change home site: unknown site", func(d *vdibroker.Federation) (bool, error) {
			_, changed, err := ChangeHomeSite(d, "group", "Sales", "amer")
			return changed, err
		}, false, vdibroker.EInvalid, "site", nil},
		{"change home site: none", func(d *vdibroker.Federation) (bool, error) {
			_, changed, err := ChangeHomeSite(d, "user", "Sales", "apac") // Sales is a group
			return changed, err
		}, false, vdibroker.ENotFound, "", nil},
		{"change home site: bad kind", func(d *vdibroker.Federation) (bool, error) {
			_, changed, err := ChangeHomeSite(d, "robot", "Sales", "apac")
			return changed, err
		}, false, vdibroker.EInvalid, "kind", nil},
		{"move home site: the only one", func(d *vdibroker.Federation) (bool, error) {
			at, changed, err := MoveHomeSite(d, "group", "sales", true)
			return changed || at != 1, err
		}, false, "", "", nil},
		{"move home site: none", func(d *vdibroker.Federation) (bool, error) {
			_, changed, err := MoveHomeSite(d, "group", "Finance", false)
			return changed, err
		}, false, vdibroker.ENotFound, "", nil},
		{"move home site: bad name", func(d *vdibroker.Federation) (bool, error) {
			_, changed, err := MoveHomeSite(d, "group", long, false)
			return changed, err
		}, false, vdibroker.EInvalid, "principal", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := editDoc()
			changed, err := tc.edit(doc)
			if got := vdibroker.ErrorCode(err); got != tc.code || vdibroker.ErrorField(err) != tc.field {
				t.Fatalf("err %v (code %q field %q), want code %q field %q", err, got, vdibroker.ErrorField(err), tc.code, tc.field)
			}
			if err == nil && changed != tc.changed {
				t.Errorf("changed %v, want %v", changed, tc.changed)
			}
			if err != nil && vdibroker.ErrorCode(err) == vdibroker.EInvalid && strings.Contains(err.Error(), long) {
				t.Errorf("the refusal echoes the long name")
			}
			if tc.after != nil && !tc.after(doc) {
				t.Errorf("document after the edit: %+v", doc)
			}
			if !tc.changed {
				// An edit that changes nothing, or is refused, leaves
				// the document as it was (the last-one cases excepted:
				// their first step changed it).
				if d := cmp.Diff(editDoc(), doc); d != "" && tc.name != "unentitle: the last one" {
					t.Errorf("document changed (-want +got):\n%s", d)
				}
			}
			Normalize(doc)
			if err := Validate(doc, Self{Pod: "fra1"}); err != nil {
				t.Errorf("the document after the edit is not valid: %v", err)
			}
		})
	}
}

// TestCheckEntitlementJoins: a new entitlement's every bad field is
// refused at once, each under its own name, for a form to mark each.
func TestCheckEntitlementJoins(t *testing.T) {
	err := CheckEntitlement(&vdibroker.GlobalEntitlement{Name: "a/b", Kind: "Kiosk", Scope: "Everywhere", SessionDistribution: "None",
		Members: []vdibroker.Member{{Pod: "", HostPool: "p"}}})
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("err %v: not joined", err)
	}
	var got []string
	for _, e := range j.Unwrap() {
		got = append(got, vdibroker.ErrorField(e))
	}
	// kind: Kiosk refused before its application is looked at.
	want := []string{"name", "scope", "kind", "pod", "hostPool"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("fields refused (-want +got):\n%s", d)
	}
	if err := CheckEntitlement(&vdibroker.GlobalEntitlement{Name: "ok", Scope: "AllSites", SessionDistribution: "None",
		Members: []vdibroker.Member{{Pod: "fra1", HostPool: "pool-a"}}}); err != nil {
		t.Errorf("a valid entitlement refused: %v", err)
	}
}

// TestEditsLeaveACopyAlone: an edit replaces the document's lists, never
// writes through them, so a shallow copy of the document (one sharing
// its lists, as a cached or stored copy the edited one was made from)
// stays as it was, and two edits of two copies do not see each other's
// (R-E9, R-G3). The lists are given room to grow in place, as
// encoding/json leaves a decoded list, so that an append into shared
// room would show.
func TestEditsLeaveACopyAlone(t *testing.T) {
	roomy := func() *vdibroker.Federation { // office with a second member, ams1/pool-c
		d := editDoc()
		d.GlobalEntitlements[0].Members = append(d.GlobalEntitlements[0].Members, vdibroker.Member{Pod: "ams1", HostPool: "pool-c"})
		d.GlobalEntitlements = slices.Grow(d.GlobalEntitlements, 4)
		d.HomeSites = slices.Grow(append(d.HomeSites, vdibroker.HomeSite{User: "erin", Site: "apac"}), 4)
		for i := range d.GlobalEntitlements {
			ge := &d.GlobalEntitlements[i]
			ge.Members, ge.Users, ge.Groups = slices.Grow(ge.Members, 4), slices.Grow(ge.Users, 4), slices.Grow(ge.Groups, 4)
		}
		return d
	}
	sales := func(user string) vdibroker.GlobalEntitlement {
		return vdibroker.GlobalEntitlement{Name: "sales-" + user, Scope: "AllSites", SessionDistribution: "None",
			Members: []vdibroker.Member{{Pod: "ams1", HostPool: "pool-a"}}, Users: []string{user}}
	}
	for _, tc := range []struct {
		name string
		edit func(*vdibroker.Federation) error
	}{
		{"add entitlement", func(d *vdibroker.Federation) error { return AddEntitlement(d, sales("carol")) }},
		{"delete entitlement", func(d *vdibroker.Federation) error { return DeleteEntitlement(d, "office") }},
		{"add member", func(d *vdibroker.Federation) error {
			_, err := AddMember(d, "office", vdibroker.Member{Pod: "ams1", HostPool: "pool-d"})
			return err
		}},
		{"remove member", func(d *vdibroker.Federation) error {
			_, err := RemoveMember(d, "office", vdibroker.Member{Pod: "fra1", HostPool: "pool-a"})
			return err
		}},
		{"entitle", func(d *vdibroker.Federation) error { _, err := Entitle(d, "office", "user", "carol"); return err }},
		{"unentitle", func(d *vdibroker.Federation) error { _, err := Unentitle(d, "office", "user", "bob"); return err }},
		{"all users", func(d *vdibroker.Federation) error { _, err := SetAllUsers(d, "office", true); return err }},
		{"settings", func(d *vdibroker.Federation) error {
			_, _, err := ChangeSettings(d, "office", Settings{Scope: "WithinSite", SessionDistribution: "LoadIndex"})
			return err
		}},
		{"add home site", func(d *vdibroker.Federation) error { return AddHomeSite(d, "user", "carol", "apac") }},
		{"remove home site", func(d *vdibroker.Federation) error { _, _, err := RemoveHomeSite(d, "group", "Sales"); return err }},
		{"change home site", func(d *vdibroker.Federation) error {
			_, _, err := ChangeHomeSite(d, "group", "Sales", "apac")
			return err
		}},
		{"move home site", func(d *vdibroker.Federation) error { _, _, err := MoveHomeSite(d, "user", "erin", true); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig := roomy()
			edited := *orig
			if err := tc.edit(&edited); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(roomy(), orig); d != "" {
				t.Errorf("the copy the edited document was made from changed (-want +got):\n%s", d)
			}
		})
	}
	t.Run("two copies", func(t *testing.T) {
		orig := roomy()
		a, b := *orig, *orig
		if err := AddEntitlement(&a, sales("carol")); err != nil {
			t.Fatal(err)
		}
		if err := AddEntitlement(&b, sales("dave")); err != nil {
			t.Fatal(err)
		}
		if err := AddHomeSite(&a, "user", "carol", "apac"); err != nil {
			t.Fatal(err)
		}
		if err := AddHomeSite(&b, "user", "dave", "emea"); err != nil {
			t.Fatal(err)
		}
		if a.Entitlement("sales-carol") == nil || a.Entitlement("sales-dave") != nil || a.HomeSites[2].User != "carol" {
			t.Errorf("an edit of another copy changed this one: %+v", a)
		}
	})
}

// TestEditsHoldTheMemberLimits: an edit adds no entitlement Validate
// would refuse for its members (none, one twice, more than MaxMembers)
// and no member beyond MaxDocumentMembers in all (R-G1, R-G5); the
// document is left as it was.
func TestEditsHoldTheMemberLimits(t *testing.T) {
	pools := func(n int) []vdibroker.Member {
		ms := make([]vdibroker.Member, n)
		for i := range ms {
			ms[i] = vdibroker.Member{Pod: "ams1", HostPool: fmt.Sprintf("pool-%d", i)}
		}
		return ms
	}
	ge := func(name string, ms []vdibroker.Member) vdibroker.GlobalEntitlement {
		return vdibroker.GlobalEntitlement{Name: name, Scope: "AllSites", SessionDistribution: "None", Members: ms, AllUsers: true}
	}
	// roomFor is editDoc (2 members) with MaxDocumentMembers-2-room
	// more: 9 entitlements of MaxMembers and one of MaxMembers-2-room.
	roomFor := func(room int) *vdibroker.Federation {
		d := editDoc()
		for i := range MaxDocumentMembers / MaxMembers {
			n := MaxMembers
			if i == MaxDocumentMembers/MaxMembers-1 {
				n -= 2 + room
			}
			d.GlobalEntitlements = append(d.GlobalEntitlements, ge(fmt.Sprintf("big-%d", i), pools(n)))
		}
		return d
	}
	full := func() *vdibroker.Federation { return roomFor(0) }
	for _, tc := range []struct {
		name  string
		doc   func() *vdibroker.Federation
		edit  func(*vdibroker.Federation) error
		field string
	}{
		{"new entitlement without a member", editDoc, func(d *vdibroker.Federation) error { return AddEntitlement(d, ge("sales", nil)) }, "members"},
		{"new entitlement with a member twice", editDoc, func(d *vdibroker.Federation) error {
			return AddEntitlement(d, ge("sales", []vdibroker.Member{{Pod: "ams1", HostPool: "pool-a"}, {Pod: "ams1", HostPool: "pool-a"}}))
		}, "members"},
		{"new entitlement of too many members", editDoc, func(d *vdibroker.Federation) error {
			return AddEntitlement(d, ge("sales", pools(MaxMembers+1)))
		}, "members"},
		{"new entitlement beyond the document's members", full, func(d *vdibroker.Federation) error {
			return AddEntitlement(d, ge("sales", pools(1)))
		}, "hostPool"},
		{"member beyond the document's members", full, func(d *vdibroker.Federation) error {
			_, err := AddMember(d, "office", vdibroker.Member{Pod: "ams1", HostPool: "pool-z"})
			return err
		}, "hostPool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := tc.doc()
			Normalize(doc)
			if err := Validate(doc, Self{Pod: "fra1"}); err != nil {
				t.Fatalf("the document before the edit: %v", err)
			}
			err := tc.edit(doc)
			if vdibroker.ErrorCode(err) != vdibroker.EInvalid || vdibroker.ErrorField(err) != tc.field {
				t.Fatalf("err %v (field %q), want InvalidArgument on %q", err, vdibroker.ErrorField(err), tc.field)
			}
			want := tc.doc()
			Normalize(want)
			if d := cmp.Diff(want, doc); d != "" {
				t.Errorf("document changed (-want +got):\n%s", d)
			}
		})
	}
	// The last member the document holds is taken.
	doc := roomFor(1)
	if _, err := AddMember(doc, "office", vdibroker.Member{Pod: "ams1", HostPool: "pool-z"}); err != nil {
		t.Fatalf("the document's last member refused: %v", err)
	}
}

// TestHomeSiteEditsKeepTheOrder_RG3: a user in several groups with home
// sites starts at the first listed (R-G3), so changing a group's home
// site keeps its place (a remove and an add put it last, and moved where
// such a user starts), and a move swaps it with its neighbour only.
func TestHomeSiteEditsKeepTheOrder_RG3(t *testing.T) {
	three := func() *vdibroker.Federation {
		d := editDoc()
		d.HomeSites = []vdibroker.HomeSite{{Group: "Sales", Site: "emea"}, {Group: "Finance", Site: "apac"}, {User: "carol", Site: "emea"}}
		return d
	}
	for _, tc := range []struct {
		name    string
		edit    func(*vdibroker.Federation) (bool, error)
		changed bool
		want    []vdibroker.HomeSite
	}{
		{"change the first", func(d *vdibroker.Federation) (bool, error) {
			_, changed, err := ChangeHomeSite(d, "group", "sales", "apac")
			return changed, err
		}, true, []vdibroker.HomeSite{{Group: "Sales", Site: "apac"}, {Group: "Finance", Site: "apac"}, {User: "carol", Site: "emea"}}},
		{"change the middle one", func(d *vdibroker.Federation) (bool, error) {
			_, changed, err := ChangeHomeSite(d, "group", "Finance", "emea")
			return changed, err
		}, true, []vdibroker.HomeSite{{Group: "Sales", Site: "emea"}, {Group: "Finance", Site: "emea"}, {User: "carol", Site: "emea"}}},
		{"move the second up: it is first", func(d *vdibroker.Federation) (bool, error) {
			at, changed, err := MoveHomeSite(d, "group", "finance", true)
			return changed && at == 1, err
		}, true, []vdibroker.HomeSite{{Group: "Finance", Site: "apac"}, {Group: "Sales", Site: "emea"}, {User: "carol", Site: "emea"}}},
		{"move the first down", func(d *vdibroker.Federation) (bool, error) {
			at, changed, err := MoveHomeSite(d, "group", "Sales", false)
			return changed && at == 2, err
		}, true, []vdibroker.HomeSite{{Group: "Finance", Site: "apac"}, {Group: "Sales", Site: "emea"}, {User: "carol", Site: "emea"}}},
		{"move the first up: nothing", func(d *vdibroker.Federation) (bool, error) {
			_, changed, err := MoveHomeSite(d, "group", "Sales", true)
			return changed, err
		}, false, nil},
		{"move the last down: nothing", func(d *vdibroker.Federation) (bool, error) {
			at, changed, err := MoveHomeSite(d, "user", "Carol", false)
			return changed || at != 3, err
		}, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := three()
			changed, err := tc.edit(d)
			if err != nil || changed != tc.changed {
				t.Fatalf("changed %v, err %v; want changed %v", changed, err, tc.changed)
			}
			want := tc.want
			if want == nil {
				want = three().HomeSites
			}
			if diff := cmp.Diff(want, d.HomeSites); diff != "" {
				t.Errorf("home sites (-want +got):\n%s", diff)
			}
			Normalize(d)
			if err := Validate(d, Self{Pod: "fra1"}); err != nil {
				t.Errorf("the document after the edit is not valid: %v", err)
			}
		})
	}
}
