package main

import (
	"encoding/json"
	"fmt"
	"io"
	nethttp "net/http"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// postJSON sends body to path on the broker with the admin token and
// answers the status and the decoded error body.
func (b *cliBroker) postJSON(method, path, body string) (int, map[string]string) {
	b.tb.Helper()
	req, err := nethttp.NewRequestWithContext(b.tb.Context(), method, b.m.URL()+path, strings.NewReader(body))
	if err != nil {
		b.tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+b.m.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	res, err := nethttp.DefaultClient.Do(req)
	if err != nil {
		b.tb.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var e struct {
		Error map[string]string `json:"error"`
	}
	_ = json.Unmarshal(raw, &e)
	return res.StatusCode, e.Error
}

// TestTokenEmptySubjectRefused_RSEC: every role's token needs a subject,
// the name the audit trail gives its calls; the API refused an empty one
// only for User tokens.
func TestTokenEmptySubjectRefused_RSEC(t *testing.T) {
	b := startCLIBroker(t)
	for _, role := range []string{"Reader", "Helpdesk", "Contributor", "Gateway", "User"} {
		status, e := b.postJSON("POST", "/api/v1/tokens", `{"role": "`+role+`", "subject": ""}`)
		if status != 400 || e["code"] != "InvalidArgument" || e["field"] != "subject" || !strings.Contains(e["message"], "1..256 characters") {
			t.Errorf("%s token, empty subject: %d %v; want 400 InvalidArgument naming subject and 1..256 characters", role, status, e)
		}
	}
	if r := b.cli("token", "create", "--role", "Reader", "--subject", ""); r.code != 2 || !strings.Contains(r.stderr, "--subject") {
		t.Errorf("token create --subject '': exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestAppGroupListOfMissingPool_RE1: a list filtered by a pool that does
// not exist says the pool is not found, in the API and in the CLI, as the
// session host list does, rather than an empty list read as "no groups".
func TestAppGroupListOfMissingPool_RE1(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "contosohp01")
	hosts := b.cli("sessionhost", "list", "--host-pool", "nopool")
	groups := b.cli("applicationgroup", "list", "--host-pool", "nopool")
	if hosts.code != 1 || groups.code != hosts.code || groups.stderr != hosts.stderr || groups.stdout != "" {
		t.Errorf("applicationgroup list --host-pool nopool: exit %d, stdout %q, stderr %q; want as sessionhost list: exit %d, stderr %q",
			groups.code, groups.stdout, groups.stderr, hosts.code, hosts.stderr)
	}
	checkCLIError(t, groups)
	status, e := b.postJSON("GET", "/api/v1/applicationgroups?hostPool=nopool", "")
	if status != 404 || e["code"] != "NotFound" || !strings.Contains(e["message"], `"nopool"`) {
		t.Errorf("GET /applicationgroups?hostPool=nopool: %d %v; want 404 NotFound naming the pool", status, e)
	}
	// An existing pool without groups still lists none.
	if got := b.ok("applicationgroup", "list", "--host-pool", "contosohp01", "-o", "json"); strings.TrimSpace(got) != "[]" {
		t.Errorf("applicationgroup list of a pool without groups: %q, want []", got)
	}
}

// TestAuditListUnknownAction_RSEC: an --action no audit entry can have (a
// typo) is refused naming action and the actions of its noun, or the
// docs' list; a known action, even one nobody did yet, and a refused
// route's pattern list as before.
func TestAuditListUnknownAction_RSEC(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "contosohp01")
	r := b.cli("audit", "list", "--action", "sessionhost.updat")
	if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, `action: no audit entry has action "sessionhost.updat"`) ||
		!strings.Contains(r.stderr, "sessionhost.update") || !strings.Contains(r.stderr, "sessionhost.put") || strings.Contains(r.stderr, "hostpool.put") {
		t.Errorf("--action sessionhost.updat: exit %d, stdout %q, stderr %q; want exit 1 naming action and the sessionhost actions", r.code, r.stdout, r.stderr)
	}
	checkCLIError(t, r)
	r = b.cli("audit", "list", "--action", "hostpol")
	if r.code != 1 || !strings.Contains(r.stderr, `"hostpol"`) || !strings.Contains(r.stderr, "docs/behaviour.md") {
		t.Errorf("--action hostpol: exit %d, stderr %q; want exit 1 pointing at the docs", r.code, r.stderr)
	}
	for _, tc := range []struct{ action, want string }{
		{"hostpool.put", "hostpool.put\n"},
		{"sessionhost.update", ""}, // nobody did it yet: an empty answer, as before
		// vdibroker restore writes it into the restored store: on a store
		// never restored it finds nothing, not a refusal (docs/operations.md).
		{"store.restore", ""},
		{"GET /api/v1/hostpools/{pool}", ""},
	} {
		if got := b.ok("audit", "list", "--action", tc.action, "--query", "[].action", "-o", "tsv"); got != tc.want {
			t.Errorf("--action %q: %q, want %q", tc.action, got, tc.want)
		}
	}
	// What serve mounts beside the API (the console, the portal,
	// Prometheus) is served but not audited: no entry has its pattern.
	for _, action := range []string{"/", "GET /metrics", "/portal/"} {
		r := b.cli("audit", "list", "--action", action)
		if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, fmt.Sprintf("action: no audit entry has action %q", action)) ||
			!strings.Contains(r.stderr, "not one of the API's") || !strings.Contains(r.stderr, `"GET /api/v1/hostpools"`) {
			t.Errorf("--action %q: exit %d, stdout %q, stderr %q; want exit 1 naming action, the route not audited, and what is", action, r.code, r.stdout, r.stderr)
		}
		checkCLIError(t, r)
	}
	status, e := b.postJSON("GET", "/api/v1/auditlog?action=token.creat", "")
	if status != 400 || e["code"] != "InvalidArgument" || e["field"] != "action" || !strings.Contains(e["message"], "token.create") {
		t.Errorf("GET /auditlog?action=token.creat: %d %v; want 400 naming action and token.create", status, e)
	}
}

// TestCLIDescriptionTooLong: every command that takes --description
// refuses one longer than the broker's 512 characters itself, exit 2
// naming the flag and the limit, and sends nothing; 512 characters pass.
func TestCLIDescriptionTooLong(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "contosohp01")
	b.ok("applicationgroup", "create", "--name", "office-desktops", "--host-pool", "contosohp01", "--application-group-type", "Desktop")
	long := strings.Repeat("é", 513) // runes, not bytes: 1026 bytes
	cases := map[string][]string{
		"vdibroker hostpool create":         {"--name", "contosohp02"},
		"vdibroker hostpool update":         {"--name", "contosohp01"},
		"vdibroker applicationgroup create": {"--name", "office-apps", "--host-pool", "contosohp01", "--application-group-type", "RemoteApp"},
		"vdibroker applicationgroup update": {"--name", "office-desktops"},
		"vdibroker scalingplan create":      {"--name", "plan1", "--time-zone", "UTC"},
		"vdibroker scalingplan update":      {"--name", "plan1"},
	}
	// Every command with --description is a case: a new one is checked too.
	root := &cobra.Command{Use: "vdibroker"}
	root.AddCommand(newAdminCommands()...)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Flags().Lookup("description") != nil {
			if _, ok := cases[c.CommandPath()]; !ok {
				t.Errorf("%s takes --description but is not checked here", c.CommandPath())
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	for path, args := range cases {
		cmd := strings.Fields(strings.TrimPrefix(path, "vdibroker "))
		r := b.cli(append(append(cmd, args...), "--description", long)...)
		if want := "error: --description: must be at most 512 characters, got 513\n"; r.code != 2 || r.stderr != want {
			t.Errorf("%s --description of 513 characters: exit %d, stderr %q; want exit 2, %q", path, r.code, r.stderr, want)
		}
	}
	if got := b.ok("hostpool", "update", "--name", "contosohp01", "--description", long[2:]); got != "" {
		t.Errorf("hostpool update: %q", got)
	}
	if got := b.ok("hostpool", "show", "--name", "contosohp01", "--query", "description", "-o", "tsv"); got != long[2:]+"\n" {
		t.Errorf("a description of 512 characters was not kept whole: %d bytes", len(got))
	}
	if n := strings.Count(b.ok("audit", "list", "--action", "hostpool.update", "-o", "tsv"), "\n"); n != 1 {
		t.Errorf("%d hostpool.update entries, want 1: a refused flag sent nothing", n)
	}
}

// TestSessionHostUpdateAuditStatus_RH1: the audit entry of a session host
// update has the host's status, before and after (a status is evaluated
// when read, and the entry had it empty).
func TestSessionHostUpdateAuditStatus_RH1(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "contosohp01")
	b.addHost("contosohp01", "sh-01")
	b.ok("sessionhost", "update", "--host-pool", "contosohp01", "--name", "sh-01", "--allow-new-session", "false")
	var entries []struct {
		Before, After struct {
			Status          string
			AllowNewSession bool
		}
	}
	out := b.ok("audit", "list", "--action", "sessionhost.update", "-o", "json")
	if err := json.Unmarshal([]byte(out), &entries); err != nil || len(entries) != 1 {
		t.Fatalf("audit list: %v, %s", err, out)
	}
	e := entries[0]
	if e.Before.Status != "Available" || e.After.Status != "Available" || !e.Before.AllowNewSession || e.After.AllowNewSession {
		t.Errorf("sessionhost.update entry: before %+v, after %+v; want status Available in both, the drain from true to false", e.Before, e.After)
	}
}

// TestRegistrationTokenUsedUpSingular: a one-use registration token's
// refusal says "its 1 host", not "its 1 hosts".
func TestRegistrationTokenUsedUpSingular(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "contosohp01")
	token := strings.TrimSpace(b.ok("registration-token", "create", "--host-pool", "contosohp01", "--max-hosts", "1", "--query", "token", "-o", "tsv"))
	c := vhttp.NewClient(b.m.URL(), "")
	for i, name := range []string{"sh-01", "sh-02"} {
		_, err := c.Register(t.Context(), &vdibroker.RegisterRequest{Token: token, HostName: name, Address: name + ".contoso.test:3389", Protocols: []string{"RDP"}})
		switch {
		case i == 0 && err != nil:
			t.Fatalf("register %s: %v", name, err)
		case i == 1 && (err == nil || !strings.Contains(err.Error(), "has registered its 1 host (maxHosts)")):
			t.Errorf("register %s with a used one-use token: %v; want \"has registered its 1 host (maxHosts)\"", name, err)
		}
	}
}

// TestCLIOtherTextsHeldToLimits: the other free texts the broker counts in
// characters are held to its limits as they parse, exit 2 naming the flag
// and the limit, as --description is; a text of the limit, in characters
// of two bytes, is sent and kept whole.
func TestCLIOtherTextsHeldToLimits(t *testing.T) {
	b := startCLIBroker(t)
	for _, tc := range []struct {
		args []string
		flag string
		max  int
	}{
		{[]string{"application", "create", "--application-group", "apps", "--name", "word"}, "file-path", vdibroker.MaxFilePathLen},
		{[]string{"application", "update", "--application-group", "apps", "--name", "word"}, "icon-path", vdibroker.MaxFilePathLen},
		{[]string{"application", "create", "--application-group", "apps", "--name", "word"}, "command-line-arguments", vdibroker.MaxCommandLineLen},
		{[]string{"application", "connect", "--application-group", "apps", "--name", "word", "--user", "anna"}, "command-line", vdibroker.MaxCommandLineLen},
		{[]string{"scalingplan", "create", "--name", "plan1", "--time-zone", "UTC"}, "ramp-down-notification-message", vdibroker.MaxNotificationMessageLen},
		{[]string{"scalingplan", "update", "--name", "plan1"}, "ramp-down-notification-message", vdibroker.MaxNotificationMessageLen},
		{[]string{"usersession", "send-message", "--host-pool", "contosohp01", "--id", "s1"}, "message", vdibroker.MaxMessageLen},
		{[]string{"sessionhost", "send-message", "--host-pool", "contosohp01", "--name", "sh-01"}, "message", vdibroker.MaxMessageLen},
	} {
		r := b.cli(append(tc.args, "--"+tc.flag, strings.Repeat("é", tc.max+1))...)
		want := fmt.Sprintf("error: --%s: must be at most %d characters, got %d\n", tc.flag, tc.max, tc.max+1)
		if r.code != 2 || r.stderr != want {
			t.Errorf("%s --%s of %d characters: exit %d, stderr %q; want exit 2, %q", strings.Join(tc.args[:2], " "), tc.flag, tc.max+1, r.code, r.stderr, want)
		}
	}
	msg := strings.Repeat("é", vdibroker.MaxNotificationMessageLen)
	b.ok("scalingplan", "create", "--name", "plan1", "--time-zone", "UTC", "--days-of-week", "Monday",
		"--ramp-up-start-time", "07:00", "--peak-start-time", "09:00", "--ramp-down-start-time", "17:00", "--off-peak-start-time", "19:00", "--ramp-down-notification-message", msg)
	if got := b.ok("scalingplan", "show", "--name", "plan1", "--query", "schedules[0].rampDownNotificationMessage", "-o", "tsv"); got != msg+"\n" {
		t.Errorf("a ramp-down message of %d characters was not kept whole: %d bytes", vdibroker.MaxNotificationMessageLen, len(got))
	}
}

// TestRegistrationTokenForTwinNameCLI_RSEC: `registration-token create
// --session-host OFFICE-01` beside office-01 exits 1 with the broker's
// 409, which names the flag's field and office-01, the name to give;
// --session-host office-01 issues the token.
func TestRegistrationTokenForTwinNameCLI_RSEC(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "contosohp01")
	token := strings.TrimSpace(b.ok("registration-token", "create", "--host-pool", "contosohp01", "--query", "token", "-o", "tsv"))
	c := vhttp.NewClient(b.m.URL(), "")
	if _, err := c.Register(t.Context(), &vdibroker.RegisterRequest{Token: token, HostName: "office-01", Address: "office-01.contoso.test:3389", Protocols: []string{"RDP"}}); err != nil {
		t.Fatal(err)
	}
	r := b.cli("registration-token", "create", "--host-pool", "contosohp01", "--session-host", "OFFICE-01")
	if r.code != 1 || !strings.Contains(r.stderr, "sessionHost") || !strings.Contains(r.stderr, `issue the token for "office-01"`) || r.stdout != "" {
		t.Errorf("--session-host OFFICE-01 beside office-01: exit %d, stdout %q, stderr %q; want exit 1 naming sessionHost and office-01", r.code, r.stdout, r.stderr)
	}
	b.ok("registration-token", "create", "--host-pool", "contosohp01", "--session-host", "office-01")
}
