package main

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestCLIGlobalEntitlementShowSaysWhoIsEntitled_RE9: `globalentitlement
// show` on a real pod says whom each entitlement entitles (R-E9) and
// what it opens, above its members' loads: its users and groups, all
// users, or everyone when it names none (with the warning on stderr).
// Before, the table said nothing of either, and an administrator who had
// just entitled a group on the console's Federation page could not read
// it back but with -o json.
func TestCLIGlobalEntitlementShowSaysWhoIsEntitled_RE9(t *testing.T) {
	m := startFederatedPod(t, time.Second)
	admin := vhttp.NewClient(m.URL(), m.AdminToken)
	members := []vdibroker.Member{{Pod: "pod1", HostPool: "office-p1"}}
	if _, err := admin.PutFederation(t.Context(), &vdibroker.Federation{Generation: 1,
		Sites: []vdibroker.Site{{Name: "site1"}},
		Pods:  []vdibroker.Pod{{Name: "pod1", Site: "site1", URL: m.URL()}},
		GlobalEntitlements: []vdibroker.GlobalEntitlement{
			{Name: "office", Users: []string{"alice@contoso.com", "bob@contoso.com"}, Groups: []string{"Sales"}, Members: members},
			{Name: "staff", AllUsers: true, Members: members},
			{Name: "crm", Kind: vdibroker.KindApplication, Application: "crm", Groups: []string{"eu-sales"}, Members: members},
			{Name: "legacy", Members: members},
		},
	}); err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) cliResult {
		t.Helper()
		root := &cobra.Command{Use: "vdibroker", SilenceUsage: true, SilenceErrors: true}
		configureRoot(root)
		root.AddCommand(newGlobalEntitlementCmd())
		var out, errOut strings.Builder
		root.SetOut(&out)
		root.SetErr(&errOut)
		root.SetContext(t.Context())
		code := execute(root, append(args, "--server", m.URL(), "--token", m.AdminToken), &errOut)
		return cliResult{stdout: out.String(), stderr: errOut.String(), code: code}
	}
	for _, tc := range []struct {
		name, head, entitles, stderr string
	}{
		{"office", "office: Desktop, scope AllSites", "entitles users alice@contoso.com, bob@contoso.com; groups Sales\n", ""},
		{"staff", "staff: Desktop,", "entitles all users\n", ""},
		{"crm", "crm: Application crm,", "entitles groups eu-sales\n", ""},
		{"legacy", "legacy: Desktop,", "entitles everyone: it names no user or group (R-E9)\n", "everyone is entitled to it"},
	} {
		r := cli("globalentitlement", "show", "--name", tc.name)
		if r.code != 0 || !strings.HasPrefix(r.stdout, tc.head) || !strings.Contains(r.stdout, tc.entitles) || !strings.Contains(r.stdout, "office-p1") {
			t.Errorf("globalentitlement show --name %s: exit %d\n%s%s\nwant %q and %q", tc.name, r.code, r.stdout, r.stderr, tc.head, tc.entitles)
		}
		if tc.stderr != "" && !strings.Contains(r.stderr, tc.stderr) {
			t.Errorf("globalentitlement show --name %s: stderr %q, want the warning %q", tc.name, r.stderr, tc.stderr)
		}
	}
}
