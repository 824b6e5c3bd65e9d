package store

import (
	"context"

	"github.com/vdibroker/vdibroker"
)

// Scaling plans (issue 17, SPEC §8). Placeholders until the scaling-plan
// work lands: every call says it is not there yet.

var errNoPlans = &vdibroker.Error{Code: vdibroker.EInternal, Message: "scaling plans are not implemented yet"}

func (s *DB) PutScalingPlan(ctx context.Context, p *vdibroker.ScalingPlan) (bool, error) {
	return false, errNoPlans
}

func (s *DB) GetScalingPlan(ctx context.Context, name string) (*vdibroker.ScalingPlan, error) {
	return nil, errNoPlans
}

func (s *DB) ListScalingPlans(ctx context.Context) ([]*vdibroker.ScalingPlan, error) {
	return nil, errNoPlans
}

func (s *DB) DeleteScalingPlan(ctx context.Context, name string) error { return errNoPlans }

func (s *DB) ScalingPlanForPool(ctx context.Context, pool string) (*vdibroker.ScalingPlan, error) {
	return nil, errNoPlans
}
