package http

import (
	nethttp "net/http"
	"slices"

	"github.com/vdibroker/vdibroker"
)

// Scaling plans (issue 17, SPEC §8): PUT, GET and DELETE
// /api/v1/scalingplans/{name} and GET /api/v1/scalingplans. A plan is
// global (no {pool} in its path), so the host-pool scope of a principal is
// checked here against the plan's pools (R-SP5): a scoped principal reads
// the plans that touch one of its pools and writes only plans whose pools,
// before and after, are all in its scope.

// mayRead reports whether the principal sees plan p (R-SP5).
func mayRead(me *vdibroker.Principal, p *vdibroker.ScalingPlan) bool {
	return vdibroker.Authorize(me, vdibroker.ActionRead, vdibroker.Target{ScalingPlan: p}) == nil
}

// mayWrite refuses a principal a plan (as stored or as sent; nil: none)
// it may not write (R-SP5).
func mayWrite(me *vdibroker.Principal, p *vdibroker.ScalingPlan) error {
	if p == nil {
		return nil
	}
	return vdibroker.Authorize(me, vdibroker.ActionWrite, vdibroker.Target{ScalingPlan: p})
}

// readablePlan reads the plan at name, answering NotFound for a plan the
// principal may not see (it cannot tell it from a missing one).
func (s *Server) readablePlan(r *nethttp.Request, name string) (*vdibroker.ScalingPlan, error) {
	p, err := s.store.GetScalingPlan(r.Context(), name)
	if err != nil {
		return nil, err
	}
	if !mayRead(vdibroker.PrincipalFrom(r.Context()), p) {
		return nil, vdibroker.Errorf(vdibroker.ENotFound, "scaling plan %q not found", name)
	}
	return p, nil
}

func (s *Server) listScalingPlans(w nethttp.ResponseWriter, r *nethttp.Request) error {
	limit, after, err := pageParams(r)
	if err != nil {
		return err
	}
	plans, err := s.store.ListScalingPlans(r.Context())
	if err != nil {
		return err
	}
	me := vdibroker.PrincipalFrom(r.Context())
	plans = slices.DeleteFunc(plans, func(p *vdibroker.ScalingPlan) bool { return !mayRead(me, p) })
	writeJSON(w, nethttp.StatusOK, pageOf(r, plans, func(p *vdibroker.ScalingPlan) string { return p.Name }, limit, after))
	return nil
}

func (s *Server) getScalingPlan(w nethttp.ResponseWriter, r *nethttp.Request) error {
	p, err := s.readablePlan(r, r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, nethttp.StatusOK, p)
	return nil
}

// putScalingPlan creates (201) or replaces (200) a plan: the body decoded
// strictly (unknown fields refused), defaults filled, validated (R-SP1..3),
// then stored with the pool checks of R-SP4 in one transaction. A refused
// plan changes nothing.
func (s *Server) putScalingPlan(w nethttp.ResponseWriter, r *nethttp.Request) error {
	name := r.PathValue("name")
	p := &vdibroker.ScalingPlan{}
	if err := decodeJSON(w, r, p); err != nil {
		return err
	}
	if p.Name == "" {
		p.Name = name
	}
	if p.Name != name {
		return vdibroker.FieldError("name", "must match the scaling plan name in the path (%q), got %q", name, p.Name)
	}
	p.FillDefaults()
	if err := p.Validate(); err != nil {
		return err
	}
	if p.HostPools == nil {
		p.HostPools = []string{}
	}
	me := vdibroker.PrincipalFrom(r.Context())
	if err := mayWrite(me, p); err != nil {
		return err
	}
	old, err := s.store.GetScalingPlan(r.Context(), name)
	switch {
	case vdibroker.ErrorCode(err) == vdibroker.ENotFound:
		old = nil
	case err != nil:
		return err
	}
	// Replacing a plan takes its pools out of it: the principal must be
	// allowed those too. (The store's transaction re-reads the plan; a
	// plan changed in between by another writer is replaced whole, as
	// any PUT is.)
	if old != nil && !mayRead(me, old) {
		// A plan it cannot see is not told about, not even its pools
		// (R-SP5: as a missing one would be, it cannot be created either).
		return vdibroker.Errorf(vdibroker.EPermission, "scaling plan %q cannot be written with this token's host pools (R-SP5)", name)
	}
	if err := mayWrite(me, old); err != nil {
		return err
	}
	auditPool(r, p, old)
	now := s.now().UTC()
	p.CreateTime, p.UpdateTime = now, now
	created, err := s.store.PutScalingPlan(r.Context(), p)
	if err != nil {
		return err
	}
	stored, err := s.store.GetScalingPlan(r.Context(), name)
	if err != nil {
		return err
	}
	status := nethttp.StatusOK
	if created {
		status = nethttp.StatusCreated
	}
	writeJSON(w, status, stored)
	return nil
}

func (s *Server) deleteScalingPlan(w nethttp.ResponseWriter, r *nethttp.Request) error {
	name := r.PathValue("name")
	old, err := s.readablePlan(r, name)
	if err != nil {
		return err
	}
	if err := mayWrite(vdibroker.PrincipalFrom(r.Context()), old); err != nil {
		return err
	}
	auditPool(r, old)
	if err := s.store.DeleteScalingPlan(r.Context(), name); err != nil {
		return err
	}
	w.WriteHeader(nethttp.StatusNoContent)
	return nil
}

// auditPool names the first pool of the plans (the new one first) in the
// request's audit entry, so a principal scoped to that pool finds the
// change in its audit log; a plan of no pool is audited with none.
func auditPool(r *nethttp.Request, plans ...*vdibroker.ScalingPlan) {
	ev := vdibroker.AuditFrom(r.Context())
	if ev == nil {
		return
	}
	for _, p := range plans {
		if p != nil && len(p.HostPools) > 0 {
			ev.HostPool = p.HostPools[0]
			return
		}
	}
}
