package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

var updateGolden = flag.Bool("update", false, "rewrite the CLI golden files in testdata/")

// ageRe is an age as the host report writes it: 4s, 3m 10s, 2h 5m ago.
var ageRe = regexp.MustCompile(`\b\d+[smhd]( \d+[smh])? ago\b`)

// cliResult is what one CLI invocation printed and its exit status.
type cliResult struct {
	stdout, stderr string
	code           int
}

// runCLI runs the admin command tree in-process as `vdibroker args...`, with
// a fresh tree so no flag value carries over from an earlier run, and exits
// as run does: 0, 1 for errors, 2 for usage errors.
func runCLI(tb testing.TB, args ...string) cliResult {
	tb.Helper()
	return runCLIIn(tb, tb.Context(), args...)
}

// runCLIIn is runCLI with ctx as the commands' context: a serve that
// starts runs until it is done.
func runCLIIn(tb testing.TB, ctx context.Context, args ...string) cliResult {
	tb.Helper()
	// The real root's handling of mistakes (configureRoot, execute), the
	// admin commands, audit, bench and serve, built fresh.
	root := &cobra.Command{Use: "vdibroker", SilenceUsage: true, SilenceErrors: true}
	configureRoot(root)
	root.AddCommand(newAdminCommands()...)
	root.AddCommand(newAuditCmd(), newBenchCmd(), newServeCmd())
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetIn(strings.NewReader(""))
	root.SetContext(ctx)
	code := execute(root, args, &errOut)
	return cliResult{stdout: out.String(), stderr: errOut.String(), code: code}
}

// cliBroker is a real vdibroker on 127.0.0.1:0 with a temp data dir.
type cliBroker struct {
	tb testing.TB
	m  *Main
}

func startCLIBroker(tb testing.TB) *cliBroker {
	tb.Helper()
	m := &Main{Listen: "127.0.0.1:0", DataDir: tb.TempDir()}
	if err := m.Open(tb.Context()); err != nil {
		tb.Fatalf("start broker: %v", err)
	}
	tb.Cleanup(func() { m.Close() })
	return &cliBroker{tb: tb, m: m}
}

// cli runs a command against this broker with the admin token.
func (b *cliBroker) cli(args ...string) cliResult {
	b.tb.Helper()
	return runCLI(b.tb, append(args, "--server", b.m.URL(), "--token", b.m.AdminToken)...)
}

// ok runs a command that must succeed and returns its stdout.
func (b *cliBroker) ok(args ...string) string {
	b.tb.Helper()
	r := b.cli(args...)
	if r.code != 0 {
		b.tb.Fatalf("vdibroker %s: exit %d\nstderr: %s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}

// cliMasker replaces what changes from run to run (times, ids, secrets) with
// stable placeholders, so golden files compare exactly.
type cliMasker struct {
	names map[string]string
	order []string
}

var cliTimeRE = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})`)

// add makes s print as placeholder, padded to s's length so table columns
// keep their width.
func (m *cliMasker) add(s, placeholder string) {
	if s == "" {
		return
	}
	if m.names == nil {
		m.names = map[string]string{}
	}
	if len(placeholder) < len(s) {
		placeholder += strings.Repeat("_", len(s)-len(placeholder))
	}
	m.names[s] = placeholder
	m.order = append(m.order, s)
}

func (m *cliMasker) mask(s string) string {
	for _, k := range m.order {
		s = strings.ReplaceAll(s, k, m.names[k])
	}
	return cliTimeRE.ReplaceAllStringFunc(s, func(t string) string {
		// Same width as a time to the second, as tables show them.
		if len(t) == 20 {
			return "2006-01-02T15:04:05Z"
		}
		return "<time>"
	})
}

// checkCLIGolden compares got with testdata/name.golden (-update rewrites it).
func checkCLIGolden(tb testing.TB, name, got string) {
	tb.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *updateGolden {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			tb.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("read golden file (run go test -update to create it): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		tb.Errorf("%s mismatch (-want +got):\n%s", path, diff)
	}
}

// checkCLIError fails when an error output looks like a Go stack trace or a
// raw JSON body rather than a message for a person.
func checkCLIError(tb testing.TB, r cliResult) {
	tb.Helper()
	for _, bad := range []string{"goroutine ", "panic:", ".go:", `{"error"`, `"code":`} {
		if strings.Contains(r.stderr, bad) || strings.Contains(r.stdout, bad) {
			tb.Errorf("output contains %q:\nstdout: %s\nstderr: %s", bad, r.stdout, r.stderr)
		}
	}
	if r.stderr != "" && !strings.HasPrefix(r.stderr, "error: ") {
		tb.Errorf("stderr does not start with \"error: \": %q", r.stderr)
	}
	if strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
		tb.Errorf("error is more than one line: %q", r.stderr)
	}
}

// addHost registers a session host through the agent protocol with a
// registration token from the CLI and sends one heartbeat, so the host is
// Available (R-H1). It returns the host credential.
func (b *cliBroker) addHost(pool, name string) string {
	b.tb.Helper()
	token := strings.TrimSpace(b.ok("registration-token", "create", "--host-pool", pool, "--expires", "24h", "--query", "token", "-o", "tsv"))
	c := vhttp.NewClient(b.m.URL(), "")
	reg, err := c.Register(b.tb.Context(), &vdibroker.RegisterRequest{
		Token: token, HostName: name, Address: name + ".contoso.test:3389", Protocols: []string{"RDP"},
	})
	if err != nil {
		b.tb.Fatalf("register %s: %v", name, err)
	}
	if _, err := c.Heartbeat(b.tb.Context(), reg.Credential, &vdibroker.HeartbeatRequest{}); err != nil {
		b.tb.Fatalf("heartbeat %s: %v", name, err)
	}
	return reg.Credential
}

// sharedPersonalHost creates pool, Personal and MultiplePersistent with
// direct assignment, and its host sh-01 assigned to users.
func (b *cliBroker) sharedPersonalHost(pool string, users ...string) {
	b.tb.Helper()
	b.ok("hostpool", "create", "--name", pool, "--host-pool-type", "Personal", "--load-balancer-type", "MultiplePersistent",
		"--personal-desktop-assignment-type", "Direct")
	b.addHost(pool, "sh-01")
	args := []string{"sessionhost", "update", "--host-pool", pool, "--name", "sh-01"}
	for _, u := range users {
		args = append(args, "--assigned-user", u)
	}
	b.ok(args...)
}

// heartbeat sends an empty heartbeat for a host and returns the commands
// the broker queued for it.
func (b *cliBroker) heartbeat(credential string) []vdibroker.Command {
	b.tb.Helper()
	c := vhttp.NewClient(b.m.URL(), "")
	res, err := c.Heartbeat(b.tb.Context(), credential, &vdibroker.HeartbeatRequest{})
	if err != nil {
		b.tb.Fatalf("heartbeat: %v", err)
	}
	return res.Commands
}

// TestCLISpec11 runs the example of docs/behaviour.md §11 and compares the
// table byte for byte: update prints nothing, show prints the aligned table.
func TestCLISpec11(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "contosohp01")

	r := b.cli("hostpool", "update", "--name", "contosohp01", "--load-balancer-type", "DepthFirst", "--max-session-limit", "10")
	if r.code != 0 || r.stdout != "" || r.stderr != "" {
		t.Fatalf("update: exit %d, stdout %q, stderr %q; want a silent success", r.code, r.stdout, r.stderr)
	}
	got := b.ok("hostpool", "show", "--name", "contosohp01", "--output", "table")
	want := "" +
		"Name         LoadBalancerType    MaxSessionLimit\n" +
		"-----------  ------------------  -----------------\n" +
		"contosohp01  DepthFirst          10\n"
	if got != want {
		t.Errorf("§11 table mismatch (-want +got):\n%s", cmp.Diff(want, got))
	}
	// Compare with the block in the behaviour reference itself too, so the
	// test follows the document if the example changes.
	doc, err := os.ReadFile("../../docs/behaviour.md")
	if err != nil {
		t.Fatal(err)
	}
	const cmdLine = "$ vdibroker hostpool show --name contosohp01 --output table\n"
	i := strings.Index(string(doc), cmdLine)
	if i < 0 {
		t.Fatal("docs/behaviour.md has no `hostpool show` example any more")
	}
	block := string(doc)[i+len(cmdLine):]
	block = block[:strings.Index(block, "```")]
	if got != block {
		t.Errorf("output differs from docs/behaviour.md §11 (-doc +got):\n%s", cmp.Diff(block, got))
	}
	// Table is the default for show.
	if def := b.ok("hostpool", "show", "--name", "contosohp01"); def != want {
		t.Errorf("show without --output:\n%s\nwant:\n%s", def, want)
	}
}

// TestCLIInvalidInput: a value outside the schema's range (R-P4) is refused
// by the CLI as the flag is parsed: exit 2, naming the flag and the range,
// nothing sent. What only the broker can judge (a load balancer type of
// the other pool type, R-P1's type change) is refused by it: exit 1, the
// message naming the flag. Either way the pool is unchanged.
func TestCLIInvalidInput(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "contosohp01", "--load-balancer-type", "DepthFirst", "--max-session-limit", "10")
	before := b.ok("hostpool", "show", "--name", "contosohp01", "-o", "json")

	tests := []struct {
		name string
		args []string
		code int
		want []string // in the message
	}{
		{"max session limit 0", []string{"--max-session-limit", "0"}, 2, []string{"--max-session-limit", "1..999999"}},
		{"max session limit too big", []string{"--max-session-limit", "1000000"}, 2, []string{"--max-session-limit", "1..999999"}},
		{"unknown load balancer type", []string{"--load-balancer-type", "Random"}, 2, []string{"--load-balancer-type", "BreadthFirst, DepthFirst, LoadIndex"}},
		{"personal type on a pooled pool", []string{"--load-balancer-type", "Persistent"}, 1, []string{"--load-balancer-type", "BreadthFirst, DepthFirst, LoadIndex"}},
		{"cpu threshold", []string{"--cpu-threshold", "101"}, 2, []string{"--cpu-threshold", "0..100"}},
		{"min servers in queue", []string{"--min-servers-in-queue", "0"}, 2, []string{"--min-servers-in-queue", "1..1000"}},
		// R-P1: refused; which field the server names first is its choice.
		{"host pool type change (R-P1)", []string{"--host-pool-type", "Personal"}, 1, nil},
		// A valid field with an invalid one: nothing of the update is kept.
		{"valid and invalid together", []string{"--max-session-limit", "5", "--heartbeat-timeout-seconds", "5"}, 2, []string{"--heartbeat-timeout-seconds", "10..3600"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := b.cli(append([]string{"hostpool", "update", "--name", "contosohp01"}, tt.args...)...)
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d; stderr %q", r.code, tt.code, r.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr %q does not name %q", r.stderr, w)
				}
			}
			checkCLIError(t, r)
			if after := b.ok("hostpool", "show", "--name", "contosohp01", "-o", "json"); after != before {
				t.Errorf("pool changed by a refused update:\n%s", cmp.Diff(before, after))
			}
		})
	}

	// Create with a bad value stores no pool.
	r := b.cli("hostpool", "create", "--name", "hp-bad", "--max-session-limit", "0")
	if r.code != 2 || !strings.Contains(r.stderr, "--max-session-limit") {
		t.Errorf("create with limit 0: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := b.cli("hostpool", "show", "--name", "hp-bad"); r.code != 1 {
		t.Errorf("refused create left a pool behind: exit %d, stdout %q", r.code, r.stdout)
	}
}

