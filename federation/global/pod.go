package global

import (
	"context"
	"fmt"
	"slices"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation"
)

// The pod side of the service: what this pod tells its peers about its own
// member pools (the pod-to-pod API's handlers call these), and the store
// calls of the federation, bounded like every other (guard.go).

// memberPools returns this pod's member pools in every global entitlement
// of doc, each once, in document order.
func (g *Service) memberPools(doc *vdibroker.Federation) []string {
	return podMembers(doc.GlobalEntitlements, g.cfg.Pod)
}

// localFacts are the facts of pools of this pod, read now from its store.
func (g *Service) localFacts(ctx context.Context, pools []string) map[string]vdibroker.PoolFacts {
	out := map[string]vdibroker.PoolFacts{}
	for _, name := range pools {
		pool, hosts, err := g.cfg.Hosts.SessionHosts(ctx, name)
		if err != nil {
			out[name] = vdibroker.PoolFacts{HostPool: name}
			continue
		}
		g.cfg.Hosts.Present(pool, hosts)
		out[name] = federation.Facts(pool, hosts)
	}
	return out
}

// localSessions are the users' open sessions in pools of this pod.
func (g *Service) localSessions(ctx context.Context, users, pools []string) ([]*vdibroker.UserSession, error) {
	if len(pools) == 0 {
		return nil, nil
	}
	return g.cfg.Store.OpenSessionsOfUsers(ctx, users, pools)
}

// PodLoads is the pod side of LoadsPath: this pod's member pools' facts.
func (g *Service) PodLoads(ctx context.Context) (*vdibroker.PodLoads, error) {
	resp := &vdibroker.PodLoads{Pod: g.cfg.Pod, Site: g.cfg.Site, Pools: []vdibroker.PoolFacts{}}
	doc, err := g.Document(ctx)
	if vdibroker.ErrorCode(err) == vdibroker.ENotFound {
		return resp, nil // no document yet: generation 0, nothing to offer
	}
	if err != nil {
		return nil, err
	}
	resp.Generation, resp.Site = doc.Generation, g.site(doc)
	resp.DirectoryBehind = g.directoryBehind(ctx, doc)
	members := g.memberPools(doc)
	facts := g.localFacts(ctx, members)
	for _, name := range members {
		resp.Pools = append(resp.Pools, facts[name])
	}
	return resp, nil
}

// PodSessions is the pod side of SessionsPath: the user's (or users')
// open sessions in those of the named pools that are members of this pod.
// A call names at most MaxPodSessionUsers users and MaxPodSessionPools
// pools (InvalidArgument naming the field): the caller cuts its pools in
// parts (sessionsCall).
func (g *Service) PodSessions(ctx context.Context, req vdibroker.PodSessionsRequest) (*vdibroker.PodSessions, error) {
	users := req.Users
	switch {
	case req.User != "" && len(users) > 0:
		return nil, vdibroker.FieldError("users", "give user or users, not both")
	case len(users) > vdibroker.MaxPodSessionUsers:
		return nil, vdibroker.FieldError("users", "at most %d users, got %d", vdibroker.MaxPodSessionUsers, len(users))
	case len(req.HostPools) > vdibroker.MaxPodSessionPools:
		return nil, vdibroker.FieldError("hostPools", "0 to %d host pools, got %d; ask for more in several calls", vdibroker.MaxPodSessionPools, len(req.HostPools))
	case len(users) == 0:
		if err := vdibroker.ValidateUser("user", req.User); err != nil {
			return nil, err
		}
		users = []string{req.User}
	}
	for i, u := range req.Users {
		if err := vdibroker.ValidateUser(fmt.Sprintf("users[%d]", i), u); err != nil {
			return nil, err
		}
	}
	doc, err := g.Document(ctx)
	if err != nil {
		return nil, err
	}
	list, err := g.localSessions(ctx, users, g.namedMembers(doc, req.HostPools))
	if err != nil {
		return nil, err
	}
	if list == nil {
		list = []*vdibroker.UserSession{}
	}
	return &vdibroker.PodSessions{Sessions: list}, nil
}

