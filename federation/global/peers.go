package global

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation"
)

// The peers side of the service: asking the pods in scope, in parallel and each
// within the pod timeout, caching their load summaries, remembering their
// failures and health.

// loadEntry is a peer's cached load summary (or the failure to get it).
type loadEntry struct {
	resp  *vdibroker.PodLoads
	err   error
	at    time.Time
	asked time.Time     // when the call began
	ready chan struct{} // closed once resp/err are set
	// pools is resp's pools by name (poolsOf), made at its first use
	// under Service.mu and shared, read-only, by the connects until resp
	// changes: each global connect reads every peer's, 49 at 50 pods.
	pools map[string]vdibroker.PoolFacts
}

// done reports whether e's call has ended (resp or err set).
func (e *loadEntry) done() bool {
	select {
	case <-e.ready:
		return true
	default:
		return false
	}
}

// peerContext is ctx for asking the peers within wait (0: ctx itself):
// once it passes, a peer not yet answered is vdibroker.NoAnswer's, its
// call going on (cachedLoads does not tie it to its caller).
func peerContext(ctx context.Context, wait time.Duration) (context.Context, context.CancelFunc) {
	if wait <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeoutCause(ctx, wait, &vdibroker.NoAnswer{Wait: wait})
}

// podState is what gather learnt of one pod.
type podState struct {
	federation.PodState
	sessions []*vdibroker.UserSession
	// asked: the pod was asked for the user's sessions (this pod's own
	// read them), whatever it answered.
	asked bool
}

// gather asks every pod of pods, in parallel, for its member pools' facts
// (peers: from the cache when fresh; this pod: its pools of ge, or all its
// member pools without ge) and, when sessions is set, for the user's
// sessions in its member pools of ge: a peer only if ask names it (nil:
// every peer) or its load summary says its directory entries are behind.
// A peer that fails is named with why; one that has not answered within
// wait (0: its pod timeout) is said to be so (vdibroker.NoAnswer).
func (g *Service) gather(ctx context.Context, doc *vdibroker.Federation, pods []vdibroker.Pod, user string, sessions bool, ge *vdibroker.GlobalEntitlement, ask map[string]bool, wait time.Duration) map[string]podState {
	out := make(map[string]podState, len(pods))
	pctx, cancel := peerContext(ctx, wait)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	var self *vdibroker.Pod // this pod, when in pods
	var selfPools []string
	for _, p := range pods {
		ifBehind := sessions && ask != nil && !ask[p.Name]
		if p.Name != g.cfg.Pod && (!sessions || ifBehind) {
			// Most peers, with the session directory: nothing to ask
			// but their loads, fresh in the cache. Read here, without a
			// goroutine each (R-G1, R-G2: what remoteState would say).
			if st, ok := g.cachedState(doc, p.Name, ifBehind); ok {
				mu.Lock() // the goroutines of the pods before write out too
				out[p.Name] = st
				mu.Unlock()
				continue
			}
		}
		var pools []string
		if ge != nil {
			for _, m := range ge.Members {
				if m.Pod == p.Name {
					pools = append(pools, m.HostPool)
				}
			}
		}
		if p.Name == g.cfg.Pod {
			self = &p
			selfPools = pools
			continue
		}
		wg.Go(func() {
			st := g.remoteState(pctx, doc, p, user, pools, sessions, ifBehind)
			mu.Lock()
			out[p.Name] = st
			mu.Unlock()
		})
	}
	if self != nil {
		// This pod's own, on this goroutine while the peers are asked:
		// a new goroutine would grow its stack for SQLite's read at
		// every connect.
		var st podState
		if ge == nil {
			selfPools = g.memberPools(doc)
		}
		st.Pools = g.ownFacts(ctx, selfPools)
		if sessions {
			var err error
			st.asked = true
			st.sessions, err = g.localSessions(ctx, []string{user}, selfPools)
			if err != nil {
				st.Err = "unavailable: " + vdibroker.ErrorMessage(err)
			}
		}
		mu.Lock()
		out[self.Name] = st
		mu.Unlock()
	}
	wg.Wait()
	return out
}

