package federation

import (
	"fmt"
	"testing"

	"github.com/vdibroker/vdibroker"
)

// BenchmarkPlan50 is one global connect's plan at Horizon's limits: 50
// pods over 15 sites, one member pool each, SessionCount, AllSites.
func BenchmarkPlan50(b *testing.B) {
	doc := &vdibroker.Federation{Generation: 1}
	for s := range 15 {
		doc.Sites = append(doc.Sites, vdibroker.Site{Name: fmt.Sprintf("site%d", s)})
	}
	ge := vdibroker.GlobalEntitlement{Name: "desktop", Scope: vdibroker.ScopeAllSites, SessionDistribution: vdibroker.DistributionSessionCount}
	in := Input{Doc: doc, Entitlement: &ge, ConnectedPod: "pod0", User: "u", Pods: map[string]PodState{}}
	for i := range 50 {
		name, pool := fmt.Sprintf("pod%d", i), fmt.Sprintf("desk-pod%d", i)
		doc.Pods = append(doc.Pods, vdibroker.Pod{Name: name, Site: fmt.Sprintf("site%d", i%15), URL: "http://127.0.0.1/"})
		ge.Members = append(ge.Members, vdibroker.Member{Pod: name, HostPool: pool})
		in.Pods[name] = PodState{Pools: map[string]vdibroker.PoolFacts{pool: {HostPool: pool, Found: true, HasCapacity: true,
			Hosts: 20, Sessions: 5000 + i, MaxSessionLimit: 999999}}}
	}
	doc.GlobalEntitlements = []vdibroker.GlobalEntitlement{ge}
	b.ReportAllocs()
	for b.Loop() {
		start, _ := StartSite(doc, &ge, "u", nil, "pod0")
		_ = Scope(doc, &ge, "pod0", start)
		Plan(in)
	}
}
