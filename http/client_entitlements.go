package http

import (
	"context"
	nethttp "net/http"
	"net/url"

	"github.com/vdibroker/vdibroker"
)

// The entitlement API's client (R-E1..R-E10).

// ApplicationGroupResult is an application group answer and whether a PUT
// created it.
type ApplicationGroupResult struct {
	vdibroker.ApplicationGroup
	Created bool `json:"-"`
	// ETag is the answer's (R-E13): what a later PUT's If-Match gives.
	ETag string `json:"-"`
}

// ApplicationResult is an application answer and whether a PUT created it.
type ApplicationResult struct {
	vdibroker.Application
	Created bool   `json:"-"`
	ETag    string `json:"-"` // as ApplicationGroupResult's
}

func appGroupPath(name string) string { return appGroupsPath + "/" + url.PathEscape(name) }

func appPath(group, name string) string {
	return appGroupPath(group) + "/applications/" + url.PathEscape(name)
}

// PutApplicationGroup creates (Created) or replaces application group
// name with its assignments. body is a *vdibroker.ApplicationGroup or a
// map[string]any of its JSON fields. cond, if given, is the PUT's
// If-Match or If-None-Match (R-E13).
func (c *Client) PutApplicationGroup(ctx context.Context, name string, body any, cond ...Condition) (*ApplicationGroupResult, error) {
	var out ApplicationGroupResult
	status, h, err := c.doHeader(ctx, "PUT", appGroupPath(name), nil, body, &out, conditionHeader(cond))
	out.Created = status == nethttp.StatusCreated
	out.ETag = h.Get("ETag")
	return resultOrNil(&out, err)
}

// GetApplicationGroup returns one application group.
func (c *Client) GetApplicationGroup(ctx context.Context, name string) (*vdibroker.ApplicationGroup, error) {
	g, err := c.GetApplicationGroupETag(ctx, name)
	if err != nil {
		return nil, err
	}
	return &g.ApplicationGroup, nil
}

// GetApplicationGroupETag returns one application group with its ETag,
// for a PUT of a change to it that writes only over what it read (R-E13).
func (c *Client) GetApplicationGroupETag(ctx context.Context, name string) (*ApplicationGroupResult, error) {
	var out ApplicationGroupResult
	_, h, err := c.doHeader(ctx, "GET", appGroupPath(name), nil, nil, &out, nil)
	out.ETag = h.Get("ETag")
	return resultOrNil(&out, err)
}

// ListApplicationGroups returns the application groups of pool ("" every
// pool) the token may see, by name.
func (c *Client) ListApplicationGroups(ctx context.Context, pool string) ([]*vdibroker.ApplicationGroup, error) {
	q := url.Values{}
	if pool != "" {
		q.Set("hostPool", pool)
	}
	return listAll[*vdibroker.ApplicationGroup](ctx, c, appGroupsPath, q)
}

// DeleteApplicationGroup deletes an application group with its
// applications.
func (c *Client) DeleteApplicationGroup(ctx context.Context, name string) error {
	_, err := c.do(ctx, "DELETE", appGroupPath(name), nil, nil, nil, nil)
	return err
}

// PutApplication creates (Created) or replaces application name of a
// RemoteApp group. body is a *vdibroker.Application or a map[string]any;
// cond as PutApplicationGroup's.
func (c *Client) PutApplication(ctx context.Context, group, name string, body any, cond ...Condition) (*ApplicationResult, error) {
	var out ApplicationResult
	status, h, err := c.doHeader(ctx, "PUT", appPath(group, name), nil, body, &out, conditionHeader(cond))
	out.Created = status == nethttp.StatusCreated
	out.ETag = h.Get("ETag")
	return resultOrNil(&out, err)
}

// GetApplication returns one application of a group.
func (c *Client) GetApplication(ctx context.Context, group, name string) (*vdibroker.Application, error) {
	a, err := c.GetApplicationETag(ctx, group, name)
	if err != nil {
		return nil, err
	}
	return &a.Application, nil
}

// GetApplicationETag returns one application of a group with its ETag
// (R-E13).
func (c *Client) GetApplicationETag(ctx context.Context, group, name string) (*ApplicationResult, error) {
	var out ApplicationResult
	_, h, err := c.doHeader(ctx, "GET", appPath(group, name), nil, nil, &out, nil)
	out.ETag = h.Get("ETag")
	return resultOrNil(&out, err)
}

// ListApplications returns a group's applications, by name.
func (c *Client) ListApplications(ctx context.Context, group string) ([]*vdibroker.Application, error) {
	return listAll[*vdibroker.Application](ctx, c, appGroupPath(group)+"/applications", nil)
}

// DeleteApplication deletes one application of a group.
func (c *Client) DeleteApplication(ctx context.Context, group, name string) error {
	_, err := c.do(ctx, "DELETE", appPath(group, name), nil, nil, nil, nil)
	return err
}

// ConnectApplication opens an application of a RemoteApp group for a
// user (R-E7): a connect whose rdpFile opens it.
func (c *Client) ConnectApplication(ctx context.Context, group string, req vdibroker.AppConnectRequest) (*ConnectResult, error) {
	var out ConnectResult
	status, err := c.do(ctx, "POST", appGroupPath(group)+"/connect", waitQuery(req.Wait), req, &out, nil)
	out.Created = status == nethttp.StatusCreated
	return resultOrNil(&out, err)
}

// UserEntitlements returns what user may use and why (R-E10), with the
// user's groups (a Reader's or Contributor's question; an end user's
// groups are its own).
func (c *Client) UserEntitlements(ctx context.Context, user string, groups []string) (*vdibroker.UserEntitlements, error) {
	var out vdibroker.UserEntitlements
	_, err := c.do(ctx, "GET", "/api/v1/users/"+url.PathEscape(user)+"/entitlements", url.Values{"group": groups}, nil, &out, nil)
	return resultOrNil(&out, err)
}
