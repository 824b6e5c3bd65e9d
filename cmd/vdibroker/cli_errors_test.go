package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
)

// TestCLIErrorsGolden: each mistake below gets one line in the CLI's
// words and the right exit status, against a real broker on loopback:
// unknown commands and flags exit 2 with a "did you mean" (an unknown
// command after the admin commands' flags too); a bad value
// names the flag and what it allows, in the flag's units; a URL without a
// scheme, one naming /api/v1, a missing and a rejected token each get a
// hint. The outputs are testdata/error_*.golden (go test -update rewrites
// them); the exit status is part of each file.
func TestCLIErrorsGolden(t *testing.T) {
	t.Setenv("VDIBROKER_SERVER", "")
	t.Setenv("VDIBROKER_TOKEN", "")
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "contosohp01")
	url := b.m.URL()
	hostPort := strings.TrimPrefix(url, "http://")
	auth := []string{"--server", url, "--token", b.m.AdminToken}
	tests := []struct {
		name string
		args []string
		auth bool // append --server and --token
		code int
	}{
		{"unknown_subcommand", []string{"hostpool", "lst"}, true, 2},
		{"placement_explain", []string{"placement", "explain"}, true, 2},
		{"unknown_command", []string{"hostpol", "list"}, true, 2},
		// The flags first, as the demo's banner writes them: the
		// command is named, not --server, which root does not know.
		{"unknown_command_after_flags", []string{"--server", url, "--token", b.m.AdminToken, "-o", "json", "--insecure-http", "hostpol", "list"}, false, 2},
		{"flags_without_command", []string{"--server", url, "--token", b.m.AdminToken}, false, 2},
		{"unknown_flag", []string{"hostpool", "update", "--name", "contosohp01", "--max-sesion-limit", "3"}, true, 2},
		{"expires_10m", []string{"registration-token", "create", "--host-pool", "contosohp01", "--expires", "10m"}, true, 2},
		{"expires_not_a_duration", []string{"registration-token", "create", "--host-pool", "contosohp01", "--expires", "ten"}, true, 2},
		{"token_expires_too_long", []string{"token", "create", "--role", "Reader", "--subject", "x", "--expires", "100000h"}, true, 2},
		{"max_session_limit_abc", []string{"hostpool", "update", "--name", "contosohp01", "--max-session-limit", "abc"}, true, 2},
		{"max_session_limit_0", []string{"hostpool", "update", "--name", "contosohp01", "--max-session-limit", "0"}, true, 2},
		{"load_balancer_type_case", []string{"hostpool", "update", "--name", "contosohp01", "--load-balancer-type", "depthfirst"}, true, 2},
		{"load_balancer_type_of_personal", []string{"hostpool", "update", "--name", "contosohp01", "--load-balancer-type", "Persistent"}, true, 1},
		{"role_enum", []string{"token", "create", "--role", "Admin", "--subject", "x"}, true, 2},
		{"state_enum", []string{"usersession", "list", "--host-pool", "contosohp01", "--state", "Open"}, true, 2},
		{"output_near", []string{"hostpool", "list", "-o", "jsn"}, true, 2},
		{"name_with_slash", []string{"hostpool", "show", "--name", "bad/name"}, true, 2},
		{"host_name_with_slash", []string{"sessionhost", "show", "--host-pool", "contosohp01", "--name", "a/b"}, true, 2},
		{"server_without_scheme", []string{"hostpool", "list", "--server", hostPort, "--token", b.m.AdminToken}, false, 2},
		{"server_with_api_v1", []string{"hostpool", "list", "--server", url + "/api/v1", "--token", b.m.AdminToken}, false, 2},
		{"missing_token", []string{"hostpool", "list", "--server", url}, false, 2},
		{"rejected_token", []string{"hostpool", "list", "--server", url, "--token", "vdbt_wrong"}, false, 1},
		{"log_format_xml", []string{"serve", "--log-format", "xml"}, false, 2},
		{"pod_with_host_pool", []string{"usersession", "logoff", "--pod", "pod2", "--host-pool", "contosohp01", "--user", "y", "--id", "x"}, true, 2},
		{"pod_without_id", []string{"usersession", "disconnect", "--pod", "pod2", "--user", "y"}, true, 2},
		{"pod_without_user", []string{"usersession", "logoff", "--pod", "pod2", "--id", "x"}, true, 2},
		{"pod_bad_name", []string{"usersession", "logoff", "--pod", "pod2!", "--user", "y", "--id", "x"}, true, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.auth {
				args = append(append([]string(nil), tt.args...), auth...)
			}
			r := runCLI(t, args...)
			if r.code != tt.code {
				t.Errorf("exit %d, want %d; stderr %q", r.code, tt.code, r.stderr)
			}
			checkCLIError(t, r)
			norm := func(s string) string {
				s = strings.ReplaceAll(s, b.m.AdminToken, "<admin-token>")
				s = strings.ReplaceAll(s, url, "http://BROKER")
				return strings.ReplaceAll(s, hostPort, "BROKER")
			}
			got := fmt.Sprintf("$ vdibroker %s\nexit %d\n--- stderr\n%s--- stdout\n%s", norm(strings.Join(tt.args, " ")), r.code, norm(r.stderr), norm(r.stdout))
			path := filepath.Join("testdata", "error_"+tt.name+".golden")
			if *updateGolden {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("%s mismatch (-want +got):\n%s", path, diff)
			}
		})
	}
	// Nothing of those mistakes reached the pool.
	if got := b.ok("hostpool", "show", "--name", "contosohp01", "--query", "maxSessionLimit", "-o", "tsv"); got != "999999\n" {
		t.Errorf("a refused command changed the pool: maxSessionLimit %q", got)
	}
}