// TestCLIUsageErrors: mistakes in how a command is called exit 2 and send
// nothing.
func TestCLIUsageErrors(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "contosohp01")
	tests := []struct {
		name string
		args []string
	}{
		{"missing required flag", []string{"hostpool", "show"}},
		{"unknown flag", []string{"hostpool", "show", "--name", "contosohp01", "--colour", "red"}},
		{"unknown output", []string{"hostpool", "show", "--name", "contosohp01", "--output", "xml"}},
		{"bad query", []string{"hostpool", "list", "--query", "[?name=="}},
		{"not an int", []string{"hostpool", "update", "--name", "contosohp01", "--max-session-limit", "ten"}},
		{"not a bool", []string{"sessionhost", "update", "--host-pool", "contosohp01", "--name", "sh-01", "--allow-new-session", "maybe"}},
		{"nothing to update", []string{"hostpool", "update", "--name", "contosohp01"}},
		{"id and user", []string{"usersession", "logoff", "--host-pool", "contosohp01", "--id", "x", "--user", "y"}},
		{"no pool or pod", []string{"usersession", "logoff", "--id", "x"}},
		{"pod and pool", []string{"usersession", "logoff", "--pod", "pod2", "--host-pool", "contosohp01", "--id", "x", "--user", "y"}},
		{"pod without id", []string{"usersession", "disconnect", "--pod", "pod2", "--user", "y"}},
		{"stray argument", []string{"hostpool", "list", "extra"}},
		// A required flag given as "" is no value: refused here, naming
		// the flag, rather than sent as an empty path segment the server
		// redirects (which read "cannot reach the broker at ").
		{"empty user", []string{"user", "entitlements", "--user", ""}},
		{"empty session", []string{"placement", "show", "--host-pool", "contosohp01", "--session", ""}},
		{"empty message", []string{"usersession", "send-message", "--host-pool", "contosohp01", "--user", "alice", "--message", ""}},
		{"empty id", []string{"usersession", "logoff", "--host-pool", "contosohp01", "--id", ""}},
		{"empty user of a logoff", []string{"usersession", "disconnect", "--host-pool", "contosohp01", "--user", ""}},
		// An optional filter given as "" is refused too, not taken for
		// no filter (which listed every user's sessions, every entry).
		{"empty user of a list", []string{"usersession", "list", "--host-pool", "contosohp01", "--user", ""}},
		{"empty user of a list of every pool", []string{"usersession", "list", "--user", ""}},
		{"empty host pool of an application group list", []string{"applicationgroup", "list", "--host-pool", ""}},
		{"empty audit target", []string{"audit", "list", "--target", ""}},
		{"empty audit principal", []string{"audit", "list", "--principal", ""}},
		{"empty audit action", []string{"audit", "list", "--action", ""}},
		{"empty audit request id", []string{"audit", "list", "--request-id", ""}},
		{"empty audit since", []string{"audit", "list", "--since", ""}},
		{"empty bench user prefix", []string{"bench", "connect", "--host-pool", "contosohp01", "--connects", "1", "--user-prefix", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := b.cli(tt.args...)
			if r.code != 2 {
				t.Errorf("exit %d, want 2; stderr %q", r.code, r.stderr)
			}
			checkCLIError(t, r)
			if strings.HasPrefix(tt.name, "empty ") && !strings.Contains(r.stderr, `": must not be empty`) {
				t.Errorf("stderr %q does not say the flag is empty", r.stderr)
			}
		})
	}
	if got := b.ok("hostpool", "show", "--name", "contosohp01", "--query", "maxSessionLimit", "-o", "tsv"); got != "999999\n" {
		t.Errorf("a usage error changed the pool: maxSessionLimit %q", got)
	}
}

// TestCLIErrors: server and transport errors are one line, the server's
// message, exit 1.
func TestCLIErrors(t *testing.T) {
	b := startCLIBroker(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"not found", []string{"hostpool", "show", "--name", "nope", "--server", b.m.URL(), "--token", b.m.AdminToken}, "nope"},
		{"bad token", []string{"hostpool", "list", "--server", b.m.URL(), "--token", "wrong"}, "error: "},
		{"no server", []string{"hostpool", "list", "--server", "http://127.0.0.1:1", "--token", "x"}, "cannot reach the broker at http://127.0.0.1:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runCLI(t, tt.args...)
			if r.code != 1 {
				t.Errorf("exit %d, want 1; stderr %q", r.code, r.stderr)
			}
			if !strings.Contains(r.stderr, tt.want) {
				t.Errorf("stderr %q does not contain %q", r.stderr, tt.want)
			}
			checkCLIError(t, r)
		})
	}
}

// TestCLIEnvironment: VDIBROKER_SERVER and VDIBROKER_TOKEN stand in for the
// flags, and the flags win over them.
func TestCLIEnvironment(t *testing.T) {
	b := startCLIBroker(t)
	t.Setenv("VDIBROKER_SERVER", b.m.URL())
	t.Setenv("VDIBROKER_TOKEN", b.m.AdminToken)
	if r := runCLI(t, "hostpool", "create", "--name", "envpool"); r.code != 0 {
		t.Fatalf("with env: exit %d, stderr %q", r.code, r.stderr)
	}
	if got := runCLI(t, "hostpool", "list", "--query", "[].name", "-o", "tsv").stdout; got != "envpool\n" {
		t.Errorf("list with env = %q", got)
	}
	if r := runCLI(t, "hostpool", "list", "--token", "wrong"); r.code != 1 {
		t.Errorf("--token did not win over VDIBROKER_TOKEN: exit %d", r.code)
	}
	if r := runCLI(t, "hostpool", "list", "--server", "http://127.0.0.1:1"); r.code != 1 {
		t.Errorf("--server did not win over VDIBROKER_SERVER: exit %d", r.code)
	}
}

// TestCLIGolden checks the table, json, yaml and tsv output of every show
// and list command against testdata/*.golden (go test -update rewrites
// them). The broker is real; times, ids and secrets are masked.
func TestCLIGolden(t *testing.T) {
	b := startCLIBroker(t)
	var m cliMasker

	// Two pools; contosohp01 is DepthFirst so placements are deterministic
	// (R-DF2: the first host in query order fills first).
	b.ok("hostpool", "create", "--name", "contosohp01", "--load-balancer-type", "DepthFirst", "--max-session-limit", "10",
		"--description", "Contoso sales", "--friendly-name", "Sales desktops")
	b.ok("hostpool", "create", "--name", "hp-lab", "--host-pool-type", "Personal", "--personal-desktop-assignment-type", "Direct")
	for i, h := range []string{"sh-01", "sh-02", "sh-03"} {
		cred := b.addHost("contosohp01", h)
		// What the hosts say of RemoteApps (R-E12): sh-01 no (xrdp),
		// sh-02 yes (Windows), sh-03 nothing (an older agent).
		if i < 2 {
			can := i == 1
			if _, err := vhttp.NewClient(b.m.URL(), "").Heartbeat(t.Context(), cred, &vdibroker.HeartbeatRequest{RemoteApps: &can}); err != nil {
				t.Fatal(err)
			}
		}
	}
	b.ok("sessionhost", "update", "--host-pool", "contosohp01", "--name", "sh-03", "--allow-new-session", "false")

	for _, u := range []string{"alice", "bob"} {
		id := strings.TrimSpace(b.ok("connect", "--host-pool", "contosohp01", "--user", u, "--query", "sessionId", "-o", "tsv"))
		// Session ids made one after another sort in that order
		// (vdibroker.NewID): the list shows alice, then bob.
		m.add(id, "<session-"+u+">")
	}
	tok := b.ok("token", "create", "--role", "Reader", "--subject", "auditor", "--query", "[id, token]", "-o", "tsv")
	// A list of scalars is one line per item in tsv, as in az.
	idSecret := strings.Split(strings.TrimSpace(tok), "\n")
	if len(idSecret) != 2 {
		t.Fatalf("token create printed %q, want id and token on two lines", tok)
	}
	m.add(idSecret[0], "<token-id>")
	m.add(idSecret[1], "<token-secret>")

	cmds := map[string][]string{
		"hostpool_show":    {"hostpool", "show", "--name", "contosohp01"},
		"hostpool_list":    {"hostpool", "list"},
		"sessionhost_show": {"sessionhost", "show", "--host-pool", "contosohp01", "--name", "sh-01"},
		"sessionhost_list": {"sessionhost", "list", "--host-pool", "contosohp01"},
		"usersession_list": {"usersession", "list", "--host-pool", "contosohp01"},
		"token_list":       {"token", "list"},
	}
	for name, args := range cmds {
		for _, format := range []string{formatTable, formatJSON, formatYAML, formatTSV} {
			t.Run(name+"_"+format, func(t *testing.T) {
				// Ages ("heartbeat 2s ago") depend on the machine's speed.
				got := ageRe.ReplaceAllString(m.mask(b.ok(append(args, "--output", format)...)), "<age> ago")
				checkCLIGolden(t, name+"_"+format, got)
			})
		}
	}

	// The decision record of bob's placement in words, and raw.
	bobID := ""
	for id, ph := range m.names {
		if strings.HasPrefix(ph, "<session-bob>") {
			bobID = id
		}
	}
	t.Run("placement_show", func(t *testing.T) {
		checkCLIGolden(t, "placement_show", m.mask(b.ok("placement", "show", "--host-pool", "contosohp01", "--session", bobID)))
	})
	for _, format := range []string{formatJSON, formatYAML, formatTSV} {
		t.Run("placement_show_"+format, func(t *testing.T) {
			checkCLIGolden(t, "placement_show_"+format, m.mask(b.ok("placement", "show", "--host-pool", "contosohp01", "--session", bobID, "-o", format)))
		})
	}
	t.Run("connect_dry_run", func(t *testing.T) {
		checkCLIGolden(t, "connect_dry_run", m.mask(b.ok("connect", "--host-pool", "contosohp01", "--user", "carol", "--dry-run")))
	})
}

