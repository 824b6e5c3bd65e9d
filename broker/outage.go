package broker

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/broker/poolview"
	"github.com/vdibroker/vdibroker/placement"
)

// What the service does while its store is down (issue 19): reconnects of
// users it knows are answered from memory, new connects are refused with
// StoreUnavailable and Retry-After, and heartbeats are accepted and kept
// (the latest per host, with every command result) to be written when the
// store is back.

// storeIsDown reports whether err is the store's outage.
func storeIsDown(err error) bool {
	return vdibroker.ErrorCode(err) == vdibroker.EStoreUnavailable
}

// reconnectFromMemory answers a connect while the store is down: the
// user's open session as the view remembers it, on its host, when the view
// sees that host taking sessions (R-C1, R-H1). Anything else would need
// the store (a new session, ending a lost one, R-S3) and is refused with
// cause, a StoreUnavailable error.
func (s *Service) reconnectFromMemory(v *poolview.View, req vdibroker.ConnectRequest, cause error) (*vdibroker.ConnectAnswer, error) {
	if !storeIsDown(cause) {
		cause = unavailable(errors.New("store down"))
	}
	pool, loaded := v.Pool()
	if !loaded {
		return nil, cause
	}
	k, ok := v.KnownSession(req.User)
	if !ok || k.ID == "" {
		return s.placeInOutage(v, req, cause) // escrow.go; cause when off
	}
	if pool.LoadBalancerType == vdibroker.MultiplePersistent && req.SessionHost != "" && req.SessionHost != k.Host {
		return nil, cause
	}
	now := s.now()
	h, addr, known := v.Host(k.Host)
	if !known || !vdibroker.Placeable(placement.Status(&h, pool.HeartbeatTimeout(), s.outageTime(&h, now))) {
		return nil, cause // R-C1 would end it and place anew
	}
	// Is the session still there? The host's last report says so for a
	// logged-on user; a Pending session the host has not reported is
	// answered while its user may still be logging on (R-S3).
	reported, known, goneAt := s.reports.has(hostKey{pool.Name, k.Host}, req.User)
	switch {
	case reported:
	case !goneAt.IsZero() && !goneAt.Before(k.CreateTime):
		return nil, cause // the host reported the user, then no more: logged off
	case k.State == vdibroker.StatePending && (pool.PendingTimeoutSeconds == 0 || now.Sub(k.CreateTime) <= pool.PendingTimeout()):
	case !known && k.State != vdibroker.StatePending:
		// No report from the host since this server started: nothing says
		// the session ended.
	default:
		return nil, cause // ended since (logged off), or expired (R-S3)
	}
	a := &vdibroker.ConnectAnswer{ConnectResponse: s.answer(pool, req, k.Host, addr)}
	a.Reconnect, a.DryRun, a.State = true, req.DryRun, k.State
	if !req.DryRun {
		a.SessionID = k.ID
	}
	s.log.Info("reconnect answered from memory during a store outage", "pool", pool.Name, "user", req.User, "host", k.Host)
	return a, nil
}

// outageTime is the time host h's R-H1 status is judged at while the
// store is down (R-OUT5). A host's heartbeats may all go to another
// replica (the agents' load balancer decides), which writes them to the
// store this one cannot read now: their silence here says nothing. So a
// host this replica has not heard from since the outage began is judged
// as it was then; one it has heard from (holdHeartbeat puts the heartbeat
// in the view) is judged now, its shutdown or failed health check
// included. A host that was silent already when the outage began stays so.
func (s *Service) outageTime(h *placement.Host, now time.Time) time.Time {
	if st := s.health.Status(); !st.Up && !st.Since.IsZero() && st.Since.Before(now) &&
		(h.LastHeartBeat == nil || !h.LastHeartBeat.After(st.Since)) {
		return st.Since
	}
	return now
}

// heldHeartbeats keeps the heartbeats that arrived during an outage, to be
// applied when the store is back. Per host: the latest sessions, metrics,
// policy and flags (what reconciliation needs), and every command result
// (each was reported once, and the agent does not send it again).
type heldHeartbeats struct {
	mu sync.Mutex
	m  map[hostKey]*heldHeartbeat
}

type hostKey struct{ pool, host string }

type heldHeartbeat struct {
	hb *vdibroker.HeartbeatRequest
	at time.Time
}

