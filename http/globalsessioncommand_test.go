package http_test

import (
	nethttp "net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestGlobalSessionCommand_RU3 is testGlobalSessionCommand on SQLite.
func TestGlobalSessionCommand_RU3(t *testing.T) { testGlobalSessionCommand(t, "") }

// TestGlobalSessionCommandPostgres_RU3 is testGlobalSessionCommand on
// PostgreSQL, each pod in a schema of its own.
func TestGlobalSessionCommandPostgres_RU3(t *testing.T) {
	testGlobalSessionCommand(t, postgresDSN(t))
}

// commandsFor is the commands of host's heartbeat answer for session id.
func commandsFor(e *env, host, id string, sessions ...vdibroker.AgentSession) []string {
	e.t.Helper()
	var out []string
	for _, c := range e.heartbeat(host, sessions...).Commands {
		if c.SessionID == id {
			out = append(out, c.Type)
		}
	}
	return out
}

// testGlobalSessionCommand (R-U3 across the federation, R-G5): alice,
// signed in at pod0, disconnects and logs off her session in pod1 through
// DELETE and POST .../disconnect of /users/{user}/globalsessions/{pod}/{id};
// pod1 queues each as its own API does (a logoff asked twice is one
// command) and its agent gets them. bob's session is 404 to her (and
// another user's name 403) and stays as it was; her own session in a pool
// that is a member of an entitlement that does not grant her is 404, while
// the admin, and a Helpdesk for any user, may. Scoped principals, Readers
// and Gateway tokens are refused; a pod that is not a peer is 404, one
// that does not answer 503 PodUnavailable, without its address for her. A
// replayed pod call changes nothing. Both pods' audit trails record it:
// pod1's names pod0 and the user, pod0's the caller.
func testGlobalSessionCommand(t *testing.T, dsn string) {
	envs := fedPodsOn(t, dsn, 3, 1, 5, vdibroker.DistributionNone, false, nil)
	ctx := t.Context()
	far := envs[1]
	far.pool("payroll-pod1", map[string]any{"maxSessionLimit": 5})
	far.addHosts("payroll-pod1", "payroll-h", 1)
	st, err := envs[0].admin.GetFederation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	doc := *st.Document
	doc.Generation++
	doc.GlobalEntitlements = append(slices.Clone(doc.GlobalEntitlements), vdibroker.GlobalEntitlement{Name: "payroll",
		SessionDistribution: vdibroker.DistributionNone, Users: []string{"bob"},
		Members: []vdibroker.Member{{Pod: "pod1", HostPool: "payroll-pod1"}}})
	for _, e := range envs {
		d := doc
		if _, err := e.admin.PutFederation(ctx, &d); err != nil {
			t.Fatal(err)
		}
	}
	const host = "pod1-h001"
	mine := far.mustConnect("office-pod1", "alice").SessionID
	bobs := far.mustConnect("office-pod1", "bob").SessionID
	payroll := far.mustConnect("payroll-pod1", "alice").SessionID
	active := []vdibroker.AgentSession{{ID: "1", User: "alice", State: vdibroker.StateActive}, {ID: "2", User: "bob", State: vdibroker.StateActive}}
	far.heartbeat(host, active...)
	far.heartbeat("payroll-h001", active[0])

	e := envs[0]
	aliceToken := e.userToken("Alice", nil)
	alice := e.client(0, aliceToken)
	c, err := alice.GlobalDisconnect(ctx, "alice", "pod1", mine)
	if err != nil || c.Type != vdibroker.CommandDisconnect || c.SessionID != mine {
		t.Fatalf("alice disconnects her session on pod1: %+v %v", c, err)
	}
	if got := commandsFor(far, host, mine, active...); !slices.Equal(got, []string{vdibroker.CommandDisconnect}) {
		t.Errorf("pod1's agent got %v for alice's session, want the Disconnect", got)
	}
	first, err := alice.GlobalLogoff(ctx, "alice", "pod1", mine)
	if err != nil || first.Type != vdibroker.CommandLogoff || first.SessionID != mine {
		t.Fatalf("alice logs off her session on pod1: %+v %v", first, err)
	}
	again, err := alice.GlobalLogoff(ctx, "alice", "pod1", mine)
	if err != nil || again.ID != first.ID {
		t.Errorf("alice's logoff asked again: %+v %v; want the queued one, %s", again, err, first.ID)
	}
	if got := commandsFor(far, host, mine, active...); !slices.Equal(got, []string{vdibroker.CommandLogoff}) {
		t.Errorf("pod1's agent got %v for alice's session, want one Logoff", got)
	}

	// Another user's session, and a pool not of an entitlement granting
	// her: 404, as an unknown one; nothing queued.
	_, err = alice.GlobalLogoff(ctx, "alice", "pod1", bobs)
	wantCode(t, err, vdibroker.ENotFound)
	_, err = alice.GlobalDisconnect(ctx, "alice", "pod1", "no-such-session")
	wantCode(t, err, vdibroker.ENotFound)
	_, err = alice.GlobalLogoff(ctx, "bob", "pod1", bobs)
	wantCode(t, err, vdibroker.EPermission)
	_, err = alice.GlobalLogoff(ctx, "alice", "pod1", payroll)
	wantCode(t, err, vdibroker.ENotFound)
	if got := commandsFor(far, host, bobs, active...); len(got) != 0 {
		t.Errorf("bob's session got %v after alice's refused logoff, want nothing", got)
	}
	if got := commandsFor(far, "payroll-h001", payroll, active[0]); len(got) != 0 {
		t.Errorf("alice's payroll session got %v after her refused logoff, want nothing", got)
	}
	if us, err := far.admin.GetUserSession(ctx, "office-pod1", bobs); err != nil || us.State != vdibroker.StateActive {
		t.Errorf("bob's session after alice's refused logoff: %+v %v; want it Active", us, err)
	}
	// The admin acts in every member pool of the pod.
	if c, err := e.admin.GlobalLogoff(ctx, "alice", "pod1", payroll); err != nil || c.SessionID != payroll {
		t.Errorf("the admin logs off alice's payroll session: %+v %v", c, err)
	}

	// Who may: a Helpdesk for any user; scoped principals, Readers and
	// Gateway tokens not.
	for _, tc := range []struct {
		name, token, path string
		status            int
	}{
		{"a Reader", e.roleToken("Reader", "auditor"), "/api/v1/users/bob/globalsessions/pod1/" + bobs, 403},
		{"a scoped Helpdesk", e.roleToken("Helpdesk", "pin-desk", "office-pod0"), "/api/v1/users/bob/globalsessions/pod1/" + bobs, 403},
		{"a scoped alice", e.userToken("alice", nil, "office-pod0"), "/api/v1/users/alice/globalsessions/pod1/" + mine, 403},
		{"a Gateway token", e.roleToken("Gateway", "rdgw"), "/api/v1/users/bob/globalsessions/pod1/" + bobs, 403},
		{"no token", "", "/api/v1/users/bob/globalsessions/pod1/" + bobs, 401},
		{"a pod not in the document", adminToken, "/api/v1/users/bob/globalsessions/pod9/" + bobs, 404},
		{"this pod", adminToken, "/api/v1/users/bob/globalsessions/pod0/" + bobs, 404},
	} {
		if status, _, raw := rawDo(t, e, "DELETE", tc.path, tc.token, ""); status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, status, raw, tc.status)
		}
	}
	if got := commandsFor(far, host, bobs, active...); len(got) != 0 {
		t.Errorf("bob's session got %v after refused logoffs, want nothing", got)
	}

	// A pod call replayed: refused, nothing queued again (the first's
	// command was delivered, so a second would be a new one).
	pc := vhttp.NewPodClient("pod0", []byte(testFedSecret))
	rec := &recordingTransport{rt: pc.HTTPClient.Transport}
	pc.HTTPClient.Transport = rec
	req := vdibroker.PodSessionCommandRequest{User: "BOB", ID: bobs, HostPools: []string{"office-pod1"}, Command: vdibroker.CommandLogoff}
	if c, err := pc.SessionCommand(ctx, vdibroker.Pod{Name: "pod1", URL: far.urls[0]}, req); err != nil || c.SessionID != bobs {
		t.Fatalf("pod0's signed logoff of bob's session: %+v %v", c, err)
	}
	if got := commandsFor(far, host, bobs, active...); !slices.Equal(got, []string{vdibroker.CommandLogoff}) {
		t.Errorf("pod1's agent got %v for bob's session, want the Logoff", got)
	}
	if got := podCallStatus(t, far.urls[0], "POST", federation.SessionCommandPath, rec.body, rec.h); got != 401 {
		t.Errorf("the logoff pod call replayed: %d, want 401", got)
	}
	if got := commandsFor(far, host, bobs, active...); len(got) != 0 {
		t.Errorf("bob's session got %v after the replay, want nothing", got)
	}
	// A Helpdesk logs off any user's.
	desk := e.client(0, e.roleToken("Helpdesk", "desk"))
	if c, err := desk.GlobalLogoff(ctx, "bob", "pod1", bobs); err != nil || c.SessionID != bobs {
		t.Errorf("a Helpdesk logs off bob's session on pod1: %+v %v", c, err)
	}

	// Both audit trails.
	list, err := far.admin.ListAudit(ctx, vhttp.AuditQuery{Target: "hostpools/office-pod1/usersessions/"})
	if err != nil {
		t.Fatal(err)
	}

	var actions, farIDs []string
	for _, a := range list {
		if strings.Contains(a.Target, mine) && a.Principal.Kind == vdibroker.PrincipalPod && a.Principal.ID == "pod0" && a.Principal.Name == "alice" &&
			a.Outcome == vdibroker.AuditOK {
			actions = append(actions, a.Action)
			farIDs = append(farIDs, a.RequestID)
		}
	}
	// The logoff asked again is audited too, per asker (R-S4), though
	// one command was queued.
	if !slices.Equal(actions, []string{"usersession.disconnect", "usersession.logoff", "usersession.logoff"}) {
		t.Errorf("pod1's audit of alice's session: %v; want its disconnect and both logoffs by pod0 for alice", actions)
	}
	list, err = e.admin.ListAudit(ctx, vhttp.AuditQuery{Target: "users/alice/globalsessions/pod1/"})
	if err != nil {
		t.Fatal(err)
	}
	actions = nil
	var nearIDs []string
	for _, a := range list {
		if strings.Contains(a.Target, mine) && a.Principal.Name == "Alice" && a.Outcome == vdibroker.AuditOK {
			actions = append(actions, a.Action)
			nearIDs = append(nearIDs, a.RequestID)
		}
	}
	if !slices.Equal(actions, []string{"globalsession.disconnect", "globalsession.logoff", "globalsession.logoff"}) {
		t.Errorf("pod0's audit of alice's session on pod1: %v; want her disconnect and two logoffs", actions)
	}
	// One reference finds both pods' entries: the pod call carries the
	// request id of the request it is made for.
	if !slices.Equal(nearIDs, farIDs) || slices.Contains(nearIDs, "") {
		t.Errorf("request ids of pod0's entries %v, of pod1's %v; want the same, each set", nearIDs, farIDs)
	}
	if list, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Target: "users/alice/globalsessions/pod1/" + bobs}); err != nil ||
		len(list) != 1 || list[0].Outcome != vdibroker.AuditRefused {
		t.Errorf("pod0's audit of alice's logoff of bob's session: %+v %v; want one refusal", list, err)
	}

	// A pod that does not answer: 503, without its address for her.
	// When to try again is in the Retry-After alone: the LoadTTL (3 s)
	// for which pod0 now takes pod2 for unreachable, which the CLI
	// appends once (" (try again in 3 s)"), not also "shortly" in the
	// words (R-OUT1).
	envs[2].down()
	_, err = alice.GlobalLogoff(ctx, "alice", "pod2", "some-session")
	if ve := wantCode(t, err, vdibroker.EPodUnavailable); ve.Message != "pod pod2 did not answer" || ve.RetryAfter != 3*time.Second {
		t.Errorf("an end user is told %q, Retry-After %s; want \"pod pod2 did not answer\" (no address, no wait in words), Retry-After 3s", ve.Message, ve.RetryAfter)
	}
	for _, token := range []string{aliceToken, adminToken} {
		res, ve, raw := rawDoAt(t, e.urls[0], "DELETE", "/api/v1/users/alice/globalsessions/pod2/some-session", token, "")
		if res.StatusCode != 503 || ve == nil || ve.Code != vdibroker.EPodUnavailable || res.Header.Get("Retry-After") != "3" ||
			!strings.HasPrefix(ve.Message, "pod pod2 did not answer") || strings.Contains(ve.Message, "try again") {
			t.Errorf("a logoff on pod2, down: %d Retry-After %q %s; want 503 PodUnavailable, Retry-After 3, no wait in its words", res.StatusCode, res.Header.Get("Retry-After"), raw)
		}
	}

	if status, _, raw := rawDo(t, newEnv(t), "DELETE", "/api/v1/users/alice/globalsessions/pod1/x", adminToken, ""); status != 404 {
		t.Errorf("a broker that is no pod: %d %s, want 404", status, raw)
	}
}

