package main

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestCLIConnectAsTheTokensUser (R-E5): a User token may connect only its
// own user, so connect and application connect without --user connect
// that user (the CLI asks the broker whose the token is); with --user it
// is as before. Any other token (the admin's, a Contributor's) may
// connect anyone: without --user it is a usage error saying --user is
// required with that token, and nothing is placed. --user "" is refused
// as before, not taken for "the token's user". A token the broker
// refuses is told so by whoami, and nothing is placed either.
func TestCLIConnectAsTheTokensUser(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "office")
	b.addHost("office", "office-01")
	b.ok("applicationgroup", "create", "--name", "office-dag", "--host-pool", "office", "--application-group-type", "Desktop", "--users", "carol@contoso.com")
	b.ok("applicationgroup", "create", "--name", "office-apps", "--host-pool", "office", "--application-group-type", "RemoteApp", "--users", "carol@contoso.com")
	b.ok("application", "create", "--application-group", "office-apps", "--name", "word", "--file-path", `C:\Program Files\Microsoft Office\WINWORD.EXE`)
	carol := strings.TrimSpace(b.ok("token", "create", "--role", "User", "--subject", "carol@contoso.com", "--query", "token", "-o", "tsv"))
	contributor := strings.TrimSpace(b.ok("token", "create", "--role", "Contributor", "--subject", "ops", "--query", "token", "-o", "tsv"))
	as := func(token string, args ...string) cliResult {
		t.Helper()
		return runCLI(t, append(args, "--server", b.m.URL(), "--token", token)...)
	}
	desktop := []string{"connect", "--host-pool", "office"}
	app := []string{"application", "connect", "--application-group", "office-apps", "--name", "word"}
	sessions := func() string {
		t.Helper()
		return b.ok("usersession", "list", "--host-pool", "office", "--query", "[].user", "-o", "tsv")
	}

	// Refused first, so that nothing placed below hides a placement here.
	for _, tc := range []struct {
		name, token string
		args        []string
		want        string
	}{
		{"admin connect", b.m.AdminToken, desktop, "--user: required with this token (role Admin): only a User token connects its own user without it"},
		{"Contributor connect", contributor, desktop, "--user: required with this token (role Contributor)"},
		{"Contributor application connect", contributor, app, "--user: required with this token (role Contributor)"},
		{"User connect --user \"\"", carol, append(desktop, "--user", ""), `--user "": must not be empty`},
		{"User application connect --user \"\"", carol, append(app, "--user", ""), `--user "": must not be empty`},
	} {
		r := as(tc.token, tc.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want 2 and %q", tc.name, r.code, r.stderr, tc.want)
		}
	}
	// A token the broker refuses: whoami's answer, as any command's, and
	// no connect after it.
	if r := as("vdbt_not-a-token", desktop...); r.code != 1 || !strings.Contains(r.stderr, "the broker refused the token") {
		t.Errorf("connect without --user with a token the broker refuses: exit %d, stderr %q; want 1 and the refusal", r.code, r.stderr)
	}
	if got := sessions(); got != "" {
		t.Fatalf("sessions after the refused connects: %q, want none", got)
	}

	// Her token without --user: her session, her application.
	if r := as(carol, append(desktop, "--query", "user", "-o", "tsv")...); r.code != 0 || r.stdout != "carol@contoso.com\n" {
		t.Errorf("her connect without --user: exit %d, stdout %q, stderr %q; want her own session", r.code, r.stdout, r.stderr)
	}
	if r := as(carol, append(app, "--query", "[user, rdpFile]", "-o", "tsv")...); r.code != 0 || !strings.HasPrefix(r.stdout, "carol@contoso.com\n") || !strings.Contains(r.stdout, "remoteapplicationprogram:s:||word") {
		t.Errorf("her application connect without --user: exit %d, stdout %q, stderr %q; want word for her", r.code, r.stdout, r.stderr)
	}
	// With --user as before: her own name, in any case, is her session;
	// another's is refused by the broker.
	if r := as(carol, append(desktop, "--user", "Carol@Contoso.com", "--query", "reconnect", "-o", "tsv")...); r.code != 0 || r.stdout != "true\n" {
		t.Errorf("her connect with --user of her own name: exit %d, stdout %q, stderr %q; want her session again", r.code, r.stdout, r.stderr)
	}
	if r := as(carol, append(desktop, "--user", "dave@contoso.com")...); r.code != 1 || !strings.Contains(r.stderr, "may connect only its own user") {
		t.Errorf("her connect of another user: exit %d, stderr %q; want the broker's refusal", r.code, r.stderr)
	}
	// An admin with --user as before.
	if r := as(b.m.AdminToken, append(desktop, "--user", "erin@contoso.com", "--query", "user", "-o", "tsv")...); r.code != 0 || r.stdout != "erin@contoso.com\n" {
		t.Errorf("admin connect --user erin: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if got := sessions(); got != "carol@contoso.com\nerin@contoso.com\n" {
		t.Errorf("sessions: %q, want carol's (one, the application's in it) and erin's", got)
	}
}

