package main

import (
	"strings"
	"testing"
)

// TestCLIReadsAsTheTokensUser (R-E5, R-E10, R-U3): a User token may ask
// only about its own user, so user entitlements without --user, and
// usersession list with neither --host-pool nor --user, answer for that
// user (the CLI asks the broker whose the token is), as connect does.
// Any other token may ask about anyone: without --user it is a usage
// error saying --user is required with its role. --user "" is refused as
// before, and --state without --host-pool is a usage error before
// anything is asked.
func TestCLIReadsAsTheTokensUser(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "office")
	b.addHost("office", "office-01")
	b.ok("applicationgroup", "create", "--name", "office-dag", "--host-pool", "office", "--application-group-type", "Desktop", "--users", "carol@contoso.com")
	carolSession := strings.TrimSpace(b.ok("connect", "--host-pool", "office", "--user", "carol@contoso.com", "--query", "sessionId", "-o", "tsv"))
	b.ok("connect", "--host-pool", "office", "--user", "dave@contoso.com")
	carol := strings.TrimSpace(b.ok("token", "create", "--role", "User", "--subject", "carol@contoso.com", "--query", "token", "-o", "tsv"))
	reader := strings.TrimSpace(b.ok("token", "create", "--role", "Reader", "--subject", "ops", "--query", "token", "-o", "tsv"))
	as := func(token string, args ...string) cliResult {
		t.Helper()
		return runCLI(t, append(args, "--server", b.m.URL(), "--token", token)...)
	}

	// Her token without --user: her entitlements, her sessions.
	if r := as(carol, "user", "entitlements", "--query", "[user, resources[].applicationGroup]", "-o", "tsv"); r.code != 0 || r.stdout != "carol@contoso.com\noffice-dag\n" {
		t.Errorf("her user entitlements without --user: exit %d, stdout %q, stderr %q; want her office-dag", r.code, r.stdout, r.stderr)
	}
	if r := as(carol, "usersession", "list", "--query", "[].[user, hostPool, id]", "-o", "tsv"); r.code != 0 || r.stdout != "carol@contoso.com\toffice\t"+carolSession+"\n" {
		t.Errorf("her usersession list without --user: exit %d, stdout %q, stderr %q; want her one session", r.code, r.stdout, r.stderr)
	}
	// With --user of another user, the broker refuses as before.
	if r := as(carol, "user", "entitlements", "--user", "dave@contoso.com"); r.code != 1 || !strings.Contains(r.stderr, "may ask only about its own user") {
		t.Errorf("her user entitlements of dave: exit %d, stderr %q; want the broker's refusal", r.code, r.stderr)
	}

	for _, tc := range []struct {
		name, token string
		args        []string
		code        int
		want        string
	}{
		{"admin user entitlements", b.m.AdminToken, []string{"user", "entitlements"}, 2,
			"--user: required with this token (role Admin): only a User token asks about its own user without it"},
		{"Reader user entitlements", reader, []string{"user", "entitlements"}, 2, "--user: required with this token (role Reader)"},
		{"Reader usersession list", reader, []string{"usersession", "list"}, 2,
			"give --host-pool, or --user for the user's open sessions in every pool: only a User token lists its own without them (this token's role is Reader)"},
		{"User user entitlements --user \"\"", carol, []string{"user", "entitlements", "--user", ""}, 2, `--user "": must not be empty`},
		{"User usersession list --user \"\"", carol, []string{"usersession", "list", "--user", ""}, 2, `--user "": must not be empty`},
		{"User usersession list --state", carol, []string{"usersession", "list", "--state", "Active"}, 2, "--state and --session-host need --host-pool"},
		{"refused token", "vdbt_not-a-token", []string{"user", "entitlements"}, 1, "the broker refused the token"},
	} {
		if r := as(tc.token, tc.args...); r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want %d and %q", tc.name, r.code, r.stderr, tc.code, tc.want)
		}
	}
	// Others with --user as before.
	if r := as(reader, "user", "entitlements", "--user", "carol@contoso.com", "--query", "resources[].applicationGroup", "-o", "tsv"); r.code != 0 || r.stdout != "office-dag\n" {
		t.Errorf("Reader user entitlements --user carol: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := as(reader, "usersession", "list", "--user", "dave@contoso.com", "--query", "[].user", "-o", "tsv"); r.code != 0 || r.stdout != "dave@contoso.com\n" {
		t.Errorf("Reader usersession list --user dave: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}
