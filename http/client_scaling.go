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
	Created bool   `json:"-"`
	ETag    string `json:"-"` // what a later PUT's If-Match gives (R-E13)
}

func planPath(name string) string { return "/api/v1/scalingplans/" + url.PathEscape(name) }

// PutScalingPlan creates (Created) or replaces the scaling plan name
// (R-SP). body is a *vdibroker.ScalingPlan or a map[string]any of its JSON
// fields; empty enums take their defaults. cond, if given, is the PUT's
// If-Match or If-None-Match (R-E13).
func (c *Client) PutScalingPlan(ctx context.Context, name string, body any, cond ...Condition) (*ScalingPlanResult, error) {
	var out ScalingPlanResult
	status, h, err := c.doHeader(ctx, "PUT", planPath(name), nil, body, &out, conditionHeader(cond))
	out.Created = status == nethttp.StatusCreated
	out.ETag = h.Get("ETag")
	return resultOrNil(&out, err)
}

// GetScalingPlan returns one scaling plan.
func (c *Client) GetScalingPlan(ctx context.Context, name string) (*vdibroker.ScalingPlan, error) {
	p, err := c.GetScalingPlanETag(ctx, name)
	if err != nil {
		return nil, err
	}
	return &p.ScalingPlan, nil
}

// GetScalingPlanETag returns one scaling plan with its ETag (R-E13).
func (c *Client) GetScalingPlanETag(ctx context.Context, name string) (*ScalingPlanResult, error) {
	var out ScalingPlanResult
	_, h, err := c.doHeader(ctx, "GET", planPath(name), nil, nil, &out, nil)
	out.ETag = h.Get("ETag")
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
