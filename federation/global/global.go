package global

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	"k8s.io/utils/clock"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation"
	"github.com/vdibroker/vdibroker/internal/keyed"
)

// Config is what a Service needs: this pod's own services and store, its
// identity (serve --pod-name, --site, --external-url) and its peers.
type Config struct {
	// Connect is this pod's own connect, which places a global connect's
	// user in a member pool of this pod.
	Connect vdibroker.ConnectService
	// Applications opens a global application entitlement's application
	// in a member pool of this pod (R-E9): the entitlement service.
	Applications Applications
	// Hosts reads this pod's member pools for their facts.
	Hosts Hosts
	// Sessions logs off and disconnects the sessions of this pod's
	// member pools a peer asks for (PodSessionCommand): the broker
	// service, as its own API does. nil refuses such calls.
	Sessions SessionCommands
	// Store keeps this pod's copy of the federation document.
	Store  vdibroker.FederationStore
	Logger *slog.Logger // nil discards logs
	Pod    string
	Site   string
	URL    string
	Peers  vdibroker.PodClient
	// PeerPolicy is what the peers' URLs of a document must pass (serve
	// --federation-allow); nil allows any http(s) URL.
	PeerPolicy *federation.PeerPolicy
	// PodTimeout bounds every pod-to-pod call (0 = 2s, R-G5).
	PodTimeout time.Duration
	// LoadTTL is how long a peer's load summary is reused (0 = 3s), so a
	// global connect usually costs no load call at all.
	LoadTTL time.Duration
	// ObserveConnect, when set, is called once per global connect with its
	// outcome (Created, Reconnect, DryRun or an error code) and the pod
	// that answered ("" when none).
	ObserveConnect func(outcome, pod string)
	// OutagePlacementsWaiting, when set, says this replica holds
	// sessions placed during a store outage not yet written
	// (broker.Service.OutagePlacementsWaiting): their ids are older than
	// the session directory's passes look back, and only this replica's
	// memory has them (R-G1, R-OUT3). Once written, the store's count
	// tells every replica (FederationStore.LateSessionWrites).
	OutagePlacementsWaiting func() bool
	// ObservePodCall, when set, is called after every pod-to-pod call.
	ObservePodCall func(peer, op string, d time.Duration, err error)
	// Clock is the time of the caches (the document for docTTL, peer
	// loads for LoadTTL) and of the peers' last contact (nil = the real
	// clock).
	Clock clock.PassiveClock
}

// Applications connects a user to an application a pool publishes in one
// of its RemoteApp groups, on a global entitlement's behalf (R-E9).
type Applications interface {
	ConnectPoolApplication(ctx context.Context, pool, application string, req vdibroker.ConnectRequest) (*vdibroker.ConnectAnswer, error)
}

// SessionCommands queues a logoff or a disconnect of a session of this
// pod (R-S4): the broker service's.
type SessionCommands interface {
	Logoff(ctx context.Context, pool, id string) (*vdibroker.Command, error)
	Disconnect(ctx context.Context, pool, id string) (*vdibroker.Command, error)
}

// Hosts reads a pool's hosts and fills their read-time fields (status,
// load index): the broker service.
type Hosts interface {
	SessionHosts(ctx context.Context, pool string) (*vdibroker.HostPool, []*vdibroker.SessionHost, error)
	Present(pool *vdibroker.HostPool, all []*vdibroker.SessionHost, show ...*vdibroker.SessionHost)
}

// Service is the Cloud Pod Architecture service of one pod (SPEC §7): the
// federation document, global connects across pods (R-G1..R-G5), and the
// pod side of the pod-to-pod API.
type Service struct {
	cfg   Config
	log   *slog.Logger
	clock clock.PassiveClock
	locks keyed.Mutex

	mu    sync.Mutex
	loads map[string]*loadEntry // by peer pod name
	peers map[string]*vdibroker.PeerStatus
	doc   *vdibroker.Federation // cached for docTTL from docAt
	docAt time.Time

	nonces  nonceBatcher
	dir     directory
	lookups map[string]*lookupQueue // R-G1 look-ups by peer and pools, under mu
	// listings are the UserSessions under way, by user (sessions.go).
	listings singleflight.Group
}

