package federation

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vdibroker/vdibroker"
)

// testDoc: two pods in emea (fra1, ams1), one in amer (nyc1); entitlement
// office has one pool per pod, plus a second one in fra1.
func testDoc(scope, policy string) *vdibroker.Federation {
	return &vdibroker.Federation{
		Generation: 1,
		Sites:      []vdibroker.Site{{Name: "emea"}, {Name: "amer"}},
		Pods: []vdibroker.Pod{
			{Name: "fra1", Site: "emea", URL: "http://127.0.0.1:1"},
			{Name: "ams1", Site: "emea", URL: "http://127.0.0.1:2"},
			{Name: "nyc1", Site: "amer", URL: "http://127.0.0.1:3"},
		},
		GlobalEntitlements: []vdibroker.GlobalEntitlement{{
			Name: "office", Scope: scope, SessionDistribution: policy, UseHomeSite: true,
			Members: []vdibroker.Member{
				{Pod: "fra1", HostPool: "office-fra1"}, {Pod: "fra1", HostPool: "office-fra1b"},
				{Pod: "ams1", HostPool: "office-ams1"}, {Pod: "nyc1", HostPool: "office-nyc1"},
			},
		}},
		HomeSites: []vdibroker.HomeSite{{User: "alice", Site: "amer"}, {Group: "us-staff", Site: "amer"}, {Group: "eu-staff", Site: "emea"}},
	}
}

// pool is a pooled pool of hosts hosts, limit 10, with sessions sessions.
func pool(name string, hosts, sessions int) vdibroker.PoolFacts {
	return vdibroker.PoolFacts{HostPool: name, Found: true, LoadBalancerType: vdibroker.BreadthFirst, MaxSessionLimit: 10,
		Hosts: hosts, Sessions: sessions, HasCapacity: sessions < hosts*10}
}

func states(fra1, fra1b, ams1, nyc1 vdibroker.PoolFacts) map[string]PodState {
	return map[string]PodState{
		"fra1": {Pools: map[string]vdibroker.PoolFacts{"office-fra1": fra1, "office-fra1b": fra1b}},
		"ams1": {Pools: map[string]vdibroker.PoolFacts{"office-ams1": ams1}},
		"nyc1": {Pools: map[string]vdibroker.PoolFacts{"office-nyc1": nyc1}},
	}
}

func order(cs []vdibroker.MemberCandidate) string {
	var s []string
	for _, c := range cs {
		s = append(s, c.Pod+"/"+c.HostPool)
	}
	return strings.Join(s, " ")
}

