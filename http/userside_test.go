package http_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// The user's side of the API: the feed (R-U5), a user's own sessions and
// their commands (R-U3), connects that wait for a starting host (R-U4).

// feedWorld: alice (group Sales) is assigned p1's desktop by name and
// p2's through Sales; bob p3's; p1's RemoteApp group "p01-apps" is
// alice's, with word shown in the portal and a hidden one; a Finance
// group of p2 with excel is nobody's here. p1 and p2 have a host each.
func feedWorld(t *testing.T) *env {
	t.Helper()
	e := newEnvWith(t, envOptions{maintenance: time.Hour})
	ctx := context.Background()
	e.pool("p01", nil)
	e.pool("p02", map[string]any{"friendlyName": "Lab desktops"})
	e.pool("p03", nil)
	e.addHosts("p01", "p01h", 1)
	e.addHosts("p02", "p02h", 1)
	for name, g := range map[string]map[string]any{
		"p01-desk": {"hostPool": "p01", "applicationGroupType": "Desktop", "friendlyName": "Office",
			"assignments": map[string]any{"users": []string{"ALICE"}}},
		"p02-desk": {"hostPool": "p02", "applicationGroupType": "Desktop", "assignments": map[string]any{"groups": []string{"sales"}}},
		"p03-desk": {"hostPool": "p03", "applicationGroupType": "Desktop", "assignments": map[string]any{"users": []string{"bob"}}},
		"p01-apps": {"hostPool": "p01", "applicationGroupType": "RemoteApp", "assignments": map[string]any{"users": []string{"alice"}}},
		"p02-fin":  {"hostPool": "p02", "applicationGroupType": "RemoteApp", "assignments": map[string]any{"groups": []string{"Finance"}}},
	} {
		if _, err := e.admin.PutApplicationGroup(ctx, name, g); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range []struct {
		group, name string
		body        map[string]any
	}{
		{"p01-apps", "word", map[string]any{"filePath": `C:\Office\WINWORD.EXE`, "friendlyName": "Word", "showInPortal": true,
			"iconPath": `C:\Office\WINWORD.EXE`}},
		{"p01-apps", "regedit", map[string]any{"filePath": `C:\Windows\regedit.exe`, "showInPortal": false}},
		{"p02-fin", "excel", map[string]any{"filePath": `C:\Office\EXCEL.EXE`, "showInPortal": true}},
	} {
		if _, err := e.admin.PutApplication(ctx, a.group, a.name, a.body); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// TestFeed_RU5: GET /api/v1/feed answers exactly what the caller may
// open as itself: desktops first (by friendly name: the group's, else the
// pool's), then the applications shown in the portal, each with the
// kind's default icon and the call that opens it, which works as
// written. Another user, a scoped token, a Reader, a Gateway token and no
// token get their own answers.
func TestFeed_RU5(t *testing.T) {
	e := feedWorld(t)
	ctx := context.Background()
	alice := e.client(0, e.userToken("alice", []string{"Sales"}))
	f, err := alice.Feed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := &vdibroker.Feed{User: "alice", Resources: []vdibroker.FeedResource{
		{ID: "desktop:p02", Kind: "Desktop", FriendlyName: "Lab desktops", HostPool: "p02", ApplicationGroup: "p02-desk",
			IconURL: "/portal/icons/desktop.svg", ConnectURL: "/api/v1/hostpools/p02/connect", ConnectBody: map[string]string{"user": "alice"}},
		{ID: "desktop:p01", Kind: "Desktop", FriendlyName: "Office", HostPool: "p01", ApplicationGroup: "p01-desk",
			IconURL: "/portal/icons/desktop.svg", ConnectURL: "/api/v1/hostpools/p01/connect", ConnectBody: map[string]string{"user": "alice"}},
		{ID: "app:p01-apps/word", Kind: "RemoteApp", FriendlyName: "Word", HostPool: "p01", ApplicationGroup: "p01-apps", Application: "word",
			IconURL: "/portal/icons/remoteapp.svg", ConnectURL: "/api/v1/applicationgroups/p01-apps/connect",
			ConnectBody: map[string]string{"user": "alice", "application": "word"}},
	}}
	if diff := cmp.Diff(want, f); diff != "" {
		t.Fatalf("alice's feed (-want +got):\n%s", diff)
	}
	// Each connect call opens what the feed says, for alice herself.
	for _, r := range f.Resources {
		body, _ := json.Marshal(r.ConnectBody)
		status, _, raw := rawDo(t, e, "POST", r.ConnectURL, aliceSecret(t, e), string(body))
		if status != http.StatusCreated && status != http.StatusOK {
			t.Errorf("%s: %s answered %d %s", r.ID, r.ConnectURL, status, raw)
		}
		if r.Kind == "RemoteApp" && !strings.Contains(string(raw), `remoteapplicationprogram:s:||word`) {
			t.Errorf("%s: the answer opens no RemoteApp: %s", r.ID, raw)
		}
	}

	bob, err := e.client(0, e.userToken("Bob", nil)).Feed(ctx)
	if err != nil || len(bob.Resources) != 1 || bob.Resources[0].ID != "desktop:p03" || bob.Resources[0].FriendlyName != "p03" {
		t.Errorf("bob's feed: %+v, %v; want p3's desktop alone, named after its pool", bob, err)
	}
	scoped, err := e.client(0, e.userToken("alice", []string{"Sales"}, "p02")).Feed(ctx)
	if err != nil || len(scoped.Resources) != 1 || scoped.Resources[0].ID != "desktop:p02" {
		t.Errorf("a token of alice scoped to p2: %+v, %v; want p2's desktop alone", scoped, err)
	}
	reader, err := e.client(0, e.roleToken("Reader", "auditor")).Feed(ctx)
	if err != nil || len(reader.Resources) != 0 {
		t.Errorf("a Reader's own feed: %+v, %v; want empty (it is entitled to nothing)", reader, err)
	}
	for _, c := range []struct {
		name, token string
		status      int
	}{
		{"no token", "", 401},
		{"Gateway", e.roleToken("Gateway", "rdgw"), 403},
	} {
		if status, _, raw := rawDo(t, e, "GET", "/api/v1/feed", c.token, ""); status != c.status {
			t.Errorf("feed with %s: %d %s, want %d", c.name, status, raw, c.status)
		}
	}
}

// TestFeedGlobalMemberPools_RU3: a global entitlement in a pod's feed
// names its member pools in that pod, and only those, so the portal can
// name a session in one of them after the entitlement; and it says
// whether its global connect at that pod looks in that pod (its scope
// from there, for her, R-G1), so the portal offers Reconnect through it
// only where it reaches her session (R-U1): with WithinSite from her
// home site s1, only pod2's (of s1) does; from a home site of one of
// her groups (s0), as her global connect starts there (R-G3), pod0's
// and pod1's do; a user's own home site before her group's.
func TestFeedGlobalMemberPools_RU3(t *testing.T) {
	ctx := context.Background()
	envs := fedPods(t, 3, 1, 5, vdibroker.DistributionNone)
	feedsOf := func(user string, groups []string) []*vdibroker.Feed {
		t.Helper()
		var out []*vdibroker.Feed
		for _, e := range envs {
			f, err := e.client(0, e.userToken(user, groups)).Feed(ctx)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, f)
		}
		return out
	}
	feeds := func() []*vdibroker.Feed { return feedsOf("alice", nil) }
	for i, f := range feeds() {
		want := []vdibroker.FeedResource{{ID: "global:office", Kind: "Desktop", FriendlyName: "office", GlobalEntitlement: "office",
			MemberPools: []string{fmt.Sprintf("office-pod%d", i)}, ReconnectsHere: true, IconURL: "/portal/icons/desktop.svg",
			ConnectURL: "/api/v1/globalentitlements/office/connect", ConnectBody: map[string]string{"user": "alice"}}}
		if diff := cmp.Diff(want, f.Resources); diff != "" {
			t.Errorf("pod%d's feed (-want +got):\n%s", i, diff)
		}
	}
	st, err := envs[0].admin.GetFederation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	doc := *st.Document
	doc.Generation++
	doc.HomeSites = []vdibroker.HomeSite{{User: "alice", Site: "s1"}}
	doc.GlobalEntitlements = slices.Clone(doc.GlobalEntitlements)
	doc.GlobalEntitlements[0].Scope, doc.GlobalEntitlements[0].UseHomeSite = vdibroker.ScopeWithinSite, true
	for _, e := range envs {
		d := doc
		if _, err := e.admin.PutFederation(ctx, &d); err != nil {
			t.Fatal(err)
		}
	}
	for i, f := range feeds() {
		if len(f.Resources) != 1 || f.Resources[0].ReconnectsHere != (i == 2) {
			t.Errorf("pod%d's feed, WithinSite from alice's home site s1: %+v; want reconnectsHere %v", i, f.Resources, i == 2)
		}
	}
	// A home site through a group: carol's Sales starts at s0; alice,
	// in Sales too, still starts at her own s1.
	doc.Generation++
	doc.HomeSites = []vdibroker.HomeSite{{User: "alice", Site: "s1"}, {Group: "Sales", Site: "s0"}}
	for _, e := range envs {
		d := doc
		if _, err := e.admin.PutFederation(ctx, &d); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		user string
		want []bool
	}{{"carol", []bool{true, true, false}}, {"alice", []bool{false, false, true}}} {
		for i, f := range feedsOf(tc.user, []string{"Sales"}) {
			if len(f.Resources) != 1 || f.Resources[0].ReconnectsHere != tc.want[i] {
				t.Errorf("pod%d's feed of %s in Sales, WithinSite from Sales's home site s0: %+v; want reconnectsHere %v", i, tc.user, f.Resources, tc.want[i])
			}
		}
	}
}

// aliceSecret is a fresh User token of alice in Sales.
func aliceSecret(t *testing.T, e *env) string { return e.userToken("alice", []string{"Sales"}) }

// TestOwnSessions_RU3: an end user lists its own open sessions in every
// pool and logs off and disconnects them; another user's session is
// refused (403, nothing queued, the refusal audited), whichever route;
// the commands are audited under the user's token.
func TestOwnSessions_RU3(t *testing.T) {
	e := feedWorld(t)
	ctx := context.Background()
	if _, err := e.admin.PutApplicationGroup(ctx, "p02-desk", map[string]any{"hostPool": "p02", "applicationGroupType": "Desktop",
		"assignments": map[string]any{"groups": []string{"sales"}, "users": []string{"bob"}}}); err != nil {
		t.Fatal(err)
	}
	aliceTok, bobTok := e.userToken("Alice", []string{"Sales"}), e.userToken("bob", nil)
	alice, bob := e.client(0, aliceTok), e.client(0, bobTok)
	a1, err := alice.Connect(ctx, "p01", vhttp.ConnectRequest{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	a2, err := alice.Connect(ctx, "p02", vhttp.ConnectRequest{User: "ALICE"})
	if err != nil {
		t.Fatal(err)
	}
	b2, err := bob.Connect(ctx, "p02", vhttp.ConnectRequest{User: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	e.heartbeat("p01h001", vdibroker.AgentSession{ID: "1", User: "alice", State: vdibroker.StateActive})
	e.heartbeat("p02h001", vdibroker.AgentSession{ID: "2", User: "alice", State: vdibroker.StateActive},
		vdibroker.AgentSession{ID: "3", User: "bob", State: vdibroker.StateActive})

	mine, err := alice.UserSessions(ctx, "alice")
	if err != nil || len(mine) != 2 || !sameIDs(mine, a1.SessionID, a2.SessionID) {
		t.Fatalf("alice's sessions: %+v, %v; want her two, in p1 and p2", mine, err)
	}
	_, err = bob.UserSessions(ctx, "alice")
	wantCode(t, err, vdibroker.EPermission, "only its own")
	if all, err := e.client(0, e.roleToken("Reader", "auditor")).UserSessions(ctx, "alice"); err != nil || len(all) != 2 {
		t.Errorf("a Reader asking about alice: %+v, %v", all, err)
	}
	if some, err := e.client(0, e.roleToken("Reader", "p1-auditor", "p01")).UserSessions(ctx, "alice"); err != nil || len(some) != 1 || some[0].HostPool != "p01" {
		t.Errorf("a Reader scoped to p1 asking about alice: %+v, %v; want p1's alone", some, err)
	}

	// Bob on alice's session: refused on both routes, nothing queued.
	for _, path := range []string{"/api/v1/hostpools/p02/usersessions/" + a2.SessionID, "/api/v1/hostpools/p02/usersessions/" + a2.SessionID + "/disconnect"} {
		method := "DELETE"
		if strings.HasSuffix(path, "/disconnect") {
			method = "POST"
		}
		status, ve, raw := rawDo(t, e, method, path, bobTok, "")
		if status != 403 || ve == nil || ve.Code != vdibroker.EPermission || !strings.Contains(ve.Message, "only its own") {
			t.Errorf("bob %s alice's session: %d %s; want 403", method, status, raw)
		}
	}
	if s, _ := e.admin.GetUserSession(ctx, "p02", a2.SessionID); s.State != vdibroker.StateActive {
		t.Fatalf("alice's session after bob's attempts: %s", s.State)
	}
	refused, _ := e.admin.ListAudit(ctx, vhttp.AuditQuery{Action: "usersession.logoff"})
	if len(refused) != 1 || refused[0].Outcome != vdibroker.AuditRefused || refused[0].Principal.Name != "bob" {
		t.Errorf("audit of bob's logoff: %+v", refused)
	}
	// A Reader is refused too; so is bob's disconnect of his own
	// session as another user's token would be scoped out.
	if status, _, raw := rawDo(t, e, "DELETE", "/api/v1/hostpools/p01/usersessions/"+a1.SessionID, e.roleToken("Reader", "r"), ""); status != 403 {
		t.Errorf("a Reader's logoff: %d %s", status, raw)
	}

	// Alice on her own: disconnect, then log off; bob on his own.
	if _, err := alice.Disconnect(ctx, "p02", a2.SessionID); err != nil {
		t.Fatalf("alice disconnects her session: %v", err)
	}
	if _, err := alice.Logoff(ctx, "p01", a1.SessionID); err != nil {
		t.Fatalf("alice logs off her session: %v", err)
	}
	if _, err := bob.Logoff(ctx, "p02", b2.SessionID); err != nil {
		t.Fatalf("bob logs off his session: %v", err)
	}
	// The session's audit: the Reader's refusal, then alice's logoff.
	entries, _ := e.admin.ListAudit(ctx, vhttp.AuditQuery{Target: "hostpools/p01/usersessions/" + a1.SessionID})
	var done []*vdibroker.AuditEntry
	for _, en := range entries {
		if en.Outcome == vdibroker.AuditOK {
			done = append(done, en)
		}
	}
	if len(entries) != 2 || len(done) != 1 || done[0].Action != "usersession.logoff" || done[0].Principal.Name != "Alice" ||
		done[0].Principal.Role != "User" {
		t.Errorf("audit of alice's logoff: %+v", entries)
	}
}

func sameIDs(list []*vdibroker.UserSession, ids ...string) bool {
	if len(list) != len(ids) {
		return false
	}
	for _, id := range ids {
		found := false
		for _, us := range list {
			found = found || us.ID == id
		}
		if !found {
			return false
		}
	}
	return true
}

// TestConnectWait_RU4: POST .../connect?wait= and the application
// connect's: with every host stopped, the connect starts one and is held
// (not answered 503) until that host's agent heartbeats, then answered
// 201 with a session there; a bad wait is 400 naming the field and the
// range, and nothing is stored.
func TestConnectWait_RU4(t *testing.T) {
	e, _, pool, hosts := powerEnv(t)
	ctx := context.Background()
	e.desktopFor(pool, vdibroker.Assignments{AllUsers: true})
	if _, err := e.admin.PutApplicationGroup(ctx, pool+"-apps", map[string]any{"hostPool": pool, "applicationGroupType": "RemoteApp",
		"assignments": map[string]any{"allUsers": true}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.PutApplication(ctx, pool+"-apps", "paint", map[string]any{"filePath": `C:\Windows\mspaint.exe`, "friendlyName": "Paint"}); err != nil {
		t.Fatal(err)
	}
	for _, h := range hosts {
		if _, err := e.admin.StopSessionHost(ctx, pool, h, true); err != nil {
			t.Fatal(err)
		}
	}
	// Stopped long enough that their agents' last heartbeats are old: a
	// started host takes sessions once its agent heartbeats again.
	e.clock.Advance(5 * time.Minute)
	for _, c := range []struct{ wait, want string }{
		{"abc", "from 0s to 10m0s"}, {"11m", "from 0s to 10m0s"}, {"-1s", "from 0s to 10m0s"}, {"601", "from 0s to 10m0s"}, {"1e9", "10m0s"},
	} {
		for _, path := range []string{"/api/v1/hostpools/" + pool + "/connect", "/api/v1/applicationgroups/" + pool + "-apps/connect"} {
			body := `{"user": "bob"}`
			if strings.Contains(path, "applicationgroups") {
				body = `{"user": "bob", "application": "paint"}`
			}
			status, ve, raw := rawDo(t, e, "POST", path+"?wait="+c.wait, adminToken, body)
			if status != 400 || ve == nil || ve.Field != "wait" || !strings.Contains(ve.Message, c.want) {
				t.Errorf("%s?wait=%s: %d %s; want 400 on wait naming the range", path, c.wait, status, raw)
			}
		}
	}
	if n := len(e.openSessions(pool)); n != 0 {
		t.Fatalf("%d sessions after refused connects", n)
	}

	// bob's desktop: held, h1 started; its heartbeat answers him.
	bob := e.client(0, e.userToken("bob", nil))
	held := func(user string, connect func() (*vhttp.ConnectResult, error), n int) <-chan result {
		t.Helper()
		out := make(chan result, 1)
		go func() { a, err := connect(); out <- result{a, err} }()
		for deadline := time.Now().Add(10 * time.Second); e.srvs[0].Broker.HeldConnects() < n; time.Sleep(time.Millisecond) {
			select {
			case r := <-out:
				t.Fatalf("%s's connect was answered, not held: %+v, %v", user, r.a, r.err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s's connect was neither held nor answered within 10 s", user)
			}
		}
		return out
	}
	rb := held("bob", func() (*vhttp.ConnectResult, error) {
		return bob.Connect(ctx, pool, vhttp.ConnectRequest{User: "bob", Wait: 90 * time.Second})
	}, 1)
	// carol's application: the other host (h1's one seat is bob's).
	carol := e.client(0, e.userToken("carol", nil))
	rc := held("carol", func() (*vhttp.ConnectResult, error) {
		return carol.ConnectApplication(ctx, pool+"-apps", vdibroker.AppConnectRequest{User: "carol", Application: "paint", Wait: 2 * time.Minute})
	}, 2)
	// A second held connect of bob is answered at once.
	status, ve, raw := rawDo(t, e, "POST", "/api/v1/hostpools/"+pool+"/connect?wait=30s", adminToken, `{"user": "BOB"}`)
	if status != 503 || ve == nil || ve.Code != vdibroker.EHostStarting || !strings.Contains(ve.Message, "held already") {
		t.Errorf("bob's second connect with a wait: %d %s; want 503 at once", status, raw)
	}
	// h1's heartbeat answers one of them (both woke: whichever decides
	// first takes its one seat), h2's the other; each on its own host.
	got := map[string]result{}
	for _, h := range hosts[:2] {
		e.heartbeat(h)
		select {
		case r := <-rb:
			got["bob"] = r
		case r := <-rc:
			got["carol"] = r
		}
		if len(got) == 1 && e.srvs[0].Broker.HeldConnects() != 1 {
			t.Errorf("after %s's heartbeat: %d connects held, want the other one", h, e.srvs[0].Broker.HeldConnects())
		}
	}
	b, c := got["bob"], got["carol"]
	if b.err != nil || !b.a.Created || b.a.RDPFile == "" || !slices.Contains(hosts[:2], b.a.SessionHost) {
		t.Fatalf("bob after the heartbeats: %+v, %v; want 201 on %v", b.a, b.err, hosts[:2])
	}
	if c.err != nil || !c.a.Created || !strings.Contains(c.a.RDPFile, "remoteapplicationprogram:s:||paint") || c.a.SessionHost == b.a.SessionHost {
		t.Fatalf("carol after the heartbeats: %+v, %v; want paint on the host bob is not on", c.a, c.err)
	}
	if n := e.srvs[0].Broker.HeldConnects(); n != 0 {
		t.Errorf("%d connects still held", n)
	}
}

type result struct {
	a   *vhttp.ConnectResult
	err error
}
