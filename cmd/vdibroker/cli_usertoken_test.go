//go:build unix

package main

import (
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker/internal/pgtest"
)

// startCLIBrokerOn is startCLIBroker on engine: the embedded SQLite, or a
// PostgreSQL schema of the test's own (skipped without
// VDIBROKER_TEST_POSTGRES_DSN).
func startCLIBrokerOn(t *testing.T, engine string) *cliBroker {
	t.Helper()
	m := &Main{Listen: "127.0.0.1:0", DataDir: t.TempDir()}
	if engine == "postgres" {
		m.Database = pgtest.SchemaDSN(t, "vdibroker_cli_usertoken_", "PostgreSQL CLI User token test")
	}
	if err := m.Open(t.Context()); err != nil {
		t.Fatalf("start broker: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return &cliBroker{tb: t, m: m}
}

// TestCLIUserTokenListsOwnSessionsInPool_RU3 (R-U3, R-E5, R-SEC): with a
// User token, usersession list --host-pool P lists her own open sessions
// in P, where it was refused ("role User may only ..."): the CLI asks
// the broker for hers (GET /users/{user}/sessions, which answers an end
// user about herself only) and keeps those in P, with --state and
// --session-host as filters. She sees no other user's session in P:
// not by default, not by naming another user in another case or in a
// spelling that folds to his name (the broker refuses), and not the
// session of a user whose name only looks like hers (a Cyrillic "о").
// Her own name in another case lists hers. A pool she has no session
// in, or that does not exist, lists nothing; --state LoggedOff is
// refused with what she may read; no read of a pool's list is sent for
// her (none refused in the audit trail). Any other token lists the
// pool's sessions as before. On SQLite and PostgreSQL: the store finds
// a user's sessions by the folded name.
func TestCLIUserTokenListsOwnSessionsInPool_RU3(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			b := startCLIBrokerOn(t, engine)
			for _, p := range []string{"office", "dev"} {
				b.ok("hostpool", "create", "--name", p)
				b.addHost(p, p+"-01")
			}
			connect := func(pool, user string) string {
				t.Helper()
				return strings.TrimSpace(b.ok("connect", "--host-pool", pool, "--user", user, "--query", "sessionId", "-o", "tsv"))
			}
			office := connect("office", "carol@contoso.com")
			dev := connect("dev", "Carol@Contoso.com")
			dave := connect("office", "dave@contoso.com")
			// A look-alike: "о" is Cyrillic, no spelling of carol's name (R-E5).
			lookalike := connect("office", "carol@contos\u043e.com")
			carol := strings.TrimSpace(b.ok("token", "create", "--role", "User", "--subject", "carol@contoso.com", "--query", "token", "-o", "tsv"))
			as := func(args ...string) cliResult {
				t.Helper()
				return runCLI(t, append(args, "--server", b.m.URL(), "--token", carol)...)
			}
			const ids = "[].[user, id]"

			for _, tc := range []struct {
				name string
				args []string
				want string
			}{
				{"her pool", []string{"--host-pool", "office"}, "carol@contoso.com\t" + office + "\n"},
				{"her other pool", []string{"--host-pool", "dev"}, "Carol@Contoso.com\t" + dev + "\n"},
				{"her name in another case", []string{"--host-pool", "office", "--user", "CAROL@CONTOSO.COM"}, "carol@contoso.com\t" + office + "\n"},
				{"her state", []string{"--host-pool", "office", "--state", "Pending"}, "carol@contoso.com\t" + office + "\n"},
				{"another state", []string{"--host-pool", "office", "--state", "Active"}, ""},
				{"her host", []string{"--host-pool", "office", "--session-host", "office-01"}, "carol@contoso.com\t" + office + "\n"},
				{"another host", []string{"--host-pool", "office", "--session-host", "dev-01"}, ""},
				{"a pool without hers", []string{"--host-pool", "nosuch"}, ""},
			} {
				r := as(append([]string{"usersession", "list", "--query", ids, "-o", "tsv"}, tc.args...)...)
				if r.code != 0 || r.stdout != tc.want {
					t.Errorf("%s: exit %d, stdout %q, stderr %q; want %q", tc.name, r.code, r.stdout, r.stderr, tc.want)
				}
			}
			if r := as("usersession", "list", "--host-pool", "office"); r.code != 0 || !strings.Contains(r.stdout, office) ||
				strings.Contains(r.stdout, dave) || strings.Contains(r.stdout, lookalike) || !strings.Contains(r.stdout, "SessionHost") {
				t.Errorf("her table of office: exit %d\n%s%s\nwant her session alone, in the pool's columns", r.code, r.stdout, r.stderr)
			}
			// Another user's name, in any spelling the broker takes for
			// his (ſ folds to s, R-E5), or a look-alike of hers: refused.
			for _, other := range []string{"dave@contoso.com", "DAVE@contoso.com", "dave@conto\u017fo.com", "carol@contos\u043e.com"} {
				r := as("usersession", "list", "--host-pool", "office", "--user", other)
				if r.code != 1 || !strings.Contains(r.stderr, "may list only its own sessions") || strings.Contains(r.stdout, dave) || strings.Contains(r.stdout, lookalike) {
					t.Errorf("her list of office --user %q: exit %d, stdout %q, stderr %q; want the broker's refusal", other, r.code, r.stdout, r.stderr)
				}
			}
			if r := as("usersession", "list", "--host-pool", "office", "--state", "LoggedOff"); r.code != 1 || r.stdout != "" ||
				!strings.Contains(r.stderr, "--state LoggedOff: a User token lists its own open sessions only") {
				t.Errorf("her list of LoggedOff sessions: exit %d, stdout %q, stderr %q; want refused saying what she may read", r.code, r.stdout, r.stderr)
			}
			if refused := b.ok("audit", "list", "--query", "[?outcome!='ok' && contains(action, 'usersessions')].action", "-o", "tsv"); refused != "" {
				t.Errorf("refused reads of a pool's sessions in the audit trail:\n%s", refused)
			}
			// The admin token lists the pool's sessions, everyone's.
			got := b.ok("usersession", "list", "--host-pool", "office", "--query", "length(@)", "-o", "tsv")
			if got != "3\n" {
				t.Errorf("admin's list of office: %q sessions, want 3 (carol's, dave's, the look-alike's)", got)
			}
		})
	}
}
