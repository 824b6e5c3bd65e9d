package http

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	nethttp "net/http"
	"strings"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/placement"
)

// maxPlaceAttempts bounds the retries of a connect that lost a commit race
// to another connect or replica (ErrHostFull, ErrHostTaken,
// ErrUserHasSession); each retry works from refreshed data.
const maxPlaceAttempts = 10

// connect is POST /hostpools/{pool}/connect (SPEC §4, §9).
func (s *Server) connect(w nethttp.ResponseWriter, r *nethttp.Request) error {
	pool := r.PathValue("pool")
	var req ConnectRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if err := vdibroker.ValidateUser("user", req.User); err != nil {
		return err
	}
	if req.SessionHost != "" {
		if err := vdibroker.ValidateName("sessionHost", req.SessionHost, vdibroker.MinHostNameLen, vdibroker.MaxHostNameLen); err != nil {
			return err
		}
	}
	p := principalFrom(r.Context())
	if p.Role == vdibroker.RoleUser && p.Subject != req.User {
		return vdibroker.Errorf(vdibroker.EPermission, "a User token may connect only its own user %q", p.Subject)
	}

	key := r.Header.Get("Idempotency-Key")
	if key == "" || req.DryRun {
		resp, status, err := s.place(r.Context(), pool, req)
		if err != nil {
			return err
		}
		writeJSON(w, status, resp)
		return nil
	}
	if len(key) > 255 {
		return vdibroker.FieldError("Idempotency-Key", "must be 1..255 characters")
	}
	// The key is scoped to the caller, the pool and the user.
	scope := strings.Join([]string{p.Role, p.TokenID, pool, req.User, key}, "\x00")
	var placeErr error
	ans := s.idem.do(scope, func() (*idemAnswer, bool) {
		resp, status, err := s.place(r.Context(), pool, req)
		if err != nil {
			placeErr = err
			return nil, false
		}
		b, _ := json.Marshal(resp)
		return &idemAnswer{status: status, body: append(b, '\n')}, true
	})
	if ans == nil {
		return placeErr
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(ans.status)
	w.Write(ans.body)
	return nil
}

// place decides and commits one connect: reconnect first (R-C1), else a new
// Pending session on the host the engine picks, made durable by the store,
// which enforces the limit (R-C4) and one session per user (R-C6) even
// against other replicas. Connects of one user in one pool are serialised
// here, so they do not reserve several hosts at once.
func (s *Server) place(ctx context.Context, poolName string, req ConnectRequest) (*ConnectResponse, int, error) {
	unlock := s.userLocks.Lock(poolName + "\x00" + req.User)
	defer unlock()

	v := s.views.get(poolName)
	reloaded := false
	lookup := false // read the user's sessions from the store
	for attempt := 0; attempt < maxPlaceAttempts; attempt++ {
		if err := s.views.ensure(ctx, v); err != nil {
			if vdibroker.ErrorCode(err) == vdibroker.ENotFound {
				s.views.drop(poolName)
			}
			return nil, 0, err
		}
		v.lock()
		pool := v.pool
		v.mu.Unlock()
		var err error
		var existing *vdibroker.UserSession
		// A dry run never reaches the store's R-C6 refusal that would
		// reveal a session this server does not know of, so it reads the
		// user's sessions first (R-C8 must answer what a connect would).
		if lookup || req.DryRun || pool.HostPoolType != vdibroker.Pooled || v.knowsUser(req.User) {
			existing, err = s.existingSession(ctx, v, pool, req)
			if err != nil {
				return nil, 0, err
			}
			if existing != nil {
				v.rememberUser(req.User, existing.ID)
			} else {
				v.rememberUser(req.User, "")
			}
		}

		preq := placement.Request{User: req.User, SessionHost: req.SessionHost}
		if existing != nil {
			preq.Existing = &placement.Existing{SessionID: existing.ID, Host: existing.SessionHost, State: existing.State}
		}
		d, addr, err := s.decide(v, pool, preq, !req.DryRun)
		if err != nil {
			code := vdibroker.ErrorCode(err)
			if (code == vdibroker.ENoCapacity || code == vdibroker.ENotAssigned) && (!lookup || !reloaded) {
				// Before refusing, decide again from the store: the user
				// may have a session this server does not know of (R-C1
				// answers it even over the limit), and our view may be
				// stale (sessions ended on another replica).
				if !reloaded {
					reloaded = true
					v.markStale()
				}
				lookup = true
				continue
			}
			return nil, 0, err
		}
		if req.DryRun || d.Reconnect {
			resp := s.answer(pool, req, d.Host, addr)
			resp.DryRun = req.DryRun
			resp.Reconnect = d.Reconnect
			if d.Reconnect && existing != nil {
				resp.State = existing.State
				if !req.DryRun {
					resp.SessionID = existing.ID
				}
			}
			return resp, nethttp.StatusOK, nil
		}

		now := s.now().UTC()
		sess := &vdibroker.UserSession{
			ID: newSessionID(now), User: req.User, HostPool: poolName, SessionHost: d.Host,
			State: vdibroker.StatePending, CreateTime: now, StateTime: now,
		}
		record, err := json.Marshal(d.Explain)
		if err != nil {
			return nil, 0, fmt.Errorf("encode decision record: %w", err)
		}
		c := &vdibroker.PlacementCommit{
			Session:         sess,
			MaxSessionLimit: pool.MaxSessionLimit,
			Pooled:          pool.HostPoolType == vdibroker.Pooled,
			Assign:          d.Assign,
			Record:          record,
			PoolUpdateTime:  pool.UpdateTime,
		}
		if d.EndExisting && existing != nil {
			c.EndSessionID = existing.ID
		}
		// The reservation lands when the session is stored, before any
		// heartbeat committed with it is answered (see upsertHeartbeat).
		landed := false
		c.OnCommitted = func(seq int64) { v.land(d.Host, seq); landed = true }
		err = s.store.CommitPlacement(ctx, c)
		if !landed {
			v.lock()
			v.release(d.Host)
			v.mu.Unlock()
		}

		if err == nil {
			v.rememberUser(req.User, sess.ID)
			if c.EndSessionID != "" {
				s.views.refreshHost(ctx, poolName, existing.SessionHost)
			}
			resp := s.answer(pool, req, d.Host, addr)
			resp.SessionID = sess.ID
			resp.State = sess.State
			return resp, nethttp.StatusCreated, nil
		}
		// The reservation did not land: take it back with the store's count.
		s.views.refreshHost(context.WithoutCancel(ctx), poolName, d.Host)
		switch {
		case errors.Is(err, vdibroker.ErrUserHasSession):
			// The user has a session this server did not know of (placed
			// by another replica, adopted, or on a lost host): the next
			// round reads it and answers it or replaces it (R-C6, R-C1).
			lookup = true
		case errors.Is(err, vdibroker.ErrPoolChanged):
			// Another replica changed the pool's settings since our view
			// read them: decide again with the new ones (R-P1).
			v.markStale()
		case errors.Is(err, vdibroker.ErrHostFull), errors.Is(err, vdibroker.ErrHostTaken):
			// Another replica filled or took the host: decide again. After
			// a second loss the whole view is suspect: re-read the pool.
			if attempt >= 1 {
				v.markStale()
			}
		default:
			return nil, 0, fmt.Errorf("commit placement: pool=%q host=%q: %w", poolName, d.Host, err)
		}
		s.loggerFrom(ctx).Debug("placement lost a race; retrying", "pool", poolName, "host", d.Host, "err", err)
	}
	return nil, 0, vdibroker.Errorf(vdibroker.EConflict, "connect kept losing races with concurrent connects; try again")
}

// decide runs the placement engine on the pool's view and, when reserve is
// set and the decision is a new session, reserves the host (the count is up
// before the next Place). The view's lock is released by defer: a panic in
// the engine or the observe hook, which the middleware recovers, must not
// leave the pool locked, or every later connect to it, the maintenance loop
// (markAllStale) and Close would wait for it forever.
func (s *Server) decide(v *poolView, pool *vdibroker.HostPool, preq placement.Request, reserve bool) (placement.Decision, string, error) {
	v.lock()
	defer v.mu.Unlock()
	t0 := time.Now()
	d, err := v.placer.Place(preq)
	if s.observe != nil {
		s.observe(pool.LoadBalancerType, time.Since(t0))
	}
	if err != nil {
		return d, "", err
	}
	if reserve && !d.Reconnect {
		v.placer.Apply(d)
		v.inflight[d.Host]++
	}
	return d, v.addrs[d.Host], nil
}

// existingSession returns the user's open session in the pool (R-C1), or
// nil. A Pending session older than pendingTimeoutSeconds is ended here
// (R-S3) rather than answered. In a MultiplePersistent pool with a named
// session host, only a session on that host counts (R-PE3); Persistent pools
// ignore the name, as placement does.
func (s *Server) existingSession(ctx context.Context, v *poolView, pool *vdibroker.HostPool, req ConnectRequest) (*vdibroker.UserSession, error) {
	f := vdibroker.SessionFilter{HostPool: pool.Name, User: req.User}
	if pool.LoadBalancerType == vdibroker.MultiplePersistent && req.SessionHost != "" {
		f.SessionHost = req.SessionHost
	}
	list, err := s.store.ListUserSessions(ctx, f)
	if err != nil {
		return nil, err
	}
	now := s.now()
	timeout := time.Duration(pool.PendingTimeoutSeconds) * time.Second
	hbTimeout := time.Duration(pool.HeartbeatTimeoutSeconds) * time.Second
	var best *vdibroker.UserSession
	bestLive := false
	for _, us := range list {
		if !us.Open() {
			continue
		}
		if us.State == vdibroker.StatePending && timeout > 0 && now.Sub(us.StateTime) > timeout {
			if err := s.store.EndSession(ctx, pool.Name, us.ID, "PendingTimeout", now); err != nil {
				return nil, err
			}
			s.views.refreshHost(ctx, pool.Name, us.SessionHost)
			continue
		}
		// Several only in Personal pools: the first host in query order
		// whose host takes sessions now, else the first in query order
		// (R-C1 then ends it and places anew). Preferring a live host keeps
		// a MultiplePersistent user from getting a second session on a
		// host where one is already open.
		live := v.placeable(us.SessionHost, hbTimeout, now)
		switch {
		case best == nil,
			live && !bestLive,
			live == bestLive && us.SessionHost < best.SessionHost:
			best, bestLive = us, live
		}
	}
	return best, nil
}

func (s *Server) answer(pool *vdibroker.HostPool, req ConnectRequest, host, addr string) *ConnectResponse {
	if addr == "" {
		addr = host + ":3389" // not registered yet: the name is all we know
	}
	return &ConnectResponse{
		User:        req.User,
		HostPool:    pool.Name,
		SessionHost: host,
		Address:     addr,
		State:       vdibroker.StatePending,
		RDPFile:     rdpFile(addr, req.User),
	}
}

// newSessionID returns a session id that sorts by creation time (ms) then
// at random, so lists by id read oldest first.
func newSessionID(now time.Time) string {
	return fmt.Sprintf("%012x%s", now.UnixMilli(), newID(8))
}

// rdpFile returns an .rdp file for addr and user that mstsc, the Microsoft
// Remote Desktop apps, FreeRDP and Remmina open: the address, the user name
// as a hint, a credential prompt, full screen and the usual redirections.
// Lines end in CRLF as Windows expects. addr and user were validated (no
// control characters), so they cannot inject lines.
func rdpFile(addr, user string) string {
	return "full address:s:" + addr + "\r\nusername:s:" + user + "\r\n" + rdpDefaults
}

// rdpDefaults are the .rdp lines every connect shares, built once.
var rdpDefaults = strings.Join([]string{
	"prompt for credentials:i:1",
	"administrative session:i:0",
	"screen mode id:i:2",
	"use multimon:i:0",
	"desktopwidth:i:1920",
	"desktopheight:i:1080",
	"session bpp:i:32",
	"smart sizing:i:1",
	"dynamic resolution:i:1",
	"compression:i:1",
	"connection type:i:7",
	"networkautodetect:i:1",
	"bandwidthautodetect:i:1",
	"displayconnectionbar:i:1",
	"autoreconnection enabled:i:1",
	"authentication level:i:2",
	"enablecredsspsupport:i:1",
	"negotiate security layer:i:1",
	"audiomode:i:0",
	"redirectclipboard:i:1",
	"redirectprinters:i:1",
	"redirectsmartcards:i:1",
	"drivestoredirect:s:",
}, "\r\n") + "\r\n"