// remoteState is gather for one peer: its loads (cached) and the user's
// sessions, asked at the same time; a peer known to be unreachable from
// the last few seconds is not asked again (each connect would otherwise
// wait out its timeout). With ifBehind, the sessions are asked only when
// the loads say the peer's directory entries are behind (R-G1), or that
// it is on another generation of the document than doc: its new sessions
// are at the directory pods of its own, which a whole list it sent at
// doc's generation does not vouch for.
func (g *Service) remoteState(ctx context.Context, doc *vdibroker.Federation, p vdibroker.Pod, user string, pools []string, sessions, ifBehind bool) podState {
	var st podState
	if e := g.cachedFailure(p.Name); e != nil {
		st.Err = g.reason(e)
		return st
	}
	if ifBehind {
		lr, err := g.peerLoads(ctx, p)
		if err == nil && !lr.DirectoryBehind && lr.Generation == doc.Generation {
			st.Pools = poolsOf(lr)
			return st
		}
	}
	var (
		wg      sync.WaitGroup
		lr      *vdibroker.PodLoads
		lerr    error
		sessErr error
	)
	wg.Go(func() { lr, lerr = g.peerLoads(ctx, p) })
	if sessions && len(pools) > 0 {
		st.asked = true
		wg.Go(func() {
			st.sessions, sessErr = g.callSessions(ctx, p, user, pools)
		})
	}
	wg.Wait()
	switch {
	case lerr != nil:
		st.Err = g.reason(lerr)
	case sessErr != nil:
		st.Err = g.reason(sessErr)
		g.markFailed(p.Name, sessErr)
	default:
		st.Pools = poolsOf(lr)
	}
	return st
}

// cachedState is remoteState's answer for peer pod when the cache has it
// without a call: a fresh failure, or a fresh load summary that needs no
// sessions call besides (ifBehind: unless it says the peer's directory
// entries are behind or it is of another generation than doc). ok is
// false when remoteState must run.
func (g *Service) cachedState(doc *vdibroker.Federation, pod string, ifBehind bool) (podState, bool) {
	var st podState
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.loads[pod]
	if e == nil {
		return st, false
	}
	select {
	case <-e.ready:
	default:
		return st, false // in flight: remoteState waits for it
	}
	if g.clock.Since(e.at) >= g.cfg.LoadTTL {
		return st, false
	}
	switch {
	case e.err != nil:
		st.Err = g.reason(e.err)
		return st, true
	case e.resp == nil:
		return st, false
	case ifBehind && (e.resp.DirectoryBehind || e.resp.Generation != doc.Generation):
		return st, false
	}
	if e.pools == nil {
		e.pools = poolsOf(e.resp)
	}
	st.Pools = e.pools
	return st, true
}

// poolsOf is a peer's load summary by member pool.
func poolsOf(lr *vdibroker.PodLoads) map[string]vdibroker.PoolFacts {
	out := make(map[string]vdibroker.PoolFacts, len(lr.Pools))
	for _, f := range lr.Pools {
		out[f.HostPool] = f
	}
	return out
}

// ownFacts are the facts of pools of this pod: from the cached summary
// of its member pools (ownLoads), else read now.
func (g *Service) ownFacts(ctx context.Context, pools []string) map[string]vdibroker.PoolFacts {
	lr, err := g.ownLoads(ctx)
	if err != nil {
		return g.localFacts(ctx, pools)
	}
	out := make(map[string]vdibroker.PoolFacts, len(pools))
	for _, name := range pools {
		out[name] = vdibroker.PoolFacts{HostPool: name} // not a member (yet): not found
	}
	for _, f := range lr.Pools {
		if _, ok := out[f.HostPool]; ok {
			out[f.HostPool] = f
		}
	}
	return out
}

