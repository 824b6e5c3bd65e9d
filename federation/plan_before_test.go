package federation

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/vdibroker/vdibroker"
)

// The plan as it was before it was made to allocate less (R-G3, R-G4),
// kept to check that the new one decides the same, bit for bit.

func memberPodsBefore(doc *vdibroker.Federation, ge *vdibroker.GlobalEntitlement) ([]vdibroker.Pod, map[string][]string) {
	pools := map[string][]string{}
	for _, m := range ge.Members {
		pools[m.Pod] = append(pools[m.Pod], m.HostPool)
	}
	var pods []vdibroker.Pod
	for _, p := range doc.Pods {
		if len(pools[p.Name]) > 0 {
			pods = append(pods, p)
		}
	}
	return pods, pools
}

func ScopeBefore(doc *vdibroker.Federation, ge *vdibroker.GlobalEntitlement, connectedPod, startSite string) []vdibroker.Pod {
	pods, _ := memberPodsBefore(doc, ge)
	in := func(p vdibroker.Pod) bool {
		switch ge.Scope {
		case vdibroker.ScopeWithinPod:
			return p.Name == connectedPod
		case vdibroker.ScopeWithinSite:
			return p.Site == startSite
		}
		return true
	}
	rank := func(p vdibroker.Pod) int {
		switch {
		case p.Name == connectedPod:
			return 0
		case p.Site == startSite:
			return 1
		}
		return 2
	}
	var out []vdibroker.Pod
	for _, p := range pods {
		if in(p) {
			out = append(out, p)
		}
	}
	slices.SortStableFunc(out, func(a, b vdibroker.Pod) int { return cmp.Compare(rank(a), rank(b)) })
	return out
}

