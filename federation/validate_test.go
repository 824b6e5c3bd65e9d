package federation

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker"
)

// TestValidate: bad documents are refused naming the field.
func TestValidate(t *testing.T) {
	self := Self{Pod: "fra1"}
	for _, tc := range []struct {
		name  string
		edit  func(f *vdibroker.Federation)
		self  Self
		field string
	}{
		{"valid", func(f *vdibroker.Federation) {}, self, ""},
		{"unknown pod in a member", func(f *vdibroker.Federation) { f.GlobalEntitlements[0].Members[2].Pod = "par1" }, self, "globalEntitlements[0].members[2].pod"},
		{"duplicate site", func(f *vdibroker.Federation) { f.Sites[1].Name = "emea" }, self, "sites[1].name"},
		{"duplicate pod", func(f *vdibroker.Federation) { f.Pods[1].Name = "fra1" }, self, "pods[1].name"},
		{"duplicate entitlement", func(f *vdibroker.Federation) {
			f.GlobalEntitlements = append(f.GlobalEntitlements, f.GlobalEntitlements[0])
		}, self, "globalEntitlements[1].name"},
		{"duplicate member", func(f *vdibroker.Federation) { f.GlobalEntitlements[0].Members[1].HostPool = "office-fra1" }, self, "globalEntitlements[0].members[1]"},
		{"bad scope", func(f *vdibroker.Federation) { f.GlobalEntitlements[0].Scope = "Everywhere" }, self, "globalEntitlements[0].scope"},
		{"bad policy", func(f *vdibroker.Federation) { f.GlobalEntitlements[0].SessionDistribution = "RoundRobin" }, self, "globalEntitlements[0].sessionDistribution"},
		{"pod in no site", func(f *vdibroker.Federation) { f.Pods[2].Site = "" }, self, "pods[2].site"},
		{"pod in an unknown site", func(f *vdibroker.Federation) { f.Pods[2].Site = "apac" }, self, "pods[2].site"},
		{"document without this pod", func(f *vdibroker.Federation) {}, Self{Pod: "lon1"}, "pods"},
		{"site other than --site", func(f *vdibroker.Federation) {}, Self{Pod: "nyc1", Site: "emea"}, "pods[2].site"},
		{"url other than --external-url", func(f *vdibroker.Federation) {}, Self{Pod: "ams1", URL: "http://127.0.0.1:9"}, "pods[1].url"},
		{"bad url", func(f *vdibroker.Federation) { f.Pods[0].URL = "fra1:8443" }, self, "pods[0].url"},
		{"generation 0", func(f *vdibroker.Federation) { f.Generation = 0 }, self, "generation"},
		// A generation no higher one follows would lock the document (R-G5, R-SEC).
		{"generation beyond the bound", func(f *vdibroker.Federation) { f.Generation = vdibroker.MaxGeneration + 1 }, self, "generation"},
		{"home site of an unknown site", func(f *vdibroker.Federation) { f.HomeSites[0].Site = "apac" }, self, "homeSites[0].site"},
		{"home site with user and group", func(f *vdibroker.Federation) { f.HomeSites[0].Group = "g" }, self, "homeSites[0]"},
		{"entitlement without members", func(f *vdibroker.Federation) { f.GlobalEntitlements[0].Members = nil }, self, "globalEntitlements[0].members"},
		// R-E9: what an entitlement offers, and to whom.
		{"application entitlement", func(f *vdibroker.Federation) {
			ge := &f.GlobalEntitlements[0]
			ge.Kind, ge.Application, ge.Users, ge.Groups = vdibroker.KindApplication, "crm", []string{"dora"}, []string{"Sales"}
		}, self, ""},
		{"unknown kind", func(f *vdibroker.Federation) { f.GlobalEntitlements[0].Kind = "App" }, self, "globalEntitlements[0].kind"},
		{"application without its name", func(f *vdibroker.Federation) { f.GlobalEntitlements[0].Kind = vdibroker.KindApplication }, self, "globalEntitlements[0].application"},
		{"bad application name", func(f *vdibroker.Federation) {
			f.GlobalEntitlements[0].Kind, f.GlobalEntitlements[0].Application = vdibroker.KindApplication, "crm/../x"
		}, self, "globalEntitlements[0].application"},
		{"a desktop with an application", func(f *vdibroker.Federation) { f.GlobalEntitlements[0].Application = "crm" }, self, "globalEntitlements[0].application"},
		{"a user twice in two cases", func(f *vdibroker.Federation) { f.GlobalEntitlements[0].Users = []string{"Dora", "dora"} }, self, "globalEntitlements[0].users"},
		{"an empty group", func(f *vdibroker.Federation) { f.GlobalEntitlements[0].Groups = []string{""} }, self, "globalEntitlements[0].groups[0]"},
		{"a user's second home site in another case", func(f *vdibroker.Federation) {
			f.HomeSites = append(f.HomeSites, vdibroker.HomeSite{User: "ALICE", Site: "emea"})
		}, self, "homeSites[3]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := testDoc("", "")
			tc.edit(f)
			Normalize(f)
			err := Validate(f, tc.self)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("valid document refused: %v", err)
				}
				return
			}
			if vdibroker.ErrorCode(err) != vdibroker.EInvalid || vdibroker.ErrorField(err) != tc.field {
				t.Fatalf("got %v (field %q), want InvalidArgument on %s", err, vdibroker.ErrorField(err), tc.field)
			}
		})
	}
}

