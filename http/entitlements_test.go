package http_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/pgtest"
	"github.com/vdibroker/vdibroker/internal/testop"
)

// desktopFor gives pool a Desktop application group assigned as a says
// (R-E1, R-E2): end users (User tokens, SSO users) need one to connect
// (R-E3).
func (e *env) desktopFor(pool string, a vdibroker.Assignments) {
	e.t.Helper()
	if _, err := e.admin.PutApplicationGroup(context.Background(), pool+"-desktops",
		map[string]any{"hostPool": pool, "applicationGroupType": "Desktop", "assignments": a}); err != nil {
		e.t.Fatalf("desktop group of %s: %v", pool, err)
	}
}

// userToken issues a User token for subject with groups (R-E6).
func (e *env) userToken(subject string, groups []string, pools ...string) string {
	e.t.Helper()
	tr, err := e.admin.CreateToken(context.Background(), vhttp.TokenRequest{Role: "User", Subject: subject, Groups: groups, HostPools: pools})
	if err != nil {
		e.t.Fatalf("User token of %s: %v", subject, err)
	}
	return tr.Secret
}

// roleToken issues a token of role for subject, scoped to pools.
func (e *env) roleToken(role, subject string, pools ...string) string {
	e.t.Helper()
	tr, err := e.admin.CreateToken(context.Background(), vhttp.TokenRequest{Role: role, Subject: subject, HostPools: pools})
	if err != nil {
		e.t.Fatalf("%s token: %v", role, err)
	}
	return tr.Secret
}

// openSessions is the pool's open sessions, as the admin lists them.
func (e *env) openSessions(pool string) []*vdibroker.UserSession {
	e.t.Helper()
	l, err := e.admin.ListUserSessions(context.Background(), pool, vhttp.SessionQuery{})
	if err != nil {
		e.t.Fatalf("sessions of %s: %v", pool, err)
	}
	return l
}

// TestApplicationGroupAPI_RE1: application groups and applications
// through the API: created (201), replaced (200), read, listed by pool,
// deleted with their applications; every bad field refused with 400
// naming it, and nothing stored; the pool's one Desktop group (409); the
// writes audited with before and after.
func TestApplicationGroupAPI_RE1(t *testing.T) {
	e := newEnvWith(t, envOptions{maintenance: time.Hour})
	ctx := context.Background()
	e.pool("office", nil)
	e.pool("other", nil)
	g, err := e.admin.PutApplicationGroup(ctx, "office-apps", map[string]any{"hostPool": "office", "applicationGroupType": "RemoteApp",
		"friendlyName": "Office apps", "assignments": map[string]any{"users": []string{"Alice@Contoso.com"}, "groups": []string{"Sales"}}})
	if err != nil || !g.Created || g.Name != "office-apps" || g.Assignments.Users[0] != "Alice@Contoso.com" || g.CreateTime.IsZero() {
		t.Fatalf("create: %+v, %v", g, err)
	}
	if _, _, after := oneEntry(t, e, "applicationgroup.put", "applicationgroups/office-apps"); after["hostPool"] != "office" {
		t.Errorf("audit of the create: after %v", after)
	}
	for _, c := range []struct {
		name, path, body, field string
		status                  int
	}{
		{"bad name", "/api/v1/applicationgroups/x", `{"hostPool": "office", "applicationGroupType": "RemoteApp"}`, "name", 400},
		{"name in body differs", "/api/v1/applicationgroups/g-1", `{"name": "g-2", "hostPool": "office", "applicationGroupType": "RemoteApp"}`, "name", 400},
		{"no pool", "/api/v1/applicationgroups/g-1", `{"applicationGroupType": "RemoteApp"}`, "hostPool", 400},
		{"unknown pool", "/api/v1/applicationgroups/g-1", `{"hostPool": "nope", "applicationGroupType": "RemoteApp"}`, "hostPool", 400},
		{"bad type", "/api/v1/applicationgroups/g-1", `{"hostPool": "office", "applicationGroupType": "Desk"}`, "applicationGroupType", 400},
		{"control character", "/api/v1/applicationgroups/g-1", `{"hostPool": "office", "applicationGroupType": "RemoteApp", "friendlyName": "a\u0007"}`, "friendlyName", 400},
		{"user twice in two cases", "/api/v1/applicationgroups/g-1", `{"hostPool": "office", "applicationGroupType": "RemoteApp", "assignments": {"users": ["bob", "BOB"]}}`, "assignments.users", 400},
		{"empty group name", "/api/v1/applicationgroups/g-1", `{"hostPool": "office", "applicationGroupType": "RemoteApp", "assignments": {"groups": [""]}}`, "assignments.groups[0]", 400},
		{"unknown field", "/api/v1/applicationgroups/g-1", `{"hostPool": "office", "applicationGroupType": "RemoteApp", "admins": []}`, "admins", 400},
		{"pool changes", "/api/v1/applicationgroups/office-apps", `{"hostPool": "other", "applicationGroupType": "RemoteApp"}`, "hostPool", 400},
		{"type changes", "/api/v1/applicationgroups/office-apps", `{"hostPool": "office", "applicationGroupType": "Desktop"}`, "applicationGroupType", 400},
		{"app without a path", "/api/v1/applicationgroups/office-apps/applications/word", `{}`, "filePath", 400},
		{"app bad setting", "/api/v1/applicationgroups/office-apps/applications/word", `{"filePath": "w.exe", "commandLineSetting": "Sometimes"}`, "commandLineSetting", 400},
		{"app Require without arguments", "/api/v1/applicationgroups/office-apps/applications/word", `{"filePath": "w.exe", "commandLineSetting": "Require"}`, "commandLineArguments", 400},
		{"app DoNotAllow with arguments", "/api/v1/applicationgroups/office-apps/applications/word", `{"filePath": "w.exe", "commandLineArguments": "/x"}`, "commandLineArguments", 400},
		{"app in no group", "/api/v1/applicationgroups/none/applications/word", `{"filePath": "w.exe"}`, "", 404},
	} {
		status, ve, raw := rawDo(t, e, "PUT", c.path, adminToken, c.body)
		if status != c.status || (c.field != "" && (ve == nil || ve.Field != c.field || !strings.Contains(ve.Message, c.field))) {
			t.Errorf("%s: %d %s, want %d naming %s", c.name, status, raw, c.status, c.field)
		}
	}
	groups, _ := e.admin.ListApplicationGroups(ctx, "")
	if len(groups) != 1 || groups[0].HostPool != "office" || groups[0].ApplicationGroupType != "RemoteApp" || groups[0].FriendlyName != "Office apps" {
		t.Fatalf("after the refusals: %+v, want office-apps unchanged", groups)
	}
	if apps, err := e.admin.ListApplications(ctx, "office-apps"); err != nil || len(apps) != 0 {
		t.Errorf("applications after the refusals: %+v, %v", apps, err)
	}

	// One Desktop group per pool; applications in RemoteApp groups only.
	e.desktopFor("office", vdibroker.Assignments{AllUsers: true})
	_, err = e.admin.PutApplicationGroup(ctx, "office-desk-2", map[string]any{"hostPool": "office", "applicationGroupType": "Desktop"})
	if ve := wantCode(t, err, vdibroker.EConflict, "office-desktops", "at most one"); ve.Field != "applicationGroupType" {
		t.Errorf("second Desktop group: field %q", ve.Field)
	}
	_, err = e.admin.PutApplication(ctx, "office-desktops", "word", map[string]any{"filePath": "w.exe"})
	wantCode(t, err, vdibroker.EInvalid, "RemoteApp groups only")

	// An application, replaced, audited; the group's pool listing.
	word := map[string]any{"filePath": `C:\Program Files\Office\WINWORD.EXE`, "commandLineSetting": "Allow", "friendlyName": "Word"}
	a, err := e.admin.PutApplication(ctx, "office-apps", "word", word)
	if err != nil || !a.Created || a.ApplicationGroup != "office-apps" || a.CommandLineSetting != "Allow" {
		t.Fatalf("application: %+v, %v", a, err)
	}
	word["friendlyName"] = "Microsoft Word"
	if a, err = e.admin.PutApplication(ctx, "office-apps", "word", word); err != nil || a.Created || a.FriendlyName != "Microsoft Word" {
		t.Fatalf("application replaced: %+v, %v", a, err)
	}
	all, _ := e.admin.ListAudit(ctx, vhttp.AuditQuery{Action: "application.put"})
	var list []*vdibroker.AuditEntry // the refusals above are there too
	for _, a := range all {
		if a.Outcome == vdibroker.AuditOK {
			list = append(list, a)
		}
	}
	if len(list) != 2 || list[1].HostPool != "office" || !strings.Contains(string(list[1].Before), `"friendlyName":"Word"`) ||
		!strings.Contains(string(list[1].After), `"friendlyName":"Microsoft Word"`) {
		t.Errorf("application audit entries: %v; want 2, the replace of pool office from Word to Microsoft Word", list)
	}
	if l, err := e.admin.ListApplicationGroups(ctx, "office"); err != nil || len(l) != 2 {
		t.Errorf("groups of office: %+v, %v", l, err)
	}
	if l, err := e.admin.ListApplicationGroups(ctx, "other"); err != nil || len(l) != 0 {
		t.Errorf("groups of other: %+v, %v", l, err)
	}

	// Deleting the group deletes its application.
	if err := e.admin.DeleteApplicationGroup(ctx, "office-apps"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.GetApplication(ctx, "office-apps", "word"); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
		t.Errorf("application of a deleted group: %v", err)
	}
	_, before, after := oneEntry(t, e, "applicationgroup.delete", "applicationgroups/office-apps")
	if before["name"] != "office-apps" || after != nil {
		t.Errorf("audit of the delete: before %v after %v", before, after)
	}
}

