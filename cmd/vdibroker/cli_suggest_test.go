package main

import (
	"strings"
	"testing"
)

// suggestWorld is a broker with named resources of every kind the hint
// reads: pools contosohp01 and fabrikam01, hosts sh-01 and sh-02 in
// contosohp01, RemoteApp group office-apps (contosohp01) with
// application excel, and scaling plan weekday-plan of contosohp01.
func suggestWorld(t *testing.T) *cliBroker {
	t.Helper()
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "contosohp01")
	b.ok("hostpool", "create", "--name", "fabrikam01")
	b.addHost("contosohp01", "sh-01")
	b.addHost("contosohp01", "sh-02")
	b.ok("applicationgroup", "create", "--name", "office-apps", "--host-pool", "contosohp01", "--application-group-type", "RemoteApp")
	b.ok("application", "create", "--application-group", "office-apps", "--name", "excel", "--file-path", `C:\Program Files\excel.exe`)
	b.ok("scalingplan", "create", "--name", "weekday-plan", "--time-zone", "UTC", "--host-pools", "contosohp01", "--days-of-week", "Monday",
		"--ramp-up-start-time", "07:00", "--peak-start-time", "09:00", "--ramp-down-start-time", "17:00", "--off-peak-start-time", "19:00")
	return b
}

// TestCLINotFoundDidYouMean: a name the broker does not know is answered
// with the broker's message, the same exit status 1, and "did you mean"
// naming the near names of that kind (the pool when the pool is the
// typo, the host when the host is); no hint when nothing is near, or when
// every name given exists (the answer was about a session's id).
func TestCLINotFoundDidYouMean(t *testing.T) {
	b := suggestWorld(t)
	tests := []struct {
		name string
		args []string
		want string // stderr
	}{
		{"hostpool_show", []string{"hostpool", "show", "--name", "contosohp1"},
			`error: host pool "contosohp1" not found (did you mean "contosohp01"?)`},
		{"hostpool_show_case", []string{"hostpool", "show", "--name", "ContosoHP01"},
			`error: host pool "ContosoHP01" not found (did you mean "contosohp01"?)`},
		{"hostpool_update", []string{"hostpool", "update", "--name", "fabrikam1", "--max-session-limit", "3"},
			`error: host pool "fabrikam1" not found (did you mean "fabrikam01"?)`},
		{"hostpool_delete", []string{"hostpool", "delete", "--name", "fabrikam1"},
			`error: host pool "fabrikam1" not found (did you mean "fabrikam01"?)`},
		{"hostpool_far", []string{"hostpool", "show", "--name", "northwind"},
			`error: host pool "northwind" not found`},
		{"sessionhost_show", []string{"sessionhost", "show", "--host-pool", "contosohp01", "--name", "sh-1"},
			`error: session host "sh-1" not found in host pool "contosohp01" (did you mean "sh-01"?)`},
		{"sessionhost_update", []string{"sessionhost", "update", "--host-pool", "contosohp01", "--name", "sh-2", "--allow-new-session", "false"},
			`error: session host "sh-2" not found in host pool "contosohp01" (did you mean "sh-02"?)`},
		{"sessionhost_pool_typo", []string{"sessionhost", "show", "--host-pool", "contosohp1", "--name", "sh-01"},
			`error: host pool "contosohp1" not found (did you mean "contosohp01"?)`},
		{"sessionhost_list", []string{"sessionhost", "list", "--host-pool", "contosohp1"},
			`error: host pool "contosohp1" not found (did you mean "contosohp01"?)`},
		{"applicationgroup_show", []string{"applicationgroup", "show", "--name", "office-app"},
			`error: application group "office-app" not found (did you mean "office-apps"?)`},
		{"applicationgroup_delete", []string{"applicationgroup", "delete", "--name", "Office-Apps"},
			`error: application group "Office-Apps" not found (did you mean "office-apps"?)`},
		{"application_show", []string{"application", "show", "--application-group", "office-apps", "--name", "exel"},
			`error: application "exel" not found in application group "office-apps" (did you mean "excel"?)`},
		{"application_group_typo", []string{"application", "show", "--application-group", "ofice-apps", "--name", "excel"},
			`error: application group "ofice-apps" not found (did you mean "office-apps"?)`},
		{"scalingplan_show", []string{"scalingplan", "show", "--name", "weekday-plans"},
			`error: scaling plan "weekday-plans" not found (did you mean "weekday-plan"?)`},
		{"usersession_pool_typo", []string{"usersession", "list", "--host-pool", "fabrikam1"},
			`error: host pool "fabrikam1" not found (did you mean "fabrikam01"?)`},
		// The pool exists: the session's id is what was not found.
		{"usersession_id", []string{"usersession", "logoff", "--host-pool", "contosohp01", "--id", "contosohp1"},
			`error: user session "contosohp1" not found in host pool "contosohp01"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := b.cli(tt.args...)
			if r.code != 1 {
				t.Errorf("exit %d, want 1", r.code)
			}
			checkCLIError(t, r)
			if got := strings.TrimSuffix(r.stderr, "\n"); got != tt.want {
				t.Errorf("stderr\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

// TestCLINotFoundHintScoped (R-SEC scoped roles): a principal scoped to
// host pools is told near names of its own pools only. A Reader of
// fabrikam01 asking for contosohp1, near contosohp01, which it may not
// see, gets the broker's not found alone; so does asking for contosohp01
// itself, and for a host, group or plan of that pool. Asking for
// fabrikam1 it is told fabrikam01, so the hint works for it.
func TestCLINotFoundHintScoped(t *testing.T) {
	b := suggestWorld(t)
	secret := strings.TrimSpace(b.ok("token", "create", "--role", "Reader", "--subject", "fab-reader", "--host-pools", "fabrikam01", "--query", "token", "-o", "tsv"))
	as := func(args ...string) cliResult {
		return runCLI(t, append(args, "--server", b.m.URL(), "--token", secret)...)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"own_pool", []string{"hostpool", "show", "--name", "fabrikam1"},
			`error: host pool "fabrikam1" not found (did you mean "fabrikam01"?)`},
		{"other_pool_typo", []string{"hostpool", "show", "--name", "contosohp1"},
			`error: host pool "contosohp1" not found`},
		{"other_pool_case", []string{"hostpool", "show", "--name", "CONTOSOHP01"},
			`error: host pool "CONTOSOHP01" not found`},
		{"other_pool", []string{"hostpool", "show", "--name", "contosohp01"},
			`error: host pool "contosohp01" not found`},
		{"other_pool_host", []string{"sessionhost", "show", "--host-pool", "contosohp01", "--name", "sh-1"},
			`error: host pool "contosohp01" not found`},
		{"other_pool_group", []string{"applicationgroup", "show", "--name", "office-app"},
			`error: application group "office-app" not found`},
		{"other_pool_plan", []string{"scalingplan", "show", "--name", "weekday-plans"},
			`error: scaling plan "weekday-plans" not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := as(tt.args...)
			if r.code != 1 {
				t.Errorf("exit %d, want 1", r.code)
			}
			checkCLIError(t, r)
			if got := strings.TrimSuffix(r.stderr, "\n"); got != tt.want {
				t.Errorf("stderr\n got %q\nwant %q", got, tt.want)
			}
			for _, hidden := range []string{"contosohp01\"?", "sh-01", "office-apps", "weekday-plan\""} {
				if strings.Contains(r.stderr, hidden) {
					t.Errorf("stderr %q names %s, which the scoped token may not see", r.stderr, hidden)
				}
			}
		})
	}
}