// TestServeDatabaseNotPostgres: a --database that is neither empty nor a
// postgres:// URL is a mistake in the command (exit 2) named by its flag,
// as VDIBROKER_DATABASE and --database-file give it too, without the
// store's error code and field, and without echoing the URL, which may
// hold a password.
func TestServeDatabaseNotPostgres(t *testing.T) {
	for _, args := range [][]string{
		{"--database", "mysql://u:s3cret@db/x"},
		{"--database", "s3cret"},
	} {
		r := runCLI(t, append([]string{"serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0"}, args...)...)
		if r.code != 2 {
			t.Errorf("%v: exit %d, want 2; stderr %q", args, r.code, r.stderr)
		}
		checkCLIError(t, r)
		if !strings.Contains(r.stderr, "--database: want empty (SQLite in --data-dir) or a postgres:// URL") {
			t.Errorf("%v: stderr %q does not name the flag and what it takes", args, r.stderr)
		}
		if strings.Contains(r.stderr, "s3cret") || strings.Contains(r.stderr, "InvalidArgument") {
			t.Errorf("%v: stderr %q echoes the URL or the API's code", args, r.stderr)
		}
	}
}

// TestServeDatabaseUnreachableOneLine: PostgreSQL's driver writes a
// failed connection over two lines with a tab; serve's error is still one
// line (docs/cli.md, "Errors and exit status"), with no \x09 in it.
func TestServeDatabaseUnreachableOneLine(t *testing.T) {
	r := runCLI(t, "serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0",
		"--database", "postgres://vdibroker@127.0.0.1:1/nodb")
	if r.code != 1 {
		t.Errorf("exit %d, want 1; stderr %q", r.code, r.stderr)
	}
	checkCLIError(t, r)
	if strings.Contains(r.stderr, `\x09`) || !strings.Contains(r.stderr, "open store: ") {
		t.Errorf("stderr %q", r.stderr)
	}
}

