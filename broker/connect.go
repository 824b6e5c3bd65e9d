package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/broker/outage"
	"github.com/vdibroker/vdibroker/broker/poolview"
	"github.com/vdibroker/vdibroker/placement"
	"github.com/vdibroker/vdibroker/power"
	"github.com/vdibroker/vdibroker/rdp"
)

// maxPlaceAttempts bounds the rounds of one connect: each round that lost a
// commit race to another connect or replica (ErrHostFull, ErrHostTaken,
// ErrUserHasSession, ErrPoolChanged), or that found no capacity in a view
// that may be stale, decides again from refreshed data.
const maxPlaceAttempts = 10

var _ vdibroker.ConnectService = (*Service)(nil)

// Connect places req.User in the pool (SPEC §4): reconnect first (R-C1),
// else a new Pending session on the host the engine picks, made durable by
// the store, which enforces the limit (R-C4) and one session per user
// (R-C6) even against other replicas. A dry run decides and stores nothing
// (R-C8).
//
// With an idempotency key (R-C6, the Idempotency-Key header) the first
// connect runs; later and concurrent ones with the same key, from the same
// caller for the same pool and user, get its answer. Dry runs are not
// kept.
func (s *Service) Connect(ctx context.Context, pool string, req vdibroker.ConnectRequest, key string) (*vdibroker.ConnectAnswer, error) {
	if err := vdibroker.ValidateConnect(&req); err != nil {
		return nil, err
	}
	p := vdibroker.PrincipalFrom(ctx)
	if err := vdibroker.Authorize(p, vdibroker.ActionConnect, vdibroker.Target{HostPool: pool, For: &vdibroker.UserIdentity{User: req.User}}); err != nil {
		return nil, err
	}
	if len(key) > 255 {
		return nil, vdibroker.FieldError("Idempotency-Key", "must be 1..255 characters")
	}
	if key == "" || req.DryRun {
		return s.placeOrWait(ctx, pool, req)
	}
	role, token, endUser := "", "", ""
	if p != nil {
		role, token = p.Role, p.TokenID
		if p.Role == vdibroker.RoleUser {
			a := p.Audit()
			endUser = a.Kind + "\x00" + a.ID
		}
	}
	// The key is scoped to the caller, the pool, the user (in any case,
	// R-E5) and the application (R-E7).
	app := ""
	if req.RemoteApp != nil {
		app = req.RemoteApp.Program
	}
	key = strings.Join([]string{role, token, pool, vdibroker.FoldUser(req.User), app, key}, "\x00")
	var placeErr error
	ans := s.idem.do(endUser, key, func() (*vdibroker.ConnectAnswer, bool) {
		a, err := s.placeOrWait(ctx, pool, req)
		if err != nil {
			placeErr = err
			return nil, false
		}
		return a, true
	})
	if ans == nil {
		return nil, placeErr
	}
	return ans, nil
}

// connectRound is what one round of a connect knows besides the request:
// the retry rule's state, carried from round to round.
type connectRound struct {
	// reloaded: the view was marked for a reload after a refusal.
	reloaded bool
	// lookup: read the user's sessions from the store this round, though
	// the view does not know the user.
	lookup bool
}

// again is the connect's one retry rule. It says, for the error a round
// ended with, whether to decide again and with what refreshed: a refusal
// (NoCapacity, NotAssigned) gets one more round from the store, since the
// user may have a session this server does not know of (R-C1 answers it
// even over the limit) and the view may be stale (sessions ended on
// another replica); a lost commit race gets a round with the host (and,
// after a second loss, the whole pool) re-read.
func (r *connectRound) again(err error, attempt int, v interface{ MarkStale() }) bool {
	switch {
	case vdibroker.ErrorCode(err) == vdibroker.ENoCapacity || vdibroker.ErrorCode(err) == vdibroker.ENotAssigned ||
		vdibroker.ErrorCode(err) == vdibroker.ERemoteAppUnsupported: // a host's agent may have said it can since the view read it (R-E12)
		if r.lookup && r.reloaded {
			return false // decided from the store already: the refusal stands
		}
		if !r.reloaded {
			r.reloaded = true
			v.MarkStale()
		}
		r.lookup = true
	case errors.Is(err, vdibroker.ErrUserHasSession):
		// The user has a session this server did not know of (placed by
		// another replica, adopted, or on a lost host): the next round
		// reads it and answers it or replaces it (R-C6, R-C1).
		r.lookup = true
	case errors.Is(err, vdibroker.ErrPoolChanged):
		// Another replica changed the pool's settings since our view read
		// them: decide again with the new ones (R-P1).
		v.MarkStale()
	case vdibroker.ErrorCode(err) == vdibroker.ENotFound:
		// The chosen host is gone: deleted since the view read it (on
		// another replica, or while the view sat idle and was decided on
		// before its background read). Read the pool again: if it is gone
		// too, the next round's lookup says so.
		v.MarkStale()
	case errors.Is(err, vdibroker.ErrHostFull), errors.Is(err, vdibroker.ErrHostTaken):
		// Another replica filled or took the host: decide again. After a
		// second loss the whole view is suspect: re-read the pool.
		if attempt >= 1 {
			v.MarkStale()
		}
	default:
		return false
	}
	return true
}

