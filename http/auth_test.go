package http_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestAuthRoles_RSEC: every role against every kind of call. Reader reads,
// Contributor does all admin calls but tokens, User connects only itself,
// the admin token does everything.
func TestAuthRoles_RSEC(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pool("authpool", nil)
	e.desktopFor("authpool", vdibroker.Assignments{Users: []string{"alice", "bob"}}) // R-E3: bob's refusal is the token's, not his
	e.addHosts("authpool", "authh", 2)
	mk := func(role, subject string) string {
		tr, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: role, Subject: subject})
		if err != nil {
			t.Fatalf("create %s token: %v", role, err)
		}
		if tr.Secret == "" || tr.ID == "" || tr.Role != role {
			t.Fatalf("token answer %+v", tr)
		}
		return tr.Secret
	}
	tokens := map[string]string{
		"Admin":       adminToken,
		"Contributor": mk("Contributor", "ops-team"),
		"Reader":      mk("Reader", "auditor"),
		"User":        mk("User", "alice"),
		"None":        "",
		"Bogus":       "vdbt_not-a-real-token",
	}
	type call struct {
		name, method, path, body string
	}
	calls := []call{
		{"list pools", "GET", "/api/v1/hostpools", ""},
		{"get pool", "GET", "/api/v1/hostpools/authpool", ""},
		{"list hosts", "GET", "/api/v1/hostpools/authpool/sessionhosts", ""},
		{"list sessions", "GET", "/api/v1/hostpools/authpool/usersessions", ""},
		{"patch pool", "PATCH", "/api/v1/hostpools/authpool", `{"description": "x"}`},
		{"registration token", "POST", "/api/v1/hostpools/authpool/registrationtoken", `{}`},
		{"connect alice", "POST", "/api/v1/hostpools/authpool/connect", `{"user": "alice", "dryRun": true}`},
		{"connect bob", "POST", "/api/v1/hostpools/authpool/connect", `{"user": "bob", "dryRun": true}`},
		{"list tokens", "GET", "/api/v1/tokens", ""},
		{"create token", "POST", "/api/v1/tokens", `{"role": "Reader", "subject": "x"}`},
		{"whoami", "GET", "/api/v1/whoami", ""},
	}
	// want[role][call] = status
	want := map[string]map[string]int{
		"Admin":       {"list pools": 200, "get pool": 200, "list hosts": 200, "list sessions": 200, "patch pool": 200, "registration token": 201, "connect alice": 200, "connect bob": 200, "list tokens": 200, "create token": 201, "whoami": 200},
		"Contributor": {"list pools": 200, "get pool": 200, "list hosts": 200, "list sessions": 200, "patch pool": 200, "registration token": 201, "connect alice": 200, "connect bob": 200, "list tokens": 403, "create token": 403, "whoami": 200},
		"Reader":      {"list pools": 200, "get pool": 200, "list hosts": 200, "list sessions": 200, "patch pool": 403, "registration token": 403, "connect alice": 403, "connect bob": 403, "list tokens": 403, "create token": 403, "whoami": 200},
		"User":        {"list pools": 403, "get pool": 403, "list hosts": 403, "list sessions": 403, "patch pool": 403, "registration token": 403, "connect alice": 200, "connect bob": 403, "list tokens": 403, "create token": 403, "whoami": 200},
		"None":        {},
		"Bogus":       {},
	}
	for role, tok := range tokens {
		for _, c := range calls {
			t.Run(role+"/"+c.name, func(t *testing.T) {
				w, ok := want[role][c.name]
				if !ok {
					w = 401
				}
				status, ve, raw := rawDo(t, e, c.method, c.path, tok, c.body)
				if status != w {
					t.Fatalf("%s %s as %s: %d %s, want %d", c.method, c.path, role, status, raw, w)
				}
				if status >= 400 && (ve == nil || ve.Message == "") {
					t.Errorf("error answer without error body: %s", raw)
				}
			})
		}
	}
	// Healthz and the agent endpoints need no API token.
	if status, _, _ := rawDo(t, e, "GET", "/healthz", "", ""); status != 200 {
		t.Errorf("healthz: %d", status)
	}
}