// reason is how a failed pod call reads in a decision.
func (g *Service) reason(err error) string {
	var e *vdibroker.Error
	var na *vdibroker.NoAnswer
	switch {
	case errors.As(err, &na):
		return fmt.Sprintf("%s (its call goes on, up to the pod timeout of %s)", na.Error(), g.cfg.PodTimeout)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("unreachable: timeout after %s", g.cfg.PodTimeout)
	case errors.As(err, &e):
		return "refused: " + e.Message
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // the URL is the document's: the cause is what matters
	}
	return "unreachable: " + err.Error()
}

// cachedFailure returns the error of a fresh failed load call to pod.
func (g *Service) cachedFailure(pod string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.loads[pod]
	if e == nil {
		return nil
	}
	select {
	case <-e.ready:
	default:
		return nil
	}
	if e.err != nil && g.clock.Since(e.at) < g.cfg.LoadTTL {
		return e.err
	}
	return nil
}

// peerLoads returns pod's load summary: the cached one while fresh, else
// one call (shared by every connect that needs it meanwhile), bounded by
// the pod timeout.
func (g *Service) peerLoads(ctx context.Context, p vdibroker.Pod) (*vdibroker.PodLoads, error) {
	return g.cachedLoads(ctx, p.Name, func(cctx context.Context) (*vdibroker.PodLoads, error) {
		start := g.clock.Now()
		resp, err := g.cfg.Peers.Loads(cctx, p)
		g.observe(p, "loads", start, err, resp)
		return resp, err
	})
}

// ownLoads returns this pod's own member pools' facts, cached for the
// load TTL as a peer's are: a global connect otherwise reads every member
// pool's hosts from the store, which cost as much as the connect itself.
// placed counts this pod's new sessions in it as in a peer's.
func (g *Service) ownLoads(ctx context.Context) (*vdibroker.PodLoads, error) {
	return g.cachedLoads(ctx, g.cfg.Pod, g.PodLoads)
}

