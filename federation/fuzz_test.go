package federation

import (
	"encoding/json"
	"testing"

	"github.com/vdibroker/vdibroker"
)

// FuzzPlan: any document that decodes and validates, with any facts, plans
// without panicking, every candidate is a member pool in scope, and every
// member pod appears once in the decision.
func FuzzPlan(f *testing.F) {
	// The test document, the source document's example (one pod), and
	// one whose pods share names with sites.
	seed, _ := json.Marshal(testDoc(vdibroker.ScopeAllSites, vdibroker.DistributionSessionCount))
	f.Add(seed, "fra1", "alice", 3, 10)
	f.Add([]byte(`{"generation":3,"sites":[{"name":"emea"},{"name":"amer"}],"pods":[{"name":"fra1","site":"emea","url":"https://fra1.example.com:8443"}],`+
		`"globalEntitlements":[{"name":"office","scope":"WithinSite","sessionDistribution":"LoadIndex","useHomeSite":true,"members":[{"pod":"fra1","hostPool":"office-fra1"}]}],`+
		`"homeSites":[{"user":"alice@contoso.com","site":"amer"},{"group":"us-staff","site":"amer"}]}`), "fra1", "alice@contoso.com", 0, 0)
	f.Add([]byte(`{"generation":1,"sites":[{"name":"a"}],"pods":[{"name":"a","site":"a","url":"http://a"}],"globalEntitlements":[{"name":"a","scope":"WithinPod","members":[{"pod":"a","hostPool":"abc"}]}]}`), "a", "u", 1, 1)
	f.Fuzz(func(t *testing.T, data []byte, self, user string, sessions, hosts int) {
		var doc vdibroker.Federation
		if json.Unmarshal(data, &doc) != nil {
			return
		}
		Normalize(&doc)
		if Validate(&doc, Self{Pod: self}) != nil {
			return
		}
		for i := range doc.GlobalEntitlements {
			ge := &doc.GlobalEntitlements[i]
			pods := map[string]PodState{}
			for _, m := range ge.Members {
				st := pods[m.Pod]
				if st.Pools == nil {
					st.Pools = map[string]vdibroker.PoolFacts{}
				}
				st.Pools[m.HostPool] = vdibroker.PoolFacts{HostPool: m.HostPool, Found: true, Hosts: hosts & 0xff, Sessions: sessions & 0xffff,
					MaxSessionLimit: 10, HasCapacity: sessions%2 == 0, LoadBalancerType: vdibroker.LoadIndex, LoadIndexes: []int{sessions & 0x7f}}
				pods[m.Pod] = st
			}
			d, cands := Plan(Input{Doc: &doc, Entitlement: ge, ConnectedPod: self, User: user, Pods: pods})
			seen := map[string]int{}
			for _, p := range d.Pods {
				seen[p.Pod]++
			}
			for _, m := range ge.Members {
				if seen[m.Pod] != 1 {
					t.Fatalf("pod %s appears %d times in the decision", m.Pod, seen[m.Pod])
				}
			}
			for _, c := range cands {
				found := false
				for _, m := range ge.Members {
					found = found || (m.Pod == c.Pod && m.HostPool == c.HostPool)
				}
				if !found {
					t.Fatalf("candidate %v is not a member", c)
				}
				if ge.Scope == vdibroker.ScopeWithinPod && c.Pod != self {
					t.Fatalf("WithinPod candidate %v outside the connected pod %s", c, self)
				}
			}
		}
	})
}
