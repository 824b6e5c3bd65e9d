package http_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/testop"
)

// scopeWorld is what one credential kind's fresh server holds: pools "pin"
// and "pout" with four hosts each, an Active session of alice on each, a
// spare registration token and a spare API token.
type scopeWorld struct {
	e         *env
	session   map[string]string // pool -> alice's session id
	spareReg  map[string]string // pool -> registration token id
	spareTok  string
	regSecret string     // a registration token of pout, as a bearer
	hostCred  string     // the credential of pout's first host
	op        *testop.OP // the OpenID provider the server trusts (testRoles)
}

func newScopeWorld(t *testing.T) *scopeWorld {
	t.Helper()
	op := testop.Start(t, "vdibroker-test", "s3cret")
	e := newEnvWith(t, envOptions{maintenance: time.Hour, oidc: mustProvider(t, op)})
	op.Now = e.clock.Now
	ctx := context.Background()
	w := &scopeWorld{e: e, session: map[string]string{}, spareReg: map[string]string{}, op: op}
	for _, p := range []string{"pin", "pout"} {
		e.pool(p, nil)
		e.desktopFor(p, vdibroker.Assignments{AllUsers: true}) // R-E3
		hosts := e.addHosts(p, p+"h", 4)
		c := e.mustConnect(p, "alice")
		e.heartbeat(hosts[0], vdibroker.AgentSession{ID: "1", User: "alice", State: "Active"})
		e.heartbeat(hosts[1], vdibroker.AgentSession{ID: "2", User: "alice", State: "Active"})
		w.session[p] = c.SessionID
		if _, err := e.admin.PutScalingPlan(ctx, "plan-"+p, planBody(p)); err != nil {
			t.Fatal(err)
		}
		rt, err := e.admin.CreateRegistrationToken(ctx, p, vhttp.RegistrationTokenRequest{})
		if err != nil {
			t.Fatal(err)
		}
		w.spareReg[p] = rt.ID
		if p == "pout" {
			w.regSecret = rt.Token
			w.hostCred = e.agents[hosts[0]]
		}
	}
	tr, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: "Reader", Subject: "spare"})
	if err != nil {
		t.Fatal(err)
	}
	w.spareTok = tr.ID
	return w
}

func (w *scopeWorld) token(t *testing.T, role, subject string, pools []string, expires int) string {
	t.Helper()
	tr, err := w.e.admin.CreateToken(context.Background(), vhttp.TokenRequest{Role: role, Subject: subject, HostPools: pools, ExpiresInSeconds: expires})
	if err != nil {
		t.Fatalf("create %s token: %v", role, err)
	}
	return tr.Secret
}

// Route classes: what a route needs of the caller.
const (
	cPublic   = iota // no token (answer independent of the bearer)
	cRead            // Reader and up; the pool's scope applies
	cWrite           // Contributor and up; the pool's scope applies
	cConnect         // Contributor, admin, a User for itself; scope applies
	cOwn             // Contributor, admin, a User on its own session (R-U3: alice's here); scope applies
	cAdmin           // the admin token only
	cAny             // every API token, scoped ones included
	cGRead           // read, global: refused to a scoped principal
	cGWrite          // write, global
	cGConnect        // connect, global
	cList            // read, global, filtered by scope
	cAudit           // Contributor and up, global, filtered by scope
	// Scaling plans (R-SP5): global routes whose scope is the plan's
	// pools. A scoped principal gets 404 for a plan of no pool of its
	// scope (GET and DELETE: it cannot tell it from a missing plan) and
	// 403 for a PUT naming a pool outside its scope.
	cPlanRead
	cPlanWrite
	// An RD gateway's tunnel reports (R-GW4): a Gateway token and the
	// admin token; the report's pool is the scope.
	cGateway
	// A gateway's check of its tunnels (R-GW4): a Gateway token and the
	// admin token, in or out of scope; a tunnel out of scope is left out
	// of the answer, not refused.
	cGatewayCheck
)

