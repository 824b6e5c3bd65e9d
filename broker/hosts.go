package broker

import (
	"context"
	"sync"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/loadindex"
)

// The host service's admin side (vdibroker.HostService; the agents' side
// is heartbeat.go). The writes change what placement sees: each one
// updates the pool's view with what the store kept, so the next connect on
// this server uses it (R-C2, R-PE1); other replicas see it at their next
// refresh.

var _ vdibroker.HostService = (*Service)(nil)

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

// PutSessionHost creates or replaces a host's admin fields from req: a
// new host takes RDP, standard features and new sessions, and is
// Unavailable until its agent registers and heartbeats (R-H1); an absent
// address keeps the registered one.
func (s *Service) PutSessionHost(ctx context.Context, poolName, name string, req *vdibroker.SessionHostRequest) (*vdibroker.SessionHost, bool, error) {
	pool, err := s.store.GetHostPool(ctx, poolName)
	if err != nil {
		return nil, false, err
	}
	h := &vdibroker.SessionHost{
		HostPool: poolName, Name: name,
		Protocols: []string{"RDP"}, StandardFeatures: true, AllowNewSession: true,
		AssignedUsers: []string{}, CreateTime: s.now().UTC(),
	}
	// The host replaced: its address when req has none, and its list's
	// length, which bounds the new list's when an older release stored
	// it past MaxAssignedUsers (R-PE3). Read before the write's
	// transaction: a write between may have shortened the list, and the
	// PUT then writes one no longer than the host had just before it.
	stored := 0
	old, err := s.store.GetSessionHost(ctx, poolName, name)
	switch vdibroker.ErrorCode(err) {
	case "":
		stored = len(old.AssignedUsers)
		if req.Address == nil {
			h.Address = old.Address
		}
	case vdibroker.ENotFound:
	default:
		return nil, false, err
	}
	if req.Name != nil && *req.Name != name {
		return nil, false, vdibroker.FieldError("name", "must match the session host name in the path (%q), got %q", name, *req.Name)
	}
	applyHostRequest(h, req)
	if req.Protocols != nil {
		h.Protocols = *req.Protocols
	}
	if err := validateHost(pool, h, stored); err != nil {
		return nil, false, err
	}
	created, err := s.store.PutSessionHost(ctx, h)
	if err != nil {
		return nil, false, err
	}
	got, err := s.readBack(ctx, h.HostPool, h.Name)
	return got, created, err
}

// UpdateSessionHost changes allowNewSession (drain), assignedUsers,
// standardFeatures and address in one transaction; anything else is
// refused. A drain records who drained the host and when.
func (s *Service) UpdateSessionHost(ctx context.Context, poolName, name string, req *vdibroker.SessionHostRequest) (*vdibroker.SessionHost, error) {
	const allowed = "PATCH changes only allowNewSession, assignedUsers, standardFeatures and address"
	if req.Name != nil {
		return nil, vdibroker.FieldError("name", "cannot be changed: %s", allowed)
	}
	if req.Protocols != nil {
		return nil, vdibroker.FieldError("protocols", "cannot be changed by PATCH (use PUT or re-register the agent): %s", allowed)
	}
	pool, err := s.store.GetHostPool(ctx, poolName)
	if err != nil {
		return nil, err
	}
	return s.updateHost(ctx, poolName, name, func(h *vdibroker.SessionHost) error {
		// The host's status as it is read (R-H1), for the audit entry.
		h.Status = vdibroker.HostStatus(h, pool.HeartbeatTimeout(), s.now())
		wasAllowed, stored := h.AllowNewSession, len(h.AssignedUsers)
		applyHostRequest(h, req)
		if wasAllowed && !h.AllowNewSession {
			s.noteDrain(ctx, h)
		}
		return validatePatch(pool, h, req, stored)
	})
}

// updateHost changes a host's admin fields with fn in one transaction and
// returns the host as stored.
func (s *Service) updateHost(ctx context.Context, pool, name string, fn func(*vdibroker.SessionHost) error) (*vdibroker.SessionHost, error) {
	if _, err := s.store.UpdateSessionHost(ctx, pool, name, fn); err != nil {
		return nil, err
	}
	return s.readBack(ctx, pool, name)
}