func PlanBefore(in Input) (*vdibroker.GlobalDecision, []vdibroker.MemberCandidate) {
	ge := in.Entitlement
	policy := ge.SessionDistribution
	start, from := StartSite(in.Doc, ge, in.User, in.Groups, in.ConnectedPod)
	if ge.Scope == vdibroker.ScopeWithinPod {
		if p := in.Doc.Pod(in.ConnectedPod); p != nil {
			start, from = p.Site, ""
		}
	}
	d := &vdibroker.GlobalDecision{GlobalEntitlement: ge.Name, Scope: ge.Scope, SessionDistribution: policy,
		ConnectedPod: in.ConnectedPod, StartSite: start, HomeSite: from, Sites: []vdibroker.SiteDecision{}, Pods: []vdibroker.PodDecision{}}
	all, members := memberPodsBefore(in.Doc, ge)
	scope := ScopeBefore(in.Doc, ge, in.ConnectedPod, start)
	inScope := map[string]bool{}
	for _, p := range scope {
		inScope[p.Name] = true
	}
	loads := policy != vdibroker.DistributionNone

	// Per pod: its pools' facts and its load.
	type podInfo struct {
		pod   vdibroker.Pod
		facts []vdibroker.PoolFacts
		load  float64
		has   bool
		err   string
		order int
	}
	infos := map[string]*podInfo{}
	for i, p := range all {
		pi := &podInfo{pod: p, order: i}
		st, ok := in.Pods[p.Name]
		switch {
		case !inScope[p.Name]:
		case !ok:
			pi.err = "unreachable"
		case st.Err != "":
			pi.err = st.Err
		default:
			for _, hp := range members[p.Name] {
				f, ok := st.Pools[hp]
				if !ok {
					f = vdibroker.PoolFacts{HostPool: hp}
				}
				pi.facts = append(pi.facts, f)
			}
			if loads {
				pi.load, pi.has = Aggregate(pi.facts, policy)
			}
		}
		infos[p.Name] = pi
	}

	// Sites in order: the start site, then the others (AllSites only).
	var siteOrder []string
	siteSeen := map[string]bool{}
	for _, p := range scope {
		if !siteSeen[p.Site] {
			siteSeen[p.Site] = true
			siteOrder = append(siteOrder, p.Site)
		}
	}
	siteLoad := map[string]float64{}
	siteHas := map[string]bool{}
	for _, s := range siteOrder {
		var facts []vdibroker.PoolFacts
		for _, p := range scope {
			if p.Site == s {
				facts = append(facts, infos[p.Name].facts...)
			}
		}
		if loads {
			siteLoad[s], siteHas[s] = Aggregate(facts, policy)
		}
	}
	docOrder := func(site string) int {
		return slices.IndexFunc(in.Doc.Sites, func(x vdibroker.Site) bool { return x.Name == site })
	}
	slices.SortStableFunc(siteOrder, func(a, b string) int {
		switch {
		case a == start:
			return -1
		case b == start:
			return 1
		case loads && siteHas[a] != siteHas[b]:
			if siteHas[a] {
				return -1
			}
			return 1
		case loads && siteHas[a] && siteLoad[a] != siteLoad[b]:
			return cmp.Compare(siteLoad[a], siteLoad[b])
		}
		return cmp.Compare(docOrder(a), docOrder(b))
	})

	var cands []vdibroker.MemberCandidate
	for _, s := range siteOrder {
		sd := vdibroker.SiteDecision{Site: s}
		if loads && siteHas[s] {
			sd.Load = ptr(siteLoad[s])
		}
		d.Sites = append(d.Sites, sd)
		var pods []*podInfo
		for _, p := range scope {
			if p.Site == s {
				pods = append(pods, infos[p.Name])
			}
		}
		slices.SortStableFunc(pods, func(a, b *podInfo) int {
			if loads {
				if a.has != b.has {
					if a.has {
						return -1
					}
					return 1
				}
				if a.has && a.load != b.load {
					return cmp.Compare(a.load, b.load)
				}
			}
			if (a.pod.Name == in.ConnectedPod) != (b.pod.Name == in.ConnectedPod) {
				if a.pod.Name == in.ConnectedPod {
					return -1
				}
				return 1
			}
			return cmp.Compare(a.order, b.order)
		})
		for _, pi := range pods {
			pd := vdibroker.PodDecision{Pod: pi.pod.Name, Site: pi.pod.Site, Skipped: pi.err}
			if pi.has {
				pd.Load = ptr(pi.load)
			}
			if pi.err == "" {
				pd.Pools, cands = poolOrderBefore(pi.pod.Name, pi.facts, policy, cands)
				switch {
				case slices.ContainsFunc(pd.Pools, func(p vdibroker.PoolDecision) bool { return p.Skipped == "" }):
				case !slices.ContainsFunc(pd.Pools, func(p vdibroker.PoolDecision) bool { return p.Skipped != SkipNotFound }):
					pd.Skipped = SkipNotFound // a document ahead of the pod's pools
				default:
					pd.Skipped = SkipNoCapacity
				}
			}
			d.Pods = append(d.Pods, pd)
		}
	}
	for _, p := range all {
		if !inScope[p.Name] {
			d.Pods = append(d.Pods, vdibroker.PodDecision{Pod: p.Name, Site: p.Site, Skipped: SkipOutOfScope})
		}
	}
	return d, cands
}

func poolOrderBefore(pod string, facts []vdibroker.PoolFacts, policy string, cands []vdibroker.MemberCandidate) ([]vdibroker.PoolDecision, []vdibroker.MemberCandidate) {
	type pl struct {
		f    vdibroker.PoolFacts
		load float64
		has  bool
		i    int
	}
	var ok []pl
	out := make([]vdibroker.PoolDecision, 0, len(facts))
	var skipped []vdibroker.PoolDecision
	for i, f := range facts {
		l, has := PoolLoad(f, policy)
		pd := vdibroker.PoolDecision{HostPool: f.HostPool}
		if has {
			pd.Load = ptr(l)
		}
		switch {
		case !f.Found:
			pd.Skipped = SkipNotFound
		case !f.HasCapacity:
			pd.Skipped = SkipNoCapacity
		default:
			ok = append(ok, pl{f, l, has, i})
			continue
		}
		skipped = append(skipped, pd)
	}
	if policy != vdibroker.DistributionNone {
		slices.SortStableFunc(ok, func(a, b pl) int {
			if a.has != b.has {
				if a.has {
					return -1
				}
				return 1
			}
			return cmp.Compare(a.load, b.load)
		})
	}
	for _, p := range ok {
		pd := vdibroker.PoolDecision{HostPool: p.f.HostPool}
		if p.has {
			pd.Load = ptr(p.load)
		}
		out = append(out, pd)
		cands = append(cands, vdibroker.MemberCandidate{Pod: pod, HostPool: p.f.HostPool})
	}
	return append(out, skipped...), cands
}