type scopeCall struct {
	name, method, path, body string
	class                    int
	ok                       int // the answer of a principal allowed to call
}

// scopeCalls is every route of routes.go and federation.go on pool pool
// (the pod-to-pod routes are signed, not bearer: TestPodCallsNeedSignature).
// Changes come before deletes, so each call finds what it needs.
func scopeCalls(w *scopeWorld, pool string) []scopeCall {
	p := "/api/v1/hostpools/" + pool
	sid := w.session[pool]
	return []scopeCall{
		{"list pools", "GET", "/api/v1/hostpools", "", cList, 200},
		{"get pool", "GET", p, "", cRead, 200},
		{"put pool", "PUT", p, `{}`, cWrite, 200},
		{"patch pool", "PATCH", p, `{"description": "x"}`, cWrite, 200},
		{"list hosts", "GET", p + "/sessionhosts", "", cRead, 200},
		{"get host", "GET", p + "/sessionhosts/" + pool + "h001", "", cRead, 200},
		{"put host", "PUT", p + "/sessionhosts/" + pool + "h002", `{"address": "x.example.test:3389"}`, cWrite, 200},
		{"drain host", "PATCH", p + "/sessionhosts/" + pool + "h003", `{"allowNewSession": false}`, cWrite, 200},
		{"list sessions", "GET", p + "/usersessions", "", cRead, 200},
		{"get session", "GET", p + "/usersessions/" + sid, "", cRead, 200},
		{"placement", "GET", p + "/usersessions/" + sid + "/placement", "", cRead, 200},
		{"autoscale evaluations", "GET", p + "/autoscale/evaluations", "", cRead, 200},
		{"disconnect", "POST", p + "/usersessions/" + sid + "/disconnect", "", cOwn, 202},
		{"send message", "POST", p + "/usersessions/" + sid + "/sendmessage", `{"message": "hi"}`, cWrite, 202},
		{"send message to a host", "POST", p + "/sessionhosts/" + pool + "h001/sendmessage", `{"message": "hi"}`, cWrite, 202},
		{"connect alice", "POST", p + "/connect", `{"user": "alice", "dryRun": true}`, cConnect, 200},
		{"connect bob", "POST", p + "/connect", `{"user": "bob", "dryRun": true}`, cConnect, 200},
		{"registration token", "POST", p + "/registrationtoken", `{}`, cWrite, 201},
		{"list registration tokens", "GET", p + "/registrationtokens", "", cWrite, 200},
		{"revoke registration token", "DELETE", p + "/registrationtokens/" + w.spareReg[pool], "", cWrite, 204},
		{"reset registration", "POST", p + "/sessionhosts/" + pool + "h003/resetregistration", "", cWrite, 204},
		// The pools have no power driver: an allowed caller is answered
		// 409 (TestPowerAPI has drivers), anyone else is refused first.
		{"start host", "POST", p + "/sessionhosts/" + pool + "h004/start", "", cWrite, 409},
		{"stop host", "POST", p + "/sessionhosts/" + pool + "h004/stop?force=true", "", cWrite, 409},
		{"delete host", "DELETE", p + "/sessionhosts/" + pool + "h004", "", cWrite, 204},
		{"logoff", "DELETE", p + "/usersessions/" + sid, "", cOwn, 202},
		{"list tokens", "GET", "/api/v1/tokens", "", cAdmin, 200},
		{"create token", "POST", "/api/v1/tokens", `{"role": "Reader", "subject": "x"}`, cAdmin, 201},
		{"revoke token", "DELETE", "/api/v1/tokens/" + w.spareTok, "", cAdmin, 204},
		{"whoami", "GET", "/api/v1/whoami", "", cAny, 200},
		{"signin", "POST", "/api/v1/signin", "", cAny, 200},
		{"audit log", "GET", "/api/v1/auditlog", "", cAudit, 200},
		// Not a pod: the federation API answers 404 to whoever may call it.
		{"get federation", "GET", "/api/v1/federation", "", cGRead, 404},
		{"put federation", "PUT", "/api/v1/federation", `{}`, cGWrite, 404},
		{"list global entitlements", "GET", "/api/v1/globalentitlements", "", cGRead, 404},
		{"get global entitlement", "GET", "/api/v1/globalentitlements/g", "", cGRead, 404},
		{"global connect", "POST", "/api/v1/globalentitlements/g/connect", `{"user": "alice"}`, cGConnect, 404},
		{"healthz", "GET", "/healthz", "", cPublic, 200},
		{"register bogus", "POST", "/api/v1/agent/register", `{"token": "vdbr_bogus", "hostName": "newhost", "address": "n.example.test:3389"}`, cPublic, 401},
		{"list scaling plans", "GET", "/api/v1/scalingplans", "", cList, 200},
		{"get scaling plan", "GET", "/api/v1/scalingplans/plan-" + pool, "", cPlanRead, 200},
		{"put scaling plan", "PUT", "/api/v1/scalingplans/plan-" + pool, planJSON(pool), cPlanWrite, 200},
		{"delete scaling plan", "DELETE", "/api/v1/scalingplans/plan-" + pool, "", cPlanWrite, 204},
		// The keys are public; rotating them is the admin's. A report of a
		// token the broker never issued is NotFound to whoever may report.
		{"gateway keys", "GET", "/api/v1/gateway/keys", "", cPublic, 200},
		{"rotate gateway key", "POST", "/api/v1/gateway/keys/rotate", "", cAdmin, 204},
		{"tunnel open", "POST", "/api/v1/gateway/tunnels/open", tunnelReport(pool, sid), cGateway, 404},
		{"tunnel channel", "POST", "/api/v1/gateway/tunnels/channel", tunnelReport(pool, sid), cGateway, 404},
		{"tunnel close", "POST", "/api/v1/gateway/tunnels/close", tunnelReport(pool, sid), cGateway, 404},
		{"tunnel check", "POST", "/api/v1/gateway/tunnels/check", `{"gateway": "rdgw-1", "tunnels": [` + tunnelReport(pool, sid) + `]}`, cGatewayCheck, 200},
		{"delete pool", "DELETE", p + "?force=true", "", cWrite, 200},
	}
}

