package entitlement

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/vdibroker/vdibroker"
)

// Application groups and applications (R-E1): validated here, stored
// with the store's checks (the pool exists, one Desktop group per pool).
// A principal scoped to host pools reads and writes the groups of its
// pools only, as it does pools: a group of another pool is not found when
// read, and not its to write.

// ListApplicationGroups lists the groups of pool ("" every pool) the
// caller sees, by name; NotFound when pool does not exist.
func (s *Service) ListApplicationGroups(ctx context.Context, pool string) ([]*vdibroker.ApplicationGroup, error) {
	me := vdibroker.PrincipalFrom(ctx)
	if pool != "" {
		if err := vdibroker.Authorize(me, vdibroker.ActionRead, vdibroker.Target{HostPool: pool}); err != nil {
			return nil, err
		}
		// A pool that does not exist has no groups, but an empty list
		// would read as "none yet" for a typo: NotFound, as the pool's
		// session hosts are.
		if _, err := s.store.GetHostPool(ctx, pool); err != nil {
			return nil, err
		}
	}
	list, err := s.store.ListApplicationGroups(ctx, pool)
	if err != nil {
		return nil, err
	}
	list = slices.DeleteFunc(list, func(g *vdibroker.ApplicationGroup) bool { return !me.Sees(g.HostPool) })
	if list == nil {
		list = []*vdibroker.ApplicationGroup{}
	}
	return list, nil
}

// ApplicationGroup reads group name; NotFound for a group of a pool out
// of the caller's scope.
func (s *Service) ApplicationGroup(ctx context.Context, name string) (*vdibroker.ApplicationGroup, error) {
	g, err := s.store.GetApplicationGroup(ctx, name)
	if err != nil {
		return nil, err
	}
	if !vdibroker.PrincipalFrom(ctx).Sees(g.HostPool) {
		return nil, groupNotFound(name)
	}
	return g, nil
}

func groupNotFound(name string) error {
	return vdibroker.Errorf(vdibroker.ENotFound, "application group %q not found", name)
}

// writable returns group name for a write by the caller: NotFound when
// there is none, or it is of a pool the caller does not see.
func (s *Service) writable(ctx context.Context, name string) (*vdibroker.ApplicationGroup, error) {
	g, err := s.ApplicationGroup(ctx, name)
	if err != nil {
		return nil, err
	}
	if err := vdibroker.Authorize(vdibroker.PrincipalFrom(ctx), vdibroker.ActionWrite, vdibroker.Target{HostPool: g.HostPool}); err != nil {
		return nil, err
	}
	auditPool(ctx, g.HostPool)
	return g, nil
}

// PutApplicationGroup creates or replaces group name with g (R-E1):
// validated, the caller allowed to write its pool (and the pool of the
// group it replaces), stored; a refused group changes nothing.
//
// pre, the PUT's If-Match or If-None-Match, is checked by the store in
// the write's transaction (R-E13).
func (s *Service) PutApplicationGroup(ctx context.Context, name string, g *vdibroker.ApplicationGroup, pre vdibroker.Precondition) (*vdibroker.ApplicationGroup, bool, error) {
	if g.Name == "" {
		g.Name = name
	}
	if g.Name != name {
		return nil, false, vdibroker.FieldError("name", "must match the application group name in the path (%q), got %q", name, g.Name)
	}
	g.FillDefaults()
	if err := vdibroker.ValidateApplicationGroup(g); err != nil {
		return nil, false, err
	}
	me := vdibroker.PrincipalFrom(ctx)
	if err := vdibroker.Authorize(me, vdibroker.ActionWrite, vdibroker.Target{HostPool: g.HostPool}); err != nil {
		return nil, false, err
	}
	old, err := s.store.GetApplicationGroup(ctx, name)
	switch {
	case vdibroker.ErrorCode(err) == vdibroker.ENotFound:
	case err != nil:
		return nil, false, err
	case !me.Sees(old.HostPool):
		// A group it cannot see is not told about (as a missing one would
		// be, it cannot be created either).
		return nil, false, vdibroker.Errorf(vdibroker.EPermission, "application group %q cannot be written with this token's host pools", name)
	}
	auditPool(ctx, g.HostPool)
	now := s.clock.Now().UTC()
	g.CreateTime, g.UpdateTime = now, now
	created, err := s.store.PutApplicationGroup(ctx, g, pre)
	if err != nil {
		return nil, false, err
	}
	stored, err := s.store.GetApplicationGroup(ctx, name)
	if err != nil {
		return nil, false, err
	}
	if stored.ApplicationGroupType == vdibroker.AppGroupRemoteApp {
		stored.Warnings = s.remoteAppsWarnings(ctx, stored.HostPool)
	}
	return stored, created, nil
}