// TestGlobalSessionCommandBound_RU3: a principal asks for at most
// GlobalSessionCommandsPerPrincipal logoffs and disconnects of sessions in
// other pods at once: each is a pod call and an audit entry on both pods.
// A Helpdesk's (an end user's are bounded sooner by her write budget,
// TestUserWriteBudget_RSEC): the next is 429 with Retry-After, with no pod
// call; another principal is not refused for it.
func TestGlobalSessionCommandBound_RU3(t *testing.T) {
	envs := fedPods(t, 2, 1, 5, vdibroker.DistributionNone)
	e := envs[0]
	e.clock.Freeze() // the bound refills by the test's clock alone: 60 calls on a slow machine outlast a second
	desk := e.roleToken("Helpdesk", "desk")
	path := "/api/v1/users/alice/globalsessions/pod1/no-such-session"
	for i := range vhttp.GlobalSessionCommandsPerPrincipal {
		if status, _, raw := rawDo(t, e, "DELETE", path, desk, ""); status != 404 {
			t.Fatalf("logoff %d: %d %s, want pod1's 404", i+1, status, raw)
		}
	}
	e.calls.take()
	res, ve, _ := rawDoAt(t, e.urls[0], "DELETE", path, desk, "")
	if res.StatusCode != 429 || ve == nil || ve.Code != vdibroker.ETooManyRequests || res.Header.Get("Retry-After") == "" {
		t.Errorf("logoff %d: %d %+v, want 429 with Retry-After", vhttp.GlobalSessionCommandsPerPrincipal+1, res.StatusCode, ve)
	}
	if calls := e.calls.take(); calls[envs[1].urls[0]+federation.SessionCommandPath] != 0 {
		t.Errorf("the refused logoff called pod1: %v", calls)
	}
	if status, _, raw := rawDo(t, e, "DELETE", strings.Replace(path, "alice", "bob", 1), e.userToken("bob", nil), ""); status != 404 {
		t.Errorf("bob's logoff meanwhile: %d %s, want pod1's 404", status, raw)
	}
}