// cachedLoads returns the load summary cached under pod while fresh, else
// fetch's (one call shared by every connect that needs it meanwhile, not
// tied to the caller, bounded by the pod timeout).
func (g *Service) cachedLoads(ctx context.Context, pod string, fetch func(context.Context) (*vdibroker.PodLoads, error)) (*vdibroker.PodLoads, error) {
	g.mu.Lock()
	e := g.loads[pod]
	fresh := false
	if e != nil {
		select {
		case <-e.ready:
			fresh = g.clock.Since(e.at) < g.cfg.LoadTTL
		default:
			fresh = true // in flight: wait for it
		}
	}
	if !fresh {
		e = &loadEntry{ready: make(chan struct{}), asked: g.clock.Now()}
		g.loads[pod] = e
		go func() {
			// Not tied to the caller: other connects wait for this call.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.cfg.PodTimeout)
			defer cancel()
			resp, err := fetch(cctx)
			g.mu.Lock()
			e.resp, e.err, e.at = resp, err, g.clock.Now()
			g.mu.Unlock()
			close(e.ready)
		}()
	}
	g.mu.Unlock()
	select {
	case <-e.ready:
	case <-ctx.Done():
		// The caller's own end, or a read's wait for the peers passed
		// (peerContext's NoAnswer).
		return nil, context.Cause(ctx)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return e.resp, e.err
}

// markFailed remembers, for the load TTL, that a call to pod failed in
// transport (a refusal it answered is not a failure), so the connects
// meanwhile skip it at once instead of each waiting out the pod timeout.
func (g *Service) markFailed(pod string, err error) {
	var e *vdibroker.Error
	if errors.As(err, &e) || errors.Is(err, context.Canceled) {
		return // an answer, or our own caller gone: the peer is fine
	}
	ready := make(chan struct{})
	close(ready)
	g.mu.Lock()
	g.loads[pod] = &loadEntry{err: err, at: g.clock.Now(), ready: ready}
	g.mu.Unlock()
}

// placed counts a new session in pod's (or this pod's own) cached
// summary, so the connects until the next refresh see it and a logon storm does not pile onto the
// pod that looked least loaded a few seconds ago.
func (g *Service) placed(pod, pool string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.loads[pod]
	if e == nil || e.resp == nil {
		return
	}
	resp := *e.resp
	resp.Pools = slices.Clone(resp.Pools)
	for i := range resp.Pools {
		if resp.Pools[i].HostPool == pool {
			resp.Pools[i].Sessions++
		}
	}
	e.resp, e.pools = &resp, nil
}

// observe records a pod call in the peer's status and the metrics hook.
func (g *Service) observe(p vdibroker.Pod, op string, start time.Time, err error, lr *vdibroker.PodLoads) {
	d := g.clock.Since(start)
	if g.cfg.ObservePodCall != nil {
		g.cfg.ObservePodCall(p.Name, op, d, err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	ps := g.peers[p.Name]
	if ps == nil {
		ps = &vdibroker.PeerStatus{Pod: p.Name}
		g.peers[p.Name] = ps
	}
	ps.LatencyMs = float64(d.Microseconds()) / 1000
	if err != nil {
		ps.Health = g.reason(err)
		return
	}
	now := g.clock.Now().UTC()
	ps.LastContact, ps.Health = &now, "ok"
	if lr != nil {
		ps.Generation = lr.Generation
	}
}

// lookup is one global connect's R-G1 question to one peer: user's open
// sessions in pools.
type lookup struct {
	user     string
	sessions []*vdibroker.UserSession
	err      error
	done     chan struct{}
}

// lookupQueue is the look-ups waiting for a call to one peer about one set
// of pools; running says a call (or a run of them) is under way.
type lookupQueue struct {
	running bool
	queue   []*lookup
}

// callSessions asks pod for the user's open sessions in pools (R-G1). The
// look-ups of concurrent global connects share calls: one call per peer
// and set of pools is under way at a time, and the users that asked
// meanwhile go together in the next (at most MaxPodSessionUsers), which
// starts after they asked, so no answer predates its question.
func (g *Service) callSessions(ctx context.Context, p vdibroker.Pod, user string, pools []string) ([]*vdibroker.UserSession, error) {
	ctx, cancel := context.WithTimeout(ctx, g.cfg.PodTimeout)
	defer cancel()
	l := &lookup{user: user, done: make(chan struct{})}
	key := p.Name + "\x00" + strings.Join(pools, "\x00")
	g.mu.Lock()
	q := g.lookups[key]
	if q == nil {
		q = &lookupQueue{}
		g.lookups[key] = q
	}
	q.queue = append(q.queue, l)
	start := !q.running
	q.running = true
	g.mu.Unlock()
	if start {
		// Not tied to this caller: the calls carry others' look-ups.
		go g.runLookups(context.WithoutCancel(ctx), key, q, p, pools)
	}
	select {
	case <-l.done:
		return l.sessions, l.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// runLookups sends q's look-ups to pod, a call at a time, until q is
// empty. A peer of an older version, which refuses users, is asked user
// by user.
func (g *Service) runLookups(ctx context.Context, key string, q *lookupQueue, p vdibroker.Pod, pools []string) {
	for {
		g.mu.Lock()
		n := min(len(q.queue), vdibroker.MaxPodSessionUsers)
		if n == 0 {
			q.running = false
			delete(g.lookups, key)
			g.mu.Unlock()
			return
		}
		batch := q.queue[:n:n]
		q.queue = q.queue[n:]
		g.mu.Unlock()
		var users []string
		for _, l := range batch {
			if !slices.ContainsFunc(users, func(u string) bool { return vdibroker.FoldUser(u) == vdibroker.FoldUser(l.user) }) {
				users = append(users, l.user)
			}
		}
		req := vdibroker.PodSessionsRequest{HostPools: pools}
		if len(users) == 1 {
			req.User = users[0] // the form every version takes
		} else {
			req.Users = users
		}
		list, err := g.sessionsCall(ctx, p, req)
		if err != nil && len(users) > 1 && vdibroker.ErrorCode(err) == vdibroker.EInvalid {
			list, err = g.sessionsOneByOne(ctx, p, users, pools)
		}
		for _, l := range batch {
			l.err = err
			for _, s := range list {
				if vdibroker.FoldUser(s.User) == vdibroker.FoldUser(l.user) {
					l.sessions = append(l.sessions, s)
				}
			}
			close(l.done)
		}
	}
}

// sessionsOneByOne asks pod for each user's sessions in a call of its own,
// in parallel.
func (g *Service) sessionsOneByOne(ctx context.Context, p vdibroker.Pod, users, pools []string) ([]*vdibroker.UserSession, error) {
	lists := make([][]*vdibroker.UserSession, len(users))
	errs := make([]error, len(users))
	var wg sync.WaitGroup
	for i, u := range users {
		wg.Go(func() {
			lists[i], errs[i] = g.sessionsCall(ctx, p, vdibroker.PodSessionsRequest{User: u, HostPools: pools})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return slices.Concat(lists...), nil
}

// sessionsCall is one sessions call to pod, bounded by the pod timeout:
// one call for each MaxPodSessionPools of req's pools (an entitlement
// with more member pools in pod than one call takes), one after another.
func (g *Service) sessionsCall(ctx context.Context, p vdibroker.Pod, req vdibroker.PodSessionsRequest) ([]*vdibroker.UserSession, error) {
	ctx, cancel := context.WithTimeout(ctx, g.cfg.PodTimeout)
	defer cancel()
	var out []*vdibroker.UserSession
	for part := range slices.Chunk(req.HostPools, vdibroker.MaxPodSessionPools) {
		r := req
		r.HostPools = part
		start := g.clock.Now()
		s, err := g.cfg.Peers.Sessions(ctx, p, r)
		g.observe(p, "sessions", start, err, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, s...)
	}
	return out, nil
}

// callConnect asks pod p to connect the user (its pod-to-pod connect).
// A pod of an older version refuses a session id or registeredAt, fields
// it does not know (400 naming one, before it does anything): it is
// asked again without them. Its pool's connect then reconnects the
// user's session there by R-C1's own choice (the pool's one session, but
// for a personal pool of several), and it registers a new session
// itself (R-G1).
func (g *Service) callConnect(ctx context.Context, p vdibroker.Pod, req vdibroker.PodConnectRequest) (*vdibroker.ConnectAnswer, error) {
	a, err := g.podConnect(ctx, p, req)
	for range 2 {
		if err == nil || vdibroker.ErrorCode(err) != vdibroker.EInvalid {
			break
		}
		switch f := vdibroker.ErrorField(err); {
		case f == "sessionId" && req.SessionID != "":
			req.SessionID = ""
		case f == "registeredAt" && req.RegisteredAt != "":
			req.RegisteredAt = ""
		default:
			return a, err
		}
		a, err = g.podConnect(ctx, p, req)
	}
	return a, err
}

// podConnect is one pod-to-pod connect, bounded by the pod timeout.
func (g *Service) podConnect(ctx context.Context, p vdibroker.Pod, req vdibroker.PodConnectRequest) (*vdibroker.ConnectAnswer, error) {
	ctx, cancel := context.WithTimeout(ctx, g.cfg.PodTimeout)
	defer cancel()
	start := g.clock.Now()
	a, err := g.cfg.Peers.Connect(ctx, p, req)
	var e *vdibroker.Error
	callErr := err
	if errors.As(err, &e) {
		callErr = nil // the pod answered: a refusal is not a failed call
	}
	g.observe(p, "connect", start, callErr, nil)
	return a, err
}