func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		name         string
		scope        string
		policy       string
		user         string
		groups       []string
		connected    string
		pods         map[string]PodState
		wantStart    string
		wantOrder    string
		wantSkipped  map[string]string // pod -> skipped
		wantPodLoads map[string]float64
	}{
		{
			// fra1: (4+1)/(10+10) = 0.25 over its two pools (0.4, 0.1);
			// ams1: 2/(10*2) = 0.1; nyc1: 0/10 = 0. Start emea (the connected pod's site): ams1 is
			// the least loaded pod, then fra1 with fra1b (0.1) before
			// fra1 (0.4); AllSites goes on to amer.
			name: "SessionCount least loaded pod of the start site", scope: vdibroker.ScopeAllSites, policy: vdibroker.DistributionSessionCount,
			user: "bob", connected: "fra1",
			pods:      states(pool("office-fra1", 1, 4), pool("office-fra1b", 1, 1), pool("office-ams1", 2, 2), pool("office-nyc1", 1, 0)),
			wantStart: "emea", wantOrder: "ams1/office-ams1 fra1/office-fra1b fra1/office-fra1 nyc1/office-nyc1",
			wantPodLoads: map[string]float64{"fra1": 0.25, "ams1": 0.1, "nyc1": 0},
		},
		{
			// alice's own home site is amer (useHomeSite): nyc1 first.
			name: "user's home site", scope: vdibroker.ScopeAllSites, policy: vdibroker.DistributionSessionCount,
			user: "alice", groups: []string{"eu-staff"}, connected: "fra1",
			pods:      states(pool("office-fra1", 1, 0), pool("office-fra1b", 1, 0), pool("office-ams1", 1, 0), pool("office-nyc1", 1, 9)),
			wantStart: "amer", wantOrder: "nyc1/office-nyc1 fra1/office-fra1 fra1/office-fra1b ams1/office-ams1",
		},
		{
			// carol has no home site of her own; us-staff's is amer.
			name: "group's home site", scope: vdibroker.ScopeWithinSite, policy: vdibroker.DistributionLoadIndex,
			user: "carol", groups: []string{"us-staff", "eu-staff"}, connected: "ams1",
			pods:      states(pool("office-fra1", 1, 0), pool("office-fra1b", 1, 0), pool("office-ams1", 1, 0), pool("office-nyc1", 1, 9)),
			wantStart: "amer", wantOrder: "nyc1/office-nyc1",
			wantSkipped: map[string]string{"fra1": SkipOutOfScope, "ams1": SkipOutOfScope},
		},
		{
			// WithinSite: emea is full (no capacity), amer is not tried.
			name: "WithinSite stops at the start site", scope: vdibroker.ScopeWithinSite, policy: vdibroker.DistributionSessionCount,
			user: "bob", connected: "fra1",
			pods:      states(pool("office-fra1", 1, 10), pool("office-fra1b", 1, 10), pool("office-ams1", 1, 10), pool("office-nyc1", 1, 0)),
			wantStart: "emea", wantOrder: "",
			wantSkipped: map[string]string{"fra1": SkipNoCapacity, "ams1": SkipNoCapacity, "nyc1": SkipOutOfScope},
		},
		{
			name: "AllSites goes on to the other site", scope: vdibroker.ScopeAllSites, policy: vdibroker.DistributionSessionCount,
			user: "bob", connected: "fra1",
			pods:      states(pool("office-fra1", 1, 10), pool("office-fra1b", 1, 10), pool("office-ams1", 1, 10), pool("office-nyc1", 1, 0)),
			wantStart: "emea", wantOrder: "nyc1/office-nyc1",
			wantSkipped: map[string]string{"fra1": SkipNoCapacity, "ams1": SkipNoCapacity},
		},
		{
			name: "WithinPod: the connected pod only", scope: vdibroker.ScopeWithinPod, policy: vdibroker.DistributionLoadIndex,
			user: "alice", connected: "ams1",
			pods:      states(pool("office-fra1", 1, 0), pool("office-fra1b", 1, 0), pool("office-ams1", 1, 5), pool("office-nyc1", 1, 0)),
			wantStart: "emea", wantOrder: "ams1/office-ams1",
			wantSkipped: map[string]string{"fra1": SkipOutOfScope, "nyc1": SkipOutOfScope},
		},
		{
			// R-G4: no load comparison: the connected pod's pools in
			// listed order, the other pods of its site, the other sites,
			// though fra1 is the most loaded.
			name: "None keeps the document order", scope: vdibroker.ScopeAllSites, policy: vdibroker.DistributionNone,
			user: "bob", connected: "ams1",
			pods:      states(pool("office-fra1", 1, 9), pool("office-fra1b", 1, 8), pool("office-ams1", 1, 9), pool("office-nyc1", 1, 0)),
			wantStart: "emea", wantOrder: "ams1/office-ams1 fra1/office-fra1 fra1/office-fra1b nyc1/office-nyc1",
		},
		{
			// An unreachable pod is skipped and named; its pools weigh
			// nothing in its site's load.
			name: "unreachable pod skipped", scope: vdibroker.ScopeAllSites, policy: vdibroker.DistributionSessionCount,
			user: "bob", connected: "fra1",
			pods: map[string]PodState{
				"fra1": {Pools: map[string]vdibroker.PoolFacts{"office-fra1": pool("office-fra1", 1, 5), "office-fra1b": {HostPool: "office-fra1b"}}},
				"ams1": {Err: "unreachable: timeout after 2s"},
				"nyc1": {Pools: map[string]vdibroker.PoolFacts{"office-nyc1": pool("office-nyc1", 1, 0)}},
			},
			wantStart: "emea", wantOrder: "fra1/office-fra1 nyc1/office-nyc1",
			wantSkipped: map[string]string{"ams1": "unreachable: timeout after 2s"},
		},
		{
			// nyc1 has no pool office-nyc1 (the document is ahead of it):
			// skipped as such, not as full.
			name: "member pool missing on its pod", scope: vdibroker.ScopeAllSites, policy: vdibroker.DistributionLoadIndex,
			user: "bob", connected: "fra1",
			pods:      states(pool("office-fra1", 1, 0), pool("office-fra1b", 1, 0), pool("office-ams1", 1, 0), vdibroker.PoolFacts{HostPool: "office-nyc1"}),
			wantStart: "emea", wantOrder: "fra1/office-fra1 fra1/office-fra1b ams1/office-ams1",
			wantSkipped: map[string]string{"nyc1": SkipNotFound},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := testDoc(tc.scope, tc.policy)
			d, cands := Plan(Input{Doc: doc, Entitlement: &doc.GlobalEntitlements[0], ConnectedPod: tc.connected,
				User: tc.user, Groups: tc.groups, Pods: tc.pods})
			if d.StartSite != tc.wantStart {
				t.Errorf("start site %q, want %q", d.StartSite, tc.wantStart)
			}
			if got := order(cands); got != tc.wantOrder {
				t.Errorf("order\n got %q\nwant %q", got, tc.wantOrder)
			}
			skipped := map[string]string{}
			loads := map[string]float64{}
			for _, p := range d.Pods {
				if p.Skipped != "" {
					skipped[p.Pod] = p.Skipped
				}
				if p.Load != nil {
					loads[p.Pod] = *p.Load
				}
			}
			if tc.wantSkipped == nil {
				tc.wantSkipped = map[string]string{}
			}
			if diff := cmp.Diff(tc.wantSkipped, skipped); diff != "" {
				t.Errorf("skipped pods (-want +got):\n%s", diff)
			}
			if tc.wantPodLoads != nil {
				if diff := cmp.Diff(tc.wantPodLoads, loads); diff != "" {
					t.Errorf("pod loads (-want +got):\n%s", diff)
				}
			}
			if len(d.Pods) != 3 {
				t.Errorf("decision lists %d pods, want all 3: %+v", len(d.Pods), d.Pods)
			}
		})
	}
}