// TestGlobalSessionCommandPodName_RU3 (R-U3, R-SEC): the pod of
// /users/{user}/globalsessions/{pod}/{id} is a pod name as the federation
// document takes one (1..64 characters of A-Za-z0-9@._- and space), as
// the session id is bounded: anything else is 400 naming the field
// "pod" and its range, without echoing the name into the answer, and
// no pod is called. An end user could otherwise have her pod echo a
// name of tens of kilobytes in its 404 and its audit entry.
func TestGlobalSessionCommandPodName_RU3(t *testing.T) {
	envs := fedPods(t, 2, 1, 5, vdibroker.DistributionNone)
	e := envs[0]
	alice := e.userToken("alice", nil)
	long := strings.Repeat("p", 300)
	for _, tc := range []struct{ name, pod string }{
		{"300 characters", long},
		{"a character no pod name has", "pod1!"},
	} {
		e.calls.take()
		path := "/api/v1/users/alice/globalsessions/" + tc.pod + "/no-such-session"
		status, ve, raw := rawDo(t, e, "DELETE", path, alice, "")
		if status != 400 || ve == nil || ve.Code != vdibroker.EInvalid || ve.Field != "pod" || !strings.Contains(ve.Message, "1..64") {
			t.Errorf("%s: %d %s, want 400 InvalidArgument on field pod naming 1..64", tc.name, status, raw)
		}
		if strings.Contains(string(raw), long) {
			t.Errorf("%s: the answer echoes the pod name: %s", tc.name, raw)
		}
		if calls := e.calls.take(); len(calls) != 0 {
			t.Errorf("%s: pod calls %v, want none", tc.name, calls)
		}
	}
	// A valid name that is no pod of the document stays 404.
	if status, _, raw := rawDo(t, e, "POST", "/api/v1/users/alice/globalsessions/pod9/x/disconnect", alice, ""); status != 404 {
		t.Errorf("a pod not in the document: %d %s, want 404", status, raw)
	}
}