// TestCLINotFoundHintOnePage: the hint reads one page of names, not the
// whole list: with a page of 2, the pools' list by name is aa01, aa02 on
// the first page and zz01 on the next, so zz1 gets no hint while aa1
// gets aa01.
func TestCLINotFoundHintOnePage(t *testing.T) {
	defer func(n int) { suggestPageSize = n }(suggestPageSize)
	suggestPageSize = 2
	b := startCLIBroker(t)
	for _, p := range []string{"zz01", "aa02", "aa01"} {
		b.ok("hostpool", "create", "--name", p)
	}
	for _, tt := range []struct{ typed, want string }{
		{"aa1", `error: host pool "aa1" not found (did you mean "aa01"?)`},
		{"zz1", `error: host pool "zz1" not found`},
	} {
		r := b.cli("hostpool", "show", "--name", tt.typed)
		if got := strings.TrimSuffix(r.stderr, "\n"); r.code != 1 || got != tt.want {
			t.Errorf("hostpool show --name %s: exit %d, stderr %q; want 1, %q", tt.typed, r.code, got, tt.want)
		}
	}
}

// TestCLINotFoundHintUserToken (R-SEC audit): a User token may connect
// (and log off its own sessions) but not read, so a name it mistypes on
// connect or logoff gets the broker's message alone, and the CLI sends no
// read the broker would refuse: such a refusal is an audit entry of a
// request the user never made ("GET /api/v1/applicationgroups/{name}
// refused"), counted against the token's budget of written refusals. The
// logoff's own refusal is the user's, and stays. A mistyped group on
// connect is NotEntitled, as any group not hers (R-E3): a NotFound told
// her token which groups exist.
func TestCLINotFoundHintUserToken(t *testing.T) {
	b := suggestWorld(t)
	secret := strings.TrimSpace(b.ok("token", "create", "--role", "User", "--subject", "hal@contoso.com", "--query", "token", "-o", "tsv"))
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"application", "connect", "--application-group", "ofice-apps", "--name", "excel", "--user", "hal@contoso.com"},
			`error: user "hal@contoso.com" is not entitled to application group "ofice-apps": an administrator assigns it to the user, or to one of their groups`},
		{[]string{"usersession", "logoff", "--host-pool", "contosohp1", "--id", "0123456789abcdef"},
			`error: user session "0123456789abcdef" not found in host pool "contosohp1"`},
	} {
		r := runCLI(t, append(tt.args, "--server", b.m.URL(), "--token", secret)...)
		if got := strings.TrimSuffix(r.stderr, "\n"); r.code != 1 || got != tt.want {
			t.Errorf("%v: exit %d, stderr %q; want 1, %q", tt.args, r.code, got, tt.want)
		}
	}
	if got := b.ok("audit", "list", "--principal", "hal@contoso.com", "--query", "[?outcome=='refused' && starts_with(action, 'GET ')].[action, target]", "-o", "tsv"); got != "" {
		t.Errorf("the User token's mistyped names left refusals of reads it never asked for:\n%s", got)
	}
}