var _ vdibroker.FederationService = (*Service)(nil)

// New returns the federation service of a pod.
func New(cfg Config) *Service {
	if cfg.PodTimeout <= 0 {
		cfg.PodTimeout = 2 * time.Second
	}
	if cfg.LoadTTL <= 0 {
		cfg.LoadTTL = 3 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Service{cfg: cfg, log: log, clock: clk, loads: map[string]*loadEntry{}, peers: map[string]*vdibroker.PeerStatus{},
		lookups: map[string]*lookupQueue{}, dir: directory{sent: map[string]time.Time{}, dropped: -1}}
}

// Pod is this pod's name.
func (g *Service) Pod() string { return g.cfg.Pod }

// Self is this pod's identity.
func (g *Service) Self() federation.Self {
	return federation.Self{Pod: g.cfg.Pod, Site: g.cfg.Site, URL: g.cfg.URL, Peers: g.cfg.PeerPolicy}
}

// site is this pod's site: --site, else what the document says.
func (g *Service) site(doc *vdibroker.Federation) string {
	if g.cfg.Site != "" {
		return g.cfg.Site
	}
	if p := doc.Pod(g.cfg.Pod); p != nil {
		return p.Site
	}
	return ""
}

// PodTimeout is the bound of every pod-to-pod call.
func (g *Service) PodTimeout() time.Duration { return g.cfg.PodTimeout }

// PutDocument validates f as this pod sees it and stores it (the
// generation check is the store's). Cached peer loads are dropped: the
// members may have changed.
func (g *Service) PutDocument(ctx context.Context, f *vdibroker.Federation) (bool, error) {
	federation.Normalize(f)
	if err := federation.Validate(f, g.Self()); err != nil {
		return false, err
	}
	created, err := g.cfg.Store.PutFederation(ctx, f)
	if err != nil {
		return false, err
	}
	g.mu.Lock()
	clear(g.loads)
	g.doc = nil
	g.mu.Unlock()
	return created, nil
}

// docTTL is how long the stored document is reused from memory: every
// global connect and pod-to-pod call reads it, and a PUT on another
// replica of this pod is seen within it (a PUT here at once).
const docTTL = time.Second

// Document returns the stored document (NotFound when none). Callers must
// not change it.
func (g *Service) Document(ctx context.Context) (*vdibroker.Federation, error) {
	g.mu.Lock()
	doc, at := g.doc, g.docAt
	g.mu.Unlock()
	if doc != nil && g.clock.Since(at) < docTTL {
		return doc, nil
	}
	doc, err := g.cfg.Store.GetFederation(ctx)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	forget := g.doc == nil || g.doc.Generation != doc.Generation
	if forget {
		g.forgetRemoved(doc)
	}
	g.doc, g.docAt = doc, g.clock.Now()
	g.mu.Unlock()
	if forget {
		g.dir.forgetRemoved(doc)
	}
	return doc, nil
}

// forgetRemoved drops what this pod keeps of the pods doc does not list
// (their load summaries, their health): kept by name, they would
// otherwise grow with every name a document ever listed, and a holder of
// the federation secret writes a document of 200 new names at every
// generation (R-SEC). g.mu is held.
func (g *Service) forgetRemoved(doc *vdibroker.Federation) {
	for name := range g.loads {
		if name != g.cfg.Pod && doc.Pod(name) == nil {
			delete(g.loads, name)
		}
	}
	for name := range g.peers {
		if doc.Pod(name) == nil {
			delete(g.peers, name)
		}
	}
}

// Status returns the document with each peer's health and generation,
// asking the peers whose load summary is not cached (in parallel, each
// within the pod timeout) when askPeers, waiting for them at most wait
// (0: until each answers or its pod timeout passes); else the peers are
// as last heard of, and none is asked: a reader of the document alone
// (the console's pool page) does not wait out a peer that does not
// answer. A peer whose call is under way, unanswered, has AskedAt.
func (g *Service) Status(ctx context.Context, askPeers bool, wait time.Duration) (*vdibroker.FederationStatus, error) {
	doc, err := g.Document(ctx)
	if err != nil {
		return nil, err
	}
	if askPeers {
		pctx, cancel := peerContext(ctx, wait)
		var wg sync.WaitGroup
		for _, p := range doc.Pods {
			if p.Name != g.cfg.Pod {
				wg.Go(func() { g.peerLoads(pctx, p) })
			}
		}
		wg.Wait()
		cancel()
	}
	st := &vdibroker.FederationStatus{Pod: g.cfg.Pod, Site: g.site(doc), Document: doc, Peers: []vdibroker.PeerStatus{},
		Warnings: doc.EveryoneWarnings(), Directory: g.directoryStatus(ctx, doc)}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range doc.Pods {
		if p.Name == g.cfg.Pod {
			continue
		}
		ps := vdibroker.PeerStatus{Pod: p.Name, Site: p.Site, URL: p.URL, Health: "unknown"}
		if known := g.peers[p.Name]; known != nil {
			ps = *known
			ps.Site, ps.URL = p.Site, p.URL
		}
		if e := g.loads[p.Name]; e != nil && !e.done() {
			at := e.asked.UTC()
			ps.AskedAt = &at
		}
		ps.GenerationMismatch = ps.Generation != doc.Generation
		st.Peers = append(st.Peers, ps)
	}
	return st, nil
}

// Entitlements returns every global entitlement (or the one named, when
// name is not empty: NotFound when there is none) with its members' loads,
// waiting for the peers at most wait (0: until each answers or its pod
// timeout passes); a member of a peer that has not answered by then is
// said to be so (vdibroker.NoAnswer).
func (g *Service) Entitlements(ctx context.Context, name string, wait time.Duration) ([]vdibroker.EntitlementView, error) {
	doc, err := g.Document(ctx)
	if err != nil {
		return nil, err
	}
	states := g.gather(ctx, doc, doc.Pods, "", false, nil, nil, wait)
	out := []vdibroker.EntitlementView{}
	for _, ge := range doc.GlobalEntitlements {
		if name != "" && ge.Name != name {
			continue
		}
		v := vdibroker.EntitlementView{GlobalEntitlement: ge, Members: []vdibroker.MemberView{}}
		if ge.NamesNobody() {
			v.Warnings = []string{vdibroker.EveryoneWarning(ge.Name)} // R-E9
		}
		for _, m := range ge.Members {
			mv := vdibroker.MemberView{Member: m}
			if p := doc.Pod(m.Pod); p != nil {
				mv.Site = p.Site
			}
			st := states[m.Pod]
			if st.Err != "" {
				mv.Error = st.Err
			} else if f, ok := st.Pools[m.HostPool]; ok && f.Found {
				mv.Facts = &f
				if l, ok := federation.PoolLoad(f, ge.SessionDistribution); ok {
					mv.Load = &l
				}
			} else {
				mv.Error = federation.SkipNotFound
			}
			v.Members = append(v.Members, mv)
		}
		out = append(out, v)
	}
	if name != "" && len(out) == 0 {
		return nil, vdibroker.Errorf(vdibroker.ENotFound, "global entitlement %q not found", name)
	}
	return out, nil
}

// Connect is a connect to global entitlement name (SPEC §7): the user's
// existing session in scope first (R-G1), else a new one in the member
// pool R-G2..R-G4 choose, made by the chosen pod through its own connect
// path, so its database enforces its limits (R-C4). A pod that does not
// answer within the pod timeout is skipped and named (R-G5).
func (g *Service) Connect(ctx context.Context, name string, req vdibroker.GlobalConnectRequest) (a *vdibroker.GlobalAnswer, err error) {
	defer func() {
		if g.cfg.ObserveConnect == nil {
			return
		}
		switch {
		case err != nil:
			g.cfg.ObserveConnect(vdibroker.ErrorCode(err), "")
		case a.DryRun:
			g.cfg.ObserveConnect("DryRun", a.Pod)
		case a.Reconnect:
			g.cfg.ObserveConnect("Reconnect", a.Pod)
		default:
			g.cfg.ObserveConnect("Created", a.Pod)
		}
	}()
	if err := vdibroker.ValidateUser("user", req.User); err != nil {
		return nil, err
	}
	for i, grp := range req.Groups {
		if err := vdibroker.ValidateUser(fmt.Sprintf("groups[%d]", i), grp); err != nil {
			return nil, err
		}
	}
	if req.Session != nil {
		if err := federation.ValidateSessionRef("session", req.Session); err != nil {
			return nil, err
		}
	}
	doc, err := g.Document(ctx)
	if err != nil {
		return nil, err
	}
	ge := doc.Entitlement(name)
	// R-E9: an end user is entitled by the entitlement's users, groups or
	// allUsers, with the groups of their identity (which home sites use
	// too); the pods then connect them on the entitlement's behalf. To
	// one of no such name she is told the same (R-E3), not NotFound: her
	// token would list the entitlements she may not open.
	if p := vdibroker.PrincipalFrom(ctx); p.EndUser() {
		req.Groups = p.Groups
		if ge == nil || ge.Grants(vdibroker.UserIdentity{User: req.User, Groups: req.Groups}) == nil {
			return nil, vdibroker.NotEntitled(req.User, vdibroker.Resource{GlobalEntitlement: name})
		}
	}
	if ge == nil {
		return nil, vdibroker.Errorf(vdibroker.ENotFound, "global entitlement %q not found", name)
	}
	// One user's connects to one entitlement, one at a time on this pod,
	// so they do not make two sessions in two pods.
	unlock := g.locks.Lock(name + "\x00" + vdibroker.FoldUser(req.User))
	defer unlock()

	start, _ := federation.StartSite(doc, ge, req.User, req.Groups, g.cfg.Pod)
	scope := federation.Scope(doc, ge, g.cfg.Pod, start)
	plan := func(states map[string]podState) (*vdibroker.GlobalDecision, []vdibroker.MemberCandidate) {
		in := federation.Input{Doc: doc, Entitlement: ge, ConnectedPod: g.cfg.Pod, User: req.User, Groups: req.Groups,
			Pods: make(map[string]federation.PodState, len(states))}
		for pod, st := range states {
			in.Pods[pod] = st.PodState
		}
		return federation.Plan(in)
	}
	// R-G1 through the session directory: only the pods it names, or
	// cannot vouch for, are asked for the user's sessions. A new
	// session's pod is planned first, as if the directory named none, so
	// that the look-up registers the user there when it does name none
	// (the common case, a user without a session): the placing pod then
	// makes no registration call of its own beside its placement.
	var (
		states   map[string]podState
		d        *vdibroker.GlobalDecision
		cands    []vdibroker.MemberCandidate
		register string
	)
	if federation.UsesDirectory(doc) && !req.DryRun {
		states = g.gather(ctx, doc, scope, req.User, true, ge, map[string]bool{}, 0)
		d, cands = plan(states)
		if _, _, ok := g.existing(ge, scope, states, req); !ok && len(cands) > 0 {
			register = cands[0].Pod
		}
	}
	ask, ok, registeredAt, named := g.lookup(ctx, doc, req.User, register)
	switch {
	case states == nil || !ok:
		// Asked as the directory says: every pod when it did not answer.
		states = g.gather(ctx, doc, scope, req.User, true, ge, ask, 0)
		d, cands = plan(states)
	case len(ask) > 0:
		// The pods it names or cannot vouch for, but those the plan's
		// gathering asked already (a peer whose summary says it is
		// behind), or could not reach: unless one answered no session
		// and the directory holds an entry of the user there, which may
		// be a session made since it was asked.
		var more []vdibroker.Pod
		for _, p := range scope {
			st := states[p.Name]
			again := !st.asked || (len(st.sessions) == 0 && slices.Contains(named, p.Name))
			if ask[p.Name] && again && st.Err == "" {
				more = append(more, p)
			}
		}
		if len(more) > 0 {
			maps.Copy(states, g.gather(ctx, doc, more, req.User, true, ge, nil, 0))
			d, cands = plan(states)
		}
	}

	// The member pools that refused her for an administrator
	// (ReasonStartByAdministrator): when they are all there was, the
	// refusal says so too.
	var byAdmin map[vdibroker.MemberCandidate]bool
	// R-G1: the existing session: the one the caller names, else the
	// first in search order.
	if c, id, ok := g.existing(ge, scope, states, req); ok {
		ans, err := g.try(ctx, doc, ge, c, req, id, true, "")
		if err == nil {
			d.ExistingSession = &c
			return g.answer(d, c, doc, ans), nil
		}
		if errNotPlaced(err) {
			d.Skip(c, skipReason(err))
			byAdmin = forAdministrator(byAdmin, c, err)
			cands = slices.DeleteFunc(cands, func(x vdibroker.MemberCandidate) bool { return x == c })
		} else {
			g.markFailed(c.Pod, err)
			cands = d.SkipPod(c.Pod, g.reason(err), cands)
		}
	}
	for len(cands) > 0 {
		c := cands[0]
		cands = cands[1:]
		at := ""
		if c.Pod == register {
			at = registeredAt
		}
		ans, err := g.try(ctx, doc, ge, c, req, "", false, at)
		if err == nil {
			if ans.Created {
				g.placed(c.Pod, c.HostPool)
			}
			return g.answer(d, c, doc, ans), nil
		}
		if errNotPlaced(err) {
			d.Skip(c, skipReason(err))
			byAdmin = forAdministrator(byAdmin, c, err)
			continue
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if c.Pod == g.cfg.Pod {
			// This pod's own failure (its store down, say): the other
			// pods may still place the user, which is what a federation
			// is for. The decision says why this pod was passed over.
			g.log.WarnContext(ctx, "global connect: this pod's connect failed; trying other pods", "pool", c.HostPool, "err", err)
			cands = d.SkipPod(c.Pod, "unavailable: "+vdibroker.ErrorMessage(err), cands)
			continue
		}
		g.markFailed(c.Pod, err)
		cands = d.SkipPod(c.Pod, g.reason(err), cands)
	}
	return nil, noCapacity(d, byAdmin)
}

// existing is the member pool (in its pod) of the user's existing session
// a global connect reconnects (R-G1), ok false when she has none in
// scope: the session req.Session names (with its id, for the pool's
// connect) when it is one the pods in scope answered as hers, open, in a
// member pool of ge, else the first pod in search order that answered
// one, its first member pool (in listed order) holding one.
//
// Any other session named is passed over, not refused: the user portal's
// list is a snapshot, and the session a user clicked Reconnect on may
// have ended since, when opening the entitlement (R-G1, then a new
// session) is what she asked for; and a connect that answers as if
// nothing were named, whatever was named, tells nobody whether another
// user's session, or one out of scope, exists.
func (g *Service) existing(ge *vdibroker.GlobalEntitlement, scope []vdibroker.Pod, states map[string]podState, req vdibroker.GlobalConnectRequest) (c vdibroker.MemberCandidate, id string, ok bool) {
	if want := req.Session; want != nil {
		pod := cmp.Or(want.Pod, g.cfg.Pod)
		st := states[pod]
		inScope := slices.ContainsFunc(scope, func(p vdibroker.Pod) bool { return p.Name == pod }) &&
			slices.Contains(ge.Members, vdibroker.Member{Pod: pod, HostPool: want.HostPool})
		if inScope && st.Err == "" && slices.ContainsFunc(st.sessions, func(s *vdibroker.UserSession) bool {
			return s.ID == want.ID && s.HostPool == want.HostPool && vdibroker.SameUser(s.User, req.User) && s.Open()
		}) {
			return vdibroker.MemberCandidate{Pod: pod, HostPool: want.HostPool}, want.ID, true
		}
	}
	for _, p := range scope {
		st := states[p.Name]
		if st.Err != "" || len(st.sessions) == 0 {
			continue
		}
		return vdibroker.MemberCandidate{Pod: p.Name, HostPool: firstMember(ge, p.Name, st.sessions)}, "", true
	}
	return vdibroker.MemberCandidate{}, "", false
}

// try connects the user into candidate c: this pod's own connect path, or
// the pod-to-pod connect of c's pod. sessionID, when set, is the user's
// session there to reconnect (ConnectRequest.SessionID). registeredAt,
// when set, is the directory pod whose look-up registered the user at
// c's pod (PodLookup.Registered).
func (g *Service) try(ctx context.Context, doc *vdibroker.Federation, ge *vdibroker.GlobalEntitlement, c vdibroker.MemberCandidate, req vdibroker.GlobalConnectRequest, sessionID string, existing bool, registeredAt string) (*vdibroker.ConnectAnswer, error) {
	if c.Pod == g.cfg.Pod {
		return g.connectMember(ctx, doc, ge, c.HostPool, vdibroker.ConnectRequest{User: req.User, DryRun: req.DryRun, SessionID: sessionID}, existing, registeredAt)
	}
	return g.callConnect(ctx, *doc.Pod(c.Pod), vdibroker.PodConnectRequest{GlobalEntitlement: ge.Name, HostPool: c.HostPool,
		User: req.User, DryRun: req.DryRun, Application: ge.Application, Existing: existing, SessionID: sessionID, RegisteredAt: registeredAt})
}

// connectMember connects a user into pool, a member of ge on this pod:
// its desktop, or for a global application entitlement the application
// (R-E9).
// A session it makes is registered at the user's directory pod before
// it is answered (startRegister).
// existing says the connect is for the user's existing session (R-G1),
// which needs no registration; registeredAt, when set, the directory
// pod whose look-up registered the user for this pod (PodLookup.
// Registered): nor does a session it makes, if that is the user's
// directory pod in doc. Another (the caller's look-up went by another
// generation of the document) is not where this pod's connects and
// whole lists look for the user, whose directory pod in doc may vouch
// for this pod already: the session is registered there as usual.
func (g *Service) connectMember(ctx context.Context, doc *vdibroker.Federation, ge *vdibroker.GlobalEntitlement, pool string, req vdibroker.ConnectRequest, existing bool, registeredAt string) (a *vdibroker.ConnectAnswer, err error) {
	registered := registeredAt != "" && federation.DirectoryPod(doc, vdibroker.FoldUser(req.User)) == registeredAt
	register := federation.UsesDirectory(doc) && !registered
	if register && !req.DryRun && !existing {
		// The common case, a new session: registered beside its
		// placement, not after it.
		done := g.startRegister(ctx, doc, req.User)
		defer func() { done(err == nil && a.Created) }()
		register = false
	}
	if registered && !req.DryRun && !existing {
		// Registered by the look-up: this pod's next directory pass
		// need not send it again either (as startRegister's).
		key, now := vdibroker.FoldUser(req.User), g.clock.Now()
		defer func() {
			if err == nil && a.Created {
				g.markSent(key, now)
			}
		}()
	}
	switch {
	case ge != nil && ge.IsApplication() && g.cfg.Applications == nil:
		return nil, vdibroker.Errorf(vdibroker.ENotFound, "pod %s publishes no applications", g.cfg.Pod)
	case ge != nil && ge.IsApplication():
		a, err = g.cfg.Applications.ConnectPoolApplication(ctx, pool, ge.Application, req)
	default:
		a, err = g.cfg.Connect.Connect(ctx, pool, req, "")
	}
	if register && err == nil && a.Created {
		g.startRegister(ctx, doc, req.User)(true) // the session it was for had ended
	}
	return a, err
}

// errNotPlaced reports a pool's refusal to take the session (it answered;
// the next candidate may).
func errNotPlaced(err error) bool {
	switch vdibroker.ErrorCode(err) {
	case vdibroker.ENoCapacity, vdibroker.ENotAssigned, vdibroker.ENotFound, vdibroker.EHostStarting,
		vdibroker.ERemoteAppUnsupported: // the pool's hosts cannot run the application (R-E12)
		return true
	}
	return false
}

func skipReason(err error) string {
	switch vdibroker.ErrorCode(err) {
	case vdibroker.ENoCapacity:
		return federation.SkipNoCapacity
	case vdibroker.ENotFound:
		return federation.SkipNotFound
	case vdibroker.ERemoteAppUnsupported:
		return federation.SkipRemoteAppUnsupported
	}
	reason := vdibroker.ErrorCode(err) + ": " + vdibroker.ErrorMessage(err)
	if d := vdibroker.ErrorRetryAfter(err); d > 0 {
		// A member pool's host starting (HostStarting, R-A4) says when
		// to try again in its Retry-After alone, not in its words: the
		// decision repeats it, in the CLI's form.
		reason += fmt.Sprintf(" (try again in %d s)", int((d+time.Second-1)/time.Second))
	}
	return reason
}

// noCapacity is the refusal when no candidate took the session: the
// message names every pod and why it was passed over (R-C5 style). When
// pools were passed over because their hosts cannot run RemoteApps and
// none for want of capacity, no wait helps: the code is then
// RemoteAppUnsupported (R-E12), so the user reads why.
//
// When every member pool of every pod in the decision refused her for
// an administrator (byAdmin: her own Personal desktop that no connect of
// hers starts again, R-A4), the refusal has their reason
// (ReasonStartByAdministrator): trying again does not help, and the
// portal she connected to tells her to ask her helpdesk. One pool
// passed over for anything else (full, its pod unreachable), or a pod
// without pools, may take her later: no reason.
func noCapacity(d *vdibroker.GlobalDecision, byAdmin map[vdibroker.MemberCandidate]bool) error {
	var why []string
	apps, full := false, false
	for _, p := range d.Pods {
		why = append(why, fmt.Sprintf("%s (%s): %s", p.Pod, p.Site, p.Skipped))
		for _, pl := range p.Pools {
			apps = apps || pl.Skipped == federation.SkipRemoteAppUnsupported
			full = full || pl.Skipped == federation.SkipNoCapacity
		}
	}
	if apps && !full {
		return vdibroker.Errorf(vdibroker.ERemoteAppUnsupported,
			"global entitlement %q has no member host pool in scope %s from site %s whose session hosts can run RemoteApps: %s; add session hosts that can (Windows session hosts) to its member pools",
			d.GlobalEntitlement, d.Scope, d.StartSite, strings.Join(why, "; "))
	}
	e := vdibroker.Errorf(vdibroker.ENoCapacity,
		"global entitlement %q has no member host pool that can take a session in scope %s from site %s: %s; add capacity to its member pools or widen its scope",
		d.GlobalEntitlement, d.Scope, d.StartSite, strings.Join(why, "; "))
	all := len(byAdmin) > 0
	for _, p := range d.Pods {
		all = all && len(p.Pools) > 0
		for _, pl := range p.Pools {
			all = all && byAdmin[vdibroker.MemberCandidate{Pod: p.Pod, HostPool: pl.HostPool}]
		}
	}
	if all {
		e.Reason = vdibroker.ReasonStartByAdministrator
	}
	return e
}

// forAdministrator is byAdmin with c added when its pool's refusal err
// is for an administrator (ReasonStartByAdministrator, R-A4).
func forAdministrator(byAdmin map[vdibroker.MemberCandidate]bool, c vdibroker.MemberCandidate, err error) map[vdibroker.MemberCandidate]bool {
	if vdibroker.ErrorCode(err) != vdibroker.ENoCapacity || vdibroker.ErrorReason(err) != vdibroker.ReasonStartByAdministrator {
		return byAdmin
	}
	if byAdmin == nil {
		byAdmin = map[vdibroker.MemberCandidate]bool{}
	}
	byAdmin[c] = true
	return byAdmin
}

func (g *Service) answer(d *vdibroker.GlobalDecision, c vdibroker.MemberCandidate, doc *vdibroker.Federation, a *vdibroker.ConnectAnswer) *vdibroker.GlobalAnswer {
	d.Choose(c)
	ga := &vdibroker.GlobalAnswer{ConnectResponse: a.ConnectResponse, Pod: c.Pod, Decision: d, Created: a.Created}
	if p := doc.Pod(c.Pod); p != nil {
		ga.Site = p.Site
	}
	return ga
}

// firstMember returns the member pool (of pod, in listed order) that holds
// one of sessions.
func firstMember(ge *vdibroker.GlobalEntitlement, pod string, sessions []*vdibroker.UserSession) string {
	for _, m := range ge.Members {
		if m.Pod != pod {
			continue
		}
		for _, s := range sessions {
			if s.HostPool == m.HostPool {
				return m.HostPool
			}
		}
	}
	return sessions[0].HostPool
}
