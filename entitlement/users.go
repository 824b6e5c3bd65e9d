package entitlement

import (
	"context"

	"github.com/vdibroker/vdibroker"
)

// UserEntitlements lists what who may use and why (R-E10): each desktop
// (a pool's Desktop group), each application of a RemoteApp group, and
// each global entitlement who is entitled to, with the grant. An end user
// asks about itself only, with the groups of its identity; a principal
// scoped to host pools sees its pools' resources, and no global one.
func (s *Service) UserEntitlements(ctx context.Context, who vdibroker.UserIdentity) (*vdibroker.UserEntitlements, error) {
	me := vdibroker.PrincipalFrom(ctx)
	if err := vdibroker.ValidateUser("user", who.User); err != nil {
		return nil, err
	}
	if err := vdibroker.ValidateGroups("group", who.Groups); err != nil {
		return nil, err
	}
	if me.EndUser() {
		if !vdibroker.SameUser(me.Subject, who.User) {
			return nil, vdibroker.Errorf(vdibroker.EPermission, "a User token may ask only about its own user %q", me.Subject)
		}
		if len(who.Groups) > 0 {
			return nil, &vdibroker.Error{Code: vdibroker.EPermission, Field: "group",
				Message: "group: an end user's groups come from its identity; only a Reader or Contributor may name them"}
		}
		who.Groups = me.Groups
	} else if err := vdibroker.Authorize(me, vdibroker.ActionRead, vdibroker.Target{}); err != nil {
		return nil, err
	}
	out := &vdibroker.UserEntitlements{User: who.User, Groups: who.Groups, Resources: []vdibroker.EntitledResource{}}
	if out.Groups == nil {
		out.Groups = []string{}
	}
	groups, err := s.store.AssignedApplicationGroups(ctx, vdibroker.AssignmentQuery{User: who.User, Groups: who.Groups})
	if err != nil {
		return nil, err
	}
	for _, g := range groups {
		if !me.Sees(g.HostPool) {
			continue
		}
		grant := g.Assignments.Grants(who)
		if grant == nil {
			continue
		}
		grant.ApplicationGroup = g.Name
		if g.ApplicationGroupType == vdibroker.AppGroupDesktop {
			out.Resources = append(out.Resources, vdibroker.EntitledResource{Kind: vdibroker.ResourceDesktop, HostPool: g.HostPool,
				ApplicationGroup: g.Name, FriendlyName: g.FriendlyName, Grant: *grant})
			continue
		}
		apps, err := s.store.ListApplications(ctx, g.Name)
		if err != nil && vdibroker.ErrorCode(err) != vdibroker.ENotFound {
			return nil, err
		}
		for _, a := range apps {
			out.Resources = append(out.Resources, vdibroker.EntitledResource{Kind: vdibroker.ResourceRemoteApp, HostPool: g.HostPool,
				ApplicationGroup: g.Name, Application: a.Name, FriendlyName: a.FriendlyName, Grant: *grant})
		}
	}
	if !s.pod || (me != nil && len(me.HostPools) > 0) {
		return out, nil // global entitlements belong to no pool (Target.Global)
	}
	doc, err := s.store.GetFederation(ctx)
	switch vdibroker.ErrorCode(err) {
	case "":
	case vdibroker.ENotFound:
		return out, nil // not a pod, or no document yet
	default:
		return nil, err
	}
	for i := range doc.GlobalEntitlements {
		ge := &doc.GlobalEntitlements[i]
		grant := ge.Grants(who)
		if grant == nil {
			continue
		}
		r := vdibroker.EntitledResource{Kind: vdibroker.ResourceGlobalDesktop, GlobalEntitlement: ge.Name, Grant: *grant}
		if ge.IsApplication() {
			r.Kind, r.Application = vdibroker.ResourceGlobalApplication, ge.Application
		}
		out.Resources = append(out.Resources, r)
		if ge.NamesNobody() {
			out.Warnings = append(out.Warnings, vdibroker.EveryoneWarning(ge.Name))
		}
	}
	return out, nil
}
