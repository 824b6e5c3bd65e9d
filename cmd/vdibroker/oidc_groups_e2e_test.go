package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/testop"
)

// manyGroups is n groups, pin-ops (mapped to Contributor of pin) first.
func manyGroups(n int) []string {
	groups := []string{"pin-ops"}
	for i := 1; i < n; i++ {
		groups = append(groups, fmt.Sprintf("team-%04d", i))
	}
	return groups
}

// TestOIDCGroupsClaimBounded_RE6 (R-E6, R-E3, R-SEC): an end user's
// groups claim is bounded as a User token's groups are: at most
// vdibroker.MaxGroups (500) groups, each a name the API takes (1..256
// characters, no control characters). Through a real provider and a
// real broker: wide, in 500 groups, signs in to the console with her
// role (pin-ops: Contributor of pin) and her ID token is taken at the
// API; hoarder, in 501, and longname, one of whose groups is 257
// characters, are refused at the portal's sign-in (its reason in the
// audit trail for the administrator), and an ID token of the role
// map's User (pin-users) as theirs is refused at the API (403), the
// refusal saying how many groups were sent, the bound and what to
// change at the provider, or the bound of a name without quoting it
// whole. As administrators (pin-ops: Contributor, asked for no
// assignment, R-E3) hoarder and longname sign in to the console and
// are taken at the API with their role, as before the bound: it
// refused them too, an administrator in hundreds of directory groups
// locked out.
func TestOIDCGroupsClaimBounded_RE6(t *testing.T) {
	long := strings.Repeat("g", vdibroker.MaxUserLen+1)
	op := testop.StartAt(t, "127.0.0.1", "vdibroker-console", "console-secret",
		testop.User{Subject: "wide", Password: "pw-wide", Groups: manyGroups(vdibroker.MaxGroups)},
		testop.User{Subject: "hoarder", Password: "pw-hoarder", Groups: manyGroups(vdibroker.MaxGroups + 1)},
		testop.User{Subject: "longname", Password: "pw-longname", Groups: []string{"pin-ops", long}})
	m := startOIDCBroker(t, op)
	admin := vhttp.NewClient(m.URL(), m.AdminToken)
	if _, err := admin.PutHostPool(t.Context(), "pin", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	const tooMany = `sent 501 groups in the "groups" claim; at most 500 are taken: have it send only the groups`
	const tooLong = `a group name is 1..256 characters`

	// The portal's: the end user is told it did not complete; the
	// administrator reads why in the audit trail (first: of the refusals
	// from one address within a minute only the first is a row).
	for _, user := range []string{"hoarder", "longname"} {
		c := jarClient()
		res, err := c.Get(m.URL() + "/portal/signin/oidc?next=/portal/")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		cb, err := testop.SignIn(c, res.Request.URL.String(), user, "pw-"+user)
		if err != nil {
			t.Fatal(err)
		}
		if res, _ := getBody(t, noRedirects(c), cb); res.StatusCode == http.StatusSeeOther {
			t.Errorf("%s signed in to the portal", user)
		}
	}
	entries, err := admin.ListAudit(t.Context(), vhttp.AuditQuery{Action: "signin"})
	if err != nil {
		t.Fatal(err)
	}
	var portal []string
	for _, e := range entries {
		if e.Target == "portal/oidc" && e.Outcome != "ok" {
			portal = append(portal, e.Error)
		}
	}
	if len(portal) == 0 || !strings.Contains(portal[0], tooMany) {
		t.Errorf("the portal's refusals in the audit trail: %q; want the first saying %q", portal, tooMany)
	}

	// The console's sign-in: administrators, whatever their groups.
	for _, user := range []string{"wide", "hoarder", "longname"} {
		c := jarClient()
		if res, body := getBody(t, c, oidcLogin(t, m.URL(), c, user, "pw-"+user)); res.StatusCode != 200 || !strings.Contains(body, `data-pool="pin"`) {
			t.Errorf("%s's console sign-in: %d at %s; want the overview of pin", user, res.StatusCode, res.Request.URL)
		}
	}

	// The API, with the ID token as a bearer token: administrators
	// taken, the role map's Users bounded.
	for _, groups := range [][]string{manyGroups(vdibroker.MaxGroups), manyGroups(vdibroker.MaxGroups + 1), {"pin-ops", long}} {
		who, err := vhttp.NewClient(m.URL(), op.Mint(map[string]any{"sub": "wide", "groups": groups})).WhoAmI(t.Context())
		if err != nil || who.Role != vdibroker.RoleContributor {
			t.Errorf("a Contributor's token of %d groups at the API: %+v %v; want Contributor", len(groups), who, err)
		}
	}
	users := func(groups ...string) []string { return append([]string{"pin-users"}, groups...) }
	for _, tc := range []struct {
		groups []string
		want   string
	}{{users(manyGroups(vdibroker.MaxGroups + 1)[1:]...), tooMany}, {users(long), tooLong}, {users("team\x1b[2J"), "without control characters"}} {
		_, err := vhttp.NewClient(m.URL(), op.Mint(map[string]any{"sub": "hoarder", "groups": tc.groups})).WhoAmI(t.Context())
		if vdibroker.ErrorCode(err) != vdibroker.EPermission || !strings.Contains(vdibroker.ErrorMessage(err), tc.want) ||
			strings.Contains(vdibroker.ErrorMessage(err), long) || strings.Contains(vdibroker.ErrorMessage(err), "\x1b") {
			t.Errorf("a token of %d groups at the API: %v; want PermissionDenied saying %q", len(tc.groups), err, tc.want)
		}
	}
}

// startOIDCBroker starts a broker on loopback signing in with op (client
// secret "console-secret", oidcRoles as its role map, groups from the
// "groups" claim); the test's cleanup closes it.
func startOIDCBroker(t *testing.T, op *testop.OP) *Main {
	t.Helper()
	dir := t.TempDir()
	roles, secret := filepath.Join(dir, "roles.yaml"), filepath.Join(dir, "secret")
	if err := os.WriteFile(roles, []byte(oidcRoles), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secret, []byte("console-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := &Main{Listen: "127.0.0.1:0", DataDir: t.TempDir(),
		OIDC: OIDCFlags{Issuer: op.Issuer, ClientID: op.ClientID, ClientSecretFile: secret, RoleMapFile: roles, GroupsClaim: "groups"}}
	if err := m.Open(t.Context()); err != nil {
		t.Fatalf("start broker: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}
