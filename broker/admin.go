package broker

import (
	"context"
	"sync"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/loadindex"
)

// The writes of this file change what placement sees. Each one updates the
// pool's view with what the store kept, so the next connect on this server
// uses it (R-P1, R-C2); other replicas see it at their next refresh.

// StorePool validates p and stores it; old is the pool as read before (nil
// when new). createOnly refuses, in the store's transaction, to replace a
// pool created meanwhile (If-None-Match: *). It returns the pool as stored
// and whether it was created. Invalid input changes nothing (R-P4).
func (s *Service) StorePool(ctx context.Context, name string, old, p *vdibroker.HostPool, createOnly bool) (*vdibroker.HostPool, bool, error) {
	if p.Name != name {
		return nil, false, vdibroker.FieldError("name", "must match the host pool name in the path (%q), got %q", name, p.Name)
	}
	// R-P1 first: a type change is refused for what it is, not for the
	// load balancer type that no longer fits the new type.
	validType := p.HostPoolType == vdibroker.Pooled || p.HostPoolType == vdibroker.Personal
	if old != nil && validType && p.HostPoolType != old.HostPoolType {
		return nil, false, hostPoolTypeChange(old.HostPoolType)
	}
	p.FillDefaults()
	if _, err := vdibroker.ValidateHostPool(p); err != nil {
		return nil, false, err
	}
	if err := s.validatePower(p); err != nil { // power.go: the loaded drivers
		return nil, false, err
	}
	if old != nil && p.HostPoolType != old.HostPoolType {
		return nil, false, hostPoolTypeChange(old.HostPoolType)
	}
	now := s.now().UTC()
	p.CreateTime, p.UpdateTime = now, now
	var created bool
	var err error
	if createOnly {
		created, err = true, s.store.CreateHostPool(ctx, p)
		if vdibroker.ErrorCode(err) == vdibroker.EConflict {
			return nil, false, PoolExists(name) // created since the caller's read
		}
	} else {
		created, err = s.store.PutHostPool(ctx, p)
	}
	if err != nil {
		return nil, false, err
	}
	// Read back what the store kept (createTime on replace).
	stored, err := s.store.GetHostPool(ctx, name)
	if err != nil {
		return nil, false, err
	}
	s.views.setPool(stored) // R-P1: the next placement uses the new settings
	return stored, created, nil
}

// PoolExists is the Conflict of a create-only PUT of an existing pool.
func PoolExists(name string) error {
	return vdibroker.Errorf(vdibroker.EConflict, "host pool %q already exists; change it with PATCH or PUT without If-None-Match", name)
}

func hostPoolTypeChange(was string) error {
	return vdibroker.FieldError("hostPoolType", "cannot be changed after creation (R-P1): this pool is %s; create a new host pool instead", was)
}

// DeletePool deletes a pool with its hosts and sessions (refused with
// Conflict while sessions are open, unless force).
func (s *Service) DeletePool(ctx context.Context, name string, force bool) error {
	if err := s.store.DeleteHostPool(ctx, name, force); err != nil {
		return err
	}
	s.views.drop(name)
	return nil
}

// SessionHosts returns a pool and its hosts in query order with their
// read-time fields (status, load index).
func (s *Service) SessionHosts(ctx context.Context, poolName string) (*vdibroker.HostPool, []*vdibroker.SessionHost, error) {
	pool, err := s.store.GetHostPool(ctx, poolName)
	if err != nil {
		return nil, nil, err
	}
	hosts, err := s.store.ListSessionHosts(ctx, pool.Name)
	if err != nil {
		return nil, nil, err
	}
	return pool, hosts, nil
}

// Present fills the read-time fields of show (all of all when show is
// empty): status (R-H1) and load index (R-IDX). all should be every host
// of the pool, for the pool-wide figures of the load index.
func (s *Service) Present(pool *vdibroker.HostPool, all []*vdibroker.SessionHost, show ...*vdibroker.SessionHost) {
	present(pool, all, s.now(), show...)
}