// TestEntitlementEnforced_RE3: an end user (a User token) connects only to
// a desktop assigned to them, by name in any case, through one of their
// token's groups, or as all users; anyone else is refused 403 NotEntitled
// naming the user and the pool, and nothing is stored. A Contributor
// connecting a user is not asked. A removed assignment refuses the next
// connect and leaves the open session alone.
func TestEntitlementEnforced_RE3(t *testing.T) {
	e := newEnvWith(t, envOptions{maintenance: time.Hour})
	ctx := context.Background()
	e.pool("fresh", nil)
	e.addHosts("fresh", "fresh", 2)
	alice := e.client(0, e.userToken("Alice@Contoso.com", nil))
	bob := e.client(0, e.userToken("bob", []string{"Sales"}))
	carol := e.client(0, e.userToken("carol", []string{"Engineering"}))
	connect := func(c *vhttp.Client, user string) (*vhttp.ConnectResult, error) {
		return c.Connect(ctx, "fresh", vhttp.ConnectRequest{User: user})
	}

	// A new pool has no Desktop group: no end user may connect (R-E4).
	_, err := connect(alice, "alice@contoso.com")
	// Said so that the user, whose token this is, knows who can change it.
	wantCode(t, err, vdibroker.ENotEntitled, `"alice@contoso.com"`, `host pool "fresh"`, "an administrator assigns it")
	if l := e.openSessions("fresh"); len(l) != 0 {
		t.Fatalf("a refused connect stored %d sessions", len(l))
	}
	// A Contributor connects anyone, as before.
	ops := e.client(0, e.roleToken("Contributor", "ops"))
	if r, err := ops.Connect(ctx, "fresh", vhttp.ConnectRequest{User: "dave", DryRun: true}); err != nil || r.SessionHost == "" {
		t.Fatalf("Contributor's connect of dave: %+v, %v", r, err)
	}

	e.desktopFor("fresh", vdibroker.Assignments{Users: []string{"ALICE@contoso.com"}, Groups: []string{"sales"}})
	a, err := connect(alice, "alice@contoso.com")
	if err != nil || !a.Created {
		t.Fatalf("alice, assigned in another case: %+v, %v", a, err)
	}
	if b, err := connect(bob, "bob"); err != nil || !b.Created {
		t.Fatalf("bob, through his token's group Sales: %+v, %v", b, err)
	}
	_, err = connect(carol, "carol")
	wantCode(t, err, vdibroker.ENotEntitled, `"carol"`)
	// A token of one user cannot borrow another's entitlement.
	_, err = connect(carol, "bob")
	wantCode(t, err, vdibroker.EPermission)
	if l := e.openSessions("fresh"); len(l) != 2 {
		t.Errorf("open sessions %d, want alice's and bob's", len(l))
	}

	// The assignment removed: alice's next connect is refused, her
	// session goes on.
	e.desktopFor("fresh", vdibroker.Assignments{Groups: []string{"Sales"}})
	_, err = connect(alice, "Alice@Contoso.com")
	wantCode(t, err, vdibroker.ENotEntitled)
	l, _ := e.admin.ListUserSessions(ctx, "fresh", vhttp.SessionQuery{User: "alice@CONTOSO.com"})
	if len(l) != 1 || l[0].ID != a.SessionID || !l[0].Open() {
		t.Errorf("alice's session after the removal: %+v, want %s open", l, a.SessionID)
	}

	// Everyone.
	e.desktopFor("fresh", vdibroker.Assignments{AllUsers: true})
	if c, err := connect(carol, "carol"); err != nil || !c.Created {
		t.Errorf("carol, all users: %+v, %v", c, err)
	}
	if r, err := connect(alice, "alice@contoso.com"); err != nil || r.SessionID != a.SessionID || !r.Reconnect {
		t.Errorf("alice again: %+v, %v; want her session %s", r, err, a.SessionID)
	}

	// Groups belong to User tokens only, and are bounded.
	for _, c := range []struct {
		name string
		req  vhttp.TokenRequest
	}{
		{"Reader with groups", vhttp.TokenRequest{Role: "Reader", Subject: "x", Groups: []string{"Sales"}}},
		{"bad group", vhttp.TokenRequest{Role: "User", Subject: "x", Groups: []string{" Sales"}}},
		{"too many groups", vhttp.TokenRequest{Role: "User", Subject: "x", Groups: strings.Split(strings.Repeat("g,", vdibroker.MaxGroups)+"last", ",")}},
	} {
		_, err := e.admin.CreateToken(ctx, c.req)
		if ve := wantCode(t, err, vdibroker.EInvalid); !strings.HasPrefix(ve.Field, "groups") {
			t.Errorf("%s: field %q, want groups", c.name, ve.Field)
		}
	}
}