// TestTokens_RSEC: secrets are shown once and never listed; deleted and
// expired tokens stop working; bad requests name the field.
// TestWhoAmI: every token learns its own role and subject (the console
// shows a Reader no buttons that would be refused).
func TestWhoAmI(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, role := range []string{"Contributor", "Reader", "User"} {
		tr, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: role, Subject: "s-" + role})
		if err != nil {
			t.Fatal(err)
		}
		me, err := e.client(0, tr.Secret).WhoAmI(ctx)
		if err != nil || me.Role != role || me.Subject != "s-"+role || me.TokenID != tr.ID {
			t.Errorf("%s token: whoami %+v, %v; want role %s, subject s-%s, id %s", role, me, err, role, role, tr.ID)
		}
	}
	if me, err := e.admin.WhoAmI(ctx); err != nil || me.Role != "Admin" {
		t.Errorf("admin token: whoami %+v, %v", me, err)
	}
}

func TestTokens_RSEC(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tr, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: "Reader", Subject: "auditor", ExpiresInSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	if tr.ExpireTime == nil || !strings.HasPrefix(tr.Secret, "vdbt_") {
		t.Errorf("token answer %+v", tr)
	}
	reader := e.client(0, tr.Secret)
	if _, err := reader.ListHostPools(ctx); err != nil {
		t.Fatalf("reader: %v", err)
	}
	_, _, raw := rawDo(t, e, "GET", "/api/v1/tokens", adminToken, "")
	if strings.Contains(string(raw), tr.Secret) || strings.Contains(string(raw), `"token"`) || strings.Contains(string(raw), "hash") {
		t.Errorf("token list shows secrets: %s", raw)
	}
	list, err := e.admin.ListTokens(ctx)
	if err != nil || len(list) != 1 || list[0].ID != tr.ID || list[0].Subject != "auditor" {
		t.Errorf("list: %v %+v", err, list)
	}
	e.clock.Advance(601 * time.Second)
	_, err = reader.ListHostPools(ctx)
	wantCode(t, err, vdibroker.EUnauthenticated, "expired")

	tr2, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: "Contributor", Subject: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.admin.DeleteToken(ctx, tr2.ID); err != nil {
		t.Fatal(err)
	}
	_, err = e.client(0, tr2.Secret).ListHostPools(ctx)
	wantCode(t, err, vdibroker.EUnauthenticated)
	wantCode(t, e.admin.DeleteToken(ctx, tr2.ID), vdibroker.ENotFound)

	for _, bad := range []struct {
		req   vhttp.TokenRequest
		field string
	}{
		{vhttp.TokenRequest{Role: "Admin", Subject: "x"}, "role"},
		{vhttp.TokenRequest{Role: "User"}, "subject"},
		{vhttp.TokenRequest{Role: "Reader", Subject: "x", ExpiresInSeconds: 59}, "expiresInSeconds"},
		{vhttp.TokenRequest{Role: "Reader", Subject: "x", ExpiresInSeconds: 315360001}, "expiresInSeconds"},
	} {
		_, err := e.admin.CreateToken(ctx, bad.req)
		if ve := wantCode(t, err, vdibroker.EInvalid); ve.Field != bad.field {
			t.Errorf("%+v: field %q, want %q", bad.req, ve.Field, bad.field)
		}
	}
}

