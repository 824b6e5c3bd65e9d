package entitlement

import (
	"context"
	"fmt"

	"github.com/vdibroker/vdibroker"
)

// ConnectApplication opens application req.Application of RemoteApp
// group group for req.User (R-E7): the application's RemoteApp lines in
// the .rdp file of a connect into the group's pool, placed as any connect
// there (the user's one session in the pool, R-C6). An end user needs an
// entitlement to the group (R-E3).
func (s *Service) ConnectApplication(ctx context.Context, group string, req vdibroker.AppConnectRequest, key string) (*vdibroker.ConnectAnswer, error) {
	if err := vdibroker.ValidateUser("user", req.User); err != nil {
		return nil, err
	}
	if req.Application == "" {
		return nil, vdibroker.FieldError("application", "is required: the name of an application of the group (%d..%d characters)", vdibroker.MinAppNameLen, vdibroker.MaxAppNameLen)
	}
	creq := vdibroker.ConnectRequest{User: req.User, DryRun: req.DryRun, Wait: req.Wait}
	p := vdibroker.PrincipalFrom(ctx)
	if p.EndUser() {
		// Her entitlement first (R-E3): to a group she may not open, or
		// none, the answer is NotEntitled alone, not NotFound, nor a
		// Desktop group's pool below: her token would list the groups and
		// pools she may not open.
		if err := s.authorizeEndUser(ctx, p, vdibroker.Resource{ApplicationGroup: group}, &creq); err != nil {
			return nil, err
		}
	}
	g, err := s.ApplicationGroup(ctx, group)
	if err != nil {
		return nil, err
	}
	if g.ApplicationGroupType != vdibroker.AppGroupRemoteApp {
		return nil, vdibroker.FieldError("applicationGroup", "application group %q is a %s group: open its desktop with POST /api/v1/hostpools/%s/connect", g.Name, g.ApplicationGroupType, g.HostPool)
	}
	if p.EndUser() {
		// The group's pool within her token's pools, if it names any.
		if err := vdibroker.Authorize(p, vdibroker.ActionConnect, vdibroker.Target{HostPool: g.HostPool, For: &vdibroker.UserIdentity{User: creq.User}}); err != nil {
			return nil, err
		}
	}
	a, err := s.store.GetApplication(ctx, g.Name, req.Application)
	if err != nil {
		return nil, err
	}
	if creq.RemoteApp, err = vdibroker.RemoteAppOf(a, req.CommandLine); err != nil {
		return nil, err
	}
	return s.connect.Connect(ctx, g.HostPool, creq, key)
}

// PoolApplication finds application name in pool's RemoteApp groups, the
// first group by name that publishes it (R-E9: a global application
// entitlement's member pool). NotFound when none does.
func (s *Service) PoolApplication(ctx context.Context, pool, name string) (*vdibroker.ApplicationGroup, *vdibroker.Application, error) {
	groups, err := s.store.ListApplicationGroups(ctx, pool)
	if err != nil {
		return nil, nil, err
	}
	for _, g := range groups {
		if g.ApplicationGroupType != vdibroker.AppGroupRemoteApp {
			continue
		}
		a, err := s.store.GetApplication(ctx, g.Name, name)
		switch vdibroker.ErrorCode(err) {
		case "":
			return g, a, nil
		case vdibroker.ENotFound:
		default:
			return nil, nil, err
		}
	}
	return nil, nil, vdibroker.Errorf(vdibroker.ENotFound, "host pool %q publishes no application %q", pool, name)
}

// ConnectPoolApplication connects a user to application name of pool on
// behalf of a global application entitlement (R-E9): its grant is the
// global entitlement's, so no application group of the pool is asked.
func (s *Service) ConnectPoolApplication(ctx context.Context, pool, name string, req vdibroker.ConnectRequest) (*vdibroker.ConnectAnswer, error) {
	_, a, err := s.PoolApplication(ctx, pool, name)
	if err != nil {
		return nil, err
	}
	if req.RemoteApp, err = vdibroker.RemoteAppOf(a, ""); err != nil {
		return nil, fmt.Errorf("application %q of host pool %q: %w", name, pool, err)
	}
	return s.connect.Connect(ctx, pool, req, "")
}