// TestCaseInsensitiveUsers_RE5: Alice@Contoso.com and alice@contoso.com
// connecting at once, through two replicas, get one session (R-C6); the
// session list finds it in any case; the host's report of ALICE@CONTOSO.COM
// logs on the session placed for the first spelling (R-S2), no adoption;
// a User token's subject is its user in any case.
func TestCaseInsensitiveUsers_RE5(t *testing.T) {
	e := newEnvWith(t, envOptions{maintenance: time.Hour, replicas: 2})
	ctx := context.Background()
	e.pool("ci-pool", map[string]any{"maxSessionLimit": 50})
	hosts := e.addHosts("ci-pool", "ci-pool", 2)
	const users = 12
	type res struct {
		r   *vhttp.ConnectResult
		err error
	}
	results := make([][2]res, users)
	var wg sync.WaitGroup
	for i := range users {
		for j, name := range []string{fmt.Sprintf("User%02d@Contoso.com", i), fmt.Sprintf("user%02d@CONTOSO.com", i)} {
			wg.Go(func() {
				r, err := e.client(j, adminToken).Connect(ctx, "ci-pool", vhttp.ConnectRequest{User: name})
				results[i][j] = res{r, err}
			})
		}
	}
	wg.Wait()
	for i := range users {
		a, b := results[i][0], results[i][1]
		if a.err != nil || b.err != nil || a.r.SessionID != b.r.SessionID || a.r.Created == b.r.Created {
			t.Errorf("user %d: %+v %v / %+v %v; want one session, made by one of the two", i, a.r, a.err, b.r, b.err)
		}
	}
	if l := e.openSessions("ci-pool"); len(l) != users {
		t.Fatalf("open sessions %d, want %d", len(l), users)
	}
	l, err := e.admin.ListUserSessions(ctx, "ci-pool", vhttp.SessionQuery{User: "USER03@CONTOSO.COM"})
	if err != nil || len(l) != 1 {
		t.Fatalf("list by another case: %+v, %v", l, err)
	}
	s3 := l[0]
	var onHost []vdibroker.AgentSession
	for _, us := range e.openSessions("ci-pool") {
		if us.SessionHost == s3.SessionHost {
			// The host reports every session on it, user03's in capitals.
			onHost = append(onHost, vdibroker.AgentSession{ID: "a-" + us.ID, User: strings.ToUpper(us.User), State: "Active"})
		}
	}
	if !slices.Contains(hosts, s3.SessionHost) {
		t.Fatalf("session on %q, not one of %v", s3.SessionHost, hosts)
	}
	e.heartbeat(s3.SessionHost, onHost...)
	got, err := e.admin.GetUserSession(ctx, "ci-pool", s3.ID)
	if err != nil || got.State != vdibroker.StateActive || got.AgentSessionID != "a-"+s3.ID || got.Adopted {
		t.Errorf("user03's session after the report: %+v, %v; want it Active, logged on, not adopted", got, err)
	}
	if l := e.openSessions("ci-pool"); len(l) != users {
		t.Errorf("open sessions after the report %d, want %d (no adoption)", len(l), users)
	}

	// A User token's subject is its user in any case.
	e.desktopFor("ci-pool", vdibroker.Assignments{AllUsers: true})
	u4 := e.client(1, e.userToken("USER04@contoso.com", nil))
	if r, err := u4.Connect(ctx, "ci-pool", vhttp.ConnectRequest{User: "user04@Contoso.COM"}); err != nil || !r.Reconnect || r.SessionID != results[4][0].r.SessionID {
		t.Errorf("user04's token in another case: %+v, %v", r, err)
	}
}

