package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestCLIEntitlementsGolden: application groups and applications made,
// changed, shown and listed with the az-style commands, their tables and
// JSON pinned in testdata (-update rewrites them); what a user may use,
// and an application's connect.
func TestCLIEntitlementsGolden(t *testing.T) {
	b := startCLIBroker(t)
	var m cliMasker
	b.ok("hostpool", "create", "--name", "contosohp01")
	b.addHost("contosohp01", "sh-01")
	b.ok("applicationgroup", "create", "--name", "contosohp01-dag", "--host-pool", "contosohp01", "--application-group-type", "Desktop",
		"--users", "Alice@Contoso.com,bob", "--friendly-name", "Sales desktops")
	b.ok("applicationgroup", "create", "--name", "office-apps", "--host-pool", "contosohp01", "--application-group-type", "RemoteApp",
		"--groups", "Sales")
	b.ok("applicationgroup", "update", "--name", "office-apps", "--add-groups", "Finance", "--add-users", "carol", "--description", "Office")
	b.ok("applicationgroup", "update", "--name", "contosohp01-dag", "--remove-users", "BOB")
	b.ok("application", "create", "--application-group", "office-apps", "--name", "word", "--file-path", `C:\Program Files\Microsoft Office\WINWORD.EXE`,
		"--command-line-setting", "Allow", "--friendly-name", "Word", "--show-in-portal", "true")
	b.ok("application", "create", "--application-group", "office-apps", "--name", "cmd", "--file-path", `C:\Windows\system32\cmd.exe`,
		"--command-line-setting", "Require", "--command-line-arguments", "/k dir")
	b.ok("application", "update", "--application-group", "office-apps", "--name", "cmd", "--friendly-name", "Command Prompt")

	cmds := map[string][]string{
		"applicationgroup_show": {"applicationgroup", "show", "--name", "office-apps"},
		"applicationgroup_list": {"applicationgroup", "list", "--host-pool", "contosohp01"},
		"application_show":      {"application", "show", "--application-group", "office-apps", "--name", "cmd"},
		"application_list":      {"application", "list", "--application-group", "office-apps"},
		"user_entitlements":     {"user", "entitlements", "--user", "alice@contoso.com", "--groups", "finance"},
	}
	for name, args := range cmds {
		for _, format := range []string{formatTable, formatJSON} {
			t.Run(name+"_"+format, func(t *testing.T) {
				checkCLIGolden(t, name+"_"+format, m.mask(b.ok(append(args, "--output", format)...)))
			})
		}
	}

	// An application's connect: its .rdp opens it.
	out := b.ok("application", "connect", "--application-group", "office-apps", "--name", "word", "--user", "carol",
		"--command-line", "/safe", "--query", "rdpFile", "-o", "tsv")
	for _, line := range []string{"remoteapplicationmode:i:1", "remoteapplicationprogram:s:||word", "remoteapplicationname:s:Word", "remoteapplicationcmdline:s:/safe"} {
		if !strings.Contains(out, line) {
			t.Errorf("application connect's rdpFile lacks %q:\n%s", line, out)
		}
	}
	// Refusals name the flag's field; nothing changes.
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"second Desktop group", []string{"applicationgroup", "create", "--name", "more-desktops", "--host-pool", "contosohp01", "--application-group-type", "Desktop"}, "at most one"},
		{"create over an existing one", []string{"applicationgroup", "create", "--name", "office-apps", "--host-pool", "contosohp01", "--application-group-type", "RemoteApp"}, "exists already"},
		// A create over an existing one says so whatever else is wrong
		// with it, as when it read before writing (R-E13).
		{"create over an existing one in a missing pool", []string{"applicationgroup", "create", "--name", "office-apps", "--host-pool", "nopool", "--application-group-type", "RemoteApp"}, "exists already"},
		{"create over an existing application with a bad flag", []string{"application", "create", "--application-group", "office-apps", "--name", "word", "--file-path", `C:\word.exe`, "--command-line-setting", "Require"}, "exists already"},
		{"a type that does not exist", []string{"applicationgroup", "create", "--name", "x-apps", "--host-pool", "contosohp01", "--application-group-type", "remoteapp"}, "did you mean RemoteApp"},
		{"Require without arguments", []string{"application", "update", "--application-group", "office-apps", "--name", "word", "--command-line-setting", "Require"}, "commandLineArguments"},
	} {
		r := b.cli(c.args...)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want a refusal saying %q", c.name, r.code, r.stderr, c.want)
		}
	}
	if got := b.ok("application", "show", "--application-group", "office-apps", "--name", "word", "--query", "commandLineSetting", "-o", "tsv"); strings.TrimSpace(got) != "Allow" {
		t.Errorf("word's setting after a refused update: %q", got)
	}
	b.ok("application", "delete", "--application-group", "office-apps", "--name", "cmd")
	b.ok("applicationgroup", "delete", "--name", "office-apps")
	if got := b.ok("applicationgroup", "list", "--query", "[].name", "-o", "tsv"); strings.TrimSpace(got) != "contosohp01-dag" {
		t.Errorf("groups after the deletes: %q", got)
	}
}