// tunnelReport is a well-formed report about alice's session in pool of a
// token the broker did not issue.
func tunnelReport(pool, sid string) string {
	return `{"tokenId": "` + strings.Repeat("ab", 32) + `", "user": "alice", "sessionId": "` + sid + `", "hostPool": "` + pool +
		`", "host": "` + pool + `h001.example.test:3389", "gateway": "rdgw-1", "tokenExpiry": "2030-01-01T00:00:00Z"}`
}

// cred is one kind of credential and what it may do.
type cred struct {
	name string
	// role is Admin, Contributor, Reader or User; "" for a credential
	// that is no API token (401 on every route that needs one).
	role   string
	scoped bool   // scoped to pin only
	user   string // a User token's subject
	secret func(t *testing.T, w *scopeWorld) string
}

// want is the exact status of call c by credential k on pool.
func want(k cred, c scopeCall, pool string) int {
	if c.class == cPublic {
		return c.ok
	}
	if k.role == "" {
		return 401
	}
	if k.role == "Gateway" && c.class != cGateway && c.class != cGatewayCheck {
		return 403 // a Gateway token reports tunnels and does nothing else (R-GW4)
	}
	role := map[int]bool{}
	switch c.class {
	case cRead, cGRead, cList, cPlanRead:
		role = map[int]bool{0: k.role != "User"}
	case cWrite, cGWrite, cAudit, cPlanWrite:
		role = map[int]bool{0: k.role == "Admin" || k.role == "Contributor"}
	case cConnect, cGConnect:
		role = map[int]bool{0: k.role == "Admin" || k.role == "Contributor" || k.role == "User"}
	case cOwn:
		// Every session here is alice's, the Users' subject.
		role = map[int]bool{0: k.role == "Admin" || k.role == "Contributor" || (k.role == "User" && k.user == "alice")}
	case cAdmin:
		role = map[int]bool{0: k.role == "Admin"}
	case cAny:
		role = map[int]bool{0: true}
	case cGateway, cGatewayCheck:
		role = map[int]bool{0: k.role == "Admin" || k.role == "Gateway"}
	}
	if !role[0] {
		return 403
	}
	if k.scoped {
		switch c.class {
		case cGRead, cGWrite, cGConnect, cAdmin:
			return 403
		case cPlanRead, cPlanWrite:
			if pool != "pin" {
				if c.method == "PUT" {
					return 403
				}
				return 404
			}
		case cRead, cWrite, cConnect, cOwn, cGateway:
			if pool != "pin" {
				if c.method == "GET" {
					return 404
				}
				return 403
			}
		}
	}
	// A User connects only itself (checked by the handler, after scope).
	if k.role == "User" && c.class == cConnect && !strings.Contains(c.body, `"`+k.user+`"`) {
		return 403
	}
	if k.role == "User" && c.class == cGConnect && k.user != "alice" {
		return 403
	}
	return c.ok
}