// TestGlobalSessionCommandOlderPod_RU3_RG5 (R-U3, R-G5): a pod of an
// earlier release has no route for the pod call: its router answers 404
// ("no API at …"). A helpdesk's logoff of a session there is 503
// PodUnavailable saying that pod is older and where to do it, not 404
// "no such session", which reads as "the session is gone"; an end user
// is told only that it cannot be done from here, not to try again (it
// never will), and what she can do. The call's own 404 (a session
// that pod does not hold) stays 404.
func TestGlobalSessionCommandOlderPod_RU3_RG5(t *testing.T) {
	var older atomic.Bool
	older.Store(true)
	envs := fedPodsWith(t, 2, 1, 5, vdibroker.DistributionNone, false, func(i int, h nethttp.Handler) nethttp.Handler {
		if i != 1 {
			return h
		}
		return nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			if older.Load() && r.URL.Path == federation.SessionCommandPath {
				r.URL.Path += "-not-in-this-release" // the real router's answer to a route it lacks
			}
			h.ServeHTTP(w, r)
		})
	})
	e, far := envs[0], envs[1]
	id := far.mustConnect("office-pod1", "alice").SessionID
	path := "/api/v1/users/alice/globalsessions/pod1/" + id
	status, ve, raw := rawDo(t, e, "DELETE", path, e.roleToken("Helpdesk", "desk"), "")
	if status != 503 || ve == nil || ve.Code != vdibroker.EPodUnavailable || !strings.Contains(ve.Message, "older vdibroker") {
		t.Errorf("a helpdesk's logoff on an older pod: %d %s, want 503 PodUnavailable saying the pod is older", status, raw)
	}
	status, ve, raw = rawDo(t, e, "DELETE", path, e.userToken("alice", nil), "")
	if status != 503 || ve == nil || ve.Code != vdibroker.EPodUnavailable || strings.Contains(ve.Message, federation.SessionCommandPath) ||
		strings.Contains(ve.Message, "try again") || !strings.Contains(ve.Message, "ask an administrator") {
		t.Errorf("alice's logoff on an older pod: %d %s, want 503 PodUnavailable without the pod's details, not \"try again\" (it never will), naming what she can do", status, raw)
	}
	older.Store(false)
	if status, _, raw := rawDo(t, e, "DELETE", "/api/v1/users/alice/globalsessions/pod1/no-such-session", e.roleToken("Helpdesk", "desk2"), ""); status != 404 {
		t.Errorf("a session pod1 does not hold: %d %s, want its 404", status, raw)
	}
}