// TestCLIHelpAfterAdminFlags: --help or -h after the admin commands'
// flags, written first as the demo's banner writes them, shows root's
// help and exits 0, as vdibroker --help does; with a command after it,
// that command's help. It was "--server is a flag of commands ... and no
// command follows it", exit 2.
func TestCLIHelpAfterAdminFlags(t *testing.T) {
	const server = "http://127.0.0.1:1" // never asked: help needs no broker
	rootHelp := runCLI(t, "--help")
	poolHelp := runCLI(t, "hostpool", "--help")
	listHelp := runCLI(t, "hostpool", "list", "--help")
	if rootHelp.code != 0 || !strings.Contains(rootHelp.stdout, "Usage:") || poolHelp.code != 0 || listHelp.code != 0 {
		t.Fatalf("the help to compare with: exit %d %d %d, stdout %q", rootHelp.code, poolHelp.code, listHelp.code, rootHelp.stdout)
	}
	for _, tc := range []struct {
		args []string
		want cliResult
	}{
		{[]string{"--server", server, "--help"}, rootHelp},
		{[]string{"--server", server, "-h"}, rootHelp},
		{[]string{"--server=" + server, "--token", "t0ken", "-o", "json", "--insecure-http", "--help"}, rootHelp},
		{[]string{"--help", "--server", server}, rootHelp},
		// A command after it: that command's help, not the command run
		// with --help taken for the value of a flag.
		{[]string{"--server", server, "--help", "hostpool"}, poolHelp},
		{[]string{"--server", server, "-h", "hostpool", "list"}, listHelp},
		{[]string{"-h", "hostpool"}, poolHelp},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := runCLI(t, tc.args...)
			if r.code != 0 || r.stderr != "" {
				t.Errorf("exit %d, stderr %q; want 0 and nothing", r.code, r.stderr)
			}
			if diff := cmp.Diff(tc.want.stdout, r.stdout); diff != "" {
				t.Errorf("help differs (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCLISecretForCommandNotEchoed: with the admin flags first and
// --token left out, the token is read as the command; the CLI refuses it
// (exit 2) without writing it back, and asks whether --token was
// forgotten. A mistyped command stays named, with its "did you mean", and
// so does a word after --token, or without --server.
func TestCLISecretForCommandNotEchoed(t *testing.T) {
	const server = "http://127.0.0.1:1" // never asked: the command is refused first
	const hidden = "error: unknown command (not shown); did you forget --token? see vdibroker --help\n"
	for _, tc := range []struct {
		name   string
		args   []string
		secret string // must not be in the output; "" = echoed as before
		want   string // in stderr
	}{
		{"brief's example", []string{"--server", server, "SECRETVALUE", "hostpool", "list"}, "SECRETVALUE", hidden},
		{"API token", []string{"--server=" + server, "-o", "json", "vdbt_0123456789abcdef0123456789abcdef", "hostpool", "list"}, "vdbt_0123456789abcdef", hidden},
		{"admin token", []string{"--server", server, "--insecure-http", "Zq8x-1mP_4tYw9Lr2bVc7KdE3hUa6sNf", "hostpool", "list"}, "Zq8x-1mP", hidden},
		{"mistyped command", []string{"--server", server, "applicationgroups", "list"}, "", `unknown command "applicationgroups" for "vdibroker" (did you mean "applicationgroup"?)`},
		{"command and more", []string{"--server", server, "hostpoollist"}, "", `unknown command "hostpoollist"`},
		{"short word", []string{"--server", server, "hostpol", "list"}, "", `unknown command "hostpol"`},
		{"--token given", []string{"--server", server, "--token", "t0ken", "SECRETVALUE", "hostpool", "list"}, "", `unknown command "SECRETVALUE"`},
		// Lowercase words, as commands and pools are named, are plainly
		// no secret: hidden, they read as a forgotten --token.
		{"a word", []string{"--server", server, "deployment", "list"}, "", `unknown command "deployment" for "vdibroker" (commands: `},
		{"a pool's name", []string{"--server", server, "office-breadth", "hostpool", "list"}, "", `unknown command "office-breadth"`},
		{"a generated token", []string{"--server", server, "vdb_admin_e60ca30afbaaa7630685536ef76d3619d5f23f415cc86553", "hostpool", "list"}, "e60ca30a", hidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, tc.args...)
			if r.code != 2 {
				t.Errorf("exit %d, want 2", r.code)
			}
			checkCLIError(t, r)
			if tc.secret != "" && strings.Contains(r.stderr+r.stdout, tc.secret) {
				t.Errorf("output echoes the secret: %q", r.stderr)
			}
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr %q, want it to say %q", r.stderr, tc.want)
			}
		})
	}
}

// TestCLIAdminFlagsFirst: the admin flags written before the command, a
// boolean one among them, reach the command; --insecure-http before
// "hostpool list" was "unknown command "hostpool" (did you mean
// "hostpool"?)": cobra took hostpool for the flag's value.
func TestCLIAdminFlagsFirst(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "contosohp01")
	for _, args := range [][]string{
		{"--server", b.m.URL(), "--token", b.m.AdminToken, "--insecure-http", "hostpool", "list", "--query", "[].name", "-o", "tsv"},
		{"--insecure-http", "--server=" + b.m.URL(), "-o", "tsv", "--token", b.m.AdminToken, "hostpool", "show", "--name", "contosohp01", "--query", "name"},
	} {
		r := runCLI(t, args...)
		if r.code != 0 || r.stdout != "contosohp01\n" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want the pool's name", args[len(args)-6:], r.code, r.stdout, r.stderr)
		}
	}
}