// noteDrain records on h who drains it and when (the store keeps it with
// the drain; the host page and `sessionhost show` show it).
func (s *Service) noteDrain(ctx context.Context, h *vdibroker.SessionHost) {
	now := s.now().UTC()
	h.DrainTime, h.DrainedBy = &now, "unknown"
	if p := vdibroker.PrincipalFrom(ctx); p != nil {
		h.DrainedBy = p.Subject
		if p.Subject == "" {
			h.DrainedBy = p.Role
		}
	}
}

func applyHostRequest(h *vdibroker.SessionHost, req *vdibroker.SessionHostRequest) {
	if req.Address != nil {
		h.Address = *req.Address
	}
	if req.StandardFeatures != nil {
		h.StandardFeatures = *req.StandardFeatures
	}
	if req.AllowNewSession != nil {
		h.AllowNewSession = *req.AllowNewSession
	}
	if req.AssignedUsers != nil {
		h.AssignedUsers = *req.AssignedUsers
	}
}

// validateHost checks h, to be written in pool; stored is the length of
// its assignedUsers as stored (0 for a new host, ValidateSessionHost).
func validateHost(pool *vdibroker.HostPool, h *vdibroker.SessionHost, stored int) error {
	if err := vdibroker.ValidateSessionHost(h, stored); err != nil {
		return err
	}
	return validatePoolAssigned(pool, h)
}

// validatePatch checks what a PATCH sets (req), the only fields it
// changes: a host stored under an older release's looser checks (a
// longer list of assigned users, a second user on a Persistent desktop,
// a user name or an address since refused), or left with several users
// when its pool became Persistent (R-P1 allows that change), can still
// be drained, or have another field set, without being refused for what
// the write leaves as it is (R-PE1, R-PE3).
func validatePatch(pool *vdibroker.HostPool, h *vdibroker.SessionHost, req *vdibroker.SessionHostRequest, stored int) error {
	if req.Address != nil {
		if err := vdibroker.ValidateAddress("address", h.Address); err != nil {
			return err
		}
	}
	if req.AssignedUsers == nil {
		return nil
	}
	if err := vdibroker.ValidateAssignedUsers(h.AssignedUsers, stored); err != nil {
		return err
	}
	return validatePoolAssigned(pool, h)
}

// validatePoolAssigned checks h's assignedUsers against its pool's type.
func validatePoolAssigned(pool *vdibroker.HostPool, h *vdibroker.SessionHost) error {
	if pool.HostPoolType == vdibroker.Pooled && len(h.AssignedUsers) > 0 {
		return vdibroker.FieldError("assignedUsers", "only hosts of Personal host pools have assigned users; this pool is Pooled")
	}
	if pool.LoadBalancerType == vdibroker.Persistent && len(h.AssignedUsers) > 1 {
		// R-PE1: a Persistent desktop is one user's; a second would be
		// placed on the first's desktop while the first's session is
		// open there.
		return vdibroker.FieldError("assignedUsers", "a host of a Persistent host pool is one user's: 0..1 users, got %d (several hosts per user: loadBalancerType MultiplePersistent)", len(h.AssignedUsers))
	}
	return nil
}

// readBack reads a host just written and updates the pool's view with it
// (drain and assignment apply to the next connect).
func (s *Service) readBack(ctx context.Context, pool, name string) (*vdibroker.SessionHost, error) {
	mark := s.views.LandedMark(pool)
	h, err := s.SessionHost(ctx, pool, name)
	if err != nil {
		return nil, err
	}
	s.views.UpsertHost(h, mark)
	return h, nil
}

// DeleteSessionHost deletes a host and revokes its credential (refused
// with Conflict while it has open sessions, unless force).
func (s *Service) DeleteSessionHost(ctx context.Context, pool, name string, force bool) error {
	if err := s.store.DeleteSessionHost(ctx, pool, name, force); err != nil {
		return err
	}
	s.views.RemoveHost(pool, name)
	s.creds.forget(pool, name)
	s.outage.Forget(pool, name) // its report and held heartbeat (R-SEC)
	return nil
}