// SessionHost reads one host with its read-time fields.
func (s *Service) SessionHost(ctx context.Context, poolName, name string) (*vdibroker.SessionHost, error) {
	pool, err := s.store.GetHostPool(ctx, poolName)
	if err != nil {
		return nil, err
	}
	h, err := s.store.GetSessionHost(ctx, poolName, name)
	if err != nil {
		return nil, err
	}
	all := []*vdibroker.SessionHost{h}
	if pool.LoadBalancing.UseCustomScript || pool.LoadBalancerType == vdibroker.LoadIndex {
		// Pool-wide figures (R-IDX3, R-LI6) matter only here.
		if all, err = s.store.ListSessionHosts(ctx, poolName); err != nil {
			return nil, err
		}
	}
	present(pool, all, s.now(), h)
	return h, nil
}

// PutSessionHost creates or replaces a host's admin fields and returns the
// host as stored (with its read-time fields) and whether it was created.
func (s *Service) PutSessionHost(ctx context.Context, h *vdibroker.SessionHost) (*vdibroker.SessionHost, bool, error) {
	created, err := s.store.PutSessionHost(ctx, h)
	if err != nil {
		return nil, false, err
	}
	got, err := s.readBack(ctx, h.HostPool, h.Name)
	return got, created, err
}

// UpdateSessionHost changes a host's admin fields with fn in one
// transaction (drain, assignment, address) and returns the host as stored.
func (s *Service) UpdateSessionHost(ctx context.Context, pool, name string, fn func(*vdibroker.SessionHost) error) (*vdibroker.SessionHost, error) {
	if _, err := s.store.UpdateSessionHost(ctx, pool, name, fn); err != nil {
		return nil, err
	}
	return s.readBack(ctx, pool, name)
}

// readBack reads a host just written and updates the pool's view with it
// (drain and assignment apply to the next connect).
func (s *Service) readBack(ctx context.Context, pool, name string) (*vdibroker.SessionHost, error) {
	mark := s.views.landedMark(pool)
	h, err := s.SessionHost(ctx, pool, name)
	if err != nil {
		return nil, err
	}
	s.views.upsertHost(h, mark)
	return h, nil
}

// DeleteSessionHost deletes a host and revokes its credential (refused
// with Conflict while it has open sessions, unless force).
func (s *Service) DeleteSessionHost(ctx context.Context, pool, name string, force bool) error {
	if err := s.store.DeleteSessionHost(ctx, pool, name, force); err != nil {
		return err
	}
	s.views.removeHost(pool, name)
	s.creds.forget(pool, name)
	return nil
}

// RegisterHost creates or re-keys the host req names in the pool of the
// registration token whose hash is tokenHash, with the credential whose
// hash is credentialHash. An unknown or expired token is Unauthenticated.
func (s *Service) RegisterHost(ctx context.Context, tokenHash string, req *vdibroker.RegisterRequest, credentialHash string) (*vdibroker.SessionHost, error) {
	h, err := s.store.RegisterHost(ctx, tokenHash, req, credentialHash, s.now().UTC())
	if err != nil {
		if code := vdibroker.ErrorCode(err); code == vdibroker.ENotFound || code == vdibroker.EUnauthenticated {
			return nil, vdibroker.Errorf(vdibroker.EUnauthenticated, "registration token is invalid or expired")
		}
		return nil, err
	}
	s.views.upsertHost(h, 0)           // a new host: none of its placements landed
	s.creds.forget(h.HostPool, h.Name) // a re-key revoked the old credential
	return h, nil
}

// ResetRegistration revokes a host's credential and lets the next
// registration of its name take the host (an admin replacing the machine;
// issue 14).
func (s *Service) ResetRegistration(ctx context.Context, pool, host string) error {
	if err := s.store.ResetRegistration(ctx, pool, host); err != nil {
		return err
	}
	s.creds.forget(pool, host)
	return nil
}

// Heartbeat applies host's heartbeat (R-S2 reconciliation, R-S3, R-S5)
// synchronously, so the counts reflect it when the answer arrives, and
// updates the pool's view with the result. While the store is down it is
// held and written when the store is back (issue 19); the result then has
// the pool's settings and no commands.
//
// A heartbeat whose hb.CredentialHash is no longer the host's is refused
// with Unauthenticated, and this service forgets the credential.
func (s *Service) Heartbeat(ctx context.Context, host *vdibroker.SessionHost, hb *vdibroker.HeartbeatRequest) (*vdibroker.HeartbeatResult, error) {
	now := s.now().UTC()
	k := hostKey{host.HostPool, host.Name}
	if s.health.Down() {
		s.reports.set(k, hb.Sessions, now)
		return s.holdHeartbeat(host, hb, now), nil
	}
	res, err := s.applyHeartbeat(ctx, k, hb, now)
	switch {
	case storeIsDown(err):
		s.reports.set(k, hb.Sessions, now)
		return s.holdHeartbeat(host, hb, now), nil
	case vdibroker.ErrorCode(err) == vdibroker.EUnauthenticated:
		s.creds.forget(host.HostPool, host.Name)
		return nil, err
	case err != nil:
		return nil, err
	}
	s.reports.set(k, hb.Sessions, now)
	return res, nil
}

