package federation

import (
	"cmp"
	"slices"

	"github.com/vdibroker/vdibroker"
)

// Reasons a pod or a member pool was passed over, as the decision says.
const (
	SkipOutOfScope = "out of scope"
	SkipNoCapacity = "no capacity"
	SkipNotFound   = "host pool not found on its pod"
	SkipNoMembers  = "no member host pool"
	// SkipRemoteAppUnsupported: the pool's hosts cannot run RemoteApps,
	// so it does not take an application (R-E12).
	SkipRemoteAppUnsupported = "no session host can run RemoteApps"
)

// PodState is what a global connect learnt about one pod in scope: its
// member pools' facts, or why it could not ask (Err, such as
// "unreachable: timeout after 2s").
type PodState struct {
	Err   string
	Pools map[string]vdibroker.PoolFacts // by host pool name
}

// Input is what Plan needs: the document, the entitlement, the pod the
// user connected to, the user's identity (for home sites), and the state
// of every pod in scope (a pod missing from Pods counts as unreachable).
type Input struct {
	Doc          *vdibroker.Federation
	Entitlement  *vdibroker.GlobalEntitlement
	ConnectedPod string
	User         string
	Groups       []string
	Pods         map[string]PodState
}

// StartSite is R-G3's starting site: with useHomeSite, the user's own home
// site, else the first home site (in document order) of one of the user's
// groups; otherwise the site of the connected pod. from says which:
// "user", "group" or "".
func StartSite(doc *vdibroker.Federation, ge *vdibroker.GlobalEntitlement, user string, groups []string, connectedPod string) (site, from string) {
	if ge.UseHomeSite {
		for _, h := range doc.HomeSites {
			if h.User != "" && vdibroker.SameUser(h.User, user) { // in any case (R-E5)
				return h.Site, "user"
			}
		}
		for _, h := range doc.HomeSites {
			if h.Group != "" && vdibroker.ContainsUser(groups, h.Group) {
				return h.Site, "group"
			}
		}
	}
	if p := doc.Pod(connectedPod); p != nil {
		return p.Site, ""
	}
	return "", ""
}

// memberPods returns the pods with members in ge, in document order, and
// each one's member pools in listed order.
func memberPods(doc *vdibroker.Federation, ge *vdibroker.GlobalEntitlement) ([]vdibroker.Pod, map[string][]string) {
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

// Scope returns the pods with members in the entitlement that its scope
// covers for a user starting at startSite from connectedPod, in search
// order (R-G1: an existing session is looked for in this order): the
// connected pod first, then the other pods of the start site, then the
// other sites' pods, each in document order.
func Scope(doc *vdibroker.Federation, ge *vdibroker.GlobalEntitlement, connectedPod, startSite string) []vdibroker.Pod {
	pods, _ := memberPods(doc, ge)
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

// Plan is R-G3 and R-G4: the decision so far and the member pools to try,
// in order, until one takes the session.
//
// With LoadIndex or SessionCount: the start site first; in a site, its
// pods by load, least loaded first (ties: the connected pod, then document
// order); in a pod, its member pools with capacity by load (ties: listed
// order). AllSites then goes on with the other sites by load, least loaded
// first (ties: document order); WithinSite stops after the start site,
// WithinPod considers the connected pod only.
//
// With None nothing is compared: the connected pod's member pools in their
// listed order, then the other pods of its site, then the other sites, in
// document order, as far as the scope allows. When useHomeSite sends the
// user to a home site other than the connected pod's, that site's pods
// come first (in document order), since the home site is the start site.
func Plan(in Input) (*vdibroker.GlobalDecision, []vdibroker.MemberCandidate) {
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
	all, members := memberPods(in.Doc, ge)
	scope := Scope(in.Doc, ge, in.ConnectedPod, start)
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
				pd.Pools, cands = poolOrder(pi.pod.Name, pi.facts, policy, cands)
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

// poolOrder orders one pod's member pools for Plan: those with capacity
// by load (not under None), ties in listed order; the others are skipped.
func poolOrder(pod string, facts []vdibroker.PoolFacts, policy string, cands []vdibroker.MemberCandidate) ([]vdibroker.PoolDecision, []vdibroker.MemberCandidate) {
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

func ptr(f float64) *float64 {
	// Three decimals are what a reader compares; the rest is noise.
	r := float64(int64(f*1000+0.5)) / 1000
	return &r
}