// hold keeps hb, received at at, for k, with the results of the one it
// replaces.
func (hh *heldHeartbeats) hold(k hostKey, hb *vdibroker.HeartbeatRequest, at time.Time) {
	hh.mu.Lock()
	defer hh.mu.Unlock()
	if hh.m == nil {
		hh.m = map[hostKey]*heldHeartbeat{}
	}
	c := *hb
	if old := hh.m[k]; old != nil {
		if old.at.After(at) {
			// A write that failed gives back an older heartbeat than
			// one held meanwhile: keep the newer, add the older's results.
			c = *old.hb
			at = old.at
			c.Results = append(append([]vdibroker.CommandResult(nil), hb.Results...), old.hb.Results...)
		} else {
			c.Results = append(append([]vdibroker.CommandResult(nil), old.hb.Results...), hb.Results...)
		}
	}
	hh.m[k] = &heldHeartbeat{hb: &c, at: at}
}

// take returns and forgets k's held heartbeat (nil when none).
func (hh *heldHeartbeats) take(k hostKey) *heldHeartbeat {
	hh.mu.Lock()
	defer hh.mu.Unlock()
	h := hh.m[k]
	delete(hh.m, k)
	return h
}

// keys returns the hosts with a held heartbeat.
func (hh *heldHeartbeats) keys() []hostKey {
	hh.mu.Lock()
	defer hh.mu.Unlock()
	ks := make([]hostKey, 0, len(hh.m))
	for k := range hh.m {
		ks = append(ks, k)
	}
	return ks
}

// holdHeartbeat accepts a heartbeat while the store is down: it is kept
// for later, the view sees the host alive (so it stays placeable for
// reconnects, and does not turn Unavailable when the store returns), and
// the answer carries no commands (they are in the store).
func (s *Service) holdHeartbeat(host *vdibroker.SessionHost, hb *vdibroker.HeartbeatRequest, now time.Time) *vdibroker.HeartbeatResult {
	s.log.Debug("heartbeat held during a store outage", "pool", host.HostPool, "host", host.Name)
	s.held.hold(hostKey{host.HostPool, host.Name}, hb, now)
	res := &vdibroker.HeartbeatResult{}
	v := s.views.Peek(host.HostPool)
	if v == nil {
		return res
	}
	res.Pool, _ = v.Pool()
	v.SeeHeartbeat(host.Name, now, hb.ShuttingDown, hb.HealthError)
	return res
}

// applyHeld writes the heartbeats held during an outage, once the store is
// back: reconciliation (R-S2) runs on each as it would have then.
func (s *Service) applyHeld() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := 0
	for _, k := range s.held.keys() {
		_, err := s.applyHeartbeat(ctx, k, nil, time.Time{})
		switch {
		case err == nil:
			n++
		case storeIsDown(err):
			return // down again: the rest waits for the next recovery
		default:
			s.log.Error("apply a heartbeat held during the outage", "pool", k.pool, "host", k.host, "err", err)
		}
	}
	if n > 0 {
		s.log.Info("applied the heartbeats held during the outage", "hosts", n)
	}
}

// reports keeps, per host, the users its agent's last heartbeat reported
// and those a report dropped since (logged off), so that a reconnect
// answered from memory during an outage is one to a session the host still
// has: the view remembers sessions, not their end.
type reports struct {
	mu sync.Mutex
	m  map[hostKey]*hostReport
}

type hostReport struct {
	users map[string]struct{}
	gone  map[string]time.Time // user -> when a report first lacked them
}

// goneFor is how long a logged-off user is remembered as gone.
const goneFor = 24 * time.Hour

// set records the users of host k's report at now.
func (r *reports) set(k hostKey, sessions []vdibroker.AgentSession, now time.Time) {
	users := make(map[string]struct{}, len(sessions))
	for _, s := range sessions {
		users[s.User] = struct{}{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil || len(r.m) > 1<<17 {
		r.m = map[hostKey]*hostReport{}
	}
	old := r.m[k]
	if old == nil {
		r.m[k] = &hostReport{users: users, gone: map[string]time.Time{}}
		return
	}
	for u := range old.users {
		if _, ok := users[u]; !ok {
			old.gone[u] = now
		}
	}
	for u, at := range old.gone {
		if _, back := users[u]; back || now.Sub(at) > goneFor {
			delete(old.gone, u)
		}
	}
	old.users = users
}

// has says whether host k's last report had user, whether this server
// has a report of k at all, and when a report stopped having user (zero
// when none did).
func (r *reports) has(k hostKey, user string) (reported, known bool, goneAt time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	hr := r.m[k]
	if hr == nil {
		return false, false, time.Time{}
	}
	_, reported = hr.users[user]
	return reported, true, hr.gone[user]
}