// TestTokenRefusalSaysWhy_RSEC: a refused API token whose whole secret
// matched says why, "expired" or "revoked" (an admin's token delete); a
// secret that matches no token, however near one, says only "invalid
// token", so a caller without a secret learns nothing of which tokens
// exist. The revoked token is remembered as long as history; after the
// prune it is an invalid token again.
func TestTokenRefusalSaysWhy_RSEC(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tr, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: "Contributor", Subject: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.admin.DeleteToken(ctx, tr.ID); err != nil {
		t.Fatal(err)
	}
	expiring, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: "Reader", Subject: "auditor", ExpiresInSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(601 * time.Second)
	// The revoked secret with its last character changed: a secret of no
	// token, one character from one.
	near := tr.Secret[:len(tr.Secret)-1] + "a"
	if strings.HasSuffix(tr.Secret, "a") {
		near = tr.Secret[:len(tr.Secret)-1] + "b"
	}
	for _, c := range []struct {
		name, secret, want string
		unwanted           []string
	}{
		{"revoked", tr.Secret, "token revoked at", []string{"expired"}},
		{"expired", expiring.Secret, "token expired at", []string{"revoked"}},
		{"one character off a revoked one", near, "invalid token", []string{"revoked", "expired", tr.ID}},
		{"unknown", "vdbt_0123456789abcdef0123456789abcdef", "invalid token", []string{"revoked", "expired"}},
	} {
		status, ve, raw := rawDo(t, e, "GET", "/api/v1/hostpools", c.secret, "")
		if status != http.StatusUnauthorized || ve == nil || ve.Code != vdibroker.EUnauthenticated || !strings.Contains(ve.Message, c.want) {
			t.Errorf("%s token: %d %s, want 401 saying %q", c.name, status, raw, c.want)
			continue
		}
		for _, u := range c.unwanted {
			if strings.Contains(ve.Message, u) {
				t.Errorf("%s token: %q says %q", c.name, ve.Message, u)
			}
		}
	}
	// Past the history's retention the revocation is forgotten (bounded,
	// as the expired tokens are pruned then).
	if _, err := e.store.PruneHistory(ctx, e.clock.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	for name, secret := range map[string]string{"revoked": tr.Secret, "expired": expiring.Secret} {
		_, err := e.client(0, secret).ListHostPools(ctx)
		if ve := wantCode(t, err, vdibroker.EUnauthenticated, "invalid token"); strings.Contains(ve.Message, name) {
			t.Errorf("the %s token after the prune: %q", name, ve.Message)
		}
	}
}

// TestPaging_SPEC9: every list pages with ?limit= and nextLink; the client
// follows nextLink to the end; bad limits are refused.
func TestPaging_SPEC9(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for i := range 7 {
		e.pool(fmt.Sprintf("page%02d", i), nil)
	}
	e.addHosts("page00", "pgh", 5)
	for i := range 9 {
		e.mustConnect("page00", fmt.Sprintf("user%02d", i))
	}
	for i := range 4 {
		if _, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: "Reader", Subject: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}

	status, _, raw := rawDo(t, e, "GET", "/api/v1/hostpools?limit=3", adminToken, "")
	if status != 200 || !strings.Contains(string(raw), `"nextLink":"/api/v1/hostpools?after=page02\u0026limit=3"`) {
		t.Errorf("first page: %d %s", status, raw)
	}
	status, _, raw = rawDo(t, e, "GET", "/api/v1/hostpools?after=page05&limit=3", adminToken, "")
	if status != 200 || strings.Contains(string(raw), "nextLink") || !strings.Contains(string(raw), "page06") {
		t.Errorf("last page: %d %s", status, raw)
	}

	small := e.client(0, adminToken)
	small.PageSize = 2
	pools, err := small.ListHostPools(ctx)
	if err != nil || len(pools) != 7 {
		t.Errorf("pools: %v, %d", err, len(pools))
	}
	hosts, err := small.ListSessionHosts(ctx, "page00")
	if err != nil || len(hosts) != 5 || hosts[0].Name != "pgh001" || hosts[4].Name != "pgh005" {
		t.Errorf("hosts: %v, %d", err, len(hosts))
	}
	sessions, err := small.ListUserSessions(ctx, "page00", vhttp.SessionQuery{})
	if err != nil || len(sessions) != 9 {
		t.Fatalf("sessions: %v, %d", err, len(sessions))
	}
	seen := map[string]bool{}
	for _, s := range sessions {
		if seen[s.ID] {
			t.Errorf("session %s listed twice", s.ID)
		}
		seen[s.ID] = true
	}
	filtered, err := small.ListUserSessions(ctx, "page00", vhttp.SessionQuery{User: "user03"})
	if err != nil || len(filtered) != 1 {
		t.Errorf("?user=: %v %d", err, len(filtered))
	}
	onHost, err := small.ListUserSessions(ctx, "page00", vhttp.SessionQuery{SessionHost: sessions[0].SessionHost})
	if err != nil || len(onHost) == 0 || len(onHost) == 9 {
		t.Errorf("?sessionHost=: %v %d", err, len(onHost))
	}
	tokens, err := small.ListTokens(ctx)
	if err != nil || len(tokens) != 4 {
		t.Errorf("tokens: %v, %d", err, len(tokens))
	}

	for _, q := range []string{"limit=0", "limit=1001", "limit=x", "limit=-5"} {
		status, ve, raw := rawDo(t, e, "GET", "/api/v1/hostpools?"+q, adminToken, "")
		if status != 400 || ve == nil || ve.Field != "limit" || !strings.Contains(ve.Message, "1..1000") {
			t.Errorf("%s: %d %s", q, status, raw)
		}
	}
	status, ve, _ := rawDo(t, e, "GET", "/api/v1/hostpools/page00/usersessions?state=Gone", adminToken, "")
	if status != 400 || ve == nil || ve.Field != "state" {
		t.Errorf("?state=Gone: %d %v", status, ve)
	}
}
