package global

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation"
)

// globalSessionsRoute names the call for a scoped principal's refusal.
const globalSessionsRoute = "GET /api/v1/users/{user}/globalsessions"

// UserSessions is the user's open sessions in the other pods' member
// pools (R-U3 across the federation): the pods a global connect would ask
// (R-G1: those the user's directory pod names or cannot vouch for, every
// other pod without a directory), each for its member pools of every
// global entitlement (an end user's: of those that grant her, R-E9; no
// pod is asked when none does). An end user may list only its own, a scoped
// principal none (global entitlements belong to no pool), any other
// principal that may read, any user's. Only sessions of the user in the
// pools asked are kept, whatever a peer answers. An end user is told
// which pods did not answer, not why.
func (g *Service) UserSessions(ctx context.Context, user string) (*vdibroker.GlobalSessions, error) {
	if err := vdibroker.ValidateUser("user", user); err != nil {
		return nil, err
	}
	me := vdibroker.PrincipalFrom(ctx)
	action := vdibroker.ActionRead
	if me.EndUser() {
		if !vdibroker.SameUser(me.Subject, user) {
			return nil, vdibroker.Errorf(vdibroker.EPermission, "an end user may list only its own sessions (%q)", me.Subject)
		}
		action = vdibroker.ActionIdentify
	}
	if err := vdibroker.Authorize(me, action, vdibroker.Target{Global: globalSessionsRoute}); err != nil {
		return nil, err
	}
	// One user's listings at once share one (as a global connect takes
	// one user's connects one at a time): otherwise each request is a
	// look-up and calls to the pods, each spending this pod's budget of
	// calls at its peers (R-G5), as many at once as a client opens.
	// What is listed depends on the user and, for an end user, on her
	// groups and that she is one: the key.
	endUser, groups := me.EndUser(), []string(nil)
	key := vdibroker.FoldUser(user)
	if endUser {
		groups = me.Groups
		folded := make([]string, len(groups))
		for i, grp := range groups {
			folded[i] = vdibroker.FoldUser(grp)
		}
		slices.Sort(folded)
		key += "\x00user\x00" + strings.Join(folded, "\x00")
	}
	ch := g.listings.DoChan(key, func() (any, error) {
		// Not tied to the first caller: the others wait for it; each
		// pod call is bounded by the pod timeout.
		return g.listUserSessions(context.WithoutCancel(ctx), user, endUser, groups)
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*vdibroker.GlobalSessions), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// listUserSessions is UserSessions for a caller authorized, an end user
// of groups when endUser. Its answer is shared: not to be changed.
func (g *Service) listUserSessions(ctx context.Context, user string, endUser bool, groups []string) (*vdibroker.GlobalSessions, error) {
	out := &vdibroker.GlobalSessions{Value: []*vdibroker.GlobalSession{}}
	doc, err := g.Document(ctx)
	if vdibroker.ErrorCode(err) == vdibroker.ENotFound {
		return out, nil // no document yet: no other pod
	}
	if err != nil {
		return nil, err
	}
	// An end user's are asked for in the member pools of the global
	// entitlements that grant her (R-E9), as her global connect asks: one
	// granted none asks no pod, and learns no entitlement's name that is
	// not hers.
	ents := doc.GlobalEntitlements
	if endUser {
		who := vdibroker.UserIdentity{User: user, Groups: groups}
		ents = slices.DeleteFunc(slices.Clone(ents), func(ge vdibroker.GlobalEntitlement) bool { return ge.Grants(who) == nil })
	}
	asked := map[string][]string{} // the pools asked, by pod
	for _, p := range doc.Pods {
		if m := podMembers(ents, p.Name); p.Name != g.cfg.Pod && len(m) > 0 {
			asked[p.Name] = m
		}
	}
	if len(asked) == 0 {
		return out, nil
	}
	// This pod's site, beside its sessions' (an end user granted no
	// global entitlement learns neither).
	out.Site = g.site(doc)
	// The pods each entitlement's global connect at this pod looks in
	// for the user's sessions (R-G1), for GlobalSession.Reconnect.
	scopes := map[string][]vdibroker.Pod{}
	for i := range ents {
		ge := &ents[i]
		start, _ := federation.StartSite(doc, ge, user, groups, g.cfg.Pod)
		scopes[ge.Name] = federation.Scope(doc, ge, g.cfg.Pod, start)
	}
	ask, _, _, _ := g.lookup(ctx, doc, user, "")
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for _, p := range doc.Pods {
		pools := asked[p.Name]
		if len(pools) == 0 {
			continue
		}
		wg.Go(func() {
			list, why := g.remoteSessions(ctx, doc, p, user, pools, ask != nil && !ask[p.Name])
			mu.Lock()
			defer mu.Unlock()
			if why != "" {
				if endUser {
					// The cause names the pod's address and the
					// network's errors: the administrator's to read.
					why = "did not answer"
				}
				if out.Unanswered == nil {
					out.Unanswered = map[string]string{}
				}
				out.Unanswered[p.Name] = why
				return
			}
			seen := map[string]bool{}
			for _, s := range list {
				if !vdibroker.SameUser(s.User, user) || !slices.Contains(pools, s.HostPool) || !slices.Contains(openStates, s.State) ||
					seen[s.ID] {
					continue // not what was asked: a peer's answer is checked as any input
				}
				seen[s.ID] = true
				gs := &vdibroker.GlobalSession{UserSession: *s, Pod: p.Name, Site: p.Site,
					GlobalEntitlements: entitlementsOf(ents, p.Name, s.HostPool), Reconnect: []string{}}
				for _, name := range gs.GlobalEntitlements {
					if slices.ContainsFunc(scopes[name], func(sp vdibroker.Pod) bool { return sp.Name == p.Name }) {
						gs.Reconnect = append(gs.Reconnect, name)
					}
				}
				out.Value = append(out.Value, gs)
			}
		})
	}
	wg.Wait()
	slices.SortFunc(out.Value, func(a, b *vdibroker.GlobalSession) int {
		return cmp.Or(cmp.Compare(a.Pod, b.Pod), cmp.Compare(a.ID, b.ID))
	})
	if len(out.Value) > vdibroker.MaxGlobalSessions {
		out.Value = out.Value[:vdibroker.MaxGlobalSessions]
	}
	return out, nil
}

// openStates are the states of an open session (UserSession.Open): a
// peer's session in any other is not listed.
var openStates = []string{vdibroker.StatePending, vdibroker.StateActive, vdibroker.StateDisconnected}

// remoteSessions asks peer p for the user's open sessions in pools, as a
// global connect does (remoteState): not a peer known to be unreachable
// from the last few seconds, and, with ifBehind, only when its load
// summary says its directory entries are behind or it is on another
// generation of the document (a summary that cannot be read: not
// answered). why is the reason it did not answer.
func (g *Service) remoteSessions(ctx context.Context, doc *vdibroker.Federation, p vdibroker.Pod, user string, pools []string, ifBehind bool) (list []*vdibroker.UserSession, why string) {
	if e := g.cachedFailure(p.Name); e != nil {
		return nil, g.reason(e)
	}
	if ifBehind {
		lr, err := g.peerLoads(ctx, p)
		if err != nil {
			// Not answered, as a global connect has it (remoteState);
			// asking for the sessions too waited out a second pod
			// timeout against a pod that hangs.
			return nil, g.reason(err)
		}
		if !lr.DirectoryBehind && lr.Generation == doc.Generation {
			return nil, ""
		}
	}
	list, err := g.callSessions(ctx, p, user, pools)
	if err != nil {
		g.markFailed(p.Name, err)
		return nil, g.reason(err)
	}
	return list, ""
}

// podMembers is pod's member pools of every global entitlement of ents,
// each once, in document order. Repeats are found by a set: the document
// may name tens of thousands of members, and comparing each with every
// one kept took seconds at each call.
func podMembers(ents []vdibroker.GlobalEntitlement, pod string) []string {
	var out []string
	seen := map[string]bool{}
	for _, ge := range ents {
		for _, m := range ge.Members {
			if m.Pod == pod && !seen[m.HostPool] {
				seen[m.HostPool] = true
				out = append(out, m.HostPool)
			}
		}
	}
	return out
}

// entitlementsOf names the global entitlements of ents with pool of pod
// as a member.
func entitlementsOf(ents []vdibroker.GlobalEntitlement, pod, pool string) []string {
	out := []string{}
	for _, ge := range ents {
		if slices.Contains(ge.Members, vdibroker.Member{Pod: pod, HostPool: pool}) {
			out = append(out, ge.Name)
		}
	}
	return out
}

// Routes of GlobalSessionCommand, for a scoped principal's refusal.
const (
	globalLogoffRoute     = "DELETE /api/v1/users/{user}/globalsessions/{pod}/{id}"
	globalDisconnectRoute = "POST /api/v1/users/{user}/globalsessions/{pod}/{id}/disconnect"
)

// GlobalSessionCommand logs off (vdibroker.CommandLogoff) or disconnects
// (vdibroker.CommandDisconnect) the user's session id in peer pod's
// member pools (R-U3 across the federation): the pod is asked
// (PodSessionCommand) and does it as its own API does, checking the
// session itself. The pools it is asked about are those UserSessions
// lists: for an end user (her own only) the member pools of the global
// entitlements that grant her (R-E9), none of which named: NotFound;
// for any other principal that may log off sessions (Contributor,
// Helpdesk, the admin token; not one scoped to host pools, as global
// entitlements belong to no pool), every member pool of the pod. A pod
// that is not a peer of this pod's document is NotFound; one that does
// not answer PodUnavailable (an end user is not told why: the cause
// names addresses); its refusal is passed on as it answered it.
func (g *Service) GlobalSessionCommand(ctx context.Context, user, pod, id, command string) (*vdibroker.Command, error) {
	if err := vdibroker.ValidateUser("user", user); err != nil {
		return nil, err
	}
	route := globalLogoffRoute
	switch command {
	case vdibroker.CommandLogoff:
	case vdibroker.CommandDisconnect:
		route = globalDisconnectRoute
	default:
		return nil, vdibroker.FieldError("command", "must be %s or %s, got %q", vdibroker.CommandLogoff, vdibroker.CommandDisconnect, command)
	}
	me := vdibroker.PrincipalFrom(ctx)
	if me.EndUser() && !vdibroker.SameUser(me.Subject, user) {
		return nil, vdibroker.Errorf(vdibroker.EPermission, "an end user may log off or disconnect only its own sessions (%q)", me.Subject)
	}
	if err := vdibroker.Authorize(me, vdibroker.ActionOwnSession, vdibroker.Target{Global: route, For: &vdibroker.UserIdentity{User: user}}); err != nil {
		return nil, err
	}
	if id == "" {
		return nil, vdibroker.FieldError("id", "is required (1..%d characters)", maxSessionIDLen)
	}
	if err := vdibroker.ValidateText("id", id, maxSessionIDLen); err != nil {
		return nil, err
	}
	if err := federation.ValidatePodName("pod", pod); err != nil {
		return nil, err
	}
	doc, err := g.Document(ctx)
	if vdibroker.ErrorCode(err) == vdibroker.ENotFound {
		return nil, vdibroker.Errorf(vdibroker.ENotFound, "pod %q is not in this pod's federation document: it holds none yet", pod)
	}
	if err != nil {
		return nil, err
	}
	p := doc.Pod(pod)
	switch {
	case p == nil:
		return nil, vdibroker.Errorf(vdibroker.ENotFound, "pod %q is not in this pod's federation document (generation %d)", pod, doc.Generation)
	case p.Name == g.cfg.Pod:
		return nil, vdibroker.Errorf(vdibroker.ENotFound, "pod %s is this pod: log off or disconnect its sessions with DELETE /api/v1/hostpools/{pool}/usersessions/{id} or POST .../disconnect", pod)
	}
	ents := doc.GlobalEntitlements
	if me.EndUser() {
		who := vdibroker.UserIdentity{User: user, Groups: me.Groups}
		ents = slices.DeleteFunc(slices.Clone(ents), func(ge vdibroker.GlobalEntitlement) bool { return ge.Grants(who) == nil })
	}
	pools := podMembers(ents, p.Name)
	if len(pools) == 0 {
		// The same answer as a session pod asked does not hold: she
		// learns nothing of the pod's pools.
		return nil, vdibroker.Errorf(vdibroker.ENotFound, "user %q has no open session %q on pod %s in a member pool of a global entitlement granting the user", user, id, pod)
	}
	if len(pools) > vdibroker.MaxPodSessionPools {
		pools = pools[:vdibroker.MaxPodSessionPools]
	}
	cctx, cancel := context.WithTimeout(ctx, g.cfg.PodTimeout)
	defer cancel()
	start := g.clock.Now()
	c, err := g.cfg.Peers.SessionCommand(cctx, *p, vdibroker.PodSessionCommandRequest{User: user, ID: id, HostPools: pools, Command: command})
	var answered *vdibroker.Error
	callErr := err
	if errors.As(err, &answered) {
		callErr = nil // the pod answered: a refusal is not a failed call
	}
	g.observe(*p, "sessioncommand", start, callErr, nil)
	switch {
	case answered != nil:
		switch answered.Code {
		case vdibroker.ENotFound, vdibroker.EConflict, vdibroker.EInvalid:
			return nil, err // about the session: the caller's to read
		case vdibroker.ETooManyRequests:
			// The pod takes so many a minute from this pod, for all of
			// its users (not this caller's own bound): when to try again
			// is its Retry-After, passed on, and an end user is not sent
			// to an administrator for it.
			msg := "pod " + pod + " refused: " + answered.Error()
			if me.EndUser() {
				msg = "pod " + pod + " takes no more logoffs and disconnects from this pod for now: end the session from within it"
			}
			return nil, &vdibroker.Error{Code: vdibroker.EPodUnavailable, Message: msg, RetryAfter: answered.RetryAfter}
		}
		// The pod refused this pod (its signature, its document) or
		// could not do it now: not the caller's credential, which a
		// 401 passed on would say was wrong.
		// Not "try again shortly" to an end user: a pod of an older
		// release never will (http.PodClient.SessionCommand), nor one
		// whose document does not trust this pod until an administrator
		// acts; what she can do is end it in the session, or ask.
		if me.EndUser() {
			return nil, vdibroker.Errorf(vdibroker.EPodUnavailable, "pod %s cannot do this for this pod now: end the session from within it, "+
				"or ask an administrator if this persists", pod)
		}
		return nil, vdibroker.Errorf(vdibroker.EPodUnavailable, "pod %s refused: %s", pod, answered.Error())
	case err != nil:
		g.markFailed(p.Name, err)
		// When to try again is the Retry-After alone, which every
		// reader says in its own form (the CLI's " (try again in 3 s)"):
		// the LoadTTL for which this pod now takes the pod for
		// unreachable (markFailed), its session lists and global
		// connects passing it over unasked; after it, they ask it again.
		msg := "pod " + pod + " did not answer"
		if !me.EndUser() {
			msg += ": " + g.reason(err) // its address and the network's errors: not hers to read
		}
		return nil, &vdibroker.Error{Code: vdibroker.EPodUnavailable, Message: msg, RetryAfter: g.cfg.LoadTTL}
	}
	return c, nil
}