// TestCLIQuery: --query is applied to the JSON answer before any format.
func TestCLIQuery(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "contosohp01", "--load-balancer-type", "DepthFirst", "--max-session-limit", "10")
	b.ok("hostpool", "create", "--name", "hp-bf")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"filter to names, tsv", []string{"hostpool", "list", "--query", "[?loadBalancerType=='DepthFirst'].name", "-o", "tsv"}, "contosohp01\n"},
		{"scalar, json", []string{"hostpool", "show", "--name", "hp-bf", "--query", "maxSessionLimit", "-o", "json"}, "999999\n"},
		{"nested field", []string{"hostpool", "show", "--name", "hp-bf", "--query", "loadBalancing.minServersInQueue", "-o", "tsv"}, "4\n"},
		{"projection, table in query order", []string{"hostpool", "list", "--query", "[].{Pool:name, Limit:maxSessionLimit}"},
			"Pool         Limit\n-----------  -------\ncontosohp01  10\nhp-bf        999999\n"},
		{"projection, yaml", []string{"hostpool", "list", "--query", "[?name=='hp-bf'].{pool:name}", "-o", "yaml"}, "- pool: hp-bf\n"},
		{"no match prints nothing", []string{"hostpool", "list", "--query", "[?name=='none']"}, ""},
		// A mutating command prints its result when asked with --query.
		{"update with query", []string{"hostpool", "update", "--name", "hp-bf", "--max-session-limit", "7", "--query", "maxSessionLimit"}, "7\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := b.ok(tt.args...); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestCLIWarning: DepthFirst without a real limit is accepted with a
// warning on stderr (R-P3), and stdout stays clean.
func TestCLIWarning(t *testing.T) {
	b := startCLIBroker(t)
	r := b.cli("hostpool", "create", "--name", "contosohp01", "--load-balancer-type", "DepthFirst")
	if r.code != 0 || r.stdout != "" {
		t.Fatalf("exit %d, stdout %q", r.code, r.stdout)
	}
	if !strings.HasPrefix(r.stderr, "warning: ") || !strings.Contains(r.stderr, "maxSessionLimit") {
		t.Errorf("stderr %q, want a warning about maxSessionLimit", r.stderr)
	}
}

// TestCLIPersistentSharedHostsWarning_RP1: hostpool update from
// MultiplePersistent to Persistent is taken (R-P1) and prints, on
// stderr, the server's warning that a host keeps two users; stdout stays
// clean.
func TestCLIPersistentSharedHostsWarning_RP1(t *testing.T) {
	b := startCLIBroker(t)
	b.sharedPersonalHost("hp-desks", "alice", "bob")
	r := b.cli("hostpool", "update", "--name", "hp-desks", "--load-balancer-type", "Persistent")
	if r.code != 0 || r.stdout != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if want := "warning: loadBalancerType Persistent gives each host one user, but 1 session host keeps more than one assigned user (sh-01): "; !strings.HasPrefix(r.stderr, want) ||
		strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("stderr %q, want one line starting %q", r.stderr, want)
	}
	if got := b.ok("hostpool", "show", "--name", "hp-desks", "--query", "loadBalancerType", "-o", "tsv"); got != "Persistent\n" {
		t.Errorf("loadBalancerType after the update: %q", got)
	}
}

// TestCLIRemoteAppsWarning_RE12: an application group or application
// published in a pool none of whose hosts can run RemoteApps is made, and
// the CLI prints the server's warning on stderr.
func TestCLIRemoteAppsWarning_RE12(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "linuxhp01")
	no := false
	if _, err := vhttp.NewClient(b.m.URL(), "").Heartbeat(t.Context(), b.addHost("linuxhp01", "lx-01"), &vdibroker.HeartbeatRequest{RemoteApps: &no}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"applicationgroup", "create", "--name", "linux-apps", "--host-pool", "linuxhp01", "--application-group-type", "RemoteApp"},
		{"applicationgroup", "update", "--name", "linux-apps", "--description", "Apps"},
		{"application", "create", "--application-group", "linux-apps", "--name", "gedit", "--file-path", "/usr/bin/gedit"},
	} {
		r := b.cli(args...)
		if r.code != 0 || !strings.HasPrefix(r.stderr, "warning: ") || !strings.Contains(r.stderr, `host pool "linuxhp01" can run RemoteApps`) {
			t.Errorf("%v: exit %d, stderr %q; want the warning that no host runs RemoteApps", args, r.code, r.stderr)
		}
	}
}

// TestCLIConnect: connect places a session, writes the .rdp file, and a
// second connect of the same user is the same session (R-C1, R-C6); a dry
// run stores nothing (R-C8); drained hosts take no new session (R-C2).
func TestCLIConnect(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "contosohp01", "--load-balancer-type", "DepthFirst", "--max-session-limit", "10")
	b.addHost("contosohp01", "sh-01")
	b.addHost("contosohp01", "sh-02")

	dry := b.ok("connect", "--host-pool", "contosohp01", "--user", "alice", "--dry-run", "-o", "json", "--query", "[dryRun, sessionHost]")
	if dry != "[\n  true,\n  \"sh-01\"\n]\n" {
		t.Errorf("dry run answered %q", dry)
	}
	if got := b.ok("usersession", "list", "--host-pool", "contosohp01", "-o", "json"); got != "[]\n" {
		t.Errorf("a dry run stored a session: %s", got)
	}

	rdp := filepath.Join(t.TempDir(), "alice.rdp")
	out := b.ok("connect", "--host-pool", "contosohp01", "--user", "alice", "--rdp-file", rdp)
	if !strings.Contains(out, "alice") || !strings.Contains(out, "sh-01") {
		t.Errorf("connect table:\n%s", out)
	}
	data, err := os.ReadFile(rdp)
	if err != nil {
		t.Fatalf("--rdp-file not written: %v", err)
	}
	if !strings.Contains(string(data), "full address:s:sh-01.contoso.test:3389") {
		t.Errorf(".rdp file does not point at sh-01:\n%s", data)
	}
	id := strings.TrimSpace(b.ok("usersession", "list", "--host-pool", "contosohp01", "--user", "alice", "--query", "[0].id", "-o", "tsv"))
	again := b.ok("connect", "--host-pool", "contosohp01", "--user", "alice", "--query", "[sessionId, reconnect]", "-o", "tsv")
	if again != id+"\ntrue\n" {
		t.Errorf("second connect = %q, want the same session %s as a reconnect", again, id)
	}

	// Drain sh-01: bob goes to sh-02 although DepthFirst prefers sh-01.
	b.ok("sessionhost", "update", "--host-pool", "contosohp01", "--name", "sh-01", "--allow-new-session", "false")
	if got := b.ok("sessionhost", "show", "--host-pool", "contosohp01", "--name", "sh-01", "--query", "allowNewSession", "-o", "tsv"); got != "false\n" {
		t.Errorf("after drain allowNewSession = %q", got)
	}
	if got := b.ok("connect", "--host-pool", "contosohp01", "--user", "bob", "--query", "sessionHost", "-o", "tsv"); got != "sh-02\n" {
		t.Errorf("bob placed on %q, want sh-02 (sh-01 drained)", got)
	}
	bob := strings.TrimSpace(b.ok("usersession", "list", "--host-pool", "contosohp01", "--user", "bob", "--query", "[0].id", "-o", "tsv"))
	words := b.ok("placement", "show", "--host-pool", "contosohp01", "--session", bob)
	if !strings.Contains(words, "sh-01  drain mode (R-C2)") || !strings.Contains(words, "sh-02 ranked first") {
		t.Errorf("placement show:\n%s", words)
	}

	// Full pool: the server's NoCapacity message, exit 1.
	b.ok("sessionhost", "update", "--host-pool", "contosohp01", "--name", "sh-02", "--allow-new-session", "false")
	r := b.cli("connect", "--host-pool", "contosohp01", "--user", "carol")
	if r.code != 1 || !strings.Contains(r.stderr, "drain") {
		t.Errorf("connect with every host drained: exit %d, stderr %q", r.code, r.stderr)
	}
	checkCLIError(t, r)
}

