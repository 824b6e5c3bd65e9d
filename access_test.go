package vdibroker

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestAuthorize (R-SEC, R-SP5): the one decision of what a principal may
// do, with the codes and messages the API answers.
func TestAuthorize(t *testing.T) {
	admin := &Principal{Kind: PrincipalAdmin, Role: RoleAdmin, Subject: "admin"}
	contrib := &Principal{Kind: PrincipalToken, Role: RoleContributor, TokenID: "c1"}
	reader := &Principal{Kind: PrincipalToken, Role: RoleReader, TokenID: "r1"}
	user := &Principal{Kind: PrincipalToken, Role: RoleUser, Subject: "alice", TokenID: "u1"}
	scoped := &Principal{Kind: PrincipalToken, Role: RoleContributor, TokenID: "s1", HostPools: []string{"p1", "p2"}}
	scopedReader := &Principal{Kind: PrincipalOIDC, Role: RoleReader, Subject: "bob", HostPools: []string{"p1"}}
	gateway := &Principal{Kind: PrincipalToken, Role: RoleGateway, Subject: "rdgw1", TokenID: "g1"}
	scopedGateway := &Principal{Kind: PrincipalToken, Role: RoleGateway, Subject: "rdgw2", TokenID: "g2", HostPools: []string{"p1"}}
	helpdesk := &Principal{Kind: PrincipalToken, Role: RoleHelpdesk, Subject: "desk", TokenID: "h1"}
	scopedHelpdesk := &Principal{Kind: PrincipalOIDC, Role: RoleHelpdesk, Subject: "desk2", HostPools: []string{"p1"}}
	plan := func(pools ...string) *ScalingPlan { return &ScalingPlan{Name: "sp", HostPools: pools} }
	tests := []struct {
		name     string
		p        *Principal
		a        Action
		t        Target
		code     string // "" = allowed
		contains string
	}{
		{name: "the broker itself", p: nil, a: ActionManageTokens, t: Target{Global: "POST /api/v1/tokens"}},
		{name: "reader reads", p: reader, a: ActionRead, t: Target{HostPool: "p9"}},
		{name: "user reads", p: user, a: ActionRead, code: EPermission, contains: "role User may only open its desktops and apps"},
		{name: "reader writes", p: reader, a: ActionWrite, code: EPermission, contains: "role Reader may only read (GET)"},
		{name: "user writes", p: user, a: ActionWrite, code: EPermission, contains: "role User may only open its desktops and apps"},
		{name: "reader inspects", p: reader, a: ActionInspect, code: EPermission, contains: "role Reader may not read registration tokens: they are for Contributors and the admin token"},
		{name: "contributor inspects", p: contrib, a: ActionInspect},
		{name: "reader connects", p: reader, a: ActionConnect, code: EPermission, contains: "role Reader may not connect users"},
		{name: "contributor issues tokens", p: contrib, a: ActionManageTokens, code: EPermission, contains: "only the admin token may manage API tokens"},
		{name: "admin issues tokens", p: admin, a: ActionManageTokens, t: Target{Global: "POST /api/v1/tokens"}},
		{name: "user identifies", p: user, a: ActionIdentify},

		// Helpdesk (our addition, as AVD's User Session Operator): reads,
		// the audit trail, and users' sessions operated; nothing changed.
		{name: "helpdesk reads", p: helpdesk, a: ActionRead, t: Target{HostPool: "p9"}},
		{name: "helpdesk reads the audit trail", p: helpdesk, a: ActionAudit},
		{name: "helpdesk logs off anyone's session", p: helpdesk, a: ActionOwnSession, t: Target{HostPool: "p1", For: &UserIdentity{User: "bob"}}},
		{name: "helpdesk messages", p: helpdesk, a: ActionMessage, t: Target{HostPool: "p1"}},
		{name: "helpdesk writes", p: helpdesk, a: ActionWrite, t: Target{HostPool: "p1"}, code: EPermission, contains: "role Helpdesk may read, read the audit trail, and log off"},
		{name: "helpdesk reads registration tokens", p: helpdesk, a: ActionInspect, t: Target{HostPool: "p1"}, code: EPermission, contains: "may not read registration tokens"},
		{name: "helpdesk connects", p: helpdesk, a: ActionConnect, t: Target{HostPool: "p1"}, code: EPermission, contains: "role Helpdesk may not connect users"},
		{name: "helpdesk issues tokens", p: helpdesk, a: ActionManageTokens, code: EPermission},
		{name: "helpdesk reports tunnels", p: helpdesk, a: ActionGatewayReport, code: EPermission},
		{name: "scoped helpdesk logs off out of scope", p: scopedHelpdesk, a: ActionOwnSession, t: Target{HostPool: "p3"}, code: EPermission, contains: `host pool "p3" is outside`},
		{name: "scoped helpdesk messages out of scope", p: scopedHelpdesk, a: ActionMessage, t: Target{HostPool: "p3"}, code: EPermission},
		{name: "scoped helpdesk messages in scope", p: scopedHelpdesk, a: ActionMessage, t: Target{HostPool: "p1"}},
		{name: "scoped helpdesk reads the audit trail", p: scopedHelpdesk, a: ActionAudit},
		{name: "reader reads the audit trail", p: reader, a: ActionAudit, code: EPermission, contains: "for Contributors, Helpdesk and the admin token"},
		{name: "reader messages", p: reader, a: ActionMessage, t: Target{HostPool: "p1"}, code: EPermission, contains: "role Reader may only read (GET)"},
		{name: "user messages", p: user, a: ActionMessage, t: Target{HostPool: "p1"}, code: EPermission, contains: "role User may not message sessions"},
		{name: "contributor messages", p: contrib, a: ActionMessage, t: Target{HostPool: "p1"}},

		// R-GW4: a Gateway token reports tunnels and does nothing else;
		// nobody else but the admin token reports.
		{name: "gateway reports", p: gateway, a: ActionGatewayReport, t: Target{HostPool: "p1"}},
		{name: "admin reports", p: admin, a: ActionGatewayReport, t: Target{HostPool: "p1"}},
		{name: "user reports", p: user, a: ActionGatewayReport, t: Target{HostPool: "p1"}, code: EPermission, contains: "only a Gateway token"},
		{name: "contributor reports", p: contrib, a: ActionGatewayReport, code: EPermission, contains: "only a Gateway token"},
		{name: "gateway reads", p: gateway, a: ActionRead, t: Target{HostPool: "p1"}, code: EPermission, contains: "role Gateway may only report"},
		{name: "gateway connects", p: gateway, a: ActionConnect, t: Target{HostPool: "p1"}, code: EPermission, contains: "role Gateway may only report"},
		{name: "gateway identifies", p: gateway, a: ActionIdentify, code: EPermission, contains: "role Gateway may only report"},
		{name: "gateway manages tokens", p: gateway, a: ActionManageTokens, code: EPermission},
		{name: "scoped gateway reports out of scope", p: scopedGateway, a: ActionGatewayReport, t: Target{HostPool: "p3"}, code: EPermission,
			contains: `host pool "p3" is outside`},
		{name: "scoped gateway reports in scope", p: scopedGateway, a: ActionGatewayReport, t: Target{HostPool: "p1"}},

		// Host-pool scope: a read out of scope is not found, a change forbidden.
		{name: "scoped read in scope", p: scopedReader, a: ActionRead, t: Target{HostPool: "p1"}},
		{name: "scoped read out of scope", p: scopedReader, a: ActionRead, t: Target{HostPool: "p3"}, code: ENotFound, contains: `host pool "p3" not found`},
		{name: "scoped inspect out of scope", p: scoped, a: ActionInspect, t: Target{HostPool: "p3"}, code: ENotFound},
		{name: "scoped write out of scope", p: scoped, a: ActionWrite, t: Target{HostPool: "p3"}, code: EPermission, contains: `host pool "p3" is outside this token's host pools: it may act only on host pools p1, p2`},
		{name: "scoped global", p: scoped, a: ActionRead, t: Target{Global: "GET /api/v1/federation"}, code: EPermission,
			contains: "a token scoped to host pools may not call GET /api/v1/federation: it may act only on host pools p1, p2"},
		{name: "unscoped global", p: contrib, a: ActionWrite, t: Target{Global: "PUT /api/v1/federation"}},
		{name: "scoped list", p: scoped, a: ActionRead},

		// R-SP5: plans by their pools.
		{name: "plan read, one pool in scope", p: scopedReader, a: ActionRead, t: Target{ScalingPlan: plan("p1", "p7")}},
		{name: "plan read, none in scope", p: scopedReader, a: ActionRead, t: Target{ScalingPlan: plan("p7")}, code: ENotFound, contains: `scaling plan "sp" not found`},
		{name: "plan write, all in scope", p: scoped, a: ActionWrite, t: Target{ScalingPlan: plan("p1", "p2")}},
		{name: "plan write, one out", p: scoped, a: ActionWrite, t: Target{ScalingPlan: plan("p1", "p7")}, code: EPermission,
			contains: `names host pool "p7", which is outside this token's host pools (R-SP5): it may act only on host pools p1, p2`},
		{name: "plan write, no pool", p: scoped, a: ActionWrite, t: Target{ScalingPlan: plan()}, code: EPermission, contains: "names no host pool"},
		{name: "plan write, unscoped", p: contrib, a: ActionWrite, t: Target{ScalingPlan: plan()}},

		// A User token connects its own user, naming no groups.
		{name: "user connects itself", p: user, a: ActionConnect, t: Target{HostPool: "p1", For: &UserIdentity{User: "alice"}}},
		{name: "user connects another", p: user, a: ActionConnect, t: Target{HostPool: "p1", For: &UserIdentity{User: "bob"}}, code: EPermission,
			contains: `a User token may connect only its own user "alice"`},
		{name: "user names groups", p: user, a: ActionConnect, t: Target{For: &UserIdentity{User: "alice", Groups: []string{"g"}}}, code: EPermission,
			contains: "only a Contributor may name a user's groups"},
		{name: "user before the request is read", p: user, a: ActionConnect, t: Target{HostPool: "p1"}},
		{name: "contributor connects anyone", p: contrib, a: ActionConnect, t: Target{For: &UserIdentity{User: "bob", Groups: []string{"g"}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Authorize(tc.p, tc.a, tc.t)
			if got := ErrorCode(err); got != tc.code {
				t.Fatalf("Authorize = %v, want code %q", err, tc.code)
			}
			if tc.contains != "" && !strings.Contains(ErrorMessage(err), tc.contains) {
				t.Errorf("message %q lacks %q", ErrorMessage(err), tc.contains)
			}
		})
	}
}

func TestPrincipalInContext(t *testing.T) {
	if p := PrincipalFrom(context.Background()); p != nil {
		t.Fatalf("PrincipalFrom(empty) = %+v, want nil (the broker itself)", p)
	}
	p := &Principal{Role: RoleReader, TokenID: "t1"}
	if got := PrincipalFrom(WithPrincipal(context.Background(), p)); got != p {
		t.Fatalf("PrincipalFrom = %+v, want %+v", got, p)
	}
	if got := p.Actor(); got != "t1" {
		t.Errorf("Actor = %q, want the token id", got)
	}
	if got := (*Principal)(nil).Actor(); got != PrincipalAnonymous {
		t.Errorf("nil Actor = %q, want %q", got, PrincipalAnonymous)
	}
}

// TestScopeNoteBounded (R-SEC): a refusal of a principal scoped to many
// host pools names the first maxScopeNotePools of them and how many
// more, so that a token scoped to 100 pools is told why in one line and
// its refusal is not cut in the audit trail (MaxAuditField) before its
// reason. Twelve pools: p00..p09 named, "and 2 more".
func TestScopeNoteBounded(t *testing.T) {
	var pools []string
	for i := range 12 {
		pools = append(pools, fmt.Sprintf("p%02d", i))
	}
	p := &Principal{Role: RoleContributor, Subject: "many", HostPools: pools}
	err := Authorize(p, ActionWrite, Target{HostPool: "other"})
	want := `host pool "other" is outside this token's host pools: it may act only on host pools p00, p01, p02, p03, p04, p05, p06, p07, p08, p09 and 2 more`
	if got := ErrorMessage(err); got != want {
		t.Errorf("refusal:\n got %q\nwant %q", got, want)
	}
	p.HostPools = pools[:10]
	if got := ErrorMessage(Authorize(p, ActionWrite, Target{HostPool: "other"})); !strings.HasSuffix(got, "p08, p09") {
		t.Errorf("ten pools: %q, want all ten named and no count", got)
	}
}