// place runs one connect: its rounds while the store answers, else the
// outage mode's one fallback (R-OUT1, R-OUT3). Connects of one user in
// one pool are serialised here, so they do not reserve several hosts at
// once.
func (s *Service) place(ctx context.Context, poolName string, req vdibroker.ConnectRequest) (*vdibroker.ConnectAnswer, error) {
	unlock := s.userLocks.Lock(poolName + "\x00" + vdibroker.FoldUser(req.User)) // Alice and alice are one user (R-E5)
	defer unlock()

	v := s.views.Get(poolName)
	a, down, err := s.rounds(ctx, v, poolName, req)
	if down {
		// Nothing was decided: memory answers what it can (a known
		// session, a new one within this replica's escrow), else err.
		a, err = s.outage.Connect(ctx, v, req, err)
	}
	if err != nil {
		return nil, err
	}
	// Through the pool's RD gateway, if it has one (R-GW1).
	if pool, _ := v.Pool(); pool != nil {
		if err := s.gatewayAnswer(ctx, pool, a, a.StartWait); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// rounds runs the rounds of one connect: look up, decide, commit, and the
// retry rule between rounds. down says the store was down before anything
// was decided: known so already (err nil), or found by the lookup (err is
// its StoreUnavailable).
func (s *Service) rounds(ctx context.Context, v *poolview.View, poolName string, req vdibroker.ConnectRequest) (a *vdibroker.ConnectAnswer, down bool, err error) {
	if s.health.Down() {
		return nil, true, nil
	}
	var round connectRound
	for attempt := 0; attempt < maxPlaceAttempts; attempt++ {
		pool, existing, ignoreAdopted, err := s.lookup(ctx, v, req, round.lookup)
		if outage.IsStoreDown(err) {
			return nil, true, err
		}
		if err != nil {
			return nil, false, err
		}
		preq := placement.Request{User: req.User, SessionHost: req.SessionHost, RemoteApp: req.RemoteApp != nil}
		if existing != nil {
			preq.Existing = &placement.Existing{SessionID: existing.ID, Host: existing.SessionHost, State: existing.State}
		}
		d, addr, err := v.Decide(preq, !req.DryRun)
		if err != nil {
			if round.again(err, attempt, v) {
				continue
			}
			if vdibroker.ErrorCode(err) == vdibroker.ENoCapacity && !req.DryRun {
				// R-A4: a stopped host may be started for the user
				// (the power service), who is answered HostStarting;
				// through a gateway, the user waits for it there (R-GW5).
				if serr := s.power.StartOnConnect(ctx, pool, req.User, req.RemoteApp != nil); serr != nil {
					if a := s.waitForStart(ctx, v, pool, req, d, existing, power.StartingHost(serr)); a != nil {
						return a, false, nil
					}
					return nil, false, serr
				}
			}
			return nil, false, err
		}
		if req.DryRun || d.Reconnect {
			a := &vdibroker.ConnectAnswer{ConnectResponse: s.answer(pool, req, d.Host, addr)}
			a.DryRun, a.Reconnect = req.DryRun, d.Reconnect
			if d.Reconnect && existing != nil {
				a.State = existing.State
				if !req.DryRun {
					a.SessionID = existing.ID
				}
			}
			return a, false, nil
		}
		a, err := s.commit(ctx, v, pool, req, d, existing, addr, ignoreAdopted)
		if err == nil {
			s.power.Unwait(poolName, req.User) // no longer waits for a started host (R-A4)
			return a, false, nil
		}
		if !round.again(err, attempt, v) {
			return nil, false, fmt.Errorf("commit placement: pool=%q host=%q: %w", poolName, d.Host, err)
		}
		s.log.DebugContext(ctx, "placement lost a race; retrying", "pool", poolName, "host", d.Host, "err", err)
	}
	return nil, false, vdibroker.Errorf(vdibroker.EConflict, "connect kept losing races with concurrent connects; try again")
}

// lookup loads the pool's view and, when needed, the user's open session
// in the pool (R-C1). In a pooled pool a user the view does not know is
// not read from the store: the database refuses a second session (R-C6)
// and the retry rule then reads it (force). A dry run never reaches that
// refusal, so it always reads (R-C8 must answer what a connect would).
// ignoreAdopted says the user has adopted sessions that are not answered
// (existingSession): the commit leaves them out of R-C6.
func (s *Service) lookup(ctx context.Context, v *poolview.View, req vdibroker.ConnectRequest, force bool) (pool *vdibroker.HostPool, existing *vdibroker.UserSession, ignoreAdopted bool, err error) {
	if err := s.views.Ensure(ctx, v); err != nil {
		if vdibroker.ErrorCode(err) == vdibroker.ENotFound {
			s.views.Drop(v.Name())
		}
		return nil, nil, false, err
	}
	pool, _ = v.Pool()
	if !force && !req.DryRun && pool.HostPoolType == vdibroker.Pooled && !v.KnowsUser(req.User) {
		return pool, nil, false, nil
	}
	existing, ignoreAdopted, err = s.existingSession(ctx, v, pool, req)
	if err != nil {
		return nil, nil, false, err
	}
	if existing != nil || !req.DryRun {
		v.RememberUser(req.User, existing)
	}
	return pool, existing, ignoreAdopted, nil
}

// commit makes a decided new session durable. The reservation Decide made
// lands in the view when the session is stored, before any heartbeat
// committed with it is answered (see Views.UpsertHeartbeat); when the
// commit fails, the reservation is taken back with the store's count.
func (s *Service) commit(ctx context.Context, v *poolview.View, pool *vdibroker.HostPool, req vdibroker.ConnectRequest,
	d placement.Decision, existing *vdibroker.UserSession, addr string, ignoreAdopted bool) (*vdibroker.ConnectAnswer, error) {
	now := s.now().UTC()
	sess := &vdibroker.UserSession{
		ID: vdibroker.NewID(), User: req.User, HostPool: pool.Name, SessionHost: d.Host,
		State: vdibroker.StatePending, CreateTime: now, StateTime: now,
	}
	record := placement.AppendRecord(make([]byte, 0, recordCap(&d.Explain)), &d.Explain)
	c := &vdibroker.PlacementCommit{
		Session:         sess,
		MaxSessionLimit: v.LimitFor(pool, d.Host), // less the escrows of outage placement
		Pooled:          pool.HostPoolType == vdibroker.Pooled,
		IgnoreAdopted:   ignoreAdopted,
		Assign:          d.Assign,
		Record:          record,
		PoolUpdateTime:  pool.UpdateTime,
	}
	if d.EndExisting && existing != nil {
		c.EndSessionID = existing.ID
	}
	if d.Explain.Algorithm == vdibroker.LoadIndex && d.Explain.Bucket == 1 {
		// R-LI4: the round robin goes on from here on every replica, and
		// after a restart (the cursor is the store's; see poolview.Views.reload).
		c.RoundRobinHost = d.Host
	}
	landed := false
	c.OnCommitted = func(seq int64) { v.Land(d.Host, seq); landed = true }
	err := s.store.CommitPlacement(ctx, c)
	if !landed {
		v.Release(d.Host)
	}
	if err != nil {
		// The reservation did not land: take it back with the store's count.
		s.views.RefreshHost(context.WithoutCancel(ctx), pool.Name, d.Host)
		return nil, err
	}
	v.RememberUser(req.User, sess)
	s.outage.Placed(pool.Name, d.Host) // against this replica's escrow (R-OUT2)
	if c.EndSessionID != "" {
		s.views.RefreshHost(ctx, pool.Name, existing.SessionHost)
	}
	a := &vdibroker.ConnectAnswer{ConnectResponse: s.answer(pool, req, d.Host, addr), Created: true}
	a.SessionID, a.State = sess.ID, sess.State
	return a, nil
}

// recordCap is about the size of e's stored form, so AppendRecord
// allocates once.
func recordCap(e *placement.Explain) int {
	return 128 + 16*len(e.Candidates) + 32*len(e.Excluded)
}

// existingSession returns the user's open session in the pool (R-C1), or
// nil. A Pending session older than pendingTimeoutSeconds is not answered:
// a connect ends it here (R-S3); a dry run only passes over it, since it
// stores nothing (R-C8). In a MultiplePersistent pool with a named session
// host, only a session on that host counts (R-PE3); Persistent pools
// ignore the name, as placement does. A session a host reported (adopted,
// R-S2) is answered only where placement would have put the user
// (placement.AnswersAdopted): otherwise it stays a fact of its host and
// the user is placed as if it were not there (skippedAdopted). The
// session req.SessionID names comes first, before a placed one too,
// when it is one of those and its host is neither Unavailable nor
// Shutdown, drained or not (the user portal's Reconnect of that row,
// R-U3); any other id is passed over, as if none were named.
func (s *Service) existingSession(ctx context.Context, v *poolview.View, pool *vdibroker.HostPool, req vdibroker.ConnectRequest) (best *vdibroker.UserSession, skippedAdopted bool, err error) {
	f := vdibroker.SessionFilter{HostPool: pool.Name, User: req.User}
	if pool.LoadBalancerType == vdibroker.MultiplePersistent && req.SessionHost != "" {
		f.SessionHost = req.SessionHost
	}
	list, err := s.store.ListUserSessions(ctx, f)
	if err != nil {
		return nil, false, err
	}
	now := s.now()
	timeout := pool.PendingTimeout()
	hbTimeout := pool.HeartbeatTimeout()
	pp := placement.PoolFrom(pool)
	bestLive := false
	var wanted *vdibroker.UserSession
	for _, us := range list {
		if !us.Open() {
			continue
		}
		if us.Adopted {
			if h, _, ok := v.Host(us.SessionHost); !ok || !placement.AnswersAdopted(pp, &h, req.User, now) {
				skippedAdopted = true
				continue // a host's report alone never routes a user (R-S2)
			}
		}
		if us.State == vdibroker.StatePending && timeout > 0 && now.Sub(us.StateTime) > timeout {
			if req.DryRun {
				continue
			}
			if err := s.store.EndSession(ctx, pool.Name, us.ID, vdibroker.EndPendingTimeout, now); err != nil {
				return nil, false, err
			}
			s.views.RefreshHost(ctx, pool.Name, us.SessionHost)
			continue
		}
		// Several only in Personal pools: the first host in query order
		// whose host is neither Unavailable nor Shutdown, else the first in query order
		// (R-C1 then ends it and places anew). Preferring a live host keeps
		// a MultiplePersistent user from getting a second session on a
		// host where one is already open.
		// A session the broker placed comes before one a host reported
		// (adopted): a host's report cannot draw a user away (R-S2).
		live := v.Placeable(us.SessionHost, hbTimeout, now)
		if live && req.SessionID != "" && us.ID == req.SessionID {
			wanted = us
		}
		switch {
		case best == nil,
			best.Adopted && !us.Adopted,
			best.Adopted == us.Adopted && live && !bestLive,
			best.Adopted == us.Adopted && live == bestLive && us.SessionHost < best.SessionHost:
			best, bestLive = us, live
		}
	}
	if wanted != nil {
		return wanted, skippedAdopted, nil
	}
	return best, skippedAdopted, nil
}

// answer is the connect answer for host at addr, a new Pending session
// until the caller says otherwise.
func (s *Service) answer(pool *vdibroker.HostPool, req vdibroker.ConnectRequest, host, addr string) vdibroker.ConnectResponse {
	if addr == "" {
		addr = host + ":3389" // not registered yet: the name is all we know
	}
	return vdibroker.ConnectResponse{
		User:        req.User,
		HostPool:    pool.Name,
		SessionHost: host,
		Address:     addr,
		State:       vdibroker.StatePending,
		RDPFile:     rdp.File(addr, req.User, s.properties(pool, req.RemoteApp)),
	}
}

// properties are the .rdp properties of a connect to pool: the server's
// (--rdp-defaults), the pool's customRdpProperty over them (R-E8), and an
// application's RemoteApp lines over both (R-E7).
func (s *Service) properties(pool *vdibroker.HostPool, app *vdibroker.RemoteApp) []rdp.Property {
	props := s.rdp
	if pool.CustomRdpProperty != "" {
		custom, err := rdp.ParseCustomProperties(pool.CustomRdpProperty)
		if err != nil {
			// Checked when stored; a property this version no longer
			// takes leaves the server's.
			s.log.Warn("host pool customRdpProperty ignored", "pool", pool.Name, "err", err)
		}
		props = rdp.Merge(props, custom)
	}
	if app != nil {
		props = rdp.WithRemoteApp(props, app.Program, app.Name, app.CommandLine)
	}
	return props
}