// TestCLIConnectWithARoleThatConnectsNoOne (R-SEC): a Reader or Helpdesk
// token may connect no user. connect and application connect without
// --user told it "--user: required with this token", though with --user
// the broker refuses it all the same; now it is told what the broker
// would say (whoami's role), exit 1 as the broker's refusal, and no
// connect is sent: the audit trail holds the refusal of the one connect
// with --user alone.
func TestCLIConnectWithARoleThatConnectsNoOne(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "office")
	b.addHost("office", "office-01")
	b.ok("applicationgroup", "create", "--name", "office-apps", "--host-pool", "office", "--application-group-type", "RemoteApp", "--users", "carol@contoso.com")
	b.ok("application", "create", "--application-group", "office-apps", "--name", "word", "--file-path", `C:\Program Files\Microsoft Office\WINWORD.EXE`)
	desktop := []string{"connect", "--host-pool", "office"}
	app := []string{"application", "connect", "--application-group", "office-apps", "--name", "word"}
	for _, role := range []string{"Reader", "Helpdesk"} {
		subject := "ops-" + strings.ToLower(role)
		token := strings.TrimSpace(b.ok("token", "create", "--role", role, "--subject", subject, "--query", "token", "-o", "tsv"))
		as := func(args ...string) cliResult {
			t.Helper()
			return runCLI(t, append(args, "--server", b.m.URL(), "--token", token)...)
		}
		want := "error: role " + role + " may not connect users\n"
		for _, cmd := range [][]string{desktop, app} {
			if r := as(cmd...); r.code != 1 || r.stderr != want {
				t.Errorf("%s %v without --user: exit %d, stderr %q; want 1 and %q", role, cmd, r.code, r.stderr, want)
			}
		}
		if got := b.ok("audit", "list", "--principal", subject, "--query", "[].action", "-o", "tsv"); got != "" {
			t.Errorf("%s: audit entries %q after the connects without --user, want none: no connect sent", role, got)
		}
		// The broker's own answer to a connect with --user, word for word.
		if r := as(append(desktop, "--user", "carol@contoso.com")...); r.code != 1 || r.stderr != want {
			t.Errorf("%s connect --user carol: exit %d, stderr %q; want the broker's %q", role, r.code, r.stderr, want)
		}
		if got := b.ok("audit", "list", "--principal", subject, "--query", "length(@)", "-o", "tsv"); got != "1\n" {
			t.Errorf("%s: %q audit entries after the connect with --user, want its one refusal", role, got)
		}
	}
	if got := b.ok("usersession", "list", "--host-pool", "office", "-o", "json"); got != "[]\n" {
		t.Errorf("sessions after the refused connects: %q, want none", got)
	}
}

// TestCLIConnectWithARoleThisCLIDoesNotKnow (R-SEC): a token whose role
// this CLI does not know, as a newer broker may issue, is not refused
// with this build's table ("role Operator may not connect users", exit
// 1) when the broker may let it connect: without --user it is told to
// name the user (a usage error, exit 2), and no connect is sent.
// globalentitlement connect shares connectUser.
func TestCLIConnectWithARoleThisCLIDoesNotKnow(t *testing.T) {
	var mu sync.Mutex
	var calls []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls = append(calls, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path != "/api/v1/whoami" {
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error": {"code": "NotFound", "message": "not here"}}`))
			return
		}
		w.Write([]byte(`{"role": "Operator", "subject": "ops", "kind": "token"}`))
	}))
	t.Cleanup(srv.Close)
	const want = "--user: required with this token (role Operator)"
	for _, args := range [][]string{
		{"connect", "--host-pool", "office"},
		{"application", "connect", "--application-group", "office-apps", "--name", "word"},
	} {
		mu.Lock()
		calls = nil
		mu.Unlock()
		r := runCLI(t, append(args, "--server", srv.URL, "--token", "t")...)
		if r.code != 2 || !strings.Contains(r.stderr, want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", args, r.code, r.stderr, want)
		}
		mu.Lock()
		if !slices.Equal(calls, []string{"GET /api/v1/whoami"}) {
			t.Errorf("%v: calls %q, want whoami alone", args, calls)
		}
		mu.Unlock()
	}
}