// TestAuthMatrix_Scopes: every route and method against every kind of
// credential, scoped ones in and out of their scope, with the exact status
// answered. Each credential kind gets a fresh server (and store), so the
// changes of one do not meet another's and the limit of 60 failed
// authentications per address is never reached.
func TestAuthMatrix_Scopes(t *testing.T) {
	tok := func(role, subject string, pools []string) func(*testing.T, *scopeWorld) string {
		return func(t *testing.T, w *scopeWorld) string { return w.token(t, role, subject, pools, 0) }
	}
	// mint is an ID token of subject alice in group, expiring in exp (0:
	// an hour).
	mint := func(group string, exp time.Duration) func(*testing.T, *scopeWorld) string {
		return func(t *testing.T, w *scopeWorld) string {
			c := map[string]any{"sub": "alice", "groups": []string{group}}
			if exp != 0 {
				c["exp"] = w.e.clock.Now().Add(exp).Unix()
			}
			return w.op.Mint(c)
		}
	}
	creds := []cred{
		{name: "none", secret: func(*testing.T, *scopeWorld) string { return "" }},
		{name: "forged", secret: func(*testing.T, *scopeWorld) string { return "vdbt_forged-0123456789abcdef" }},
		{name: "expired", secret: func(t *testing.T, w *scopeWorld) string {
			s := w.token(t, "Contributor", "late", nil, 60)
			w.e.clock.Advance(61 * time.Second)
			return s
		}},
		{name: "revoked", secret: func(t *testing.T, w *scopeWorld) string {
			tr, err := w.e.admin.CreateToken(context.Background(), vhttp.TokenRequest{Role: "Contributor", Subject: "gone"})
			if err != nil {
				t.Fatal(err)
			}
			if err := w.e.admin.DeleteToken(context.Background(), tr.ID); err != nil {
				t.Fatal(err)
			}
			return tr.Secret
		}},
		{name: "host credential of another pool", secret: func(t *testing.T, w *scopeWorld) string { return w.hostCred }},
		{name: "registration token", secret: func(t *testing.T, w *scopeWorld) string { return w.regSecret }},
		{name: "admin", role: "Admin", secret: func(*testing.T, *scopeWorld) string { return adminToken }},
		{name: "Reader", role: "Reader", secret: tok("Reader", "auditor", nil)},
		{name: "scoped Reader", role: "Reader", scoped: true, secret: tok("Reader", "pin-auditor", []string{"pin"})},
		{name: "Contributor", role: "Contributor", secret: tok("Contributor", "ops", nil)},
		{name: "scoped Contributor", role: "Contributor", scoped: true, secret: tok("Contributor", "pin-ops", []string{"pin"})},
		{name: "User alice", role: "User", user: "alice", secret: tok("User", "alice", nil)},
		{name: "scoped User alice", role: "User", user: "alice", scoped: true, secret: tok("User", "alice", []string{"pin"})},
		{name: "Gateway", role: "Gateway", secret: tok("Gateway", "rdgw-1", nil)},
		{name: "scoped Gateway", role: "Gateway", scoped: true, secret: tok("Gateway", "rdgw-1", []string{"pin"})},
		// The provider's ID tokens, their role and scope from testRoles.
		{name: "OIDC Reader", role: "Reader", secret: mint("readers", 0)},
		{name: "OIDC scoped Contributor", role: "Contributor", scoped: true, secret: mint("pin-ops", 0)},
		{name: "OIDC scoped User alice", role: "User", user: "alice", scoped: true, secret: mint("pin-users", 0)},
		{name: "OIDC expired", secret: mint("pin-ops", -time.Minute)},
		{name: "OIDC wrong audience", secret: func(t *testing.T, w *scopeWorld) string {
			return w.op.Mint(map[string]any{"sub": "alice", "groups": []string{"pin-ops"}, "aud": "someone-else"})
		}},
	}
	for _, k := range creds {
		t.Run(k.name, func(t *testing.T) {
			w := newScopeWorld(t)
			secret := k.secret(t, w)
			pools := []string{"pin"}
			if k.scoped {
				pools = []string{"pout", "pin"} // out of scope first: refusals change nothing
			}
			for _, pool := range pools {
				for _, c := range scopeCalls(w, pool) {
					wantStatus := want(k, c, pool)
					status, ve, raw := rawDo(t, w.e, c.method, c.path, secret, c.body)
					if status != wantStatus {
						t.Errorf("%s %s (%s) on %s: %d %s, want %d", c.method, c.path, c.name, pool, status, raw, wantStatus)
					}
					if status >= 400 && (ve == nil || ve.Message == "") {
						t.Errorf("%s: error answer without error body: %s", c.name, raw)
					}
					if k.scoped && (c.name == "list pools" || c.name == "list scaling plans") && status == 200 && strings.Contains(string(raw), "pout") {
						t.Errorf("scoped %s shows pool pout: %s", c.name, raw)
					}
				}
			}
			// The heartbeat takes only the host's own credential.
			hb := 401
			if k.name == "host credential of another pool" {
				hb = 200
			}
			if status, _, raw := rawDo(t, w.e, "POST", "/api/v1/agent/heartbeat", secret, `{"sessions": []}`); status != hb {
				t.Errorf("heartbeat: %d %s, want %d", status, raw, hb)
			}
		})
	}
}

