package broker

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/vdibroker/vdibroker"
)

// The scaling plan service (vdibroker.ScalingPlanService, SPEC §8). A plan
// is global (it has no pool of its own), so a principal scoped to host
// pools is authorized by the plan's pools (R-SP5): it reads the plans that
// touch one of its pools and writes only plans whose pools, before and
// after, are all in its scope.

var _ vdibroker.ScalingPlanService = (*Service)(nil)

// ListScalingPlans lists the plans the caller sees, by name.
func (s *Service) ListScalingPlans(ctx context.Context) ([]*vdibroker.ScalingPlan, error) {
	plans, err := s.store.ListScalingPlans(ctx)
	if err != nil {
		return nil, err
	}
	me := vdibroker.PrincipalFrom(ctx)
	return slices.DeleteFunc(plans, func(p *vdibroker.ScalingPlan) bool { return !mayReadPlan(me, p) }), nil
}

// ScalingPlan reads plan name; NotFound for a plan the caller may not
// see (it cannot tell it from a missing one).
func (s *Service) ScalingPlan(ctx context.Context, name string) (*vdibroker.ScalingPlan, error) {
	p, err := s.store.GetScalingPlan(ctx, name)
	if err != nil {
		return nil, err
	}
	if err := vdibroker.Authorize(vdibroker.PrincipalFrom(ctx), vdibroker.ActionRead, vdibroker.Target{ScalingPlan: p}); err != nil {
		return nil, err
	}
	return p, nil
}

// PutScalingPlan creates or replaces a plan: defaults filled, validated
// (R-SP1..R-SP3), then stored with the pool checks of R-SP4 in one
// transaction. A refused plan changes nothing.
func (s *Service) PutScalingPlan(ctx context.Context, name string, p *vdibroker.ScalingPlan, pre vdibroker.Precondition) (*vdibroker.ScalingPlan, bool, error) {
	if p.Name == "" {
		p.Name = name
	}
	if p.Name != name {
		return nil, false, vdibroker.FieldError("name", "must match the scaling plan name in the path (%q), got %q", name, p.Name)
	}
	p.FillDefaults()
	if err := p.Validate(); err != nil {
		return nil, false, err
	}
	if p.HostPools == nil {
		p.HostPools = []string{}
	}
	me := vdibroker.PrincipalFrom(ctx)
	if err := vdibroker.Authorize(me, vdibroker.ActionWrite, vdibroker.Target{ScalingPlan: p}); err != nil {
		return nil, false, err
	}
	old, err := s.store.GetScalingPlan(ctx, name)
	switch {
	case vdibroker.ErrorCode(err) == vdibroker.ENotFound:
		old = nil
	case err != nil:
		return nil, false, err
	}
	// Replacing a plan takes its pools out of it: the principal must be
	// allowed those too. (The store's transaction re-reads the plan; a
	// plan changed in between by another writer is replaced whole, as
	// any PUT without If-Match is, R-E13.)
	if old != nil {
		if !mayReadPlan(me, old) {
			// A plan it cannot see is not told about, not even its pools
			// (R-SP5: as a missing one would be, it cannot be created either).
			return nil, false, vdibroker.Errorf(vdibroker.EPermission, "scaling plan %q cannot be written with this token's host pools (R-SP5)", name)
		}
		if err := vdibroker.Authorize(me, vdibroker.ActionWrite, vdibroker.Target{ScalingPlan: old}); err != nil {
			return nil, false, err
		}
	}
	auditPool(ctx, p, old)
	now := s.now().UTC()
	p.CreateTime, p.UpdateTime = now, now
	created, err := s.store.PutScalingPlan(ctx, p, pre)
	if err != nil {
		return nil, false, err
	}
	stored, err := s.store.GetScalingPlan(ctx, name)
	if err != nil {
		return nil, false, err
	}
	return stored, created, nil
}

// DeleteScalingPlan deletes a plan the caller may write. pre, the
// DELETE's If-Match, is checked by the store in the delete's transaction
// (R-E13), after the caller may see the plan; a plan that does not exist
// is PreconditionFailed with If-Match, as a PUT's.
func (s *Service) DeleteScalingPlan(ctx context.Context, name string, pre vdibroker.Precondition) error {
	old, err := s.ScalingPlan(ctx, name)
	if err != nil {
		if pre.Exists && vdibroker.ErrorCode(err) == vdibroker.ENotFound {
			if _, gerr := s.store.GetScalingPlan(ctx, name); vdibroker.ErrorCode(gerr) == vdibroker.ENotFound {
				return pre.Check(fmt.Sprintf("scaling plan %q", name), false, time.Time{})
			}
		}
		return err
	}
	if err := vdibroker.Authorize(vdibroker.PrincipalFrom(ctx), vdibroker.ActionWrite, vdibroker.Target{ScalingPlan: old}); err != nil {
		return err
	}
	auditPool(ctx, old)
	return s.store.DeleteScalingPlan(ctx, name, pre)
}

// AutoscaleEvaluations lists the autoscaler's evaluations of pool, which
// must exist, newest first.
func (s *Service) AutoscaleEvaluations(ctx context.Context, pool string, before int64, limit int) ([]*vdibroker.AutoscaleEvaluation, error) {
	if _, err := s.store.GetHostPool(ctx, pool); err != nil {
		return nil, err
	}
	return s.store.ListAutoscaleEvaluations(ctx, pool, before, limit)
}

// mayReadPlan reports whether principal me sees plan p (R-SP5).
func mayReadPlan(me *vdibroker.Principal, p *vdibroker.ScalingPlan) bool {
	return vdibroker.Authorize(me, vdibroker.ActionRead, vdibroker.Target{ScalingPlan: p}) == nil
}

// auditPool names the first pool of the plans (the new one first) in the
// request's audit entry, so a principal scoped to that pool finds the
// change in its audit log; a plan of no pool is audited with none.
func auditPool(ctx context.Context, plans ...*vdibroker.ScalingPlan) {
	ev := vdibroker.AuditFrom(ctx)
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
