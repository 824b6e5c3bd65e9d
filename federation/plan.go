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
		// The groups by their folded keys (equal exactly when SameUser):
		// a document's home sites times an identity's groups, compared
		// pair by pair, took 0.1 s at each connect and feed.
		folded := make(map[string]bool, len(groups))
		for _, g := range groups {
			folded[vdibroker.FoldUser(g)] = true
		}
		for _, h := range doc.HomeSites {
			if h.Group != "" && folded[vdibroker.FoldUser(h.Group)] {
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
	pools := make(map[string][]string, len(ge.Members))
	for _, m := range ge.Members {
		pools[m.Pod] = append(pools[m.Pod], m.HostPool)
	}
	pods := make([]vdibroker.Pod, 0, len(pools))
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
//
// Every global connect computes it (twice: for the pods to ask, and in
// Plan), at 50 pods: one set of the member pods and the answer, and
// three passes in document order instead of a sort.
func Scope(doc *vdibroker.Federation, ge *vdibroker.GlobalEntitlement, connectedPod, startSite string) []vdibroker.Pod {
	member := make(map[string]bool, len(ge.Members))
	for _, m := range ge.Members {
		member[m.Pod] = true
	}
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
	for r := range 3 {
		for _, p := range doc.Pods {
			if member[p.Name] && rank(p) == r && in(p) {
				if out == nil {
					out = make([]vdibroker.Pod, 0, len(member))
				}
				out = append(out, p)
			}
		}
	}
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
	inScope := make(map[string]bool, len(scope))
	nfacts := 0
	for _, p := range scope {
		inScope[p.Name] = true
		nfacts += len(members[p.Name])
	}
	loads := policy != vdibroker.DistributionNone

	// Per pod: its pools' facts and its load. One allocation for every
	// pod's and one for every pool's (a global connect plans over every
	// member pod, 50 at Horizon's limits).
	type podInfo struct {
		pod   vdibroker.Pod
		facts []vdibroker.PoolFacts
		load  float64
		has   bool
		err   string
		order int
	}
	infoOf := make([]podInfo, len(all))
	infos := make(map[string]*podInfo, len(all))
	facts := make([]vdibroker.PoolFacts, 0, nfacts)
	for i, p := range all {
		pi := &infoOf[i]
		pi.pod, pi.order = p, i
		st, ok := in.Pods[p.Name]
		switch {
		case !inScope[p.Name]:
		case !ok:
			pi.err = "unreachable"
		case st.Err != "":
			pi.err = st.Err
		default:
			from := len(facts)
			for _, hp := range members[p.Name] {
				f, ok := st.Pools[hp]
				if !ok {
					f = vdibroker.PoolFacts{HostPool: hp}
				}
				facts = append(facts, f)
			}
			if len(facts) > from {
				pi.facts = facts[from:len(facts):len(facts)]
			}
			if loads {
				pi.load, pi.has = Aggregate(pi.facts, policy)
			}
		}
		infos[p.Name] = pi
	}

	// Sites in order: the start site, then the others (AllSites only).
	// Each site's pods in scope, in scope order; its load over their
	// pools in that order (Aggregate's sum, pool by pool).
	type siteInfo struct {
		name     string
		pods     []*podInfo
		load     float64
		has      bool
		docOrder int
	}
	var sites []*siteInfo
	siteOf := map[string]*siteInfo{}
	for _, p := range scope {
		si := siteOf[p.Site]
		if si == nil {
			si = &siteInfo{name: p.Site, docOrder: slices.IndexFunc(in.Doc.Sites, func(x vdibroker.Site) bool { return x.Name == p.Site })}
			siteOf[p.Site] = si
			sites = append(sites, si)
		}
		si.pods = append(si.pods, infos[p.Name])
	}
	for _, si := range sites {
		if loads {
			var sum loadSum
			for _, pi := range si.pods {
				sum.add(pi.facts, policy)
			}
			si.load, si.has = sum.load()
		}
	}
	slices.SortStableFunc(sites, func(a, b *siteInfo) int {
		switch {
		case a.name == start:
			return -1
		case b.name == start:
			return 1
		case loads && a.has != b.has:
			if a.has {
				return -1
			}
			return 1
		case loads && a.has && a.load != b.load:
			return cmp.Compare(a.load, b.load)
		}
		return cmp.Compare(a.docOrder, b.docOrder)
	})

	cands := make([]vdibroker.MemberCandidate, 0, len(facts))
	d.Sites = make([]vdibroker.SiteDecision, 0, len(sites))
	d.Pods = make([]vdibroker.PodDecision, 0, len(all))
	for _, si := range sites {
		sd := vdibroker.SiteDecision{Site: si.name}
		if loads && si.has {
			sd.Load = ptr(si.load)
		}
		d.Sites = append(d.Sites, sd)
		pods := si.pods
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
	if len(cands) == 0 {
		cands = nil
	}
	return d, cands
}

// poolOrder orders one pod's member pools for Plan: those with capacity
// by load (not under None), ties in listed order; the others are skipped.
func poolOrder(pod string, facts []vdibroker.PoolFacts, policy string, cands []vdibroker.MemberCandidate) ([]vdibroker.PoolDecision, []vdibroker.MemberCandidate) {
	type pl struct {
		hostPool string
		load     float64
		has      bool
	}
	ok := make([]pl, 0, len(facts))
	out := make([]vdibroker.PoolDecision, 0, len(facts))
	var skipped []vdibroker.PoolDecision
	for _, f := range facts {
		l, has := PoolLoad(f, policy)
		if f.Found && f.HasCapacity {
			ok = append(ok, pl{f.HostPool, l, has})
			continue
		}
		pd := vdibroker.PoolDecision{HostPool: f.HostPool, Skipped: SkipNoCapacity}
		if has {
			pd.Load = ptr(l)
		}
		if !f.Found {
			pd.Skipped = SkipNotFound
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
		pd := vdibroker.PoolDecision{HostPool: p.hostPool}
		if p.has {
			pd.Load = ptr(p.load)
		}
		out = append(out, pd)
		cands = append(cands, vdibroker.MemberCandidate{Pod: pod, HostPool: p.hostPool})
	}
	return append(out, skipped...), cands
}

func ptr(f float64) *float64 {
	// Three decimals are what a reader compares; the rest is noise.
	r := float64(int64(f*1000+0.5)) / 1000
	return &r
}
