package vdibroker

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Authorization (R-SEC, R-SP5): one function, Authorize, decides whether a
// principal may take an action on a target, from the principal's role and
// host-pool scope. The HTTP layer authenticates the caller, puts the
// principal in the request's context (WithPrincipal) and asks Authorize
// for the route's action on the route's pool; a service asks again where
// only it sees the target (a scaling plan's pools, the user a connect is
// for), reading the principal from its context.

// Principal is who makes a call: the admin token, an API token or an
// OpenID Connect identity.
type Principal struct {
	// Kind is PrincipalAdmin, PrincipalToken or PrincipalOIDC.
	Kind string
	// Role is one of the Role* constants.
	Role    string
	Subject string
	TokenID string
	// HostPools scopes the principal to these pools (empty: every pool).
	HostPools []string
	// Groups are the groups of an end user's identity: a User token's
	// groups, or the groups claim of an OpenID Connect identity. An
	// assignment of an application group to one of them entitles the
	// user (R-E2).
	Groups []string
	// Gateway is the RD gateway a Gateway token is for (R-GW4): its
	// reports are that gateway's, whatever name they carry. Empty for a
	// Gateway token issued before tokens had one.
	Gateway string
}

// Audit is the principal as an audit entry names it.
func (p *Principal) Audit() AuditPrincipal {
	id := p.TokenID
	if p.Kind == PrincipalOIDC || p.Kind == PrincipalAdmin {
		id = p.Subject
	}
	return AuditPrincipal{Kind: p.Kind, ID: id, Name: p.Subject, Role: p.Role, HostPools: p.HostPools}
}

// Actor names the principal as an audit entry does (token id, OIDC
// subject, admin), else by its role: who asked, in a service's logs. A nil
// principal is the anonymous one.
func (p *Principal) Actor() string {
	if p == nil {
		return PrincipalAnonymous
	}
	if id := p.Audit().ID; id != "" {
		return id
	}
	return p.Role
}

// Sees reports whether pool is in the principal's scope: the one test of
// a host-pool scope, for Authorize and for the lists that keep what their
// caller sees. A nil principal is the broker itself and sees every pool.
func (p *Principal) Sees(pool string) bool {
	return p == nil || InScope(p.HostPools, pool)
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p, the caller of what ctx is for.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

type verifiedKey struct{}

// WithVerified returns ctx carrying p as a principal an in-process caller
// has authenticated itself: the user portal, whose single sign-on makes
// any identity the provider vouches for an end user (RoleUser) without a
// role map, calls the API with it (R-U2). The API takes it instead of a
// bearer token; nothing from outside the process can set it.
func WithVerified(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, verifiedKey{}, p)
}

// VerifiedFrom returns the principal of WithVerified, or nil.
func VerifiedFrom(ctx context.Context) *Principal {
	p, _ := ctx.Value(verifiedKey{}).(*Principal)
	return p
}

type writePaidKey struct{}

// WithWritePaid returns ctx marking an in-process caller's request as an
// end user's write it has already spent of her write budget (R-SEC): the
// user portal spends a launch's one as it keeps the launch, before the
// launch's connect runs (R-U7), so that two launches at once cannot both
// find the last one left. The API spends no other for it; nothing from
// outside the process can set it.
func WithWritePaid(ctx context.Context) context.Context {
	return context.WithValue(ctx, writePaidKey{}, true)
}

// WritePaid says whether ctx is of WithWritePaid.
func WritePaid(ctx context.Context) bool {
	paid, _ := ctx.Value(writePaidKey{}).(bool)
	return paid
}

// PrincipalFrom returns the principal of WithPrincipal, or nil: a call the
// broker makes itself (a background job, a pod-to-pod call whose signature
// was checked), which Authorize allows.
func PrincipalFrom(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}

// Action is what a principal asks to do. Each names the roles that may
// (R-SEC) and how a target out of the principal's scope is answered.
type Action int