// TestCLIAdminFlagsFirstParsedAsWritten: the admin flags written before
// the command are read as pflag reads them, wherever they are moved to:
// "-ojson" is -o with its value (it took "hostpool" for its value, then
// "list", or with the flags after it "--server"'s URL, for the command),
// a "--" after the command that is a flag's value stays that value (it
// was taken for the end of the flags, and the admin flags moved before
// it), a flag given twice keeps its last value as written, and a word
// being completed stays last.
func TestCLIAdminFlagsFirstParsedAsWritten(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "contosohp01")
	srv, tok := b.m.URL(), b.m.AdminToken
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // stdout, or a part of stderr when code is not 0
	}{
		{"-ojson before the command", []string{"--server", srv, "--token", tok, "-otsv", "hostpool", "list", "--query", "[].name"}, 0, "contosohp01\n"},
		{"-ojson first", []string{"-otsv", "--server", srv, "--token", tok, "hostpool", "show", "--name", "contosohp01", "--query", "name"}, 0, "contosohp01\n"},
		{"-o and a bad value", []string{"--server", srv, "--token", tok, "-ojsn", "hostpool", "list"}, 2, `--output "jsn"`},
		{"-- as a value", []string{"--server", srv, "--token", tok, "hostpool", "update", "--name", "contosohp01", "--description", "--", "--query", "description", "-o", "tsv"}, 0, "--\n"},
		{"the last --token counts", []string{"--token", "vdb_wrong", "--server", srv, "hostpool", "list", "--token", tok, "--query", "[].name", "-o", "tsv"}, 0, "contosohp01\n"},
		{"completion of the last word", []string{"--server", srv, "--token", tok, cobra.ShellCompNoDescRequestCmd, "hostpool", "li"}, 0, "list\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, tc.args...)
			if tc.code == 0 && (r.code != 0 || !strings.HasPrefix(r.stdout, tc.want)) {
				t.Errorf("exit %d, stdout %q, stderr %q; want 0 and %q", r.code, r.stdout, r.stderr, tc.want)
			}
			if tc.code != 0 && (r.code != tc.code || !strings.Contains(r.stderr, tc.want)) {
				t.Errorf("exit %d, stderr %q; want %d and %q", r.code, r.stderr, tc.code, tc.want)
			}
		})
	}
}

