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
}

// ApplicationResult is an application answer and whether a PUT created it.
type ApplicationResult struct {
	vdibroker.Application
	Created bool `json:"-"`
}

func appGroupPath(name string) string { return appGroupsPath + "/" + url.PathEscape(name) }

func appPath(group, name string) string {
	return appGroupPath(group) + "/applications/" + url.PathEscape(name)
}

// PutApplicationGroup creates (Created) or replaces application group
// name with its assignments. body is a *vdibroker.ApplicationGroup or a
// map[string]any of its JSON fields.
func (c *Client) PutApplicationGroup(ctx context.Context, name string, body any) (*ApplicationGroupResult, error) {
	var out ApplicationGroupResult
	status, err := c.do(ctx, "PUT", appGroupPath(name), nil, body, &out, nil)
	out.Created = status == nethttp.StatusCreated
	return resultOrNil(&out, err)
}

// GetApplicationGroup returns one application group.
func (c *Client) GetApplicationGroup(ctx context.Context, name string) (*vdibroker.ApplicationGroup, error) {
	var out vdibroker.ApplicationGroup
	_, err := c.do(ctx, "GET", appGroupPath(name), nil, nil, &out, nil)
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
// RemoteApp group. body is a *vdibroker.Application or a map[string]any.
func (c *Client) PutApplication(ctx context.Context, group, name string, body any) (*ApplicationResult, error) {
	var out ApplicationResult
	status, err := c.do(ctx, "PUT", appPath(group, name), nil, body, &out, nil)
	out.Created = status == nethttp.StatusCreated
	return resultOrNil(&out, err)
}

// GetApplication returns one application of a group.
func (c *Client) GetApplication(ctx context.Context, group, name string) (*vdibroker.Application, error) {
	var out vdibroker.Application
	_, err := c.do(ctx, "GET", appPath(group, name), nil, nil, &out, nil)
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
