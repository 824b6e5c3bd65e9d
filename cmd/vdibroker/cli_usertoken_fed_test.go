//go:build linux

package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestCLIUserTokenAcrossPods_RU3 (R-U3, R-E5, R-E9, R-G1, R-SEC): two pods
// of a federation (startXPodPair: a global desktop "Anywhere" of
// alice's with a member pool desk on each), alice's User token made on
// pod A.
//
// federation sessions, which read the federation document first (a read
// a User token may not make) and was refused her, lists her own
// sessions with her token, --user left out or in another case: the one
// on pod A (no pod: the document that names it is not hers to read) and
// the one on pod B, which pod A's API asks pod B for, as her portal
// does; not bob's on pod B. Another user's name is refused before
// anything is asked, saying what she may do (no refused read of hers in
// pod A's audit trail: not the document's, not a listing). The admin token still names the user (a usage error
// without --user) and gets pod A's name on its rows.
//
// usersession logoff --pod POD --id ID needed --user even with her
// token; it is now hers, as connect's: her session on pod B gets the
// Logoff at pod B's next heartbeat. bob's session by its id is refused
// her (pod B's answer). The admin token without --user: a usage error
// naming its role, nothing sent.
func TestCLIUserTokenAcrossPods_RU3(t *testing.T) {
	a, b, api := startXPodPair(t, vdibroker.DistributionSessionCount)
	onA, err := a.admin.Connect(api, "desk", vhttp.ConnectRequest{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	onB, err := b.admin.Connect(api, "desk", vhttp.ConnectRequest{User: "Alice"})
	if err != nil {
		t.Fatal(err)
	}
	bobs, err := b.admin.Connect(api, "desk", vhttp.ConnectRequest{User: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := a.admin.CreateToken(api, vhttp.TokenRequest{Role: vdibroker.RoleUser, Subject: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	as := func(token string, args ...string) cliResult {
		t.Helper()
		// runCLI's tree and the federation commands.
		root := &cobra.Command{Use: "vdibroker", SilenceUsage: true, SilenceErrors: true}
		configureRoot(root)
		root.AddCommand(newAdminCommands()...)
		root.AddCommand(newAuditCmd(), newFederationCmd())
		var out, errOut bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&errOut)
		root.SetContext(t.Context())
		code := execute(root, append(args, "--server", a.m.URL(), "--token", token), &errOut)
		return cliResult{stdout: out.String(), stderr: errOut.String(), code: code}
	}
	alice := func(args ...string) cliResult { t.Helper(); return as(tok.Secret, args...) }

	want := "\tdesk\t" + onA.SessionID + "\npodb\tdesk\t" + onB.SessionID + "\n"
	for _, args := range [][]string{
		{"federation", "sessions"},
		{"federation", "sessions", "--user", "ALICE"},
	} {
		r := alice(append(args, "--query", "[].[pod, hostPool, id]", "-o", "tsv")...)
		if r.code != 0 || r.stdout != want {
			t.Errorf("her %v: exit %d, stdout %q, stderr %q; want %q", args, r.code, r.stdout, r.stderr, want)
		}
	}
	if r := alice("federation", "sessions"); r.code != 0 || strings.Contains(r.stdout, bobs.SessionID) || !strings.Contains(r.stdout, "podb") {
		t.Errorf("her table of sessions: exit %d\n%s%s\nwant hers on both pods, not bob's", r.code, r.stdout, r.stderr)
	}
	for _, other := range []string{"bob", "BOB", "al\u0456ce"} { // і: Cyrillic, not alice
		r := alice("federation", "sessions", "--user", other)
		if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, `a User token lists only its own user's sessions ("alice"): leave out --user`) {
			t.Errorf("her federation sessions --user %q: exit %d, stdout %q, stderr %q; want refused, saying to leave out --user", other, r.code, r.stdout, r.stderr)
		}
	}
	adminA := func(args ...string) cliResult { t.Helper(); return as(a.m.AdminToken, args...) }
	if r := adminA("federation", "sessions"); r.code != 2 || !strings.Contains(r.stderr, "--user: required with this token (role Admin)") {
		t.Errorf("admin's federation sessions without --user: exit %d, stderr %q; want a usage error naming its role", r.code, r.stderr)
	}
	if r := adminA("federation", "sessions", "--user", "alice", "--query", "[].pod", "-o", "tsv"); r.code != 0 || r.stdout != "poda\npodb\n" {
		t.Errorf("admin's federation sessions --user alice: exit %d, stdout %q, stderr %q; want a row on each pod, named", r.code, r.stdout, r.stderr)
	}

	// Log off across pods without --user.
	if r := adminA("usersession", "logoff", "--pod", "podb", "--id", onB.SessionID); r.code != 2 ||
		!strings.Contains(r.stderr, "--pod needs --user with this token (role Admin)") {
		t.Errorf("admin's logoff --pod without --user: exit %d, stderr %q; want a usage error naming its role", r.code, r.stderr)
	}
	if r := alice("usersession", "disconnect", "--pod", "podb", "--id", bobs.SessionID); r.code != 1 {
		t.Errorf("her disconnect of bob's session on pod B: exit %d, stdout %q, stderr %q; want refused", r.code, r.stdout, r.stderr)
	}
	if cmds := b.heartbeat(t); len(cmds) != 0 {
		t.Fatalf("pod B's host before her logoff got %+v", cmds)
	}
	r := alice("usersession", "logoff", "--pod", "podb", "--id", onB.SessionID)
	if r.code != 0 || !strings.Contains(r.stdout, onB.SessionID) || !strings.Contains(r.stdout, "pod podb") {
		t.Fatalf("her logoff --pod podb --id without --user: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	active := vdibroker.AgentSession{ID: "5", User: "Alice", State: vdibroker.StateActive}
	if cmds := b.heartbeat(t, active); len(cmds) != 1 || cmds[0].Type != vdibroker.CommandLogoff || cmds[0].SessionID != onB.SessionID {
		t.Errorf("pod B's host after her logoff got %+v, want the Logoff of %s", cmds, onB.SessionID)
	}
	if refused, err := a.admin.ListAudit(api, vhttp.AuditQuery{}); err != nil {
		t.Fatal(err)
	} else {
		for _, e := range refused {
			if e.Outcome != "ok" && e.Principal.Name == "alice" && strings.HasPrefix(e.Action, "GET ") {
				t.Errorf("a refused read of hers in pod A's audit trail: %s %s: %s", e.Action, e.Target, e.Error)
			}
		}
	}
}