// remoteAppsWarnings are the warnings of a write to a RemoteApp group of
// pool, or to one of its applications: RemoteAppsWarning when every host
// of the pool says it cannot run RemoteApps (R-E12). The write stands
// whatever they say, and a failed read of the hosts only leaves the
// warning out.
func (s *Service) remoteAppsWarnings(ctx context.Context, pool string) []string {
	hosts, err := s.store.ListHostStates(ctx, pool)
	if err != nil {
		s.log.WarnContext(ctx, "cannot read the hosts for the RemoteApps warning", "pool", pool, "err", err)
		return nil
	}
	if w := vdibroker.RemoteAppsWarning(pool, hosts); w != "" {
		return []string{w}
	}
	return nil
}

// DeleteApplicationGroup deletes a group with its applications.
//
// pre, the DELETE's If-Match, is checked by the store in the delete's
// transaction (R-E13), after the caller may see the group: one of a pool
// it does not see is NotFound with the header or without it. A group
// that does not exist is PreconditionFailed with If-Match, as a PUT's.
func (s *Service) DeleteApplicationGroup(ctx context.Context, name string, pre vdibroker.Precondition) error {
	if _, err := s.writable(ctx, name); err != nil {
		return absent(ctx, err, pre, fmt.Sprintf("application group %q", name), func(ctx context.Context) error {
			_, err := s.store.GetApplicationGroup(ctx, name)
			return err
		})
	}
	return s.store.DeleteApplicationGroup(ctx, name, pre)
}

// absent is the answer to a write refused with err, which is NotFound
// either when what does not exist or when the caller may not see it: for
// a write with If-Match (pre.Exists) PreconditionFailed when get, the
// store's read, finds none (R-E13, as a PUT's), err otherwise. What the
// caller may not see stays NotFound with the headers as without them.
func absent(ctx context.Context, err error, pre vdibroker.Precondition, what string, get func(context.Context) error) error {
	if !pre.Exists || vdibroker.ErrorCode(err) != vdibroker.ENotFound {
		return err
	}
	if vdibroker.ErrorCode(get(ctx)) != vdibroker.ENotFound {
		return err
	}
	return pre.Check(what, false, time.Time{})
}

// ListApplications lists a group's applications by name.
func (s *Service) ListApplications(ctx context.Context, group string) ([]*vdibroker.Application, error) {
	if _, err := s.ApplicationGroup(ctx, group); err != nil {
		return nil, err
	}
	list, err := s.store.ListApplications(ctx, group)
	if list == nil && err == nil {
		list = []*vdibroker.Application{}
	}
	return list, err
}

// Application reads one application of a group.
func (s *Service) Application(ctx context.Context, group, name string) (*vdibroker.Application, error) {
	if _, err := s.ApplicationGroup(ctx, group); err != nil {
		return nil, err
	}
	return s.store.GetApplication(ctx, group, name)
}

// PutApplication creates or replaces application name of RemoteApp group
// group (R-E1, R-E7); an absent commandLineSetting is DoNotAllow.
// pre is checked as PutApplicationGroup's (R-E13).
func (s *Service) PutApplication(ctx context.Context, group, name string, a *vdibroker.Application, pre vdibroker.Precondition) (*vdibroker.Application, bool, error) {
	if a.Name == "" {
		a.Name = name
	}
	if a.Name != name {
		return nil, false, vdibroker.FieldError("name", "must match the application name in the path (%q), got %q", name, a.Name)
	}
	if a.ApplicationGroup == "" {
		a.ApplicationGroup = group
	}
	if a.ApplicationGroup != group {
		return nil, false, vdibroker.FieldError("applicationGroup", "must match the application group in the path (%q), got %q", group, a.ApplicationGroup)
	}
	if a.CommandLineSetting == "" {
		a.CommandLineSetting = vdibroker.CommandLineDoNotAllow
	}
	if err := vdibroker.ValidateApplication(a); err != nil {
		return nil, false, err
	}
	g, err := s.writable(ctx, group)
	if err != nil {
		return nil, false, err
	}
	now := s.clock.Now().UTC()
	a.CreateTime, a.UpdateTime = now, now
	created, err := s.store.PutApplication(ctx, a, pre)
	if err != nil {
		return nil, false, err
	}
	stored, err := s.store.GetApplication(ctx, group, name)
	if err != nil {
		return nil, false, err
	}
	stored.Warnings = s.remoteAppsWarnings(ctx, g.HostPool)
	return stored, created, nil
}

// DeleteApplication deletes one application of a group.
// pre, the DELETE's If-Match, as DeleteApplicationGroup's (R-E13); an
// application of a group that does not exist is NotFound, as a PUT's.
func (s *Service) DeleteApplication(ctx context.Context, group, name string, pre vdibroker.Precondition) error {
	if _, err := s.writable(ctx, group); err != nil {
		return err
	}
	return s.store.DeleteApplication(ctx, group, name, pre)
}

// auditPool names pool in the request's audit entry, so a principal
// scoped to it finds the change in its audit log.
func auditPool(ctx context.Context, pool string) {
	if ev := vdibroker.AuditFrom(ctx); ev != nil {
		ev.HostPool = pool
	}
}