// PodConnect is the pod side of ConnectPath: a connect into one of this
// pod's member pools, through the pod's own connect path.
func (g *Service) PodConnect(ctx context.Context, req vdibroker.PodConnectRequest) (*vdibroker.ConnectAnswer, error) {
	doc, err := g.Document(ctx)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(g.memberPools(doc), req.HostPool) {
		return nil, vdibroker.Errorf(vdibroker.ENotFound, "host pool %q is not a member of a global entitlement on pod %s", req.HostPool, g.cfg.Pod)
	}
	// What is opened is this pod's document's word, not the caller's: a
	// global application entitlement's application (R-E9), else the
	// desktop; and only in a member pool of the entitlement named, whose
	// grant is all the user has here (R-E9), never another's pool.
	ge := doc.Entitlement(req.GlobalEntitlement)
	if ge == nil || !slices.Contains(ge.Members, vdibroker.Member{Pod: g.cfg.Pod, HostPool: req.HostPool}) {
		return nil, vdibroker.Errorf(vdibroker.ENotFound, "global entitlement %q on pod %s has no member host pool %q",
			req.GlobalEntitlement, g.cfg.Pod, req.HostPool)
	}
	if req.Application != "" && ge.Application != req.Application {
		return nil, vdibroker.Errorf(vdibroker.ENotFound, "global entitlement %q on pod %s has no application %q in host pool %q",
			req.GlobalEntitlement, g.cfg.Pod, req.Application, req.HostPool)
	}
	return g.connectMember(ctx, doc, ge, req.HostPool, vdibroker.ConnectRequest{User: req.User, DryRun: req.DryRun, SessionID: req.SessionID}, req.Existing, req.RegisteredAt)
}

// maxSessionIDLen bounds a session id a peer names.
const maxSessionIDLen = vdibroker.MaxSessionIDLen

// PodSessionCommand is the pod side of SessionCommandPath (R-U3 across
// the federation): peer pod asks this pod to log off or disconnect the
// user's session req.ID. This pod checks everything itself, on its own
// document and store: the session must be the user's (by folded name,
// R-E5) open one, in one of the pools named that are members of a global
// entitlement of this pod's document; anything else (unknown, ended,
// another user's, in another pool) is the same NotFound, so that a peer
// cannot tell them apart. Then it is this pod's own API's logoff or
// disconnect (the command queued, a logoff still queued the answer, a
// host that cannot carry it out now warned of), whose audit entry names
// the session (the HTTP layer names the calling pod and the user).
func (g *Service) PodSessionCommand(ctx context.Context, pod string, req vdibroker.PodSessionCommandRequest) (*vdibroker.Command, error) {
	if err := vdibroker.ValidateUser("user", req.User); err != nil {
		return nil, err
	}
	if req.ID == "" {
		return nil, vdibroker.FieldError("id", "is required (1..%d characters)", maxSessionIDLen)
	}
	if err := vdibroker.ValidateText("id", req.ID, maxSessionIDLen); err != nil {
		return nil, err
	}
	if len(req.HostPools) == 0 || len(req.HostPools) > vdibroker.MaxPodSessionPools {
		return nil, vdibroker.FieldError("hostPools", "1 to %d host pools, got %d", vdibroker.MaxPodSessionPools, len(req.HostPools))
	}
	if req.Command != vdibroker.CommandLogoff && req.Command != vdibroker.CommandDisconnect {
		return nil, vdibroker.FieldError("command", "must be %s or %s, got %q", vdibroker.CommandLogoff, vdibroker.CommandDisconnect, req.Command)
	}
	if g.cfg.Sessions == nil {
		return nil, vdibroker.Errorf(vdibroker.ENotFound, "pod %s does not log off sessions for its peers", g.cfg.Pod)
	}
	doc, err := g.Document(ctx)
	if err != nil {
		return nil, err
	}
	pools := g.namedMembers(doc, req.HostPools)
	// The user's open sessions in those pools (one read of the index by
	// folded name, as a peer's look-up): the session is among them only
	// if it is hers, open, and in a member pool asked.
	list, err := g.localSessions(ctx, []string{req.User}, pools)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(list, func(s *vdibroker.UserSession) bool {
		return s.ID == req.ID && vdibroker.SameUser(s.User, req.User) && slices.Contains(pools, s.HostPool) && s.Open()
	})
	if i < 0 {
		return nil, vdibroker.Errorf(vdibroker.ENotFound, "user %q has no open session %q in the host pools asked that are members of a global entitlement on pod %s",
			req.User, req.ID, g.cfg.Pod)
	}
	us := list[i]
	if ev := vdibroker.AuditFrom(ctx); ev != nil {
		// The session acted on, as this pod's own API's entry names it:
		// a principal scoped to its pool reads it.
		ev.Target, ev.HostPool = "hostpools/"+us.HostPool+"/usersessions/"+us.ID, us.HostPool
		ev.Bound()
	}
	if req.Command == vdibroker.CommandLogoff {
		return g.cfg.Sessions.Logoff(ctx, us.HostPool, us.ID)
	}
	return g.cfg.Sessions.Disconnect(ctx, us.HostPool, us.ID)
}

// namedMembers are this pod's member pools of doc that a peer named, each
// once: a peer naming one pool many times gets it read once per user,
// not once per name, and a pool of no global entitlement is not read.
func (g *Service) namedMembers(doc *vdibroker.Federation, named []string) []string {
	members := map[string]bool{}
	for _, p := range g.memberPools(doc) {
		members[p] = true
	}
	var pools []string
	for _, p := range named {
		if members[p] {
			delete(members, p) // each once
			pools = append(pools, p)
		}
	}
	return pools
}