// TestPlanSameAsBefore_RG3: Plan and Scope decide as the code before
// they were made cheaper did, on random federations: pods over sites,
// several member pools a pod (some missing, full or unreachable), every
// scope and distribution, home sites, a connected pod in or out of the
// entitlement.
func TestPlanSameAsBefore_RG3(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	scopes := []string{vdibroker.ScopeAllSites, vdibroker.ScopeWithinSite, vdibroker.ScopeWithinPod}
	policies := []string{vdibroker.DistributionSessionCount, vdibroker.DistributionLoadIndex, vdibroker.DistributionNone}
	for n := range 3000 {
		doc := &vdibroker.Federation{Generation: 1}
		sites := 1 + r.IntN(5)
		for s := range sites {
			doc.Sites = append(doc.Sites, vdibroker.Site{Name: fmt.Sprintf("s%d", s)})
		}
		ge := vdibroker.GlobalEntitlement{Name: "g", Scope: scopes[r.IntN(3)], SessionDistribution: policies[r.IntN(3)], UseHomeSite: r.IntN(2) == 0}
		pods := map[string]PodState{}
		for i := range 1 + r.IntN(12) {
			name := fmt.Sprintf("p%d", i)
			doc.Pods = append(doc.Pods, vdibroker.Pod{Name: name, Site: fmt.Sprintf("s%d", r.IntN(sites))})
			st := PodState{Pools: map[string]vdibroker.PoolFacts{}}
			unasked := false
			switch r.IntN(8) {
			case 0:
				unasked = true // a member pod with no state: unreachable
			case 1:
				st.Err = "unreachable: timeout after 2s"
			}
			for j := range r.IntN(4) {
				hp := fmt.Sprintf("%s-%d", name, j)
				ge.Members = append(ge.Members, vdibroker.Member{Pod: name, HostPool: hp})
				if r.IntN(6) == 0 {
					continue // missing on its pod
				}
				f := vdibroker.PoolFacts{HostPool: hp, Found: r.IntN(8) != 0, Hosts: r.IntN(4) * 5, Sessions: r.IntN(60),
					MaxSessionLimit: []int{1, 10, vdibroker.NoSessionLimit}[r.IntN(3)], HasCapacity: r.IntN(4) != 0,
					LoadBalancerType: []string{vdibroker.BreadthFirst, vdibroker.LoadIndex}[r.IntN(2)]}
				if r.IntN(2) == 0 {
					f.LoadIndexes = []int{r.IntN(101), r.IntN(101)}
				}
				st.Pools[hp] = f
			}
			if !unasked {
				pods[name] = st
			}
		}
		r.Shuffle(len(ge.Members), func(i, j int) { ge.Members[i], ge.Members[j] = ge.Members[j], ge.Members[i] })
		doc.HomeSites = []vdibroker.HomeSite{{User: "u", Site: fmt.Sprintf("s%d", r.IntN(sites))}, {Group: "grp", Site: fmt.Sprintf("s%d", r.IntN(sites))}}
		doc.GlobalEntitlements = []vdibroker.GlobalEntitlement{ge}
		in := Input{Doc: doc, Entitlement: &ge, ConnectedPod: fmt.Sprintf("p%d", r.IntN(len(doc.Pods)+1)),
			User: []string{"u", "v"}[r.IntN(2)], Groups: []string{"grp"}[:r.IntN(2)], Pods: pods}
		start, _ := StartSite(doc, &ge, in.User, in.Groups, in.ConnectedPod)
		if got, want := Scope(doc, &ge, in.ConnectedPod, start), ScopeBefore(doc, &ge, in.ConnectedPod, start); !slices.Equal(got, want) {
			t.Fatalf("case %d: scope %v, before %v", n, got, want)
		}
		d, cands := Plan(in)
		wd, wcands := PlanBefore(in)
		if diff := gocmp.Diff(wd, d); diff != "" {
			t.Fatalf("case %d: decision differs from before (-before +now):\n%s", n, diff)
		}
		if diff := gocmp.Diff(wcands, cands); diff != "" { // nil as before, too
			t.Fatalf("case %d: candidates differ from before (-before +now):\n%s", n, diff)
		}
	}
}
