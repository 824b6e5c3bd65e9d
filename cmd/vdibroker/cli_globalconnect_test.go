package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestCLIGlobalEntitlementConnect (R-G1, R-C7): an admin connects a user
// through a global entitlement from the CLI, as the user's client would,
// and reads which pod and pool took the session; a dry run stores
// nothing; --rdp-file writes the connection file; a user of no assigned
// group is refused (R-E9) with exit 1. Before, only curl could. A
// mistyped entitlement's name gets "did you mean" (docs/cli.md).
func TestCLIGlobalEntitlementConnect(t *testing.T) {
	m := startFederatedPod(t, time.Second)
	ctx := t.Context()
	admin := vhttp.NewClient(m.URL(), m.AdminToken)
	if _, err := admin.PutHostPool(ctx, "office-p1", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	rt, err := admin.CreateRegistrationToken(ctx, "office-p1", vhttp.RegistrationTokenRequest{ExpiresInSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := admin.Register(ctx, &vdibroker.RegisterRequest{Token: rt.Token, HostName: "host-p1", Address: "host-p1.example.test:3389"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Heartbeat(ctx, reg.Credential, &vdibroker.HeartbeatRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.PutFederation(ctx, &vdibroker.Federation{Generation: 1,
		Sites: []vdibroker.Site{{Name: "site1"}},
		Pods:  []vdibroker.Pod{{Name: "pod1", Site: "site1", URL: m.URL()}},
		GlobalEntitlements: []vdibroker.GlobalEntitlement{{Name: "office", Groups: []string{"office-staff"},
			Members: []vdibroker.Member{{Pod: "pod1", HostPool: "office-p1"}}}},
	}); err != nil {
		t.Fatal(err)
	}
	cliAs := func(token string, args ...string) cliResult {
		t.Helper()
		root := &cobra.Command{Use: "vdibroker", SilenceUsage: true, SilenceErrors: true}
		configureRoot(root)
		root.AddCommand(newGlobalEntitlementCmd())
		var out, errOut strings.Builder
		root.SetOut(&out)
		root.SetErr(&errOut)
		root.SetContext(ctx)
		code := execute(root, append(args, "--server", m.URL(), "--token", token), &errOut)
		return cliResult{stdout: out.String(), stderr: errOut.String(), code: code}
	}
	cli := func(args ...string) cliResult { t.Helper(); return cliAs(m.AdminToken, args...) }

	r := cli("globalentitlement", "connect", "--name", "office", "--user", "vic@contoso.com", "--dry-run")
	if r.code != 0 || !strings.Contains(r.stdout, "pod1") || !strings.Contains(r.stdout, "office-p1") ||
		!strings.Contains(r.stdout, "pod pod1 (site site1)") || !strings.Contains(r.stdout, "chosen") {
		t.Fatalf("dry run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if open, err := admin.ListUserSessions(ctx, "office-p1", vhttp.SessionQuery{User: "vic@contoso.com"}); err != nil || len(open) != 0 {
		t.Fatalf("a dry run stored a session: %v %v", open, err)
	}
	rdp := filepath.Join(t.TempDir(), "vic.rdp")
	r = cli("globalentitlement", "connect", "--name", "office", "--user", "vic@contoso.com", "--rdp-file", rdp)
	if r.code != 0 {
		t.Fatalf("connect: exit %d: %s", r.code, r.stderr)
	}
	if b, err := os.ReadFile(rdp); err != nil || !strings.Contains(string(b), "host-p1.example.test:3389") {
		t.Errorf("rdp file: %q %v", b, err)
	}
	if open, err := admin.ListUserSessions(ctx, "office-p1", vhttp.SessionQuery{User: "vic@contoso.com"}); err != nil || len(open) != 1 {
		t.Errorf("vic's session in office-p1: %v %v", open, err)
	}
	// An end user of no entitled group: the admin may connect her anyway
	// (R-E3), so the refusal is seen with her own User token.
	ut, err := admin.CreateToken(ctx, vhttp.TokenRequest{Role: vdibroker.RoleUser, Subject: "hal@contoso.com"})
	if err != nil {
		t.Fatal(err)
	}
	r = cliAs(ut.Secret, "globalentitlement", "connect", "--name", "office", "--user", "hal@contoso.com")
	if r.code != 1 || !strings.Contains(r.stderr, "not entitled") {
		t.Errorf("hal: exit %d, stderr %q", r.code, r.stderr)
	}
	// Without --user, a User token connects its own user (R-E5): wes, of
	// the entitled group, gets his session; the admin must name the user.
	wt, err := admin.CreateToken(ctx, vhttp.TokenRequest{Role: vdibroker.RoleUser, Subject: "wes@contoso.com", Groups: []string{"office-staff"}})
	if err != nil {
		t.Fatal(err)
	}
	if r = cliAs(wt.Secret, "globalentitlement", "connect", "--name", "office", "--query", "user", "-o", "tsv"); r.code != 0 || r.stdout != "wes@contoso.com\n" {
		t.Errorf("wes without --user: exit %d, stdout %q, stderr %q; want his own session", r.code, r.stdout, r.stderr)
	}
	if r = cli("globalentitlement", "connect", "--name", "office"); r.code != 2 || !strings.Contains(r.stderr, "--user: required with this token (role Admin)") {
		t.Errorf("admin without --user: exit %d, stderr %q; want a usage error", r.code, r.stderr)
	}
	// A name the pod does not know: the admin is told the near one; hal,
	// whose User token may connect but not read or list global
	// entitlements, is NotEntitled, as to any entitlement not his (R-E3:
	// a NotFound told his token which names the federation has), and the
	// CLI reads nothing to find a near name.
	for _, tt := range []struct {
		token string
		args  []string
		want  string
	}{
		{m.AdminToken, []string{"globalentitlement", "show", "--name", "ofice"}, `error: global entitlement "ofice" not found (did you mean "office"?)`},
		{m.AdminToken, []string{"globalentitlement", "connect", "--name", "ofice", "--user", "hal@contoso.com"}, `error: global entitlement "ofice" not found (did you mean "office"?)`},
		{ut.Secret, []string{"globalentitlement", "connect", "--name", "ofice", "--user", "hal@contoso.com"},
			`error: user "hal@contoso.com" is not entitled to global entitlement "ofice": an administrator assigns it to the user, or to one of their groups`},
	} {
		if r = cliAs(tt.token, tt.args...); r.code != 1 || strings.TrimSuffix(r.stderr, "\n") != tt.want {
			t.Errorf("%v: exit %d, stderr %q; want 1, %q", tt.args, r.code, r.stderr, tt.want)
		}
	}
}

// TestCLIGlobalConnectEscapesTerminalControls (R-SEC): globalentitlement
// connect writes the decision under its table in words, from the answer
// of the pod at --server, which quotes what other pods answered; every
// field of it is escaped as a table's cells are, the decision's own
// (scope, distribution, connected pod, start site) and the existing
// session's pod and pool as well as each pod's and pool's line.
func TestCLIGlobalConnectEscapesTerminalControls(t *testing.T) {
	const bad = "x\u001b[2J\u009b31m\u202efake"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/api/v1/globalentitlements/office/connect" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"user": "vic", "hostPool": "p1", "sessionHost": "h1", "state": "Pending", "pod": "pod1", "site": "s1",
			"decision": map[string]any{"globalEntitlement": "office", "scope": "scope" + bad, "sessionDistribution": "dist" + bad,
				"connectedPod": "cpod" + bad, "startSite": "site" + bad,
				"existingSession": map[string]any{"pod": "epod" + bad, "hostPool": "epool" + bad},
				"pods": []any{map[string]any{"pod": "pod1", "site": "s1", "chosen": true,
					"pools": []any{map[string]any{"hostPool": "p1", "chosen": true}}}}},
		})
	}))
	defer srv.Close()
	root := &cobra.Command{Use: "vdibroker", SilenceUsage: true, SilenceErrors: true}
	configureRoot(root)
	root.AddCommand(newGlobalEntitlementCmd())
	var out, errOut strings.Builder
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetContext(t.Context())
	code := execute(root, []string{"globalentitlement", "connect", "--name", "office", "--user", "vic", "--server", srv.URL, "--token", "t"}, &errOut)
	r := cliResult{stdout: out.String(), stderr: errOut.String(), code: code}
	if r.code != 0 || !strings.Contains(r.stdout, "Decision: scope") {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	for _, field := range []string{"scope", "dist", "cpod", "site", "epod", "epool"} {
		if !strings.Contains(r.stdout, field+`x\x1b[2J`) {
			t.Errorf("the decision's %s is not shown escaped:\n%q", field, r.stdout)
		}
	}
	for _, u := range unsafeForTerminal {
		if strings.Contains(r.stdout, u) {
			t.Errorf("stdout holds %q raw:\n%q", u, r.stdout)
		}
	}
}

// startFederatedPod starts serve as pod "pod1" of a federation on
// loopback (SQLite, a federation secret, --federation-allow
// http://127.0.0.1, the given --pod-timeout), closed when the test ends.
func startFederatedPod(t *testing.T, podTimeout time.Duration) *Main {
	t.Helper()
	return startFederatedPodWrapped(t, podTimeout, nil)
}

// startFederatedPodWrapped is startFederatedPod with wrap around its
// pod-to-pod client's transport (FederationFlags.WrapPodTransport; nil:
// none), which sees every call to a peer.
func startFederatedPodWrapped(t *testing.T, podTimeout time.Duration, wrap func(http.RoundTripper) http.RoundTripper) *Main {
	t.Helper()
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "federation.secret")
	if err := os.WriteFile(secretFile, []byte("walk-admin-federation-secret-0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := &Main{Listen: "127.0.0.1:0", DataDir: filepath.Join(dir, "data"),
		Federation: FederationFlags{PodName: "pod1", SecretFile: secretFile, PodTimeout: podTimeout, Allow: []string{"http://127.0.0.1"},
			WrapPodTransport: wrap}}
	if err := m.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}
