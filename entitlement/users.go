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
	grants, err := s.granted(ctx, me, who)
	if err != nil {
		return nil, err
	}
	for _, g := range grants.groups {
		if g.group.ApplicationGroupType == vdibroker.AppGroupDesktop {
			out.Resources = append(out.Resources, vdibroker.EntitledResource{Kind: vdibroker.ResourceDesktop, HostPool: g.group.HostPool,
				ApplicationGroup: g.group.Name, FriendlyName: g.group.FriendlyName, Grant: *g.grant})
			continue
		}
		for _, a := range g.apps {
			out.Resources = append(out.Resources, vdibroker.EntitledResource{Kind: vdibroker.ResourceRemoteApp, HostPool: g.group.HostPool,
				ApplicationGroup: g.group.Name, Application: a.Name, FriendlyName: a.FriendlyName, Grant: *g.grant})
		}
	}
	for _, g := range grants.global {
		r := vdibroker.EntitledResource{Kind: vdibroker.ResourceGlobalDesktop, GlobalEntitlement: g.ge.Name, Grant: *g.grant}
		if g.ge.IsApplication() {
			r.Kind, r.Application = vdibroker.ResourceGlobalApplication, g.ge.Application
		}
		out.Resources = append(out.Resources, r)
		if g.ge.NamesNobody() {
			out.Warnings = append(out.Warnings, vdibroker.EveryoneWarning(g.ge.Name))
		}
	}
	return out, nil
}

// grants are what an identity is entitled to: its application groups
// (with a RemoteApp group's applications) and global entitlements, each
// with the grant.
type grants struct {
	groups []grantedGroup
	global []grantedGlobal
	// doc is the federation document the global ones are of.
	doc *vdibroker.Federation
}

type grantedGroup struct {
	group *vdibroker.ApplicationGroup
	grant *vdibroker.Grant
	apps  []*vdibroker.Application // a RemoteApp group's
}

type grantedGlobal struct {
	ge    *vdibroker.GlobalEntitlement
	grant *vdibroker.Grant
}

// granted reads what who is entitled to (R-E2, R-E9) within what me
// sees: the groups of me's pools, and global entitlements only for an
// unscoped principal of a pod (they belong to no pool, Target.Global).
// The caller has checked that me may ask about who.
func (s *Service) granted(ctx context.Context, me *vdibroker.Principal, who vdibroker.UserIdentity) (*grants, error) {
	out := &grants{}
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
		gg := grantedGroup{group: g, grant: grant}
		if g.ApplicationGroupType == vdibroker.AppGroupRemoteApp {
			gg.apps, err = s.store.ListApplications(ctx, g.Name)
			if err != nil && vdibroker.ErrorCode(err) != vdibroker.ENotFound {
				return nil, err
			}
		}
		out.groups = append(out.groups, gg)
	}
	if s.pod == "" || (me != nil && len(me.HostPools) > 0) {
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
	out.doc = doc
	for i := range doc.GlobalEntitlements {
		ge := &doc.GlobalEntitlements[i]
		if grant := ge.Grants(who); grant != nil {
			out.global = append(out.global, grantedGlobal{ge: ge, grant: grant})
		}
	}
	return out, nil
}