// TestCLIUserSessionCommands: logoff, disconnect and send-message are
// queued for the host's agent (R-S4), which gets them on its heartbeat.
func TestCLIUserSessionCommands(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "contosohp01")
	cred := b.addHost("contosohp01", "sh-01")
	id := strings.TrimSpace(b.ok("connect", "--host-pool", "contosohp01", "--user", "alice", "--query", "sessionId", "-o", "tsv"))

	// One line a session saying what was queued, as logoff and
	// disconnect say; with --output or --query, the queued commands
	// (docs/cli.md "Output").
	want0 := "queued message to session " + id + " of alice on sh-01 (pool contosohp01): its agent shows it on its next heartbeat\n"
	if out := b.ok("usersession", "send-message", "--host-pool", "contosohp01", "--id", id, "--message", "Maintenance at 18:00"); out != want0 {
		t.Errorf("send-message without --output printed %q, want %q", out, want0)
	}
	var queued []*vdibroker.Command
	if err := json.Unmarshal([]byte(b.ok("usersession", "send-message", "--host-pool", "contosohp01", "--id", id, "--message", "Save your work", "-o", "json")), &queued); err != nil ||
		len(queued) != 1 || queued[0].Type != vdibroker.CommandSendMessage || queued[0].SessionID != id || queued[0].ID == "" {
		t.Errorf("send-message -o json: %+v, %v; want the one queued message to %s", queued, err, id)
	}
	logoffID := strings.TrimSpace(b.ok("usersession", "logoff", "--host-pool", "contosohp01", "--user", "alice", "--query", "[0].id", "-o", "tsv"))
	cmds := b.heartbeat(cred)
	var got []string
	for _, c := range cmds {
		got = append(got, c.Type+" "+c.SessionID+" "+c.Message)
	}
	want := []string{vdibroker.CommandSendMessage + " " + id + " Maintenance at 18:00", vdibroker.CommandSendMessage + " " + id + " Save your work", vdibroker.CommandLogoff + " " + id + " "}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("commands queued for the agent (-want +got):\n%s", diff)
	}
	if len(cmds) == 3 && cmds[2].ID != logoffID {
		t.Errorf("logoff --query [0].id printed %q, the agent got the logoff as %q", logoffID, cmds[2].ID)
	}

	r := b.cli("usersession", "disconnect", "--host-pool", "contosohp01", "--user", "nobody")
	if r.code != 1 || !strings.Contains(r.stderr, "nobody") {
		t.Errorf("disconnect of a user without session: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := b.cli("usersession", "send-message", "--host-pool", "contosohp01", "--id", id); r.code != 2 {
		t.Errorf("send-message without --message: exit %d, want 2", r.code)
	}
}

// alicePlacedOnSh01 starts a broker with pool contosohp01 and its host
// sh-01, and places alice there: her session is Pending until the host's
// agent reports her logon. It returns the host's credential and her
// session's id.
func alicePlacedOnSh01(t *testing.T) (b *cliBroker, cred, id string) {
	t.Helper()
	b = startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "contosohp01")
	cred = b.addHost("contosohp01", "sh-01")
	id = strings.TrimSpace(b.ok("connect", "--host-pool", "contosohp01", "--user", "alice", "--query", "sessionId", "-o", "tsv"))
	return b, cred, id
}

// TestCLIUserSessionActionLine_RS4: logoff, disconnect and send-message
// say on stdout what they queued, one line a session: the session, its
// user, host and pool (before, they printed nothing, and an admin could
// not tell a logoff or a message sent from one that did nothing). With
// --output or --query they print the queued commands instead, as
// before, and nothing else.
func TestCLIUserSessionActionLine_RS4(t *testing.T) {
	b, cred, id := alicePlacedOnSh01(t)
	// Her logon, as the agent reports it: Active, so it can be disconnected.
	if _, err := vhttp.NewClient(b.m.URL(), "").Heartbeat(t.Context(), cred, &vdibroker.HeartbeatRequest{
		Sessions: []vdibroker.AgentSession{{ID: "1", User: "alice", State: "Active"}}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"disconnect by user", []string{"usersession", "disconnect", "--host-pool", "contosohp01", "--user", "alice"},
			"queued disconnect of session " + id + " of alice on sh-01 (pool contosohp01): its agent runs it on its next heartbeat\n"},
		{"logoff by id", []string{"usersession", "logoff", "--host-pool", "contosohp01", "--id", id},
			"queued logoff of session " + id + " of alice on sh-01 (pool contosohp01): its agent runs it on its next heartbeat\n"},
		{"query", []string{"usersession", "logoff", "--host-pool", "contosohp01", "--id", id, "--query", "[].[type, user, sessionHost]", "-o", "tsv"},
			"Logoff\talice\tsh-01\n"},
		{"message by user", []string{"usersession", "send-message", "--host-pool", "contosohp01", "--user", "alice", "--message", "Save your work"},
			"queued message to session " + id + " of alice on sh-01 (pool contosohp01): its agent shows it on its next heartbeat\n"},
		{"message query", []string{"usersession", "send-message", "--host-pool", "contosohp01", "--id", id, "--message", "hi", "--query", "[].[type, message]", "-o", "tsv"},
			"SendMessage\thi\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := b.cli(tc.args...)
			if r.code != 0 || r.stdout != tc.want || r.stderr != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want stdout %q", r.code, r.stdout, r.stderr, tc.want)
			}
		})
	}
	var queued []*vdibroker.Command
	if err := json.Unmarshal([]byte(b.ok("usersession", "logoff", "--host-pool", "contosohp01", "--id", id, "-o", "json")), &queued); err != nil ||
		len(queued) != 1 || queued[0].Type != vdibroker.CommandLogoff || queued[0].SessionID != id {
		t.Errorf("logoff -o json: %+v, %v; want the one queued logoff of %s alone", queued, err, id)
	}
}

// TestCLILogoffOfPendingSession_RS4: a logoff of a session its agent
// never reported ends it at once (R-S4), and the line says that it
// ended, not that its agent will run the logoff on its next heartbeat:
// the session is gone when the command returns.
func TestCLILogoffOfPendingSession_RS4(t *testing.T) {
	b, _, id := alicePlacedOnSh01(t)
	r := b.cli("usersession", "logoff", "--host-pool", "contosohp01", "--id", id)
	want := "logged off session " + id + " of alice on sh-01 (pool contosohp01): it ended now, as its agent had not reported it yet; a logoff stays queued in case its logon is under way\n"
	if r.code != 0 || r.stdout != want || r.stderr != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want stdout %q", r.code, r.stdout, r.stderr, want)
	}
	if got := b.ok("usersession", "list", "--host-pool", "contosohp01", "--state", "LoggedOff", "--query", "[].[id, state]", "-o", "tsv"); got != id+"\tLoggedOff\n" {
		t.Errorf("ended sessions: %q, want %s LoggedOff", got, id)
	}
}

// TestCLIUserSessionsOfUser_RU3: a helpdesk asked about a user's frozen
// desktop finds her open sessions in every pool with `usersession list
// --user U` alone (the name in any spelling, R-U3), each with its pool and
// host, which logoff's --host-pool and --id need. Before, --host-pool was
// required: she had to list the pools and ask each.
func TestCLIUserSessionsOfUser_RU3(t *testing.T) {
	b := startCLIBroker(t)
	for _, p := range []string{"office", "dev"} {
		b.ok("hostpool", "create", "--name", p)
		b.addHost(p, p+"-01")
	}
	office := strings.TrimSpace(b.ok("connect", "--host-pool", "office", "--user", "alice@contoso.com", "--query", "sessionId", "-o", "tsv"))
	dev := strings.TrimSpace(b.ok("connect", "--host-pool", "dev", "--user", "Alice@Contoso.com", "--query", "sessionId", "-o", "tsv"))
	b.ok("connect", "--host-pool", "office", "--user", "bob@contoso.com")

	got := b.ok("usersession", "list", "--user", "ALICE@contoso.com", "--query", "[].[hostPool, sessionHost, id]", "-o", "tsv")
	lines := strings.Split(strings.TrimSpace(got), "\n")
	slices.Sort(lines)
	if want := []string{"dev\tdev-01\t" + dev, "office\toffice-01\t" + office}; !slices.Equal(lines, want) {
		t.Errorf("usersession list --user ALICE@contoso.com:\n%s\nwant her two sessions, each with its pool and host: %q", got, want)
	}
	if table := b.ok("usersession", "list", "--user", "alice@contoso.com"); !strings.Contains(table, "HostPool") || strings.Contains(table, "bob") {
		t.Errorf("the table of her sessions:\n%s\nwant a HostPool column, and no one else's", table)
	}
	for _, args := range [][]string{
		{"usersession", "list"},
		{"usersession", "list", "--user", "alice@contoso.com", "--state", "Active"},
		{"usersession", "list", "--user", "alice@contoso.com", "--session-host", "dev-01"},
	} {
		if r := b.cli(args...); r.code != 2 || !strings.Contains(r.stderr, "--host-pool") {
			t.Errorf("%v: exit %d, stderr %q; want 2, naming --host-pool", args, r.code, r.stderr)
		}
	}
}