// EndSession ends a session at once with reason (an admin's logoff of a
// Pending session the agent has not seen: there is no logon to end) and
// gives its slot back to the view.
func (s *Service) EndSession(ctx context.Context, us *vdibroker.UserSession, reason string) error {
	if err := s.store.EndSession(ctx, us.HostPool, us.ID, reason, s.now().UTC()); err != nil {
		return err
	}
	s.views.refreshHost(ctx, us.HostPool, us.SessionHost)
	return nil
}

// Summary returns pool's hosts by status, drained hosts and open sessions,
// from one read of its hosts' states (ListHostStates: the console's
// overview of a 10,000-host pool decodes no host's metrics).
func (s *Service) Summary(ctx context.Context, pool *vdibroker.HostPool) (*vdibroker.PoolSummary, error) {
	hosts, err := s.store.ListHostStates(ctx, pool.Name)
	if err != nil {
		return nil, err
	}
	now, timeout := s.now(), pool.HeartbeatTimeout()
	sum := &vdibroker.PoolSummary{Hosts: len(hosts), ByStatus: map[string]int{}}
	for _, h := range hosts {
		st := vdibroker.HostStatus(h, timeout, now)
		sum.ByStatus[st]++
		if vdibroker.Placeable(st) {
			sum.Available++
		}
		if !h.AllowNewSession || h.AutoscaleDrain { // either drain (R-C2, R-A3)
			sum.Drained++
		}
		sum.Sessions += h.Sessions
	}
	return sum, nil
}

// HostsPage returns a pool and up to limit+1 of its hosts after after (by
// name), with their read-time fields: one more than limit tells the caller
// a next page exists. Only the page is read from the store; the pool-wide
// inputs of the load index (R-IDX3, R-LI6) come from one read of all the
// pool's hosts, kept for figuresTTL, so walking the 10 pages of a
// 10,000-host pool reads it once, not ten times.
func (s *Service) HostsPage(ctx context.Context, poolName, after string, limit int) (*vdibroker.HostPool, []*vdibroker.SessionHost, error) {
	pool, err := s.store.GetHostPool(ctx, poolName)
	if err != nil {
		return nil, nil, err
	}
	page, err := s.store.ListSessionHostsPage(ctx, poolName, after, limit+1)
	if err != nil {
		return nil, nil, err
	}
	var lp loadindex.Pool
	if after == "" && len(page) <= limit {
		lp = loadindex.PoolOfHosts(page) // the whole pool
	} else if lp, err = s.figures.get(ctx, s, poolName); err != nil {
		return nil, nil, err
	}
	now := s.now()
	loadindex.PresentWith(pool, lp, now, page...)
	for _, h := range page {
		presentFields(pool, h, now)
	}
	return pool, page, nil
}

// figuresTTL is how long a pool's load-index inputs serve pages.
const figuresTTL = 2 * time.Second

// poolFigures caches each pool's pool-wide load-index inputs.
type poolFigures struct {
	mu sync.Mutex
	m  map[string]cachedFigures
}

type cachedFigures struct {
	lp loadindex.Pool
	at time.Time
}

func (f *poolFigures) get(ctx context.Context, s *Service, pool string) (loadindex.Pool, error) {
	now := time.Now()
	f.mu.Lock()
	c, ok := f.m[pool]
	f.mu.Unlock()
	if ok && now.Sub(c.at) < figuresTTL {
		return c.lp, nil
	}
	all, err := s.store.ListSessionHosts(ctx, pool)
	if err != nil {
		return loadindex.Pool{}, err
	}
	lp := loadindex.PoolOfHosts(all)
	f.mu.Lock()
	if f.m == nil || len(f.m) > 10000 {
		f.m = map[string]cachedFigures{}
	}
	f.m[pool] = cachedFigures{lp, now}
	f.mu.Unlock()
	return lp, nil
}