// rdpLines are an .rdp file's lines by property name.
func rdpLines(file string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(file, "\r\n"), "\r\n") {
		name, rest, _ := strings.Cut(line, ":")
		m[name] = rest
	}
	return m
}

// TestRemoteAppConnect_RE7_RE8: an application connect answers an .rdp
// file that opens the application as a RemoteApp, with the command line
// its setting allows; it is placed in the group's pool and shares the
// user's one session there with their desktop; an end user needs the
// RemoteApp group, not the desktop. A pool's customRdpProperty is checked
// when stored and merged over the server's properties.
func TestRemoteAppConnect_RE7_RE8(t *testing.T) {
	e := newEnvWith(t, envOptions{maintenance: time.Hour})
	ctx := context.Background()
	e.pool("apps-pool", map[string]any{"customRdpProperty": "audiocapturemode:i:1;redirectclipboard:i:0\ndrivestoredirect:s:C:;D:"})
	e.addHosts("apps-pool", "apph", 2)
	e.desktopFor("apps-pool", vdibroker.Assignments{AllUsers: true})
	if _, err := e.admin.PutApplicationGroup(ctx, "office", map[string]any{"hostPool": "apps-pool", "applicationGroupType": "RemoteApp",
		"assignments": map[string]any{"groups": []string{"Office Users"}}}); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]map[string]any{
		"paint": {"filePath": `C:\Windows\system32\mspaint.exe`, "friendlyName": "Paint"},
		"word":  {"filePath": `C:\Office\WINWORD.EXE`, "commandLineSetting": "Allow", "commandLineArguments": "/safe", "friendlyName": "Word"},
		"cmd":   {"filePath": `C:\Windows\system32\cmd.exe`, "commandLineSetting": "Require", "commandLineArguments": "/k dir"},
	} {
		if _, err := e.admin.PutApplication(ctx, "office", name, body); err != nil {
			t.Fatal(err)
		}
	}
	user := e.client(0, e.userToken("erin", []string{"office users"}))
	outsider := e.client(0, e.userToken("frank", nil))

	// Her desktop first: the pool's properties over the server's.
	d, err := user.Connect(ctx, "apps-pool", vhttp.ConnectRequest{User: "erin"})
	if err != nil {
		t.Fatal(err)
	}
	lines := rdpLines(d.RDPFile)
	for name, want := range map[string]string{"audiocapturemode": "i:1", "redirectclipboard": "i:0", "drivestoredirect": "s:C:;D:", "redirectprinters": "i:1"} {
		if lines[name] != want {
			t.Errorf("desktop .rdp %s = %q, want %q:\n%s", name, lines[name], want, d.RDPFile)
		}
	}
	if _, ok := lines["remoteapplicationmode"]; ok {
		t.Errorf("a desktop .rdp has RemoteApp lines:\n%s", d.RDPFile)
	}

	for _, c := range []struct {
		app, commandLine string
		want             map[string]string
		absent           string
	}{
		{"paint", "", map[string]string{"remoteapplicationprogram": "s:||paint", "remoteapplicationname": "s:Paint"}, "remoteapplicationcmdline"},
		{"word", "", map[string]string{"remoteapplicationcmdline": "s:/safe", "remoteapplicationname": "s:Word"}, ""},
		{"word", `/n C:\x.docx`, map[string]string{"remoteapplicationcmdline": `s:/n C:\x.docx`}, ""},
		{"cmd", "", map[string]string{"remoteapplicationcmdline": "s:/k dir", "remoteapplicationname": "s:cmd"}, ""},
	} {
		a, err := user.ConnectApplication(ctx, "office", vdibroker.AppConnectRequest{User: "erin", Application: c.app, CommandLine: c.commandLine})
		if err != nil {
			t.Fatalf("%s: %v", c.app, err)
		}
		// The user's one session in the pool (R-C6), her desktop's.
		if a.SessionID != d.SessionID || !a.Reconnect || a.HostPool != "apps-pool" {
			t.Errorf("%s: session %s reconnect %v, want her desktop's %s", c.app, a.SessionID, a.Reconnect, d.SessionID)
		}
		lines := rdpLines(a.RDPFile)
		c.want["remoteapplicationmode"] = "i:1"
		c.want["audiocapturemode"] = "i:1" // the pool's properties stay
		for name, want := range c.want {
			if lines[name] != want {
				t.Errorf("%s: %s = %q, want %q:\n%s", c.app, name, lines[name], want, a.RDPFile)
			}
		}
		if _, ok := lines[c.absent]; c.absent != "" && ok {
			t.Errorf("%s: has %s:\n%s", c.app, c.absent, a.RDPFile)
		}
	}
	for _, c := range []struct {
		name string
		c    *vhttp.Client
		req  vdibroker.AppConnectRequest
		code string
	}{
		{"command line to DoNotAllow", user, vdibroker.AppConnectRequest{User: "erin", Application: "paint", CommandLine: "/x"}, vdibroker.EInvalid},
		{"command line to Require", user, vdibroker.AppConnectRequest{User: "erin", Application: "cmd", CommandLine: "/x"}, vdibroker.EInvalid},
		{"no application", user, vdibroker.AppConnectRequest{User: "erin"}, vdibroker.EInvalid},
		{"unknown application", user, vdibroker.AppConnectRequest{User: "erin", Application: "excel"}, vdibroker.ENotFound},
		{"not in the group", outsider, vdibroker.AppConnectRequest{User: "frank", Application: "paint"}, vdibroker.ENotEntitled},
		{"another user", user, vdibroker.AppConnectRequest{User: "frank", Application: "paint"}, vdibroker.EPermission},
	} {
		_, err := c.c.ConnectApplication(ctx, "office", c.req)
		wantCode(t, err, c.code)
	}
	_, err = user.ConnectApplication(ctx, "apps-pool-desktops", vdibroker.AppConnectRequest{User: "erin", Application: "paint"})
	wantCode(t, err, vdibroker.EInvalid, "Desktop group", "/api/v1/hostpools/apps-pool/connect")
	// frank may still open the desktop (all users), and a new app
	// session of a user without one is placed and made.
	if _, err := outsider.Connect(ctx, "apps-pool", vhttp.ConnectRequest{User: "frank", DryRun: true}); err != nil {
		t.Errorf("frank's desktop: %v", err)
	}
	g, err := e.admin.ConnectApplication(ctx, "office", vdibroker.AppConnectRequest{User: "gina", Application: "paint"})
	if err != nil || !g.Created || rdpLines(g.RDPFile)["remoteapplicationprogram"] != "s:||paint" {
		t.Errorf("gina's first app connect (by the admin): %+v, %v", g, err)
	}
	if l := e.openSessions("apps-pool"); len(l) != 2 {
		t.Errorf("open sessions %d, want erin's and gina's", len(l))
	}

	// customRdpProperty is refused with its field and the property, and
	// nothing changes.
	for _, bad := range []string{"loadbalanceinfo:s:x", "redirectclipboard:i:7", "redirectclipboard:i:0;redirectclipboard:i:1", "nonsense"} {
		_, err := e.admin.PatchHostPool(ctx, "apps-pool", map[string]any{"customRdpProperty": bad})
		if ve := wantCode(t, err, vdibroker.EInvalid); ve.Field != "customRdpProperty" {
			t.Errorf("%q: field %q", bad, ve.Field)
		}
	}
	p, _ := e.admin.GetHostPool(ctx, "apps-pool")
	if !strings.HasPrefix(p.CustomRdpProperty, "audiocapturemode:i:1;") {
		t.Errorf("customRdpProperty after the refusals: %q", p.CustomRdpProperty)
	}
}

