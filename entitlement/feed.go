package entitlement

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation"
)

// Feed lists what the calling principal may open (R-U5): what it is
// entitled to as its own identity (R-E10: its subject and the groups of
// its token or sign-in), each desktop, each application whose
// showInPortal is set, each global entitlement, with the friendly name a
// person recognises, the kind's default icon and the API call that opens
// it. Desktops come first, then applications, each by friendly name.
func (s *Service) Feed(ctx context.Context) (*vdibroker.Feed, error) {
	me := vdibroker.PrincipalFrom(ctx)
	if me == nil {
		return nil, vdibroker.Errorf(vdibroker.EPermission, "a feed is a signed-in user's")
	}
	who := me.Identity()
	out := &vdibroker.Feed{User: who.User, Resources: []vdibroker.FeedResource{}}
	if vdibroker.ValidateUser("user", who.User) != nil {
		return out, nil // a principal no user can be (the admin token's "admin" is one)
	}
	g, err := s.granted(ctx, me, who)
	if err != nil {
		return nil, err
	}
	var pools map[string]*vdibroker.HostPool // read once, when a desktop needs its pool's name
	body := func(extra ...string) map[string]string {
		b := map[string]string{"user": who.User}
		for i := 0; i+1 < len(extra); i += 2 {
			b[extra[i]] = extra[i+1]
		}
		return b
	}
	// appPools are the pools a RemoteApp of the feed needs hosts of that
	// can run it, with the resources (by index) that need them (R-E12).
	appPools := map[string][]int{}
	for _, gg := range g.groups {
		grp := gg.group
		if grp.ApplicationGroupType == vdibroker.AppGroupDesktop {
			name := grp.FriendlyName
			if name == "" {
				if pools == nil {
					if pools, err = s.poolsByName(ctx); err != nil {
						return nil, err
					}
				}
				name = grp.HostPool
				if p := pools[grp.HostPool]; p != nil && p.FriendlyName != "" {
					name = p.FriendlyName
				}
			}
			r := vdibroker.Resource{HostPool: grp.HostPool}
			out.Resources = append(out.Resources, vdibroker.FeedResource{ID: vdibroker.DesktopID(grp.HostPool), Kind: vdibroker.FeedDesktop,
				FriendlyName: name, HostPool: grp.HostPool, ApplicationGroup: grp.Name, IconURL: vdibroker.IconDesktopPath,
				ConnectURL: vdibroker.ConnectPath(r), ConnectBody: body()})
			continue
		}
		for _, a := range gg.apps {
			if !a.ShowInPortal {
				continue
			}
			r := vdibroker.Resource{HostPool: grp.HostPool, ApplicationGroup: grp.Name}
			out.Resources = append(out.Resources, vdibroker.FeedResource{ID: vdibroker.AppID(grp.Name, a.Name), Kind: vdibroker.FeedRemoteApp,
				FriendlyName: cmp.Or(a.FriendlyName, a.Name), HostPool: grp.HostPool, ApplicationGroup: grp.Name, Application: a.Name,
				IconURL: vdibroker.IconRemoteAppPath, ConnectURL: vdibroker.ConnectPath(r), ConnectBody: body("application", a.Name)})
			appPools[grp.HostPool] = append(appPools[grp.HostPool], len(out.Resources)-1)
		}
	}
	var connectGroups []string
	if me.EndUser() {
		connectGroups = who.Groups
	}
	for _, gg := range g.global {
		kind, icon := vdibroker.FeedDesktop, vdibroker.IconDesktopPath
		if gg.ge.IsApplication() {
			kind, icon = vdibroker.FeedRemoteApp, vdibroker.IconRemoteAppPath
		}
		var members []string
		for _, m := range gg.ge.Members {
			if m.Pod == s.pod {
				members = append(members, m.HostPool)
			}
		}
		// Whether its global connect here looks in this pod, as that
		// connect works it out (R-G1): the start site from the user and
		// her groups, the scope from here. An end user's connect takes
		// the groups of her identity; any other principal's, those its
		// body names, and connectBody names none.
		start, _ := federation.StartSite(g.doc, gg.ge, who.User, connectGroups, s.pod)
		scope := federation.Scope(g.doc, gg.ge, s.pod, start)
		here := slices.ContainsFunc(scope, func(p vdibroker.Pod) bool { return p.Name == s.pod })
		r := vdibroker.Resource{GlobalEntitlement: gg.ge.Name}
		out.Resources = append(out.Resources, vdibroker.FeedResource{ID: vdibroker.GlobalID(gg.ge.Name), Kind: kind,
			FriendlyName: gg.ge.Name, GlobalEntitlement: gg.ge.Name, Application: gg.ge.Application, MemberPools: members,
			ReconnectsHere: here, IconURL: icon, ConnectURL: vdibroker.ConnectPath(r), ConnectBody: body()})
		if tried := triedHere(gg.ge, scope, s.pod); kind == vdibroker.FeedRemoteApp && len(tried) > 0 {
			// Its connect tries only member pools of this pod: it is
			// refused when none of them can run RemoteApps, and this pod
			// can tell. A member pool of another pod may take it, and
			// asking that pod is not for a feed: it stays available.
			for _, p := range tried {
				appPools[p] = append(appPools[p], len(out.Resources)-1)
			}
		}
	}
	if err := s.markRemoteAppsUnsupported(ctx, out.Resources, appPools); err != nil {
		return nil, err
	}
	slices.SortFunc(out.Resources, func(a, b vdibroker.FeedResource) int {
		return cmp.Or(cmp.Compare(kindOrder(a.Kind), kindOrder(b.Kind)),
			cmp.Compare(strings.ToLower(a.FriendlyName), strings.ToLower(b.FriendlyName)), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// triedHere returns the member pools ge's global connect at pod tries
// (those of the pods in its scope), when they are all of pod; nil when
// one is another pod's, or there are none.
func triedHere(ge *vdibroker.GlobalEntitlement, scope []vdibroker.Pod, pod string) []string {
	inScope := make(map[string]bool, len(scope))
	for _, p := range scope {
		inScope[p.Name] = true
	}
	var pools []string
	seen := map[string]bool{} // each once, found by a set: the portal reads the feed on each page (R-U5)
	for _, m := range ge.Members {
		if !inScope[m.Pod] {
			continue
		}
		if m.Pod != pod {
			return nil
		}
		if !seen[m.HostPool] {
			seen[m.HostPool] = true
			pools = append(pools, m.HostPool)
		}
	}
	return pools
}

// markRemoteAppsUnsupported marks unavailable, with the reason
// RemoteAppUnsupported, each RemoteApp of res whose connect is refused
// because no host of its pool can run it (R-E12): resources names, per
// pool, the resources (by index) that need one of its hosts. A global
// entitlement is named under each of its pools, and is unavailable only
// when every one of them cannot. One read for every pool (R-U5: the
// portal reads the feed on each page).
func (s *Service) markRemoteAppsUnsupported(ctx context.Context, res []vdibroker.FeedResource, resources map[string][]int) error {
	if len(resources) == 0 {
		return nil
	}
	names := slices.Sorted(maps.Keys(resources))
	cannot, err := s.store.PoolsWithoutRemoteApps(ctx, names)
	if err != nil {
		return err
	}
	// needs counts, per resource, its pools whose hosts can, or might.
	needs := map[int]int{}
	for _, idx := range resources {
		for _, i := range idx {
			needs[i]++
		}
	}
	for _, p := range cannot {
		for _, i := range resources[p] {
			needs[i]--
		}
	}
	for i, n := range needs {
		if n == 0 {
			res[i].Unavailable = vdibroker.ERemoteAppUnsupported
		}
	}
	return nil
}

func kindOrder(kind string) int {
	if kind == vdibroker.FeedDesktop {
		return 0
	}
	return 1
}

// poolsByName reads every pool, by name.
func (s *Service) poolsByName(ctx context.Context) (map[string]*vdibroker.HostPool, error) {
	list, err := s.store.ListHostPools(ctx)
	if err != nil {
		return nil, err
	}
	m := make(map[string]*vdibroker.HostPool, len(list))
	for _, p := range list {
		m[p.Name] = p
	}
	return m, nil
}
