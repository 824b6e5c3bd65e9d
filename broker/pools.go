package broker

import (
	"context"
	"slices"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/rdp"
)

// The pool service (vdibroker.PoolService): a pool's settings are what
// placement decides with, so each write updates the pool's view with what
// the store kept, and the next connect on this server uses it (R-P1);
// other replicas see it at their next refresh.

var _ vdibroker.PoolService = (*Service)(nil)

// ListPools lists the pools the caller sees, by name.
func (s *Service) ListPools(ctx context.Context) ([]*vdibroker.HostPool, error) {
	pools, err := s.store.ListHostPools(ctx)
	if err != nil {
		return nil, err
	}
	me := vdibroker.PrincipalFrom(ctx)
	return slices.DeleteFunc(pools, func(p *vdibroker.HostPool) bool { return !me.Sees(p.Name) }), nil
}

// Pool reads one pool.
func (s *Service) Pool(ctx context.Context, name string) (*vdibroker.HostPool, error) {
	return s.store.GetHostPool(ctx, name)
}

// PutPool creates or replaces pool name with p: the pool as read before
// decides between create and replace for the checks of R-P1; pre (the
// PUT's If-Match or If-None-Match) is checked by the store in the write's
// transaction (R-E13), after the body was found valid.
func (s *Service) PutPool(ctx context.Context, name string, p *vdibroker.HostPool, pre vdibroker.Precondition) (*vdibroker.HostPool, bool, error) {
	old, err := s.store.GetHostPool(ctx, name)
	if err != nil {
		if vdibroker.ErrorCode(err) != vdibroker.ENotFound {
			return nil, false, err
		}
		old = nil
	}
	return s.storePool(ctx, name, old, p, pre)
}

// UpdatePool changes pool name with change, given a copy of it, and
// stores the result: refused means nothing changed (R-P4). The change is
// applied by the store to the pool as its write's transaction reads it,
// where pre (the PATCH's If-Match) is checked (R-E13): no other write's
// change is lost. change may run more than once. A change that is not
// valid on the pool as read first is refused before pre is looked at.
func (s *Service) UpdatePool(ctx context.Context, name string, change func(*vdibroker.HostPool) error, pre vdibroker.Precondition) (*vdibroker.HostPool, error) {
	var was string // the loadBalancerType the committed change replaced
	apply := func(p *vdibroker.HostPool) error {
		old := *p
		if err := change(p); err != nil {
			return err
		}
		was = old.LoadBalancerType
		return s.checkPool(name, &old, p)
	}
	if old, err := s.store.GetHostPool(ctx, name); err == nil {
		p := *old
		if err := apply(&p); err != nil {
			return nil, err // 400 before the precondition, as a PUT's
		}
	}
	now := s.now().UTC()
	stored, err := s.store.UpdateHostPool(ctx, name, func(p *vdibroker.HostPool) error {
		if err := apply(p); err != nil {
			return err
		}
		p.UpdateTime = now
		return nil
	}, pre)
	if err != nil {
		return nil, err
	}
	s.views.SetPool(stored) // R-P1: the next placement uses the new settings
	return s.withWriteWarnings(ctx, was, stored), nil
}

// StorePool validates p and stores it; old is the pool as read before (nil
// when new). createOnly refuses, in the store's transaction, to replace a
// pool created meanwhile (If-None-Match: *). It returns the pool as stored
// and whether it was created. Invalid input changes nothing (R-P4).
func (s *Service) StorePool(ctx context.Context, name string, old, p *vdibroker.HostPool, createOnly bool) (*vdibroker.HostPool, bool, error) {
	return s.storePool(ctx, name, old, p, vdibroker.Precondition{Absent: createOnly})
}

// storePool is StorePool with the write's precondition (R-E13).
func (s *Service) storePool(ctx context.Context, name string, old, p *vdibroker.HostPool, pre vdibroker.Precondition) (*vdibroker.HostPool, bool, error) {
	if err := s.checkPool(name, old, p); err != nil {
		return nil, false, err
	}
	now := s.now().UTC()
	p.CreateTime, p.UpdateTime = now, now
	created, err := s.store.PutHostPool(ctx, p, pre)
	if err != nil {
		return nil, false, err
	}
	// Read back what the store kept (createTime on replace).
	stored, err := s.store.GetHostPool(ctx, name)
	if err != nil {
		return nil, false, err
	}
	s.views.SetPool(stored) // R-P1: the next placement uses the new settings
	if old != nil {
		stored = s.withWriteWarnings(ctx, old.LoadBalancerType, stored)
	}
	return stored, created, nil
}