// TestScopedToken_RSEC: a scoped token lists its scope, whoami shows it,
// and a scope naming a bad pool name is refused on its field.
func TestScopedToken_RSEC(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tr, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: "Contributor", Subject: "ops", HostPools: []string{"poolb", "poola", "poolb"}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(tr.HostPools, ",") != "poola,poolb" {
		t.Errorf("hostPools %v, want [a b] (sorted, unique)", tr.HostPools)
	}
	list, err := e.admin.ListTokens(ctx)
	if err != nil || len(list) != 1 || strings.Join(list[0].HostPools, ",") != "poola,poolb" {
		t.Errorf("list: %v %+v", err, list)
	}
	_, _, raw := rawDo(t, e, "GET", "/api/v1/whoami", tr.Secret, "")
	var me vhttp.WhoAmI
	if err := json.Unmarshal(raw, &me); err != nil || strings.Join(me.HostPools, ",") != "poola,poolb" || me.Kind != "token" {
		t.Errorf("whoami %s: %+v %v", raw, me, err)
	}
	_, err = e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: "Reader", Subject: "x", HostPools: []string{"bad name!"}})
	if ve := wantCode(t, err, vdibroker.EInvalid); ve.Field != "hostPools[0]" {
		t.Errorf("field %q, want hostPools[0]", ve.Field)
	}
}