// RegisterHost creates or re-keys the host req names in the pool of its
// registration token (req.Token), with a new credential: a registration
// token cannot take over a registered host unless req carries the host's
// current credential (CurrentCredentialHash) or an admin reset its
// registration. An unknown or expired token is Unauthenticated.
func (s *Service) RegisterHost(ctx context.Context, req *vdibroker.RegisterRequest) (*vdibroker.RegisterResponse, error) {
	if req.Protocols == nil {
		req.Protocols = []string{"RDP"}
	}
	if ev := vdibroker.AuditFrom(ctx); ev != nil {
		ev.Target = "agent/register/" + req.HostName // the store names the pool when the token is valid
	}
	cred := vdibroker.NewSecret("vdbh_")
	h, err := s.store.RegisterHost(ctx, vdibroker.HashSecret(req.Token), req, vdibroker.HashSecret(cred), s.now().UTC())
	if err != nil {
		if code := vdibroker.ErrorCode(err); code == vdibroker.ENotFound || code == vdibroker.EUnauthenticated {
			return nil, vdibroker.Errorf(vdibroker.EUnauthenticated, "registration token is invalid, expired or revoked (deleting a pool revokes its tokens): ask for a new one")
		}
		return nil, err
	}
	s.views.UpsertHost(h, 0)           // a new host: none of its placements landed
	s.creds.forget(h.HostPool, h.Name) // a re-key revoked the old credential
	// What this replica holds of the name for an outage is the old
	// credential's word: a machine that took the name after its delete or
	// reset through another replica is not the one that reported it
	// (R-SEC). The next heartbeat reports again.
	s.outage.Forget(h.HostPool, h.Name)
	s.log.InfoContext(ctx, "session host registered", "pool", h.HostPool, "host", h.Name, "address", h.Address)
	return &vdibroker.RegisterResponse{HostPool: h.HostPool, HostName: h.Name, Credential: cred}, nil
}

// RegistrationCreatesHost implements vdibroker.HostService: a read of the
// store, no write transaction.
func (s *Service) RegistrationCreatesHost(ctx context.Context, req *vdibroker.RegisterRequest) (tokenID, pool string, err error) {
	return s.store.RegistrationCreatesHost(ctx, vdibroker.HashSecret(req.Token), req, s.now().UTC())
}

// ResetRegistration revokes a host's credential and lets the next
// registration of its name take the host (an admin replacing the machine).
func (s *Service) ResetRegistration(ctx context.Context, pool, host string) error {
	if err := s.store.ResetRegistration(ctx, pool, host); err != nil {
		return err
	}
	s.creds.forget(pool, host)
	s.outage.Forget(pool, host) // the old machine's word (R-SEC)
	by := ""
	if p := vdibroker.PrincipalFrom(ctx); p != nil {
		by = p.Subject
	}
	s.log.InfoContext(ctx, "session host registration reset", "pool", pool, "host", host, "by", by)
	return nil
}

// HostsPage returns up to limit+1 of a pool's hosts after after (by
// name), with their read-time fields: one more than limit tells the caller
// a next page exists. Only the page is read from the store; the pool-wide
// inputs of the load index (R-IDX3, R-LI6) come from one read of all the
// pool's hosts, kept for figuresTTL, so walking the 10 pages of a
// 10,000-host pool reads it once, not ten times.
func (s *Service) HostsPage(ctx context.Context, poolName, after string, limit int) ([]*vdibroker.SessionHost, error) {
	pool, err := s.store.GetHostPool(ctx, poolName)
	if err != nil {
		return nil, err
	}
	page, err := s.store.ListSessionHostsPage(ctx, poolName, after, limit+1)
	if err != nil {
		return nil, err
	}
	var lp loadindex.Pool
	if after == "" && len(page) <= limit {
		lp = loadindex.PoolOfHosts(page) // the whole pool
	} else if lp, err = s.figures.get(ctx, s, poolName); err != nil {
		return nil, err
	}
	now := s.now()
	loadindex.PresentWith(pool, lp, now, page...)
	for _, h := range page {
		presentFields(pool, h, now)
	}
	return page, nil
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
	now := s.now()
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
