package poolview

import (
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/placement"
)

// What the broker asks of one pool's view: the decision of a connect, the
// reservation it makes and its landing, the hosts and users the view
// knows. Each takes the view's lock (lock applies the landings first).

// Name is the view's pool name.
func (v *View) Name() string { return v.name }

// Pool returns the pool's settings as last read, and whether the view is
// loaded (nil, false before its first read).
func (v *View) Pool() (*vdibroker.HostPool, bool) {
	v.lock()
	defer v.mu.Unlock()
	return v.pool, v.pool != nil && v.placer != nil
}

// Decide runs the placement engine on the view and, when reserve is set
// and the decision is a new session, reserves the host (the count is up
// before the next Place; Land or Release ends the reservation). It
// returns the decision and the chosen host's address. The view's lock is
// released by defer: a panic in the engine or the observe hook, which the
// HTTP middleware recovers, must not leave the pool locked, or every
// later connect to it, the maintenance loop (MarkAllStale) and Close
// would wait for it forever.
func (v *View) Decide(req placement.Request, reserve bool) (placement.Decision, string, error) {
	d, addr, recheck, err := v.decide(req, reserve)
	if recheck {
		// The first decision after an idle tick is made: now the view is
		// read again, behind it (Ensure).
		v.views.revalidate(v)
	}
	return d, addr, err
}

func (v *View) decide(req placement.Request, reserve bool) (d placement.Decision, addr string, recheck bool, err error) {
	v.lock()
	defer v.mu.Unlock()
	recheck, v.recheck = v.recheck, false
	t0 := time.Now()
	d, err = v.placer.Place(req)
	if v.cfg.Observe != nil {
		v.cfg.Observe(v.pool.LoadBalancerType, time.Since(t0))
	}
	if err != nil {
		return d, "", recheck, err
	}
	if reserve && !d.Reconnect {
		v.placer.Apply(d)
		v.inflight[d.Host]++
	}
	return d, v.addrs[d.Host], recheck, nil
}

// Release ends a reservation on host whose commit did not land.
func (v *View) Release(host string) {
	v.lock()
	defer v.mu.Unlock()
	v.release(host)
}

// LimitFor is the limit a commit on host checks: the pool's, less what
// other replicas hold in escrow there (R-OUT2). The store refuses at or
// above it, so 0 refuses.
//
// It is lowered too by this replica's outage placements on host not yet
// written: in the moment between the store's return and their write, a
// connect must not take the slot one of them holds.
func (v *View) LimitFor(pool *vdibroker.HostPool, host string) int {
	v.lock()
	defer v.mu.Unlock()
	return max(pool.MaxSessionLimit-v.held[host]-v.cfg.Unwritten(v.name, host), 0)
}

// Host returns host as the view sees it, and its address.
func (v *View) Host(name string) (placement.Host, string, bool) {
	v.lock()
	defer v.mu.Unlock()
	if v.placer == nil {
		return placement.Host{}, "", false
	}
	h, ok := v.placer.Host(name)
	return h, v.addrs[name], ok
}

// Hosts returns every host the view has, as it sees them now.
func (v *View) Hosts() []placement.Host {
	v.lock()
	defer v.mu.Unlock()
	if v.placer == nil {
		return nil
	}
	out := make([]placement.Host, 0, len(v.addrs))
	for name := range v.addrs {
		if h, ok := v.placer.Host(name); ok {
			out = append(out, h)
		}
	}
	return out
}

// AddSession counts a session placed on host without a commit (outage
// placement, R-OUT3) and returns the host's address.
func (v *View) AddSession(host string) string {
	v.lock()
	defer v.mu.Unlock()
	if v.placer == nil {
		return ""
	}
	if h, ok := v.placer.Host(host); ok {
		h.Sessions++
		h.Connecting++
		v.placer.Upsert(h)
	}
	return v.addrs[host]
}

// SeeHeartbeat applies a heartbeat the store could not take (an outage):
// the host is alive as of at, with its shutdown and health flags, so it
// stays placeable for reconnects and does not turn Unavailable when the
// store returns.
func (v *View) SeeHeartbeat(host string, at time.Time, shuttingDown bool, healthError string) {
	v.lock()
	defer v.mu.Unlock()
	if v.placer == nil {
		return
	}
	if h, ok := v.placer.Host(host); ok {
		h.LastHeartBeat = &at
		h.ShuttingDown = shuttingDown
		h.HealthError = healthError
		v.placer.Upsert(h)
	}
}