// TestUserEntitlements_RE10: what a user may use and why: each desktop
// and application with the assignment that grants it; a Reader names the
// user's groups, an end user asks about itself with its own; a scoped
// Reader sees its pools' resources only.
func TestUserEntitlements_RE10(t *testing.T) {
	e := newEnvWith(t, envOptions{maintenance: time.Hour})
	ctx := context.Background()
	for _, p := range []string{"east", "west"} {
		e.pool(p, nil)
	}
	e.desktopFor("east", vdibroker.Assignments{Users: []string{"Alice"}})
	e.desktopFor("west", vdibroker.Assignments{AllUsers: true})
	if _, err := e.admin.PutApplicationGroup(ctx, "east-apps", map[string]any{"hostPool": "east", "applicationGroupType": "RemoteApp",
		"assignments": map[string]any{"groups": []string{"Sales"}, "users": []string{"zed"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.PutApplication(ctx, "east-apps", "crm", map[string]any{"filePath": "crm.exe", "friendlyName": "CRM"}); err != nil {
		t.Fatal(err)
	}
	type line struct{ Kind, Resource, Via, Principal string }
	lines := func(u *vdibroker.UserEntitlements) []line {
		var out []line
		for _, r := range u.Resources {
			res := r.HostPool
			if r.Application != "" {
				res += "/" + r.Application
			}
			out = append(out, line{r.Kind, res, r.Grant.Via, r.Grant.Principal})
		}
		return out
	}
	reader := e.client(0, e.roleToken("Reader", "helpdesk"))
	u, err := reader.UserEntitlements(ctx, "alice", []string{"SALES"})
	if err != nil {
		t.Fatal(err)
	}
	// By application group: east-apps, east-desktops, west-desktops.
	want := []line{{"RemoteApp", "east/crm", "group", "Sales"}, {"Desktop", "east", "user", "Alice"}, {"Desktop", "west", "allUsers", ""}}
	if diff := cmp.Diff(want, lines(u)); diff != "" {
		t.Errorf("alice with Sales, as a Reader asks (-want +got):\n%s", diff)
	}

	// An end user asks about itself, with its token's groups.
	alice := e.client(0, e.userToken("alice", []string{"sales"}))
	if u, err := alice.UserEntitlements(ctx, "ALICE", nil); err != nil || len(u.Resources) != 3 || u.Groups[0] != "sales" {
		t.Errorf("alice about herself: %+v, %v", u, err)
	}
	_, err = alice.UserEntitlements(ctx, "bob", nil)
	wantCode(t, err, vdibroker.EPermission)
	_, err = alice.UserEntitlements(ctx, "alice", []string{"Admins"})
	wantCode(t, err, vdibroker.EPermission, "groups come from its identity")

	scoped := e.client(0, e.roleToken("Reader", "west-desk", "west"))
	if u, err := scoped.UserEntitlements(ctx, "alice", []string{"Sales"}); err != nil || len(u.Resources) != 1 || u.Resources[0].HostPool != "west" {
		t.Errorf("a Reader scoped to west: %+v, %v", u, err)
	}
	if status, ve, _ := rawDo(t, e, "GET", "/api/v1/users/alice/entitlements?group=%20x", adminToken, ""); status != 400 || ve.Field != "group[0]" {
		t.Errorf("a bad group: %d %+v", status, ve)
	}
}

// TestEntitlementRoutes_Matrix: every entitlement route against every
// credential a caller may hold: none, a registration token, a host's
// credential, User tokens (its own user, another user's), Readers,
// Contributors and the admin, each unscoped and scoped to another pool
// ("other"). A refusal changes nothing: the group and its application are
// as they were at the end.
func TestEntitlementRoutes_Matrix(t *testing.T) {
	e := newEnvWith(t, envOptions{maintenance: time.Hour})
	ctx := context.Background()
	e.pool("mx-pool", nil)
	e.pool("other", nil)
	hosts := e.addHosts("mx-pool", "mxh", 1)
	rt, err := e.admin.CreateRegistrationToken(ctx, "mx-pool", vhttp.RegistrationTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	reset := func() {
		e.t.Helper()
		if _, err := e.admin.PutApplicationGroup(ctx, "mx-apps", map[string]any{"hostPool": "mx-pool", "applicationGroupType": "RemoteApp",
			"assignments": map[string]any{"users": []string{"alice"}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.admin.PutApplication(ctx, "mx-apps", "app", map[string]any{"filePath": "app.exe"}); err != nil {
			t.Fatal(err)
		}
	}
	reset()
	creds := []struct{ name, token string }{
		{"none", ""},
		{"registration", rt.Token},
		{"host", e.agents[hosts[0]]},
		{"User alice", e.userToken("alice", nil)},
		{"User bob", e.userToken("bob", nil)},
		{"User alice scoped other", e.userToken("alice", nil, "other")},
		{"Reader", e.roleToken("Reader", "r")},
		{"Reader scoped other", e.roleToken("Reader", "r", "other")},
		{"Contributor", e.roleToken("Contributor", "c")},
		{"Contributor scoped other", e.roleToken("Contributor", "c", "other")},
		{"Contributor scoped mx-pool", e.roleToken("Contributor", "c", "mx-pool")},
		{"admin", adminToken},
	}
	const g = "/api/v1/applicationgroups/mx-apps"
	group := `{"hostPool": "mx-pool", "applicationGroupType": "RemoteApp", "assignments": {"users": ["alice"]}}`
	routes := []struct{ name, method, path, body string }{
		{"list groups", "GET", "/api/v1/applicationgroups", ""},
		{"get group", "GET", g, ""},
		{"put group", "PUT", g, group},
		{"delete group", "DELETE", g, ""},
		{"list apps", "GET", g + "/applications", ""},
		{"get app", "GET", g + "/applications/app", ""},
		{"put app", "PUT", g + "/applications/app", `{"filePath": "app.exe"}`},
		{"delete app", "DELETE", g + "/applications/app", ""},
		{"connect alice", "POST", g + "/connect", `{"user": "alice", "application": "app", "dryRun": true}`},
		{"alice's entitlements", "GET", "/api/v1/users/alice/entitlements", ""},
	}
	// want[credential] lists the statuses in the order of routes.
	want := map[string][]int{
		"none":                       {401, 401, 401, 401, 401, 401, 401, 401, 401, 401},
		"registration":               {401, 401, 401, 401, 401, 401, 401, 401, 401, 401},
		"host":                       {401, 401, 401, 401, 401, 401, 401, 401, 401, 401},
		"User alice":                 {403, 403, 403, 403, 403, 403, 403, 403, 200, 200},
		"User bob":                   {403, 403, 403, 403, 403, 403, 403, 403, 403, 403},
		"User alice scoped other":    {403, 403, 403, 403, 403, 403, 403, 403, 404, 200},
		"Reader":                     {200, 200, 403, 403, 200, 200, 403, 403, 403, 200},
		"Reader scoped other":        {200, 404, 403, 403, 404, 404, 403, 403, 403, 200},
		"Contributor":                {200, 200, 200, 204, 200, 200, 200, 204, 200, 200},
		"Contributor scoped other":   {200, 404, 403, 404, 404, 404, 404, 404, 404, 200},
		"Contributor scoped mx-pool": {200, 200, 200, 204, 200, 200, 200, 204, 200, 200},
		"admin":                      {200, 200, 200, 204, 200, 200, 200, 204, 200, 200},
	}
	for _, c := range creds {
		for i, r := range routes {
			status, _, raw := rawDo(t, e, r.method, r.path, c.token, r.body)
			if status != want[c.name][i] {
				t.Errorf("%s as %s: %d %s, want %d", r.name, c.name, status, raw, want[c.name][i])
			}
			if status < 300 && r.method == "DELETE" {
				reset()
			}
		}
	}
	// A scoped Reader's list holds none of mx-pool's groups.
	l, err := e.client(0, creds[7].token).ListApplicationGroups(ctx, "")
	if err != nil || len(l) != 0 {
		t.Errorf("groups a Reader of other sees: %+v, %v", l, err)
	}
	grp, err := e.admin.GetApplicationGroup(ctx, "mx-apps")
	if err != nil || grp.HostPool != "mx-pool" || len(grp.Assignments.Users) != 1 {
		t.Errorf("the group at the end: %+v, %v", grp, err)
	}
	if l := e.openSessions("mx-pool"); len(l) != 0 {
		t.Errorf("dry runs stored %d sessions", len(l))
	}
}

// TestPersonalRules_RPE: a Persistent host is one user's (R-PE1): a second
// assigned user, in any spelling, is refused naming assignedUsers and
// nothing changes; MultiplePersistent takes Direct assignment only
// (R-PE3), as in AVD.
func TestPersonalRules_RPE(t *testing.T) {
	e := newEnvWith(t, envOptions{maintenance: time.Hour})
	ctx := context.Background()
	e.pool("desks", map[string]any{"hostPoolType": "Personal"})
	if _, err := e.admin.PutSessionHost(ctx, "desks", "desk01", vhttp.SessionHostRequest{AssignedUsers: &[]string{"a"}}); err != nil {
		t.Fatal(err)
	}
	for _, users := range [][]string{{"a", "z"}, {"a", "A"}} {
		_, err := e.admin.PatchSessionHost(ctx, "desks", "desk01", map[string]any{"assignedUsers": users})
		if ve := wantCode(t, err, vdibroker.EInvalid); ve.Field != "assignedUsers" {
			t.Errorf("%v: field %q", users, ve.Field)
		}
	}
	_, err := e.admin.PutSessionHost(ctx, "desks", "desk02", vhttp.SessionHostRequest{AssignedUsers: &[]string{"b", "c"}})
	wantCode(t, err, vdibroker.EInvalid, "0..1 users")
	if h, err := e.admin.GetSessionHost(ctx, "desks", "desk01"); err != nil || len(h.AssignedUsers) != 1 || h.AssignedUsers[0] != "a" {
		t.Errorf("desk01 after the refusals: %+v, %v", h, err)
	}
	if _, err := e.admin.GetSessionHost(ctx, "desks", "desk02"); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
		t.Errorf("desk02 was stored: %v", err)
	}

	// R-PE3: a MultiplePersistent host's users are bounded.
	e.pool("multidesks", map[string]any{"hostPoolType": "Personal", "loadBalancerType": "MultiplePersistent", "personalDesktopAssignmentType": "Direct"})
	many := make([]string, vdibroker.MaxAssignedUsers+1)
	for i := range many {
		many[i] = fmt.Sprintf("user%d", i)
	}
	most := many[:vdibroker.MaxAssignedUsers]
	if h, err := e.admin.PutSessionHost(ctx, "multidesks", "m01", vhttp.SessionHostRequest{AssignedUsers: &most}); err != nil || len(h.AssignedUsers) != len(most) {
		t.Fatalf("%d assigned users: %v", len(most), err)
	}
	_, err = e.admin.PatchSessionHost(ctx, "multidesks", "m01", map[string]any{"assignedUsers": many})
	if ve := wantCode(t, err, vdibroker.EInvalid, fmt.Sprintf("0..%d users, got %d", vdibroker.MaxAssignedUsers, len(many))); ve.Field != "assignedUsers" {
		t.Errorf("%d assigned users: field %q", len(many), ve.Field)
	}
	if h, err := e.admin.GetSessionHost(ctx, "multidesks", "m01"); err != nil || len(h.AssignedUsers) != len(most) {
		t.Errorf("m01 after the refusal: %v", err)
	}

	for _, body := range []map[string]any{
		{"hostPoolType": "Personal", "loadBalancerType": "MultiplePersistent"},
		{"hostPoolType": "Personal", "loadBalancerType": "MultiplePersistent", "personalDesktopAssignmentType": "Automatic"},
	} {
		_, err := e.admin.PutHostPool(ctx, "multi", body)
		if ve := wantCode(t, err, vdibroker.EInvalid, "Direct"); ve.Field != "personalDesktopAssignmentType" {
			t.Errorf("%v: field %q", body, ve.Field)
		}
	}
	if _, err := e.admin.GetHostPool(ctx, "multi"); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
		t.Errorf("a refused pool was stored: %v", err)
	}
	e.pool("multi", map[string]any{"hostPoolType": "Personal", "loadBalancerType": "MultiplePersistent", "personalDesktopAssignmentType": "Direct"})
	// Several hosts of one user: MultiplePersistent.
	for _, h := range []string{"m01", "m02"} {
		if _, err := e.admin.PutSessionHost(ctx, "multi", h, vhttp.SessionHostRequest{AssignedUsers: &[]string{"a"}}); err != nil {
			t.Errorf("a's host %s: %v", h, err)
		}
	}
	_, err = e.admin.PatchHostPool(ctx, "desks", map[string]any{"loadBalancerType": "MultiplePersistent"})
	wantCode(t, err, vdibroker.EInvalid, "Direct")
}

// TestEntitlementDuringOutage_RE11: while the database is stopped, an end
// user signed in through OpenID Connect (whose token needs no database to
// check, unlike an API token) who connected before is let back in from
// memory, their entitlement answered from what the replica last read
// (R-E11, R-OUT); one refused before is still refused; one never asked
// gets 503 StoreUnavailable, not a hang, a 500 or a grant. (A PostgreSQL
// server of the test's own.)
func TestEntitlementDuringOutage_RE11(t *testing.T) {
	pg := pgtest.Start(t)
	op := testop.Start(t, "vdibroker-test", "s3cret")
	const storeTimeout = 2 * time.Second
	e := newEnvWith(t, envOptions{dsn: pg.DSN, maintenance: 200 * time.Millisecond, storeTimeout: storeTimeout, oidc: mustProvider(t, op)})
	op.Now = e.clock.Now
	ctx := context.Background()
	e.pool("pin", nil) // the pool testRoles' pin-users may connect to
	hosts := e.addHosts("pin", "pinh", 1)
	e.desktopFor("pin", vdibroker.Assignments{Groups: []string{"Staff"}})
	sso := func(user string, groups ...string) *vhttp.Client {
		return e.client(0, op.Mint(map[string]any{"sub": user, "groups": append([]string{"pin-users"}, groups...)}))
	}
	ann, bea, cid := sso("ann", "staff"), sso("bea", "staff"), sso("cid")
	a, err := ann.Connect(ctx, "pin", vhttp.ConnectRequest{User: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	e.heartbeat(hosts[0], vdibroker.AgentSession{ID: "s-ann", User: "ann", State: vdibroker.StateActive})
	_, err = cid.Connect(ctx, "pin", vhttp.ConnectRequest{User: "cid"})
	wantCode(t, err, vdibroker.ENotEntitled)

	pg.Stop()
	waitHealth(t, e.urls[0], http.StatusServiceUnavailable, storeTimeout+2*time.Second)
	r, err := ann.Connect(ctx, "pin", vhttp.ConnectRequest{User: "ann"})
	if err != nil || !r.Reconnect || r.SessionID != a.SessionID {
		t.Errorf("ann during the outage: %+v, %v; want her session %s", r, err, a.SessionID)
	}
	_, err = cid.Connect(ctx, "pin", vhttp.ConnectRequest{User: "cid"})
	wantCode(t, err, vdibroker.ENotEntitled)
	_, err = bea.Connect(ctx, "pin", vhttp.ConnectRequest{User: "bea"})
	wantCode(t, err, vdibroker.EStoreUnavailable)

	// Back: bea is asked of the database again and let in.
	pg.Restart()
	waitHealth(t, e.urls[0], http.StatusOK, 15*time.Second)
	if r, err := bea.Connect(ctx, "pin", vhttp.ConnectRequest{User: "bea"}); err != nil || !r.Created {
		t.Errorf("bea after the outage: %+v, %v", r, err)
	}
}

// TestAppGroupListPoolFilter_ScopeTellsNothing: a list of the groups of a
// pool outside a scoped token's pools is answered as the list of a pool
// that does not exist, and as the pool's session hosts are (R-E1, R-SEC):
// a Reader or Contributor scoped to one pool does not learn which other
// pools exist from the NotFound of a missing one.
func TestAppGroupListPoolFilter_ScopeTellsNothing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	mine, other := uniq("mine"), uniq("other")
	e.pool(mine, nil)
	e.pool(other, nil)
	for _, role := range []string{"Reader", "Contributor"} {
		tok, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: role, Subject: "ops", HostPools: []string{mine}})
		if err != nil {
			t.Fatal(err)
		}
		answer := func(path, pool string) string {
			status, _, raw := rawDo(t, e, "GET", path, tok.Secret, "")
			return fmt.Sprintf("%d %s", status, strings.ReplaceAll(string(raw), pool, "P"))
		}
		for _, list := range []func(string) string{
			func(p string) string { return "/api/v1/applicationgroups?hostPool=" + p },
			func(p string) string { return "/api/v1/hostpools/" + p + "/sessionhosts" },
		} {
			missing, outside := answer(list("ghost"), "ghost"), answer(list(other), other)
			if missing != outside || !strings.HasPrefix(missing, "404 ") {
				t.Errorf("%s token scoped to %s: %s of a missing pool: %s; of an existing pool outside its scope: %s; want the same 404", role, mine, list("P"), missing, outside)
			}
		}
		if got := answer("/api/v1/applicationgroups?hostPool="+mine, mine); !strings.HasPrefix(got, "200 ") {
			t.Errorf("%s token: its own pool's groups: %s", role, got)
		}
	}
}

// TestAppConnectNotEntitledLearnsNothing_RE3: an end user's application
// connect to a group she is not entitled to is 403 NotEntitled naming
// the user and the group, whatever the group is: another pool's Desktop
// group (which answered 400 naming its pool, the address of its desktop)
// and a group that does not exist (which answered 404) alike, so her
// token cannot list the groups and pools she may not open. One entitled
// to a Desktop group is still told where its desktop opens.
func TestAppConnectNotEntitledLearnsNothing_RE3(t *testing.T) {
	e := newEnvWith(t, envOptions{maintenance: time.Hour})
	ctx := context.Background()
	e.pool("hr-secret-pool", nil)
	e.addHosts("hr-secret-pool", "hr", 1)
	e.desktopFor("hr-secret-pool", vdibroker.Assignments{Groups: []string{"HR"}})
	if _, err := e.admin.PutApplicationGroup(ctx, "hr-apps", map[string]any{"hostPool": "hr-secret-pool", "applicationGroupType": "RemoteApp",
		"assignments": map[string]any{"groups": []string{"HR"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.PutApplication(ctx, "hr-apps", "payroll", map[string]any{"filePath": `C:\HR\payroll.exe`}); err != nil {
		t.Fatal(err)
	}
	frank := e.client(0, e.userToken("frank", []string{"Sales"}))
	for _, group := range []string{"hr-secret-pool-desktops", "hr-apps", "no-such-group"} {
		_, err := frank.ConnectApplication(ctx, group, vdibroker.AppConnectRequest{User: "frank", Application: "payroll"})
		ve := wantCode(t, err, vdibroker.ENotEntitled, `"frank"`, fmt.Sprintf("application group %q", group))
		if strings.Contains(ve.Message, "hr-secret-pool/") || strings.Contains(ve.Message, "Desktop") {
			t.Errorf("%s: the refusal tells what the group is: %q", group, ve.Message)
		}
		// Another user's name is refused as such first.
		_, err = frank.ConnectApplication(ctx, group, vdibroker.AppConnectRequest{User: "hr-boss", Application: "payroll"})
		wantCode(t, err, vdibroker.EPermission)
	}
	// Entitled to the Desktop group: told where its desktop opens.
	hr := e.client(0, e.userToken("hanna", []string{"hr"}))
	_, err := hr.ConnectApplication(ctx, "hr-secret-pool-desktops", vdibroker.AppConnectRequest{User: "hanna", Application: "payroll"})
	wantCode(t, err, vdibroker.EInvalid, "Desktop group", "/api/v1/hostpools/hr-secret-pool/connect")
	if a, err := hr.ConnectApplication(ctx, "hr-apps", vdibroker.AppConnectRequest{User: "hanna", Application: "payroll", DryRun: true}); err != nil || a.HostPool != "hr-secret-pool" {
		t.Errorf("hanna's payroll: %+v, %v", a, err)
	}
	if l := e.openSessions("hr-secret-pool"); len(l) != 0 {
		t.Errorf("refused and dry-run connects stored %d sessions", len(l))
	}
}

// TestGlobalConnectNotEntitledLearnsNothing_RE9_RE3: an end user's
// connect to a global entitlement she is not entitled to, or to none of
// that name, is one answer, 403 NotEntitled naming her and the name
// (a missing one answered 404), so her token cannot list the
// federation's entitlements.
func TestGlobalConnectNotEntitledLearnsNothing_RE9_RE3(t *testing.T) {
	envs := fedPodsOn(t, "", 1, 1, 5, vdibroker.DistributionNone, false, nil)
	e := envs[0]
	ctx := t.Context()
	st, err := e.admin.GetFederation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	doc := *st.Document
	doc.Generation++
	doc.GlobalEntitlements[0].Groups = []string{"Office"}
	if _, err := e.admin.PutFederation(ctx, &doc); err != nil {
		t.Fatal(err)
	}
	frank := e.client(0, e.userToken("frank", []string{"Sales"}))
	for _, name := range []string{"office", "no-such-entitlement"} {
		_, err := frank.GlobalConnect(ctx, name, vdibroker.GlobalConnectRequest{User: "frank", DryRun: true})
		wantCode(t, err, vdibroker.ENotEntitled, `"frank"`, fmt.Sprintf("global entitlement %q", name))
		// Another user's name is refused as such first.
		_, err = frank.GlobalConnect(ctx, name, vdibroker.GlobalConnectRequest{User: "olga", DryRun: true})
		wantCode(t, err, vdibroker.EPermission)
	}
	// An administrator is told the name is none.
	_, err = e.admin.GlobalConnect(ctx, "no-such-entitlement", vdibroker.GlobalConnectRequest{User: "frank", DryRun: true})
	wantCode(t, err, vdibroker.ENotFound)
	olga := e.client(0, e.userToken("olga", []string{"office"}))
	if _, err := olga.GlobalConnect(ctx, "office", vdibroker.GlobalConnectRequest{User: "olga", DryRun: true}); err != nil {
		t.Errorf("olga, of group Office: %v", err)
	}
}