// TestCLIRemoveNotAssignedWarns_RE2: taking a user or group out of an
// application group that it is not assigned to (a mistyped name: the
// one meant keeps her access) changes nothing and says so on stderr,
// exit 0; so does taking one out of a group assigned to all users, who
// keeps it through that. A removal that did what it says prints nothing.
func TestCLIRemoveNotAssignedWarns_RE2(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "contosohp01")
	b.ok("applicationgroup", "create", "--name", "office-apps", "--host-pool", "contosohp01", "--application-group-type", "RemoteApp",
		"--users", "alice@contoso.com,bob@contoso.com", "--groups", "Sales")
	tests := []struct {
		name string
		args []string
		want string // stderr
		// users and groups assigned after it
		users, groups string
	}{
		{"a mistyped user", []string{"--remove-users", "alice@contoso.co"},
			"warning: user \"alice@contoso.co\" is not assigned to application group \"office-apps\": nothing removed for it\n",
			"alice@contoso.com,bob@contoso.com", "Sales"},
		{"a mistyped group", []string{"--remove-groups", "Sale"},
			"warning: group \"Sale\" is not assigned to application group \"office-apps\": nothing removed for it\n",
			"alice@contoso.com,bob@contoso.com", "Sales"},
		{"assigned ones in any case", []string{"--remove-users", "BOB@contoso.com", "--remove-groups", "sales"}, "",
			"alice@contoso.com", ""},
		{"of a group for all users", []string{"--all-users", "true", "--remove-users", "alice@contoso.com"},
			"warning: application group \"office-apps\" is assigned to all users: those taken out still have it (--all-users false to end that)\n",
			"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := b.cli(append([]string{"applicationgroup", "update", "--name", "office-apps"}, tt.args...)...)
			if r.code != 0 || r.stderr != tt.want {
				t.Errorf("exit %d, stderr %q; want 0, %q", r.code, r.stderr, tt.want)
			}
			got := b.ok("applicationgroup", "show", "--name", "office-apps", "--query", "[join(',', assignments.users), join(',', assignments.groups)]", "-o", "tsv")
			if want := tt.users + "\n" + tt.groups + "\n"; got != want {
				t.Errorf("assigned after it: %q, want %q", got, want)
			}
		})
	}
}

// TestCLIApplicationHiddenFromPortalSaid_RU5: an application created
// without --show-in-portal is not in the users' feed (R-U5); the CLI
// says so, once, on stderr, and not when the flag was given (either
// way) nor at an update.
func TestCLIApplicationHiddenFromPortalSaid_RU5(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "contosohp01")
	b.ok("applicationgroup", "create", "--name", "office-apps", "--host-pool", "contosohp01", "--application-group-type", "RemoteApp")
	const hidden = "application %s is not in the users' portal (showInPortal false, the default)"
	for _, tt := range []struct {
		name  string
		flags []string
		said  bool
	}{
		{"word", nil, true},
		{"excel", []string{"--show-in-portal", "true"}, false},
		{"backup", []string{"--show-in-portal", "false"}, false},
	} {
		r := b.cli(append([]string{"application", "create", "--application-group", "office-apps", "--name", tt.name, "--file-path", `C:\` + tt.name + `.exe`}, tt.flags...)...)
		if r.code != 0 || strings.Contains(r.stderr, fmt.Sprintf(hidden, tt.name)) != tt.said || strings.Count(r.stderr, "warning:") > 1 {
			t.Errorf("create %s %v: exit %d, stderr %q; want it said: %v", tt.name, tt.flags, r.code, r.stderr, tt.said)
		}
	}
	if r := b.cli("application", "update", "--application-group", "office-apps", "--name", "word", "--friendly-name", "Word"); r.code != 0 || strings.Contains(r.stderr, "portal") {
		t.Errorf("update: exit %d, stderr %q; want nothing said of the portal", r.code, r.stderr)
	}
}

// TestCLIUserTokenNotEntitled_RE3: an end user's own token refused an
// application (and a desktop) it is not assigned says, in words the end
// user can act on, that an administrator assigns it (the NotEntitled
// wording of R-E3), not advice to assign it themselves; exit 1.
func TestCLIUserTokenNotEntitled_RE3(t *testing.T) {
	b := suggestWorld(t) // office-apps, a RemoteApp group of contosohp01 assigned to nobody
	secret := strings.TrimSpace(b.ok("token", "create", "--role", "User", "--subject", "hal@contoso.com", "--groups", "Finance", "--query", "token", "-o", "tsv"))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"application", "connect", "--application-group", "office-apps", "--name", "excel", "--user", "hal@contoso.com"},
			`error: user "hal@contoso.com" is not entitled to application group "office-apps": an administrator assigns it to the user, or to one of their groups` + "\n"},
		{[]string{"connect", "--host-pool", "contosohp01", "--user", "hal@contoso.com"},
			`error: user "hal@contoso.com" is not entitled to the desktop of host pool "contosohp01": an administrator assigns it to the user, or to one of their groups` + "\n"},
	} {
		r := runCLI(t, append(tc.args, "--server", b.m.URL(), "--token", secret)...)
		if r.code != 1 || r.stderr != tc.want || r.stdout != "" {
			t.Errorf("%s: exit %d, stderr %q, stdout %q; want 1 and %q", tc.args[0], r.code, r.stderr, r.stdout, tc.want)
		}
	}
}