// TestCLISecretForSubcommandNotEchoed (R-SEC): the rule of
// TestCLISecretForCommandNotEchoed one word further: a token written
// without its --token after a group ("vdibroker --server URL hostpool
// SECRET") or after a command that takes no arguments was echoed in the
// group's or cobra's "unknown command"; now it is refused (exit 2)
// without being written back, asking whether --token was forgotten. A
// mistyped subcommand keeps its name and its "did you mean", and so does
// any word when --token is given or --server is not. Command lines that
// work still do, with the admin flags before the command, after it, or
// around the word (their outputs as main's build gave them; the command
// lines that differ from it are the hidden ones alone).
func TestCLISecretForSubcommandNotEchoed(t *testing.T) {
	const server = "http://127.0.0.1:1" // never asked: the command is refused first
	const token = "Zq8x1mP4tYw9Lr2bVc7KdE3hUa6sNf"
	for _, tc := range []struct {
		name   string
		args   []string
		secret string // must not be in the output; "" = echoed as before
		want   string // in stderr
	}{
		{"after a group", []string{"--server", server, "hostpool", token, "list"}, token,
			`error: unknown command (not shown) for "vdibroker hostpool"; did you forget --token? see vdibroker hostpool --help`},
		{"API token after a group", []string{"--server=" + server, "usersession", "vdbt_0123456789abcdef0123456789abcdef"}, "vdbt_0123456789abcdef",
			`unknown command (not shown) for "vdibroker usersession"; did you forget --token?`},
		{"flags after the group", []string{"hostpool", "--server", server, "-o", "json", token}, token, "did you forget --token?"},
		{"after a command of no arguments", []string{"--server", server, "hostpool", "show", "--name", "office", token}, token,
			`error: unknown command (not shown) for "vdibroker hostpool show"; did you forget --token? see vdibroker hostpool show --help`},
		{"mistyped subcommand", []string{"--server", server, "hostpool", "lisst"}, "",
			`unknown command "lisst" for "vdibroker hostpool" (did you mean "list"?)`},
		{"subcommand and more", []string{"--server", server, "hostpool", "listAllPools2024"}, "", `unknown command "listAllPools2024" for "vdibroker hostpool"`},
		{"a word", []string{"--server", server, "hostpool", "deployment-ring"}, "", `unknown command "deployment-ring" for "vdibroker hostpool" (commands: `},
		{"a stray argument", []string{"--server", server, "hostpool", "list", "extra"}, "", `error: unknown command "extra" for "vdibroker hostpool list"` + "\n"},
		{"--token given", []string{"--server", server, "--token", "t0ken", "hostpool", token}, "", `unknown command "` + token + `" for "vdibroker hostpool"`},
		{"--token after it", []string{"--server", server, "hostpool", "show", token, "--token", "t0ken"}, "", `unknown command "` + token + `" for "vdibroker hostpool show"`},
		{"no --server", []string{"hostpool", token}, "", `unknown command "` + token + `" for "vdibroker hostpool"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, tc.args...)
			if r.code != 2 {
				t.Errorf("exit %d, want 2; stderr %q", r.code, r.stderr)
			}
			checkCLIError(t, r)
			if tc.secret != "" && strings.Contains(r.stderr+r.stdout, tc.secret) {
				t.Errorf("output echoes the secret: %q", r.stderr)
			}
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr %q, want it to say %q", r.stderr, tc.want)
			}
		})
	}

	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "office")
	srv, tok := b.m.URL(), b.m.AdminToken
	for _, tc := range []struct {
		name string
		args []string
		want string // stdout
	}{
		{"flags first", []string{"--server", srv, "--token", tok, "hostpool", "list", "--query", "[].name", "-o", "tsv"}, "office\n"},
		{"--token after the group", []string{"--server", srv, "hostpool", "--token", tok, "list", "--query", "[].name", "-o", "tsv"}, "office\n"},
		{"--token last", []string{"--server", srv, "hostpool", "show", "--name", "office", "--query", "name", "-o", "tsv", "--token", tok}, "office\n"},
		{"-otsv first", []string{"-otsv", "--server", srv, "--token", tok, "usersession", "list", "--host-pool", "office"}, ""},
		{"a value like a token", []string{"--server", srv, "--token", tok, "hostpool", "update", "--name", "office", "--description", token, "--query", "description", "-o", "tsv"}, token + "\n"},
		{"a group's help", []string{"--server", srv, "hostpool"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, tc.args...)
			if r.code != 0 || (tc.want != "" && r.stdout != tc.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want 0 and %q", r.code, r.stdout, r.stderr, tc.want)
			}
		})
	}
}

// TestCLIAgentSecretAsksForItsFlag (R-SEC): the agent's --server is the
// broker it registers with, and its secret is a registration token
// (vdbr_): one written without its flag is not echoed, and the refusal
// names the flag the agent has, --registration-token; it said "did you
// forget --token?", a flag the agent does not take.
func TestCLIAgentSecretAsksForItsFlag(t *testing.T) {
	const secret = "vdbr_0123456789abcdef0123456789abcdef"
	for _, args := range [][]string{
		{"agent", "--server", "http://127.0.0.1:1", secret},
		{"agent", "install", "--server", "http://127.0.0.1:1", secret},
	} {
		root := &cobra.Command{Use: "vdibroker", SilenceUsage: true, SilenceErrors: true}
		configureRoot(root)
		root.AddCommand(newAgentCmd())
		var out, errOut strings.Builder
		root.SetOut(&out)
		root.SetErr(&errOut)
		root.SetContext(t.Context())
		code := execute(root, args, &errOut)
		if code != 2 || strings.Contains(out.String()+errOut.String(), secret) ||
			!strings.Contains(errOut.String(), "did you forget --registration-token?") {
			t.Errorf("%q: exit %d, stderr %q; want 2, the token not shown, asking for --registration-token", args, code, errOut.String())
		}
	}
}