// TestCLIUserLogsOffOwnSessionByName_RU3: an end user's own token logs
// off her session by naming herself (usersession logoff --host-pool P
// --user ME), as with its --id: the CLI finds it among her own sessions
// (R-U3), where it read the pool's list, which a User may not read, and
// was refused with "role User may only connect" though she may log it
// off. A pool where she has none says so, and no read is sent that the
// broker refuses (no refusal in the audit trail). A read refused her
// (the pool itself) says what she may do.
func TestCLIUserLogsOffOwnSessionByName_RU3(t *testing.T) {
	b := startCLIBroker(t)
	for _, p := range []string{"office", "dev"} {
		b.ok("hostpool", "create", "--name", p)
	}
	cred := b.addHost("office", "office-01")
	b.addHost("dev", "dev-01")
	id := strings.TrimSpace(b.ok("connect", "--host-pool", "office", "--user", "alice@contoso.com", "--query", "sessionId", "-o", "tsv"))
	b.ok("connect", "--host-pool", "office", "--user", "bob@contoso.com")
	alice := strings.TrimSpace(b.ok("token", "create", "--role", "User", "--subject", "alice@contoso.com", "--query", "token", "-o", "tsv"))
	as := func(args ...string) cliResult {
		t.Helper()
		return runCLI(t, append(args, "--server", b.m.URL(), "--token", alice)...)
	}

	if r := as("usersession", "logoff", "--host-pool", "office", "--user", "Alice@Contoso.com"); r.code != 0 {
		t.Fatalf("her logoff of her own session by name: exit %d, stderr %q", r.code, r.stderr)
	}
	if cmds := b.heartbeat(cred); len(cmds) != 1 || cmds[0].Type != vdibroker.CommandLogoff || cmds[0].SessionID != id {
		t.Errorf("her host's commands after her logoff: %+v, want the logoff of %s alone", cmds, id)
	}
	if r := as("usersession", "logoff", "--host-pool", "dev", "--user", "alice@contoso.com"); r.code != 1 || r.stderr != "error: user \"alice@contoso.com\" has no open session in host pool \"dev\"\n" {
		t.Errorf("her logoff in a pool where she has none: exit %d, stderr %q", r.code, r.stderr)
	}
	if refused := b.ok("audit", "list", "--query", "[?outcome!='ok'].[action, target]", "-o", "tsv"); refused != "" {
		t.Errorf("refusals in the audit trail after her logoffs:\n%s", refused)
	}
	if r := as("usersession", "logoff", "--host-pool", "office", "--user", "bob@contoso.com"); r.code != 1 {
		t.Errorf("her logoff of bob's session: exit %d, want 1; stderr %q", r.code, r.stderr)
	}
	// The pool's list shows her own sessions alone
	// (TestCLIUserTokenListsOwnSessionsInPool_RU3); a read of another
	// kind is refused saying what she may do.
	if r := as("usersession", "list", "--host-pool", "office", "--query", "[].user", "-o", "tsv"); r.code != 0 || strings.Contains(r.stdout, "bob") {
		t.Errorf("her list of office: exit %d, stdout %q, stderr %q; want hers alone, not bob's", r.code, r.stdout, r.stderr)
	}
	if r := as("hostpool", "show", "--name", "office"); r.code != 1 || !strings.Contains(r.stderr, "log off or disconnect its own sessions") {
		t.Errorf("her read of the pool: exit %d, stderr %q; want it refused saying what she may do", r.code, r.stderr)
	}
}

// TestCLICommandWarning_RS4: a command queued for a host that cannot
// carry it out now (here its agent said it is stopping: Shutdown) is
// queued, exit 0, and the CLI prints the server's warning on stderr.
func TestCLICommandWarning_RS4(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "contosohp01")
	cred := b.addHost("contosohp01", "sh-01")
	b.ok("connect", "--host-pool", "contosohp01", "--user", "alice")
	if r := b.cli("usersession", "send-message", "--host-pool", "contosohp01", "--user", "alice", "--message", "hello"); r.code != 0 || r.stderr != "" {
		t.Errorf("message to an Available host: exit %d, stderr %q; want no warning", r.code, r.stderr)
	}
	if _, err := vhttp.NewClient(b.m.URL(), "").Heartbeat(t.Context(), cred, &vdibroker.HeartbeatRequest{ShuttingDown: true,
		Sessions: []vdibroker.AgentSession{{ID: "1", User: "alice", State: "Active"}}}); err != nil {
		t.Fatal(err)
	}
	r := b.cli("usersession", "logoff", "--host-pool", "contosohp01", "--user", "alice")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "queued logoff of session ") || strings.Count(r.stderr, "warning: ") != 1 ||
		!strings.HasPrefix(r.stderr, "warning: session host sh-01 is Shutdown (its agent said it is stopping") ||
		!strings.Contains(r.stderr, "queued, the host gets the logoff when its agent reports again") {
		t.Errorf("logoff on a host shutting down: exit %d, stdout %q, stderr %q; want one warning", r.code, r.stdout, r.stderr)
	}
	if cmds := b.heartbeat(cred); len(cmds) != 1 || cmds[0].Type != vdibroker.CommandLogoff {
		t.Errorf("the host gets %+v; want the logoff", cmds)
	}
}