func TestNormalizeDefaults(t *testing.T) {
	f := testDoc("", "")
	Normalize(f)
	if ge := f.GlobalEntitlements[0]; ge.Scope != vdibroker.ScopeAllSites || ge.SessionDistribution != vdibroker.DistributionNone {
		t.Fatalf("defaults: scope %q distribution %q, want AllSites, None", ge.Scope, ge.SessionDistribution)
	}
}

// TestValidateBounds_RG5: a document lists at most MaxSites sites,
// MaxPods pods and MaxMembers members per global entitlement (pods hash
// every user with every pod, R-G1, and act on each member at each call);
// one more is refused naming the list and the range. A long member list
// is checked for repeats as a short one is.
func TestValidateBounds_RG5(t *testing.T) {
	sites := func(f *vdibroker.Federation, n int) {
		for i := len(f.Sites); i < n; i++ {
			f.Sites = append(f.Sites, vdibroker.Site{Name: fmt.Sprintf("site%03d", i)})
		}
	}
	pods := func(f *vdibroker.Federation, n int) {
		for i := len(f.Pods); i < n; i++ {
			f.Pods = append(f.Pods, vdibroker.Pod{Name: fmt.Sprintf("pod%03d", i), Site: "emea", URL: "http://127.0.0.1:4"})
		}
	}
	members := func(f *vdibroker.Federation, n int) {
		ge := &f.GlobalEntitlements[0]
		for i := len(ge.Members); i < n; i++ {
			ge.Members = append(ge.Members, vdibroker.Member{Pod: "ams1", HostPool: fmt.Sprintf("pool%04d", i)})
		}
	}
	// n entitlements of MaxMembers members each, and one of more.
	entitlements := func(f *vdibroker.Federation, n, more int) {
		members(f, MaxMembers)
		first := f.GlobalEntitlements[0]
		for i := 1; i <= n; i++ {
			ge := first
			ge.Name = fmt.Sprintf("ge%03d", i)
			if i == n {
				ge.Members = ge.Members[:more]
			}
			f.GlobalEntitlements = append(f.GlobalEntitlements, ge)
		}
		f.GlobalEntitlements = slices.DeleteFunc(f.GlobalEntitlements, func(ge vdibroker.GlobalEntitlement) bool { return len(ge.Members) == 0 })
	}
	for _, tc := range []struct {
		name      string
		edit      func(f *vdibroker.Federation)
		field     string // "" when accepted
		wantRange string
	}{
		{"most sites", func(f *vdibroker.Federation) { sites(f, MaxSites) }, "", ""},
		{"a site too many", func(f *vdibroker.Federation) { sites(f, MaxSites+1) }, "sites", "1..200 sites, got 201"},
		{"no site", func(f *vdibroker.Federation) { f.Sites = nil }, "sites", "1..200 sites, got 0"},
		{"most pods", func(f *vdibroker.Federation) { pods(f, MaxPods) }, "", ""},
		{"a pod too many", func(f *vdibroker.Federation) { pods(f, MaxPods+1) }, "pods", "1..200 pods, got 201"},
		{"most members", func(f *vdibroker.Federation) { members(f, MaxMembers) }, "", ""},
		{"a member too many", func(f *vdibroker.Federation) { members(f, MaxMembers+1) }, "globalEntitlements[0].members", "1..1000 member host pools, got 1001"},
		{"most members in all", func(f *vdibroker.Federation) { entitlements(f, MaxDocumentMembers/MaxMembers, 0) }, "", ""},
		{"a member too many in all", func(f *vdibroker.Federation) { entitlements(f, MaxDocumentMembers/MaxMembers, 1) },
			"globalEntitlements", "0..10000 member host pools in all, got 10001"},
		{"the last of most members a repeat", func(f *vdibroker.Federation) {
			members(f, MaxMembers-1)
			f.GlobalEntitlements[0].Members = append(f.GlobalEntitlements[0].Members, vdibroker.Member{Pod: "ams1", HostPool: "pool0500"})
		}, "globalEntitlements[0].members[999]", "duplicate member ams1/pool0500"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := testDoc("", "")
			tc.edit(f)
			Normalize(f)
			err := Validate(f, Self{Pod: "fra1"})
			if tc.field == "" {
				if err != nil {
					t.Fatalf("valid document refused: %v", err)
				}
				return
			}
			if vdibroker.ErrorCode(err) != vdibroker.EInvalid || vdibroker.ErrorField(err) != tc.field || !strings.Contains(vdibroker.ErrorMessage(err), tc.wantRange) {
				t.Fatalf("got %v (field %q), want InvalidArgument on %s saying %q", err, vdibroker.ErrorField(err), tc.field, tc.wantRange)
			}
		})
	}
}
