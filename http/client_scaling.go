package http

import (
	"context"
	nethttp "net/http"
	"net/url"

	"github.com/vdibroker/vdibroker"
)

// ScalingPlanResult is a scaling plan answer and whether a PUT created it.
type ScalingPlanResult struct {
	vdibroker.ScalingPlan
	Created bool `json:"-"`
}

func planPath(name string) string { return "/api/v1/scalingplans/" + url.PathEscape(name) }

// PutScalingPlan creates (Created) or replaces the scaling plan name
// (R-SP). body is a *vdibroker.ScalingPlan or a map[string]any of its JSON
// fields; empty enums take their defaults.
func (c *Client) PutScalingPlan(ctx context.Context, name string, body any) (*ScalingPlanResult, error) {
	var out ScalingPlanResult
	status, err := c.do(ctx, "PUT", planPath(name), nil, body, &out, nil)
	out.Created = status == nethttp.StatusCreated
	return resultOrNil(&out, err)
}

// GetScalingPlan returns one scaling plan.
func (c *Client) GetScalingPlan(ctx context.Context, name string) (*vdibroker.ScalingPlan, error) {
	var out vdibroker.ScalingPlan
	_, err := c.do(ctx, "GET", planPath(name), nil, nil, &out, nil)
	return resultOrNil(&out, err)
}

// ListScalingPlans returns every scaling plan the token may see, by name.
func (c *Client) ListScalingPlans(ctx context.Context) ([]*vdibroker.ScalingPlan, error) {
	return listAll[*vdibroker.ScalingPlan](ctx, c, "/api/v1/scalingplans", nil)
}

// DeleteScalingPlan deletes a scaling plan; its pools are in no plan
// afterwards.
func (c *Client) DeleteScalingPlan(ctx context.Context, name string) error {
	_, err := c.do(ctx, "DELETE", planPath(name), nil, nil, nil, nil)
	return err
}