// TestCLISessionHostSendMessage_RS4: sessionhost send-message queues one
// message for each Active and Disconnected session of the host and prints
// how many; a host without such a session warns on stderr; the message
// is checked by the server (exit 1, naming the field) and required by the
// CLI (exit 2).
func TestCLISessionHostSendMessage_RS4(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "contosohp01", "--load-balancer-type", "DepthFirst", "--max-session-limit", "10")
	cred := b.addHost("contosohp01", "sh-01")
	b.addHost("contosohp01", "sh-02")
	for _, u := range []string{"alice", "bob"} {
		b.ok("connect", "--host-pool", "contosohp01", "--user", u)
	}
	if _, err := vhttp.NewClient(b.m.URL(), "").Heartbeat(t.Context(), cred, &vdibroker.HeartbeatRequest{
		Sessions: []vdibroker.AgentSession{{ID: "1", User: "alice", State: "Active"}, {ID: "2", User: "bob", State: "Disconnected"}}}); err != nil {
		t.Fatal(err)
	}
	r := b.cli("sessionhost", "send-message", "--host-pool", "contosohp01", "--name", "sh-01", "--message", "This host restarts in 10 minutes")
	want := "HostPool     SessionHost    Queued    AlreadyQueued\n-----------  -------------  --------  ---------------\ncontosohp01  sh-01          2         0\n"
	if r.code != 0 || r.stderr != "" || r.stdout != want {
		t.Errorf("send-message: exit %d, stderr %q, stdout\n%s\nwant\n%s", r.code, r.stderr, r.stdout, want)
	}
	// The same text again, still queued: none queued again, and it says so.
	r = b.cli("sessionhost", "send-message", "--host-pool", "contosohp01", "--name", "sh-01", "--message", "This host restarts in 10 minutes", "--query", "alreadyQueued", "-o", "tsv")
	if r.code != 0 || r.stdout != "2\n" {
		t.Errorf("the same message again: exit %d, stdout %q, stderr %q; want 2 queued already", r.code, r.stdout, r.stderr)
	}
	if cmds := b.heartbeat(cred); len(cmds) != 2 || cmds[0].Message != "This host restarts in 10 minutes" {
		t.Errorf("the agent got %+v; want the 2 messages", cmds)
	}
	r = b.cli("sessionhost", "send-message", "--host-pool", "contosohp01", "--name", "sh-02", "--message", "hi", "--query", "queued", "-o", "tsv")
	if r.code != 0 || r.stdout != "0\n" || !strings.HasPrefix(r.stderr, "warning: session host sh-02 has no Active or Disconnected session") {
		t.Errorf("send-message to a host without sessions: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = b.cli("sessionhost", "send-message", "--host-pool", "contosohp01", "--name", "sh-01", "--message", "\x1b[2J")
	if r.code != 1 || !strings.Contains(r.stderr, "message: must not contain control characters") {
		t.Errorf("send-message with an escape: exit %d, stderr %q", r.code, r.stderr)
	}
	checkCLIError(t, r)
	if r := b.cli("sessionhost", "send-message", "--host-pool", "contosohp01", "--name", "sh-01"); r.code != 2 {
		t.Errorf("send-message without --message: exit %d, want 2", r.code)
	}
}

// TestCLITokens: tokens carry their role (R-SEC): a Reader reads but cannot
// change; a deleted token no longer works.
func TestCLITokens(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "contosohp01")
	out := b.ok("token", "create", "--role", "Reader", "--subject", "auditor", "--expires", "720h", "-o", "json")
	var tok struct{ ID, Token, ExpirationTime string }
	if err := json.Unmarshal([]byte(out), &tok); err != nil || tok.Token == "" || tok.ExpirationTime == "" {
		t.Fatalf("token create -o json = %s (%v)", out, err)
	}
	reader := func(args ...string) cliResult {
		return runCLI(t, append(args, "--server", b.m.URL(), "--token", tok.Token)...)
	}
	if r := reader("hostpool", "show", "--name", "contosohp01"); r.code != 0 {
		t.Errorf("reader cannot read: exit %d, %s", r.code, r.stderr)
	}
	r := reader("hostpool", "update", "--name", "contosohp01", "--max-session-limit", "5")
	if r.code != 1 {
		t.Errorf("reader could update: exit %d", r.code)
	}
	checkCLIError(t, r)
	if got := b.ok("token", "list", "--query", "[].subject", "-o", "tsv"); got != "auditor\n" {
		t.Errorf("token list = %q", got)
	}
	if strings.Contains(b.ok("token", "list", "-o", "json"), tok.Token) {
		t.Error("token list shows the secret")
	}
	b.ok("token", "delete", "--id", tok.ID)
	if r := reader("hostpool", "show", "--name", "contosohp01"); r.code != 1 {
		t.Errorf("deleted token still works: exit %d", r.code)
	}
	if r := b.cli("token", "create", "--role", "Superuser", "--subject", "x"); r.code != 2 || !strings.Contains(r.stderr, "--role") {
		t.Errorf("unknown role: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := b.cli("registration-token", "create", "--host-pool", "contosohp01", "--expires", "30m"); r.code != 2 || !strings.Contains(r.stderr, "--expires 30m: must be 1h..648h") {
		t.Errorf("registration token for 30m: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestCLIDelete: deletes refuse while sessions exist unless --force.
func TestCLIDelete(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "contosohp01")
	b.addHost("contosohp01", "sh-01")
	b.ok("connect", "--host-pool", "contosohp01", "--user", "alice")

	for _, args := range [][]string{
		{"sessionhost", "delete", "--host-pool", "contosohp01", "--name", "sh-01"},
		{"hostpool", "delete", "--name", "contosohp01"},
	} {
		r := b.cli(args...)
		if r.code != 1 {
			t.Errorf("%v with a session: exit %d, want 1", args, r.code)
		}
		checkCLIError(t, r)
	}
	b.ok("sessionhost", "delete", "--host-pool", "contosohp01", "--name", "sh-01", "--force")
	if got := b.ok("sessionhost", "list", "--host-pool", "contosohp01", "-o", "json"); got != "[]\n" {
		t.Errorf("host not deleted: %s", got)
	}
	// create never replaces an existing pool.
	b.ok("hostpool", "update", "--name", "contosohp01", "--max-session-limit", "3")
	if r := b.cli("hostpool", "create", "--name", "contosohp01"); r.code != 1 || !strings.Contains(r.stderr, "already exists") {
		t.Errorf("create of an existing pool: exit %d, stderr %q", r.code, r.stderr)
	}
	if got := b.ok("hostpool", "show", "--name", "contosohp01", "--query", "maxSessionLimit", "-o", "tsv"); got != "3\n" {
		t.Errorf("create changed the existing pool: maxSessionLimit %q", got)
	}
	b.ok("hostpool", "delete", "--name", "contosohp01", "--force")
	// An empty list: its header alone.
	if got := b.ok("hostpool", "list"); got != "Name    LoadBalancerType    MaxSessionLimit\n------  ------------------  -----------------\n" {
		t.Errorf("pool not deleted:\n%s", got)
	}
	if got := b.ok("hostpool", "list", "-o", "tsv"); got != "" {
		t.Errorf("an empty list as tsv: %q, want nothing", got)
	}
	if got := b.ok("hostpool", "list", "-o", "json"); strings.TrimSpace(got) != "[]" {
		t.Errorf("an empty list as json: %q, want []", got)
	}
}

// TestCLIDeleteJSON (SPEC §11): every delete asked for -o json prints a
// JSON object naming what it deleted (a script reading its answer got
// nothing), and the other formats the same as every change's answer;
// without --output or --query it prints nothing, as before.
func TestCLIDeleteJSON(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "hp-del")
	b.addHost("hp-del", "sh-01")
	b.addHost("hp-del", "sh-02")
	regID := func() string {
		return strings.TrimSpace(b.ok("registration-token", "create", "--host-pool", "hp-del", "--expires", "24h", "--query", "id", "-o", "tsv"))
	}
	tokID := func() string {
		return strings.TrimSpace(b.ok("token", "create", "--role", "Reader", "--subject", "auditor", "--query", "id", "-o", "tsv"))
	}
	b.ok("applicationgroup", "create", "--name", "apps-1", "--host-pool", "hp-del", "--application-group-type", "RemoteApp")
	b.ok("applicationgroup", "create", "--name", "apps-2", "--host-pool", "hp-del", "--application-group-type", "RemoteApp")
	for _, n := range []string{"word", "cmd"} {
		b.ok("application", "create", "--application-group", "apps-1", "--name", n, "--file-path", `C:\Windows\system32\cmd.exe`)
	}
	plan := func(name string) {
		b.ok("scalingplan", "create", "--name", name, "--time-zone", "UTC", "--days-of-week", "Monday",
			"--ramp-up-start-time", "07:00", "--peak-start-time", "09:00", "--ramp-down-start-time", "17:00", "--off-peak-start-time", "19:00")
	}
	plan("plan-1")
	plan("plan-2")
	reg1, reg2, tok1, tok2 := regID(), regID(), tokID(), tokID()
	for _, c := range []struct {
		args, quiet []string // the same delete of two things: -o json, and without it
		want        map[string]string
	}{
		{[]string{"sessionhost", "delete", "--host-pool", "hp-del", "--name", "sh-01"}, []string{"sessionhost", "delete", "--host-pool", "hp-del", "--name", "sh-02"},
			map[string]string{"deleted": "sessionhost", "hostPool": "hp-del", "name": "sh-01"}},
		{[]string{"registration-token", "delete", "--host-pool", "hp-del", "--id", reg1}, []string{"registration-token", "delete", "--host-pool", "hp-del", "--id", reg2},
			map[string]string{"deleted": "registration-token", "hostPool": "hp-del", "id": reg1}},
		{[]string{"token", "delete", "--id", tok1}, []string{"token", "delete", "--id", tok2},
			map[string]string{"deleted": "token", "id": tok1}},
		{[]string{"application", "delete", "--application-group", "apps-1", "--name", "word"}, []string{"application", "delete", "--application-group", "apps-1", "--name", "cmd"},
			map[string]string{"deleted": "application", "applicationGroup": "apps-1", "name": "word"}},
		{[]string{"applicationgroup", "delete", "--name", "apps-1"}, []string{"applicationgroup", "delete", "--name", "apps-2"},
			map[string]string{"deleted": "applicationgroup", "name": "apps-1"}},
		{[]string{"scalingplan", "delete", "--name", "plan-1"}, []string{"scalingplan", "delete", "--name", "plan-2"},
			map[string]string{"deleted": "scalingplan", "name": "plan-1"}},
	} {
		out := b.ok(append(c.args, "-o", "json")...)
		var got map[string]string
		if err := json.Unmarshal([]byte(out), &got); err != nil || !maps.Equal(got, c.want) {
			t.Errorf("%v -o json printed %q (%v), want %v", c.args, out, err, c.want)
		}
		if out := b.ok(c.quiet...); out != "" {
			t.Errorf("%v printed %q, want nothing", c.quiet, out)
		}
	}
	// The other formats, as every change's answer (docs/cli.md, Output):
	// YAML, a query's answer (JSON by default then), a table and tsv.
	plan("plan-3")
	plan("plan-4")
	plan("plan-5")
	plan("plan-6")
	for _, c := range []struct{ args, want string }{
		{"plan-3 -o yaml", "deleted: scalingplan\nname: plan-3\n"},
		{"plan-4 --query name", "\"plan-4\"\n"},
		{"plan-5 -o table", "Deleted      Name\n-----------  ------\nscalingplan  plan-5\n"},
		{"plan-6 -o tsv", "scalingplan\tplan-6\n"},
	} {
		if out := b.ok(append([]string{"scalingplan", "delete", "--name"}, strings.Fields(c.args)...)...); out != c.want {
			t.Errorf("scalingplan delete --name %s printed %q, want %q", c.args, out, c.want)
		}
	}
}

// TestCLIDeletePoolWithHost (SPEC §9): hostpool delete of a pool whose
// registered host runs without a session exits 1 saying what would go and
// how to force it, and the agent keeps working; --force prints what went
// and the agent's credential is refused from then on.
func TestCLIDeletePoolWithHost(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "hp-run")
	cred := b.addHost("hp-run", "sh-01")
	r := b.cli("hostpool", "delete", "--name", "hp-run")
	if r.code != 1 || !strings.Contains(r.stderr, `has 1 session host (sh-01)`) || !strings.Contains(r.stderr, "hostpool delete --force") {
		t.Errorf("delete of a pool with a running host: exit %d, stderr %q", r.code, r.stderr)
	}
	checkCLIError(t, r)
	b.heartbeat(cred)
	out := b.ok("hostpool", "delete", "--name", "hp-run", "--force", "-o", "json")
	var del vdibroker.PoolDeletion
	if err := json.Unmarshal([]byte(out), &del); err != nil || del.SessionHosts != 1 || del.HostPool != "hp-run" || del.RegistrationTokens != 1 {
		t.Errorf("--force printed %q (%v), want the pool, 1 host and addHost's registration token", out, err)
	}
	_, err := vhttp.NewClient(b.m.URL(), "").Heartbeat(t.Context(), cred, &vdibroker.HeartbeatRequest{})
	if vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated {
		t.Errorf("the deleted host's agent heartbeats: %v", err)
	}
}

// TestCLICompletion: cobra's completion command and the fixed values of
// enum flags.
func TestCLICompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		r := runCLI(t, "completion", shell)
		if r.code != 0 || !strings.Contains(r.stdout, "vdibroker") {
			t.Errorf("completion %s: exit %d, %d bytes", shell, r.code, len(r.stdout))
		}
	}
	r := runCLI(t, "__complete", "hostpool", "update", "--load-balancer-type", "")
	for _, v := range []string{"BreadthFirst", "DepthFirst", "LoadIndex"} {
		if !strings.Contains(r.stdout, v+"\n") {
			t.Errorf("--load-balancer-type completion lacks %s:\n%s", v, r.stdout)
		}
	}
	// Names come from the broker.
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "contosohp01")
	b.addHost("contosohp01", "sh-01")
	// __complete completes the last word, so --server and --token go first.
	r = runCLI(t, "__complete", "sessionhost", "show", "--server", b.m.URL(), "--token", b.m.AdminToken, "--host-pool", "")
	if !strings.Contains(r.stdout, "contosohp01\n") {
		t.Errorf("--host-pool completion lacks contosohp01:\n%s", r.stdout)
	}
	r = runCLI(t, "__complete", "sessionhost", "show", "--server", b.m.URL(), "--token", b.m.AdminToken, "--host-pool", "contosohp01", "--name", "")
	if !strings.Contains(r.stdout, "sh-01\n") {
		t.Errorf("--name completion lacks sh-01:\n%s", r.stdout)
	}
	r = runCLI(t, "__complete", "hostpool", "")
	for _, v := range []string{"create", "update", "show", "list", "delete"} {
		if !strings.Contains(r.stdout, v+"\t") && !strings.Contains(r.stdout, v+"\n") {
			t.Errorf("hostpool subcommand completion lacks %s:\n%s", v, r.stdout)
		}
	}
}

