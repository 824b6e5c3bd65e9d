package identity_test

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/identity"
	"github.com/vdibroker/vdibroker/internal/testop"
)

func TestResolve(t *testing.T) {
	m := identity.RoleMap{Groups: map[string]identity.Grant{
		"all-ops": {Role: "Contributor"},
		"a-ops":   {Role: "Contributor", HostPools: []string{"pool-a"}},
		"b-ops":   {Role: "Contributor", HostPools: []string{"pool-b", "pool-a"}},
		"readers": {Role: "Reader"},
		"a-users": {Role: "User", HostPools: []string{"pool-a"}},
	}}
	tests := []struct {
		name   string
		groups []string
		role   string
		pools  []string
		ok     bool
	}{
		{"none mapped", []string{"x"}, "", nil, false},
		{"one scoped", []string{"a-ops"}, "Contributor", []string{"pool-a"}, true},
		// Both grant Contributor: the union of their pools, sorted, once.
		{"two scoped", []string{"b-ops", "a-ops"}, "Contributor", []string{"pool-a", "pool-b"}, true},
		// An unscoped grant of the same role makes it global.
		{"scoped and global", []string{"a-ops", "all-ops"}, "Contributor", nil, true},
		// The stronger role wins, with its own scope only: the Reader's
		// global read does not widen the Contributor's pools.
		{"stronger wins", []string{"readers", "a-ops"}, "Contributor", []string{"pool-a"}, true},
		{"reader over user", []string{"a-users", "readers"}, "Reader", nil, true},
		{"user", []string{"a-users"}, "User", []string{"pool-a"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			role, pools, ok := m.Resolve(tc.groups)
			if role != tc.role || ok != tc.ok || !cmp.Equal(pools, tc.pools) {
				t.Errorf("Resolve(%v) = %q %v %v, want %q %v %v", tc.groups, role, pools, ok, tc.role, tc.pools, tc.ok)
			}
		})
	}
}

func TestLoadRoleMap(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, text, err string
	}{
		{"good", "groups:\n  g1: {role: Reader}\n  g2: {role: User, hostPools: [pool-a]}\n", ""},
		{"admin is not mappable", "groups:\n  g1: {role: Admin}\n", "role must be"},
		{"unknown field", "groups:\n  g1: {role: Reader, pools: [x]}\n", "unknown"},
		{"bad pool name", "groups:\n  g1: {role: Reader, hostPools: ['a b!']}\n", "hostPools"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".yaml")
			if err := os.WriteFile(p, []byte(tc.text), 0o600); err != nil {
				t.Fatal(err)
			}
			m, err := identity.LoadRoleMap(p)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("load: %v", err)
			case tc.err == "" && len(m.Groups) != 2:
				t.Errorf("groups %v", m.Groups)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("err %v, want one containing %q", err, tc.err)
			}
		})
	}
}

// login drives the provider's login form for l and returns the code.
func login(t *testing.T, op *testop.OP, authURL, user, password string) string {
	t.Helper()
	u, err := url.Parse(authURL)
	if err != nil {
		t.Fatal(err)
	}
	form := u.Query()
	form.Set("username", user)
	form.Set("password", password)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.PostForm(op.Issuer+"/authorize", form)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	loc, err := url.Parse(res.Header.Get("Location"))
	if err != nil || res.StatusCode != http.StatusFound {
		t.Fatalf("login: %d %v", res.StatusCode, err)
	}
	if loc.Query().Get("state") != form.Get("state") {
		t.Fatalf("state %q came back as %q", form.Get("state"), loc.Query().Get("state"))
	}
	return loc.Query().Get("code")
}

// TestFinish: the code flow's checks: a good sign-in gives the mapped
// identity; a wrong PKCE verifier, a nonce that is not the sign-in's and
// a code used twice are refused.
func TestFinish(t *testing.T) {
	op := testop.Start(t, "cid", "sec", testop.User{Subject: "dave", Password: "pw", Name: "dave@example.test", Groups: []string{"g"}})
	p, err := identity.New(context.Background(), identity.Config{Issuer: op.Issuer, ClientID: "cid", ClientSecret: "sec",
		Roles: identity.RoleMap{Groups: map[string]identity.Grant{"g": {Role: "Reader", HostPools: []string{"pool-a"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	const redirect = "http://127.0.0.1:1/signin/oidc/callback"
	ctx := context.Background()

	l, authURL := p.NewLogin(redirect)
	if !strings.Contains(authURL, "code_challenge_method=S256") || !strings.Contains(authURL, "nonce=") {
		t.Fatalf("authorization URL without PKCE or nonce: %s", authURL)
	}
	code := login(t, op, authURL, "dave", "pw")
	id, raw, err := p.Finish(ctx, l, code)
	if err != nil {
		t.Fatal(err)
	}
	if id.Subject != "dave" || id.Role != "Reader" || !cmp.Equal(id.HostPools, []string{"pool-a"}) || id.Name != "dave@example.test" || raw == "" {
		t.Errorf("identity %+v", id)
	}
	if _, _, err := p.Finish(ctx, l, code); vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated {
		t.Errorf("a code used twice: %v", err)
	}

	l, authURL = p.NewLogin(redirect)
	code = login(t, op, authURL, "dave", "pw")
	l.Verifier = "not-the-verifier-of-this-login-0123456789abcdefghij"
	if _, _, err := p.Finish(ctx, l, code); vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated {
		t.Errorf("a wrong PKCE verifier: %v", err)
	}

	l, authURL = p.NewLogin(redirect)
	code = login(t, op, authURL, "dave", "pw")
	l.Nonce = "another-nonce"
	if _, _, err := p.Finish(ctx, l, code); vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated || !strings.Contains(err.Error(), "nonce") {
		t.Errorf("a nonce not the sign-in's: %v", err)
	}
}
