//go:build unix

package main

import (
	"database/sql"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/testop"
)

// signinCSRF is the sign-in form's CSRF field.
var signinCSRF = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// tokenSignIn signs c in to the console at base with token and returns
// the answer's status.
func tokenSignIn(t *testing.T, c *http.Client, base, token string) int {
	t.Helper()
	_, page := getBody(t, c, base+"/signin")
	m := signinCSRF.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF field on %s/signin", base)
	}
	req, _ := http.NewRequest("POST", base+"/signin", strings.NewReader(url.Values{"csrf": {m[1]}, "token": {token}, "next": {"/"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	res, err := noRedirects(c).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// TestReplicasShareSignIns (R-SEC, R-D1): replicas A and B of serve on one
// PostgreSQL database, each with a data dir of its own and neither with
// VDIBROKER_ADMIN_TOKEN, behind one external URL (a load balancer):
//   - A, started first, makes the admin token (its admin.token); B makes
//     none and accepts A's;
//   - a console sign-in on A is honoured by B, and after B restarts;
//   - a single sign-on started on A (500 anonymous starts before it store
//     nothing) comes back to B and signs in there;
//   - A restarted keeps its token;
//   - one principal's sign-ins are bounded across both: 16 sessions, the
//     rest refused within the minute.
func TestReplicasShareSignIns(t *testing.T) {
	dsn := e2ePostgresDSN(t)
	t.Setenv("VDIBROKER_ADMIN_TOKEN", "")
	const external = "http://vdi.example.test"
	op := testop.Start(t, "vdibroker-console", "console-secret",
		testop.User{Subject: "carol", Password: "pw-carol", Groups: []string{"pin-ops"}})
	dir := t.TempDir()
	roles, secret := filepath.Join(dir, "roles.yaml"), filepath.Join(dir, "secret")
	os.WriteFile(roles, []byte(oidcRoles), 0o600)
	os.WriteFile(secret, []byte("console-secret\n"), 0o600)
	open := func(name string) *Main {
		t.Helper()
		m := &Main{Listen: "127.0.0.1:0", DataDir: filepath.Join(dir, name), Database: dsn,
			Federation: FederationFlags{ExternalURL: external},
			OIDC:       OIDCFlags{Issuer: op.Issuer, ClientID: op.ClientID, ClientSecretFile: secret, RoleMapFile: roles, GroupsClaim: "groups"}}
		if err := m.Open(t.Context()); err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	a := open("a")
	b := open("b")
	if a.AdminToken == "" || b.AdminToken != "" {
		t.Fatalf("admin tokens: A %q, B %q; want A's only", a.AdminToken, b.AdminToken)
	}
	if _, err := os.Stat(filepath.Join(dir, "b", "admin.token")); err == nil {
		t.Error("B made an admin.token of its own")
	}
	tokenA := a.AdminToken
	whoami := func(m *Main) error {
		_, err := vhttp.NewClient(m.URL(), tokenA).WhoAmI(t.Context())
		return err
	}
	if err := whoami(b); err != nil {
		t.Fatalf("A's admin token on B: %v", err)
	}

	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	count := func(q string) int {
		var n int
		if err := db.QueryRow(q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Console: signed in on A, the same cookie on B (the jar sends
	// 127.0.0.1's cookies to both ports, as one site behind a balancer).
	c := jarClient()
	if s := tokenSignIn(t, c, a.URL(), tokenA); s != http.StatusSeeOther {
		t.Fatalf("sign in on A: %d", s)
	}
	if res, body := getBody(t, c, b.URL()+"/"); res.StatusCode != 200 || res.Request.URL.Path != "/" || !strings.Contains(body, "Sign out") {
		t.Fatalf("A's console cookie on B: %d at %s", res.StatusCode, res.Request.URL)
	}

	// Single sign-on: nothing is stored for a start.
	sessions, audits := count(`SELECT count(*) FROM web_sessions`), count(`SELECT count(*) FROM audit_log`)
	for range 500 {
		res, err := noRedirects(&http.Client{}).Get(a.URL() + "/signin/oidc")
		if err != nil || res.StatusCode != http.StatusSeeOther {
			t.Fatalf("start: %v", err)
		}
		res.Body.Close()
	}
	if s, au := count(`SELECT count(*) FROM web_sessions`), count(`SELECT count(*) FROM audit_log`); s != sessions || au != audits {
		t.Errorf("500 anonymous sign-in starts stored %d sessions and %d audit rows", s-sessions, au-audits)
	}
	sso := jarClient()
	cb := oidcLogin(t, a.URL(), sso, "carol", "pw-carol")
	if !strings.HasPrefix(cb, external+"/signin/oidc/callback?") {
		t.Fatalf("the provider sends the browser to %q, want the external URL", cb)
	}
	// The balancer sends the callback to B.
	if res, body := getBody(t, sso, b.URL()+strings.TrimPrefix(cb, external)); res.StatusCode != 200 || !strings.Contains(body, `data-pool`) && !strings.Contains(body, "Sign out") {
		t.Errorf("a sign-in started on A, finished on B: %d at %s\n%s", res.StatusCode, res.Request.URL, body)
	}

	// B restarts: the sign-in and A's token hold.
	b.Close()
	b = open("b")
	if res, _ := getBody(t, c, b.URL()+"/"); res.Request.URL.Path != "/" {
		t.Errorf("after B's restart the console cookie is sent to %s", res.Request.URL.Path)
	}
	if err := whoami(b); err != nil {
		t.Errorf("A's token on B restarted: %v", err)
	}
	a.Close()
	a = open("a")
	if a.AdminToken != tokenA {
		t.Errorf("A restarted has token %q, want its own %q", a.AdminToken, tokenA)
	}

	// One principal's sign-ins, on both replicas: 16 sessions at most.
	refused := 0
	for i := range 20 {
		m := a
		if i%2 == 1 {
			m = b
		}
		switch s := tokenSignIn(t, jarClient(), m.URL(), tokenA); s {
		case http.StatusSeeOther:
		case http.StatusTooManyRequests:
			refused++
		default:
			t.Fatalf("sign-in %d: %d", i, s)
		}
	}
	if n := count(`SELECT count(*) FROM web_sessions WHERE principal = 'admin'`); n != 16 || refused != 5 {
		t.Errorf("admin sessions %d, refused %d; want 16 kept (1 before, 15 of the 20) and 5 refused", n, refused)
	}
	if n := count(`SELECT count(*) FROM shared_values WHERE name = '` + vdibroker.SharedAdminTokenHash + `' AND value = '` + vdibroker.HashSecret(tokenA) + `'`); n != 1 {
		t.Errorf("the stored admin hash is not A's token's")
	}
}