// TestCLIPersonal: --assigned-user assigns a personal host (R-PE2); the
// assigned user lands there, others are refused; "" clears the list. Two
// users of one host need MultiplePersistent (a Persistent host is one
// user's, R-PE1).
func TestCLIPersonal(t *testing.T) {
	b := startCLIBroker(t)
	b.sharedPersonalHost("hp-personal", "alice", "alice2")
	if got := b.ok("sessionhost", "show", "--host-pool", "hp-personal", "--name", "sh-01", "--query", "assignedUsers", "-o", "json"); got != "[\n  \"alice\",\n  \"alice2\"\n]\n" {
		t.Errorf("assignedUsers = %s", got)
	}
	if got := b.ok("connect", "--host-pool", "hp-personal", "--user", "alice", "--query", "sessionHost", "-o", "tsv"); got != "sh-01\n" {
		t.Errorf("alice placed on %q", got)
	}
	r := b.cli("connect", "--host-pool", "hp-personal", "--user", "bob")
	if r.code != 1 {
		t.Errorf("unassigned bob: exit %d, want 1", r.code)
	}
	checkCLIError(t, r)
	// Filters of usersession list.
	if got := b.ok("usersession", "list", "--host-pool", "hp-personal", "--session-host", "sh-01", "--state", "Pending", "--query", "[].user", "-o", "tsv"); got != "alice\n" {
		t.Errorf("filtered list = %q", got)
	}
	if got := b.ok("usersession", "list", "--host-pool", "hp-personal", "--state", "LoggedOff", "-o", "json"); got != "[]\n" {
		t.Errorf("LoggedOff list = %q", got)
	}
	b.ok("sessionhost", "update", "--host-pool", "hp-personal", "--name", "sh-01", "--assigned-user", "")
	if got := b.ok("sessionhost", "show", "--host-pool", "hp-personal", "--name", "sh-01", "--query", "length(assignedUsers || `[]`)", "-o", "tsv"); got != "0\n" {
		t.Errorf("after --assigned-user \"\": %q assigned users", got)
	}
}

// TestCLIPlacementLoadIndex: the words of a LoadIndex decision from the
// real engine: bucket 1, round robin after the host chosen last (R-LI4).
func TestCLIPlacementLoadIndex(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "hp-li", "--load-balancer-type", "LoadIndex", "--max-session-limit", "10")
	b.addHost("hp-li", "sh-01")
	b.addHost("hp-li", "sh-02")
	var words []string
	for _, u := range []string{"alice", "bob"} {
		id := strings.TrimSpace(b.ok("connect", "--host-pool", "hp-li", "--user", u, "--query", "sessionId", "-o", "tsv"))
		words = append(words, b.ok("placement", "show", "--host-pool", "hp-li", "--session", id))
	}
	if !strings.Contains(words[0], "takes turns in name order; starting from the first host, sh-01 was next.") {
		t.Errorf("alice's placement:\n%s", words[0])
	}
	if !strings.Contains(words[1], "takes turns in name order; after sh-01, the host chosen last, sh-02 was next.") {
		t.Errorf("bob's placement:\n%s", words[1])
	}
}

// TestCLIResetRegistrationJSON (SPEC §11): sessionhost reset-registration
// changes something and, like a delete, gets no body from the API; asked
// for -o json it prints what it reset, {"reset": "registration",
// "hostPool", "name"}, so a script reading its JSON gets a document, and
// without --output or --query it prints nothing.
func TestCLIResetRegistrationJSON(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "hp-reset")
	b.addHost("hp-reset", "sh-01")
	b.addHost("hp-reset", "sh-02")
	out := b.ok("sessionhost", "reset-registration", "--host-pool", "hp-reset", "--name", "sh-01", "-o", "json")
	var got map[string]string
	want := map[string]string{"reset": "registration", "hostPool": "hp-reset", "name": "sh-01"}
	if err := json.Unmarshal([]byte(out), &got); err != nil || !maps.Equal(got, want) {
		t.Errorf("reset-registration -o json printed %q (%v), want %v", out, err, want)
	}
	if out := b.ok("sessionhost", "reset-registration", "--host-pool", "hp-reset", "--name", "sh-02"); out != "" {
		t.Errorf("reset-registration printed %q, want nothing", out)
	}
}

// TestCLITokenCreateHelp: token create's help names every role --role
// takes (Helpdesk was missing from its usage line) and says that a token
// without --expires never expires.
func TestCLITokenCreateHelp(t *testing.T) {
	r := runCLI(t, "token", "create", "--help")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	usage, _, _ := strings.Cut(r.stdout[strings.Index(r.stdout, "Usage:"):], "\n\n")
	for _, role := range []string{vdibroker.RoleReader, vdibroker.RoleHelpdesk, vdibroker.RoleContributor, vdibroker.RoleUser, vdibroker.RoleGateway} {
		if !strings.Contains(usage, role) {
			t.Errorf("usage does not name role %s:\n%s", role, usage)
		}
	}
	if !strings.Contains(r.stdout, "default: never expires") {
		t.Errorf("--expires does not say its default:\n%s", r.stdout)
	}
}

// TestCLIRegistrationTokenHelpNamesRealCommands: --session-host's help
// named "sessionhost put", which no command is; an admin creates such a
// host with the API's PUT of the session host.
func TestCLIRegistrationTokenHelpNamesRealCommands(t *testing.T) {
	r := runCLI(t, "registration-token", "create", "--help")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if strings.Contains(r.stdout, "sessionhost put") {
		t.Errorf("help names sessionhost put, no command:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "PUT /api/v1/hostpools/POOL/sessionhosts/HOST") {
		t.Errorf("help does not say how such a host is made:\n%s", r.stdout)
	}
	if r := runCLI(t, "sessionhost", "put"); r.code != 2 {
		t.Errorf("sessionhost put: exit %d, want 2 (no such command)", r.code)
	}
}

// TestUnansweredPods: federation sessions names the pods that did not
// answer, in words that agree with their number.
func TestUnansweredPods(t *testing.T) {
	if err := unansweredPods(nil); err != nil {
		t.Errorf("every pod answered: %v", err)
	}
	if got, want := unansweredPods(map[string]string{"pod2": "unreachable"}).Error(), "1 pod did not answer, its sessions are not listed: pod2 (unreachable)"; got != want {
		t.Errorf("one pod: %q, want %q", got, want)
	}
	if got, want := unansweredPods(map[string]string{"pod3": "timeout", "pod2": "unreachable"}).Error(), "2 pods did not answer, their sessions are not listed: pod2 (unreachable), pod3 (timeout)"; got != want {
		t.Errorf("two pods: %q, want %q", got, want)
	}
}

// TestCLITokenListShowsScope (R-SEC scoped roles): token list's table
// tells a token scoped to host pools from one that covers every pool;
// both were a Contributor with a subject, alike.
func TestCLITokenListShowsScope(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "pool-a")
	b.ok("hostpool", "create", "--name", "pool-b")
	b.ok("token", "create", "--role", "Contributor", "--subject", "scoped-ops", "--host-pools", "pool-a,pool-b")
	b.ok("token", "create", "--role", "Contributor", "--subject", "global-ops")
	out := b.ok("token", "list")
	lines := strings.Split(out, "\n")
	if !strings.Contains(lines[0], "HostPools") {
		t.Fatalf("no HostPools column:\n%s", out)
	}
	// Each token's row, found by its subject: a list that left one out
	// must fail too, not pass for want of a row to check.
	rows := map[string]string{}
	for _, l := range lines {
		for _, subject := range []string{"scoped-ops", "global-ops"} {
			if strings.Contains(l, subject) {
				rows[subject] = l
			}
		}
	}
	if l, ok := rows["scoped-ops"]; !ok || !strings.Contains(l, "pool-a, pool-b") {
		t.Errorf("the scoped token's row does not name its pools: %q\n%s", l, out)
	}
	if l, ok := rows["global-ops"]; !ok || !strings.Contains(l, "(all)") {
		t.Errorf("the global token's row does not say it covers every pool: %q\n%s", l, out)
	}
}

// TestCLITokenCreateTSVColumns: token create's tsv keeps the secret in
// the sixth field, where it was before token lists showed each token's
// host pools (a script's cut -f6); the pools come after it, then a
// Gateway token's gateway (R-GW4), its subject unless --gateway names it.
func TestCLITokenCreateTSVColumns(t *testing.T) {
	b := startCLIBroker(t)
	out := b.ok("token", "create", "--role", "Reader", "--subject", "auditor", "-o", "tsv")
	f := strings.Split(strings.TrimRight(out, "\n"), "\t")
	if len(f) != 8 || f[1] != "Reader" || f[2] != "auditor" || f[6] != "(all)" || f[7] != "" {
		t.Fatalf("token create -o tsv: %q, want Id, Role, Subject, CreateTime, ExpirationTime, Token, HostPools, Gateway", out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--subject", "rdgw-1"}, "rdgw-1"},
		{[]string{"--subject", "edge team", "--gateway", "rdgw-2"}, "rdgw-2"},
	} {
		out := b.ok(append([]string{"token", "create", "--role", "Gateway", "-o", "tsv"}, tc.args...)...)
		if g := strings.Split(strings.TrimRight(out, "\n"), "\t"); len(g) != 8 || g[7] != tc.want {
			t.Errorf("token create --role Gateway %v -o tsv: %q, want its gateway %s last", tc.args, out, tc.want)
		}
	}
	// The sixth field is the secret: it authenticates.
	r := runCLI(t, "hostpool", "list", "--server", b.m.URL(), "--token", f[5])
	if r.code != 0 {
		t.Errorf("the sixth field %q as a token: exit %d, %s", f[5], r.code, r.stderr)
	}
}

// TestCLIRegistrationTokenCreateShowsID: registration-token create's
// table names the new token's id, which registration-token delete --id
// takes; without it an admin who issued two tokens in one second could
// not tell which list row to revoke. The id comes last, so a script's
// cut -f3 of the tsv is still the secret.
func TestCLIRegistrationTokenCreateShowsID(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "contosohp01")
	out := b.ok("registration-token", "create", "--host-pool", "contosohp01", "--expires", "24h")
	if !strings.HasPrefix(out, "HostPool") || !strings.Contains(strings.SplitN(out, "\n", 2)[0], "Id") {
		t.Fatalf("no Id column:\n%s", out)
	}
	id := strings.TrimSpace(b.ok("registration-token", "list", "--host-pool", "contosohp01", "--query", "[0].id", "-o", "tsv"))
	if id == "" || !strings.Contains(out, id) {
		t.Fatalf("the table does not show the token's id %q:\n%s", id, out)
	}
	tsv := b.ok("registration-token", "create", "--host-pool", "contosohp01", "--expires", "24h", "-o", "tsv")
	f := strings.Split(strings.TrimRight(tsv, "\n"), "\t")
	if len(f) != 4 || f[0] != "contosohp01" || !strings.HasPrefix(f[2], "vdbr_") {
		t.Fatalf("registration-token create -o tsv: %q, want HostPool, ExpirationTime, Token, Id", tsv)
	}
	b.ok("registration-token", "delete", "--host-pool", "contosohp01", "--id", f[3])
	if got := b.ok("registration-token", "list", "--host-pool", "contosohp01", "--query", "[].id", "-o", "tsv"); strings.Contains(got, f[3]) {
		t.Errorf("the id of the tsv did not revoke its token: list %q", got)
	}
}