// withWriteWarnings returns the pool a write stored over one whose
// loadBalancerType was was, with the write's warning (R-P1): a change
// from MultiplePersistent to Persistent is taken, and its hosts keep
// their lists, so the answer says how many hosts still have several
// users and what connects do with them. The warning goes on a copy: the
// pool's view keeps stored as it is.
func (s *Service) withWriteWarnings(ctx context.Context, was string, stored *vdibroker.HostPool) *vdibroker.HostPool {
	if was != vdibroker.MultiplePersistent || stored.LoadBalancerType != vdibroker.Persistent {
		return stored
	}
	var warning string
	// Only the hosts whose lists have several entries, names and lists
	// alone: not every host of a 10,000-host pool in full.
	hosts, err := s.store.ListSharedHosts(ctx, stored.Name)
	if err != nil {
		// The change is stored: answer it, saying what was not checked.
		s.log.Warn("pool changed to Persistent: hosts not read", "pool", stored.Name, "err", err)
		warning = "loadBalancerType Persistent gives each host one user, but the pool's hosts could not be read to count those that keep more than one assigned user: sessionhost list shows them"
	} else {
		warning = vdibroker.PersistentSharedHostsWarning(hosts)
	}
	if warning == "" {
		return stored
	}
	out := *stored
	out.WriteWarning = warning
	return &out
}

// checkPool fills p's defaults and validates it as pool name replacing
// old (nil when new): R-P1, R-P4, its power driver and RDP properties.
func (s *Service) checkPool(name string, old, p *vdibroker.HostPool) error {
	if p.Name != name {
		return vdibroker.FieldError("name", "must match the host pool name in the path (%q), got %q", name, p.Name)
	}
	// R-P1 first: a type change is refused for what it is, not for the
	// load balancer type that no longer fits the new type.
	validType := p.HostPoolType == vdibroker.Pooled || p.HostPoolType == vdibroker.Personal
	if old != nil && validType && p.HostPoolType != old.HostPoolType {
		return hostPoolTypeChange(old.HostPoolType)
	}
	p.FillDefaults()
	if _, err := vdibroker.ValidateHostPool(p); err != nil {
		return err
	}
	if err := s.power.Validate(p); err != nil { // the loaded drivers
		return err
	}
	if _, err := rdp.ParseCustomProperties(p.CustomRdpProperty); err != nil { // R-E8
		return vdibroker.FieldError("customRdpProperty", "%v (name:type:value separated by ; or line breaks, as in serve --rdp-defaults)", err)
	}
	if old != nil && p.HostPoolType != old.HostPoolType {
		return hostPoolTypeChange(old.HostPoolType)
	}
	return nil
}

func hostPoolTypeChange(was string) error {
	return vdibroker.FieldError("hostPoolType", "cannot be changed after creation (R-P1): this pool is %s; create a new host pool instead", was)
}

// DeletePool deletes a pool with its hosts and sessions and returns what
// went (refused with Conflict while it has hosts or open sessions, unless
// force).
//
// pre, the DELETE's If-Match, is checked by the store in the delete's
// transaction (R-E13).
func (s *Service) DeletePool(ctx context.Context, name string, force bool, pre vdibroker.Precondition) (*vdibroker.PoolDeletion, error) {
	del, err := s.store.DeleteHostPool(ctx, name, force, pre)
	if err != nil {
		return nil, err
	}
	s.views.Drop(name)
	s.outage.ForgetPool(name) // its hosts' reports and held heartbeats (R-SEC)
	return del, nil
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
			if h.AllowNewSession && !h.AutoscaleDrain {
				sum.TakingSessions++
			}
		}
		if !h.AllowNewSession || h.AutoscaleDrain { // either drain (R-C2, R-A3)
			sum.Drained++
		}
		sum.Sessions += h.Sessions
		if h.CannotRunRemoteApps() {
			sum.CannotRunRemoteApps++ // R-E12
		}
	}
	return sum, nil
}