// TestDecisionSkipAndChoose: a pool that refuses at connect time is
// skipped, the pod with it once none is left; an unreachable pod loses
// its remaining candidates.
func TestDecisionSkipAndChoose(t *testing.T) {
	doc := testDoc(vdibroker.ScopeAllSites, vdibroker.DistributionNone)
	d, cands := Plan(Input{Doc: doc, Entitlement: &doc.GlobalEntitlements[0], ConnectedPod: "fra1", User: "bob",
		Pods: states(pool("office-fra1", 1, 0), pool("office-fra1b", 1, 0), pool("office-ams1", 1, 0), pool("office-nyc1", 1, 0))})
	d.Skip(cands[0], SkipNoCapacity)
	if d.Pods[0].Skipped != "" {
		t.Fatalf("fra1 skipped with a pool left: %+v", d.Pods[0])
	}
	d.Skip(cands[1], SkipNoCapacity)
	if d.Pods[0].Skipped != SkipNoCapacity {
		t.Fatalf("fra1 not skipped with no pool left: %+v", d.Pods[0])
	}
	rest := d.SkipPod("ams1", "unreachable: timeout after 2s", cands[2:])
	if order(rest) != "nyc1/office-nyc1" {
		t.Fatalf("after skipping ams1: %q", order(rest))
	}
	d.Choose(rest[0])
	if !d.Pods[2].Chosen || !d.Pods[2].Pools[0].Chosen {
		t.Fatalf("nyc1 not chosen: %+v", d.Pods[2])
	}
}

func TestScopeSearchOrder(t *testing.T) {
	doc := testDoc(vdibroker.ScopeAllSites, vdibroker.DistributionNone)
	var got []string
	for _, p := range Scope(doc, &doc.GlobalEntitlements[0], "ams1", "emea") {
		got = append(got, p.Name)
	}
	if strings.Join(got, " ") != "ams1 fra1 nyc1" {
		t.Fatalf("search order %v, want ams1 fra1 nyc1 (R-G1: connected pod, its site, the others)", got)
	}
}

// TestStartSiteAnyCase (R-G3, R-E5): a home site is found for its user and
// its group in any case.
func TestStartSiteAnyCase(t *testing.T) {
	doc := testDoc("", "")
	ge := &doc.GlobalEntitlements[0]
	for _, c := range []struct {
		user   string
		groups []string
		site   string
		from   string
	}{
		{"ALICE", nil, "amer", "user"},
		{"bob", []string{"US-Staff"}, "amer", "group"},
		{"bob", []string{"EU-STAFF"}, "emea", "group"},
		{"bob", nil, "emea", ""}, // the connected pod's site
		// In several groups with home sites: the one listed first in
		// the document's homeSites (us-staff's), whatever the order
		// of her groups (R-G3; docs/federation.md, the console's
		// home sites card).
		{"bob", []string{"EU-Staff", "US-Staff"}, "amer", "group"},
		{"bob", []string{"US-Staff", "EU-Staff"}, "amer", "group"},
	} {
		site, from := StartSite(doc, ge, c.user, c.groups, "fra1")
		if site != c.site || from != c.from {
			t.Errorf("%s %v: %s from %q, want %s from %q", c.user, c.groups, site, from, c.site, c.from)
		}
	}
}