// TestCLIRegistrationTokenCreateChecksFlags (docs/cli.md, "Errors and
// exit status"): --max-hosts past the broker's bound and a --session-host
// the broker would refuse as a name are mistakes in the command, found
// before anything is sent (exit 2) and named by the flag with the range
// allowed; they were the broker's refusals (exit 1) naming its JSON
// fields maxHosts and sessionHost, and --max-hosts -1 named no upper
// bound. No token is issued.
func TestCLIRegistrationTokenCreateChecksFlags(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "contosohp01")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-hosts", "100001"}, `error: --max-hosts "100001": must be 0..100000 (0: no limit), got 100001`},
		{[]string{"--max-hosts", "-1"}, `error: --max-hosts "-1": must be 0..100000 (0: no limit), got -1`},
		{[]string{"--session-host", "x"}, `error: --session-host "x": must be 3..48 characters of A-Za-z0-9@._- and space, got 1`},
		{[]string{"--session-host", "a/b"}, `error: --session-host "a/b": `},
	} {
		r := b.cli(append([]string{"registration-token", "create", "--host-pool", "contosohp01"}, c.args...)...)
		if r.code != 2 || !strings.HasPrefix(r.stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", c.args, r.code, r.stderr, c.want)
		}
		checkCLIError(t, r)
	}
	if got := b.ok("registration-token", "list", "--host-pool", "contosohp01", "-o", "json"); got != "[]\n" {
		t.Errorf("a refused create issued a token: %s", got)
	}
	// The bounds themselves are taken.
	b.ok("registration-token", "create", "--host-pool", "contosohp01", "--max-hosts", "100000", "--session-host", "sh-01")
}

// TestCLISessionHostAddressChecked (docs/cli.md, "Errors and exit
// status"): sessionhost update --address is checked as the API checks a
// host's address, before anything is sent: exit 2 naming the flag, the
// value and the form. It was the broker's refusal (exit 1) naming its
// JSON field address. The host keeps its address.
func TestCLISessionHostAddressChecked(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "contosohp01")
	b.addHost("contosohp01", "sh-01")
	before := b.ok("sessionhost", "show", "--host-pool", "contosohp01", "--name", "sh-01", "--query", "address", "-o", "tsv")
	for _, c := range []struct{ address, want string }{
		{"bad", `error: --address "bad": must be host:port (for example rdsh01.example.com:3389), got "bad"`},
		{"127.0.0.1:70000", `error: --address "127.0.0.1:70000": port must be 1..65535, got "70000"`},
	} {
		r := b.cli("sessionhost", "update", "--host-pool", "contosohp01", "--name", "sh-01", "--address", c.address)
		if r.code != 2 || strings.TrimSpace(r.stderr) != c.want {
			t.Errorf("--address %s: exit %d, stderr %q; want exit 2 and %q", c.address, r.code, r.stderr, c.want)
		}
		checkCLIError(t, r)
	}
	if got := b.ok("sessionhost", "show", "--host-pool", "contosohp01", "--name", "sh-01", "--query", "address", "-o", "tsv"); got != before {
		t.Errorf("a refused update changed the address: %q, was %q", got, before)
	}
	b.ok("sessionhost", "update", "--host-pool", "contosohp01", "--name", "sh-01", "--address", "sh-01.contoso.com:3390")
}

// TestCLINamesStayInTheirPathSegment (R-SEC): a name or id the CLI puts
// in a request's path is escaped and stays one segment of it, whatever
// it holds. The client dropped the escaped form when it joined the
// server's URL to the path, so "../hostpools/victim" became two dot
// segments: applicationgroup delete --name ../hostpools/victim and
// token delete --id ../hostpools/victim each deleted the host pool
// victim (an audited hostpool.delete, answered as the delete asked for).
func TestCLINamesStayInTheirPathSegment(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "victim")
	b.ok("hostpool", "create", "--name", "contosohp01")
	for _, args := range [][]string{
		{"applicationgroup", "delete", "--name", "../hostpools/victim"},
		{"token", "delete", "--id", "../hostpools/victim"},
		{"registration-token", "delete", "--host-pool", "contosohp01", "--id", "../../victim"},
		{"application", "delete", "--application-group", "../hostpools", "--name", "victim"},
	} {
		r := b.cli(args...)
		if r.code == 0 {
			t.Errorf("%v: exit 0, want a refusal", args)
		}
		if got := b.ok("hostpool", "list", "--query", "[].name", "-o", "tsv"); got != "contosohp01\nvictim\n" {
			t.Fatalf("%v deleted a host pool: pools now %q", args, got)
		}
	}
	if got := b.ok("audit", "list", "--action", "hostpool.delete", "-o", "json"); got != "[]\n" {
		t.Errorf("audit trail has hostpool.delete entries: %s", got)
	}
}

// TestCLIAppGroupNamesChecked (docs/cli.md, "Errors and exit status"):
// application group and application names are checked as the API checks
// them (R-E1, R-E7), before anything is sent, as pool and host names
// are: exit 2 naming the flag, the value and the range. applicationgroup
// create --name ap was the broker's refusal (exit 1), and a name with a
// slash, which no group has, was sent to be answered not found.
func TestCLIAppGroupNamesChecked(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "contosohp01")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"applicationgroup", "create", "--name", "ap", "--host-pool", "contosohp01", "--application-group-type", "RemoteApp"},
			`error: --name "ap": must be 3..80 characters of A-Za-z0-9@._- and space, got 2`},
		{[]string{"applicationgroup", "show", "--name", "a/b"}, `error: --name "a/b": `},
		{[]string{"applicationgroup", "delete", "--name", "../hostpools/contosohp01"}, `error: --name "../hostpools/contosohp01": `},
		{[]string{"application", "list", "--application-group", "x/y"}, `error: --application-group "x/y": `},
		{[]string{"application", "create", "--application-group", "apps", "--name", strings.Repeat("w", 65), "--file-path", "C:\\w.exe"},
			`error: --name "` + strings.Repeat("w", 65) + `": must be 1..64 characters of A-Za-z0-9@._- and space, got 65`},
	} {
		r := b.cli(c.args...)
		if r.code != 2 || !strings.HasPrefix(r.stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", c.args, r.code, r.stderr, c.want)
		}
		checkCLIError(t, r)
	}
	if got := b.ok("audit", "list", "--action", "applicationgroup.put", "-o", "json"); got != "[]\n" {
		t.Errorf("a refused command reached the broker: %s", got)
	}
}

// TestCLIAppGroupUpdateNothing: applicationgroup update and application
// update without a flag that changes something are a mistake in the
// command (exit 2, "nothing to update"), as hostpool, sessionhost and
// scalingplan update are. They wrote the group back unchanged: exit 0
// and an applicationgroup.put entry in the audit trail for no change.
func TestCLIAppGroupUpdateNothing(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "contosohp01")
	b.ok("applicationgroup", "create", "--name", "apps", "--host-pool", "contosohp01", "--application-group-type", "RemoteApp")
	b.ok("application", "create", "--application-group", "apps", "--name", "word", "--file-path", `C:\word.exe`)
	puts := func() string {
		return b.ok("audit", "list", "--query", "length([?action=='applicationgroup.put' || action=='application.put'])", "-o", "tsv")
	}
	before := puts()
	for _, args := range [][]string{
		{"applicationgroup", "update", "--name", "apps"},
		{"application", "update", "--application-group", "apps", "--name", "word"},
	} {
		r := b.cli(args...)
		if r.code != 2 || !strings.HasPrefix(r.stderr, "error: nothing to update: give ") {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and nothing to update", args, r.code, r.stderr)
		}
		checkCLIError(t, r)
	}
	if got := puts(); got != before {
		t.Errorf("an update of nothing was written: %s put entries, were %s", strings.TrimSpace(got), strings.TrimSpace(before))
	}
	b.ok("applicationgroup", "update", "--name", "apps", "--add-users", "alice")
	b.ok("application", "update", "--application-group", "apps", "--name", "word", "--friendly-name", "Word")
}

// TestCLITokenScopeNamesUnknownPool (R-SEC scoped roles): a token scoped
// to a host pool that does not exist is issued (the pool may be made
// later) with a warning naming it, so that a typo in --host-pools is seen
// at once rather than as a token that sees no pool. A pool that exists
// gets no warning.
func TestCLITokenScopeNamesUnknownPool(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "contosohp01")
	r := b.cli("token", "create", "--role", "Reader", "--subject", "ops", "--host-pools", "contosohp01,contosohp1", "--query", "id", "-o", "tsv")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	// The new token's id, so that the admin can delete it as the warning says.
	id := strings.TrimSpace(r.stdout)
	if id == "" {
		t.Fatal("token create printed no id")
	}
	want := `warning: host pool "contosohp1" does not exist: this token sees no pool of that name until one is made; check the name (token delete --id ` + id + `, then create it again)` + "\n"
	if r.stderr != want {
		t.Errorf("stderr %q, want %q", r.stderr, want)
	}
	if r := b.cli("token", "create", "--role", "Reader", "--subject", "ops", "--host-pools", "contosohp01"); r.code != 0 || r.stderr != "" {
		t.Errorf("a token of an existing pool: exit %d, stderr %q; want no warning", r.code, r.stderr)
	}
}