const (
	// ActionRead reads: Reader, Contributor and the admin token. A host
	// pool or scaling plan out of scope is not found, so a scoped Reader
	// cannot tell it from one that does not exist.
	ActionRead Action = iota + 1
	// ActionInspect reads what only those who may change it see (a pool's
	// registration tokens): Contributor and the admin token. Out of scope
	// is not found, as for ActionRead.
	ActionInspect
	// ActionWrite changes something: Contributor and the admin token. Out
	// of scope is forbidden.
	ActionWrite
	// ActionConnect connects a user: Contributor, the admin token, and a
	// User token for its own user only (Target.For), naming no groups.
	ActionConnect
	// ActionManageTokens issues, lists and revokes API tokens: the admin
	// token only.
	ActionManageTokens
	// ActionIdentify asks who the caller is (whoami, sign-in): every role
	// but Gateway.
	ActionIdentify
	// ActionGatewayReport reports an RD gateway's tunnels (R-GW4): a
	// Gateway token, whose role may do nothing else, and the admin token.
	ActionGatewayReport
	// ActionOwnSession logs off or disconnects a user session (R-U3):
	// Contributor and the admin token any session of their scope, an end
	// user (role User) only its own (Target.For, the session's user), as
	// they end their own sessions in AVD's clients, and Helpdesk any
	// session of its scope. Out of scope is forbidden, as for ActionWrite.
	ActionOwnSession
	// ActionAudit reads the audit trail: Contributor, Helpdesk (who finds
	// a user's refusal by the reference her portal gave) and the admin
	// token; a scoped principal's entries are filtered to its pools.
	ActionAudit
	// ActionMessage sends a message to users' sessions (one session's, or
	// every session of a host): Contributor, Helpdesk and the admin
	// token. Out of scope is forbidden, as for ActionWrite.
	ActionMessage
)

// Target is what an action is done to; the zero Target is nothing in
// particular (a list that keeps what its caller sees).
type Target struct {
	// HostPool is the pool acted on or in.
	HostPool string
	// Global, when set, names an action on what belongs to no pool (the
	// federation document, a global entitlement): a principal scoped to
	// host pools may not take it. It reads in the refusal, as the method
	// and path of the call.
	Global string
	// ScalingPlan is a plan acted on (R-SP5): a scoped principal reads
	// the plans naming one of its pools and writes only plans whose pools
	// are all in its scope.
	ScalingPlan *ScalingPlan
	// For is who a connect is for, once the request is read (nil before).
	For *UserIdentity
}

// UserIdentity is a user and the groups a request names for them.
type UserIdentity struct {
	User   string
	Groups []string
}

// Authorize decides whether principal p may take action a on target t
// (nil: yes). Its refusals are PermissionDenied, or NotFound for a read
// out of scope; the answers are the same whether the target exists or
// not. A nil p is the broker itself: everything is allowed.
func Authorize(p *Principal, a Action, t Target) error {
	if p == nil {
		return nil
	}
	if err := authorizeRole(p, a); err != nil {
		return err
	}
	if err := authorizeScope(p, a, t); err != nil {
		return err
	}
	if a == ActionOwnSession && p.Role == RoleUser && t.For != nil && !SameUser(p.Subject, t.For.User) { // R-E5
		return Errorf(EPermission, "an end user may log off or disconnect only its own sessions (%q); this session is another user's", p.Subject)
	}
	if a == ActionConnect && p.Role == RoleUser && t.For != nil {
		if !SameUser(p.Subject, t.For.User) { // R-E5
			return Errorf(EPermission, "a User token may connect only its own user %q", p.Subject)
		}
		if len(t.For.Groups) > 0 {
			return &Error{Code: EPermission, Field: "groups",
				Message: "groups: only a Contributor may name a user's groups; a User's groups come from its identity"}
		}
	}
	return nil
}

// userMayOnly is the refusal of an end user's read or change: what she
// may do instead (R-U3, R-U5), not "only connect", which her own
// sessions' listing and logoff belie.
const userMayOnly = "role User may only open its desktops and apps (its feed, connect) and list, log off or disconnect its own sessions (users/{user}/sessions)"

