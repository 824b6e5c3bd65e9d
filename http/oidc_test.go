package http_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/identity"
	"github.com/vdibroker/vdibroker/internal/testop"
)

var testRoles = identity.RoleMap{Groups: map[string]identity.Grant{
	"pin-ops":   {Role: "Contributor", HostPools: []string{"pin"}},
	"readers":   {Role: "Reader"},
	"pin-users": {Role: "User", HostPools: []string{"pin"}},
}}

// oidcEnv is a server that accepts the test provider's tokens.
func oidcEnv(t *testing.T) (*env, *testop.OP) {
	t.Helper()
	op := testop.Start(t, "vdibroker-test", "s3cret")
	e := newEnvWith(t, envOptions{maintenance: time.Hour, oidc: mustProvider(t, op)})
	op.Now = e.clock.Now
	return e, op
}

func mustProvider(t *testing.T, op *testop.OP) *identity.Provider {
	t.Helper()
	p, err := identity.New(context.Background(), identity.Config{Issuer: op.Issuer, ClientID: op.ClientID,
		ClientSecret: op.ClientSecret, Roles: testRoles, Now: func() time.Time { return op.Now() }})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOIDCBearer: the provider's ID token is a bearer token of the API with
// the role and scope its groups map to; a wrong audience, an expired token,
// another issuer's token and a token of no mapped group are refused; a User
// connects only as the token's subject.
func TestOIDCBearer(t *testing.T) {
	e, op := oidcEnv(t)
	for _, p := range []string{"pin", "pout"} {
		e.pool(p, nil)
		e.addHosts(p, p+"h", 1)
	}
	// The SSO user is entitled through the groups claim, in another case
	// (R-E2, R-E5, R-E6).
	e.desktopFor("pin", vdibroker.Assignments{Groups: []string{"PIN-Users"}})
	e.desktopFor("pout", vdibroker.Assignments{AllUsers: true})
	other := testop.Start(t, "vdibroker-test", "s3cret") // same client id, another issuer and key
	ops := op.Mint(map[string]any{"sub": "u-123", "groups": []string{"pin-ops", "unrelated"}})

	status, _, raw := rawDo(t, e, "GET", "/api/v1/whoami", ops, "")
	var me vhttp.WhoAmI
	_ = json.Unmarshal(raw, &me)
	if status != 200 || me.Kind != "oidc" || me.Subject != "u-123" || me.Role != "Contributor" || len(me.HostPools) != 1 || me.HostPools[0] != "pin" {
		t.Fatalf("whoami with an ID token: %d %s", status, raw)
	}
	for _, c := range []struct {
		name, method, path, body string
		want                     int
	}{
		{"list pools", "GET", "/api/v1/hostpools", "", 200},
		{"patch in scope", "PATCH", "/api/v1/hostpools/pin", `{"description": "by oidc"}`, 200},
		{"patch out of scope", "PATCH", "/api/v1/hostpools/pout", `{"description": "x"}`, 403},
		{"read out of scope", "GET", "/api/v1/hostpools/pout", "", 404},
		{"tokens", "GET", "/api/v1/tokens", "", 403},
	} {
		if status, _, raw := rawDo(t, e, c.method, c.path, ops, c.body); status != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, status, raw, c.want)
		}
	}
	a, _, after := oneEntry(t, e, "hostpool.update", "hostpools/pin")
	if a.Principal.Kind != "oidc" || a.Principal.ID != "u-123" || a.Principal.Role != "Contributor" || after["description"] != "by oidc" {
		t.Errorf("audit entry of an OIDC change: %+v", a)
	}

	user := op.Mint(map[string]any{"sub": "alice", "groups": []string{"pin-users"}})
	for _, c := range []struct {
		name, path, body string
		want             int
	}{
		{"user as itself", "/api/v1/hostpools/pin/connect", `{"user": "alice", "dryRun": true}`, 200},
		{"user as another", "/api/v1/hostpools/pin/connect", `{"user": "bob", "dryRun": true}`, 403},
		{"user out of scope", "/api/v1/hostpools/pout/connect", `{"user": "alice", "dryRun": true}`, 403},
	} {
		if status, _, raw := rawDo(t, e, "POST", c.path, user, c.body); status != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, status, raw, c.want)
		}
	}

	for _, c := range []struct {
		name string
		tok  string
		want int
	}{
		{"wrong audience", op.Mint(map[string]any{"sub": "u-1", "groups": []string{"readers"}, "aud": "another-client"}), 401},
		{"expired", op.Mint(map[string]any{"sub": "u-1", "groups": []string{"readers"}, "exp": e.clock.Now().Add(-time.Minute).Unix()}), 401},
		{"another issuer", other.Mint(map[string]any{"sub": "u-1", "groups": []string{"readers"}}), 401},
		{"another issuer named as ours", func() string {
			return other.Mint(map[string]any{"sub": "u-1", "groups": []string{"readers"}, "iss": op.Issuer})
		}(), 401},
		{"no mapped group", op.Mint(map[string]any{"sub": "u-1", "groups": []string{"nobody"}}), 403},
		{"reader", op.Mint(map[string]any{"sub": "u-1", "groups": []string{"readers"}}), 200},
	} {
		status, ve, raw := rawDo(t, e, "GET", "/api/v1/hostpools", c.tok, "")
		if status != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, status, raw, c.want)
		}
		if status == 401 && (ve == nil || ve.Code != vdibroker.EUnauthenticated) {
			t.Errorf("%s: %s", c.name, raw)
		}
	}
	// The token expires while in use.
	e.clock.Advance(2 * time.Hour)
	if status, _, _ := rawDo(t, e, "GET", "/api/v1/whoami", ops, ""); status != 401 {
		t.Errorf("an ID token past its exp: %d, want 401", status)
	}
}