// authorizeRole checks the principal's role against the action.
func authorizeRole(p *Principal, a Action) error {
	if p.Role == RoleGateway && a != ActionGatewayReport {
		// The weakest credential that reaches the tunnel reports, kept
		// on a gateway in a DMZ: it reports and does nothing else.
		return Errorf(EPermission, "role Gateway may only report an RD gateway's tunnels")
	}
	switch a {
	case ActionRead:
		if p.Role == RoleUser {
			return Errorf(EPermission, "%s", userMayOnly)
		}
		return nil
	case ActionInspect, ActionWrite:
		switch p.Role {
		case RoleAdmin, RoleContributor:
			return nil
		case RoleHelpdesk:
			if a == ActionInspect {
				return Errorf(EPermission, "role Helpdesk may not read registration tokens: they are for Contributors and the admin token")
			}
			return Errorf(EPermission, "role Helpdesk may read, read the audit trail, and log off, disconnect and message sessions; this changes more")
		case RoleReader:
			if a == ActionInspect {
				// A read too, so not "may only read": what only those
				// who may change it see. The audit trail is ActionAudit's,
				// which Helpdesk may read too.
				return Errorf(EPermission, "role Reader may not read registration tokens: they are for Contributors and the admin token")
			}
			return Errorf(EPermission, "role Reader may only read (GET)")
		default:
			return Errorf(EPermission, "%s", userMayOnly)
		}
	case ActionConnect:
		switch p.Role {
		case RoleAdmin, RoleContributor, RoleUser:
			return nil
		default:
			return Errorf(EPermission, "role %s may not connect users", p.Role)
		}
	case ActionOwnSession:
		switch p.Role {
		case RoleAdmin, RoleContributor, RoleHelpdesk, RoleUser:
			return nil // a User's own sessions only: Authorize checks Target.For
		case RoleReader:
			return Errorf(EPermission, "role Reader may only read (GET)")
		default:
			return Errorf(EPermission, "role %s may not log off or disconnect sessions", p.Role)
		}
	case ActionAudit, ActionMessage:
		switch p.Role {
		case RoleAdmin, RoleContributor, RoleHelpdesk:
			return nil
		case RoleReader:
			if a == ActionAudit {
				return Errorf(EPermission, "role Reader may not read the audit trail: it is for Contributors, Helpdesk and the admin token")
			}
			return Errorf(EPermission, "role Reader may only read (GET)")
		default:
			if a == ActionAudit {
				return Errorf(EPermission, "role %s may not read the audit trail", p.Role)
			}
			return Errorf(EPermission, "role %s may not message sessions", p.Role)
		}
	case ActionIdentify:
		return nil
	case ActionGatewayReport:
		if p.Role == RoleGateway || p.Role == RoleAdmin {
			return nil
		}
		return Errorf(EPermission, "only a Gateway token may report an RD gateway's tunnels")
	case ActionManageTokens:
		if p.Role == RoleAdmin {
			return nil
		}
		return Errorf(EPermission, "only the admin token may manage API tokens")
	}
	return Errorf(EPermission, "permission denied")
}

// authorizeScope checks the target against the principal's host pools.
func authorizeScope(p *Principal, a Action, t Target) error {
	if len(p.HostPools) == 0 {
		return nil
	}
	reads := a == ActionRead || a == ActionInspect || a == ActionAudit
	if t.HostPool != "" && !p.Sees(t.HostPool) {
		if reads {
			return Errorf(ENotFound, "host pool %q not found", t.HostPool)
		}
		return Errorf(EPermission, "host pool %q is outside this token's host pools: %s", t.HostPool, scopeNote(p))
	}
	if t.Global != "" {
		return Errorf(EPermission, "a token scoped to host pools may not call %s: %s", t.Global, scopeNote(p))
	}
	if sp := t.ScalingPlan; sp != nil {
		if reads {
			if !slices.ContainsFunc(sp.HostPools, p.Sees) {
				return Errorf(ENotFound, "scaling plan %q not found", sp.Name)
			}
			return nil
		}
		if len(sp.HostPools) == 0 {
			return Errorf(EPermission, "scaling plan %q names no host pool: a token scoped to host pools may write only plans of its pools (R-SP5)", sp.Name)
		}
		for _, pool := range sp.HostPools {
			if !p.Sees(pool) {
				return Errorf(EPermission, "scaling plan %q names host pool %q, which is outside this token's host pools (R-SP5): %s", sp.Name, pool, scopeNote(p))
			}
		}
	}
	return nil
}

// maxScopeNotePools bounds the host pools a refusal names (scopeNote): a
// token may be scoped to 100 pools, an OpenID Connect mapping to more,
// and a refusal that lists them all buries its reason.
const maxScopeNotePools = 10

// scopeNote ends a scoped principal's refusal with what it may act on,
// not only what it may not: a Contributor or Helpdesk scoped to other
// pools is told its scope, not that its role changes nothing. Past
// maxScopeNotePools it says how many more.
func scopeNote(p *Principal) string {
	pools := p.HostPools
	more := ""
	if len(pools) > maxScopeNotePools {
		more = fmt.Sprintf(" and %d more", len(pools)-maxScopeNotePools)
		pools = pools[:maxScopeNotePools]
	}
	return "it may act only on host pools " + strings.Join(pools, ", ") + more
}
