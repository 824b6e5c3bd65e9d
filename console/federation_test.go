package console_test

import (
	"cmp"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/console"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/pgtest"
	"github.com/vdibroker/vdibroker/internal/testserver"
	"github.com/vdibroker/vdibroker/store"
)

// newPodEnv is newEnv on a broker that is pod fra1 of a federation, with
// the console's federation page enabled.
func newPodEnv(t *testing.T) *env {
	t.Helper()
	return newPodEnvNamed(t, "fra1")
}

// newPodEnvNamed is newPodEnv as pod pod.
func newPodEnvNamed(t *testing.T, pod string) *env {
	t.Helper()
	return newPodEnvAt(t, pod, nil)
}

// newPodEnvAt is newPodEnvNamed whose server, console and pod-to-pod
// client read the time from now (nil: the real clock).
func newPodEnvAt(t *testing.T, pod string, now func() time.Time) *env {
	t.Helper()
	return newPodEnvWith(t, pod, now, nil)
}

// newPodEnvWith is newPodEnvAt whose pod-to-pod client's transport is
// wrap's (nil: NewPodClient's), to tell what the network does.
func newPodEnvWith(t *testing.T, pod string, now func() time.Time, wrap func(http.RoundTripper) http.RoundTripper) *env {
	t.Helper()
	return newPodEnvConfig(t, podEnvConfig{pod: pod, now: now, wrap: wrap})
}

// podEnvConfig is how newPodEnvConfig makes a pod's env.
type podEnvConfig struct {
	pod  string
	now  func() time.Time                          // nil: the real clock
	wrap func(http.RoundTripper) http.RoundTripper // nil: NewPodClient's transport
	// podTimeout is serve's --pod-timeout; peerWait the Federation
	// page's wait for the peers. Both are a minute when 0, a bound of a
	// hang only: the peers here are in-process pods that answer, and
	// under -race on a loaded machine a call to one took longer than
	// the 500ms this was; a test of a peer that does not answer sets
	// its own.
	podTimeout, peerWait time.Duration
}

// newPodEnvConfig is newPodEnv as cfg says.
func newPodEnvConfig(t *testing.T, cfg podEnvConfig) *env {
	t.Helper()
	pod, now, wrap := cfg.pod, cfg.now, cfg.wrap
	podTimeout := cmp.Or(cfg.podTimeout, time.Minute)
	peerWait := cmp.Or(cfg.peerWait, time.Minute)
	dsn := ""
	if suitePostgres {
		dsn = pgtest.SchemaDSN(t, "vdibroker_console_", "console PostgreSQL test")
	}
	st, err := store.Open(context.Background(), dsn, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	secret := []byte("console-test-federation-secret")
	peers := vhttp.NewPodClient(pod, secret)
	peers.Now = now
	if wrap != nil {
		peers.HTTPClient.Transport = wrap(peers.HTTPClient.Transport)
	}
	srv := testserver.New(testserver.Config{Store: st, AdminToken: adminToken, Pod: pod,
		Peers: peers, PodTimeout: podTimeout, FederationSecret: secret, Now: now})
	t.Cleanup(func() { srv.Close() })
	c := console.New(console.Config{API: srv.Handler(), Sessions: st, Now: now})
	c.EnableFederation(console.FederationConfig{Pods: peers, PeerWait: peerWait})
	t.Cleanup(func() { c.Close() })
	srv.Mux().Handle("/", c)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return &env{t: t, url: ts.URL, store: st, admin: vhttp.NewClient(ts.URL, adminToken), agents: map[string]string{}, ts: ts}
}

// TestFederationPage: sites, pods with health and generation, and global
// entitlements with their members' loads.
func TestFederationPage(t *testing.T) {
	e := newPodEnv(t)
	e.seed("alice")
	b := e.browser()
	b.signin(adminToken)
	if !strings.Contains(b.get("/").body, `href="/federation"`) {
		t.Errorf("a pod's console nav has no federation link")
	}
	a := b.get("/federation")
	wantStatus(t, a, http.StatusOK)
	wantContains(t, a, "no federation document")

	doc := &vdibroker.Federation{Generation: 7,
		Sites: []vdibroker.Site{{Name: "emea"}, {Name: "amer"}},
		Pods: []vdibroker.Pod{{Name: "fra1", Site: "emea", URL: e.url},
			// Nothing listens on port 1: the peer is unreachable.
			{Name: "nyc1", Site: "amer", URL: "http://127.0.0.1:1"}},
		GlobalEntitlements: []vdibroker.GlobalEntitlement{{Name: "office", SessionDistribution: vdibroker.DistributionSessionCount,
			Members: []vdibroker.Member{{Pod: "fra1", HostPool: "pool-a"}, {Pod: "nyc1", HostPool: "office-nyc1"}}}},
	}
	if _, err := e.admin.PutFederation(t.Context(), doc); err != nil {
		t.Fatal(err)
	}
	a = b.get("/federation")
	wantStatus(t, a, http.StatusOK)
	// pool-a: 1 session on 3 hosts of limit 4: 1/12 = 0.0833.
	wantContains(t, a, "<strong>fra1</strong> in site <strong>emea</strong>", "generation <strong>7</strong>",
		`data-peer="nyc1"`, "unreachable", "Global entitlement office", `data-member="fra1/pool-a"`, "0.0833")
}

// silentPeer is a pod that accepts the connection and never answers.
type silentPeer struct {
	calls, blocked atomic.Int64  // the calls it took, and those still waiting
	called         chan struct{} // closed at its first call
	once           sync.Once
}

// waitCalled waits for p's first call, a minute at most: a pod's call
// is started by a read and goes on after the read is answered, so on a
// loaded machine it may reach p only after that answer.
func (p *silentPeer) waitCalled(t *testing.T) {
	t.Helper()
	select {
	case <-p.called:
	case <-time.After(time.Minute):
		t.Fatal("the peer was not called within a minute")
	}
}

// putSilentPeer puts a federation of e's pod fra1 and a peer nyc1, both
// in site emea, with global entitlement office of members fra1/pool-a
// and nyc1/pool-b. nyc1 takes each call to path ("": any; others are
// answered 404) and holds it until the call or the test ends.
func (e *env) putSilentPeer(path string) *silentPeer {
	e.t.Helper()
	p := &silentPeer{called: make(chan struct{})}
	release := make(chan struct{})
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if path != "" && r.URL.Path != path {
			http.NotFound(w, r)
			return
		}
		p.calls.Add(1)
		p.blocked.Add(1)
		defer p.blocked.Add(-1)
		p.once.Do(func() { close(p.called) })
		select { // accepted, never answered
		case <-release:
		case <-r.Context().Done():
		}
	}))
	e.t.Cleanup(peer.Close)
	e.t.Cleanup(func() { close(release) }) // before peer.Close, which waits for the handlers
	doc := &vdibroker.Federation{Generation: 1, Sites: []vdibroker.Site{{Name: "emea"}},
		Pods: []vdibroker.Pod{{Name: "fra1", Site: "emea", URL: e.url}, {Name: "nyc1", Site: "emea", URL: peer.URL}},
		GlobalEntitlements: []vdibroker.GlobalEntitlement{{Name: "office", AllUsers: true,
			Members: []vdibroker.Member{{Pod: "fra1", HostPool: "pool-a"}, {Pod: "nyc1", HostPool: "pool-b"}}}}}
	if _, err := e.admin.PutFederation(e.t.Context(), doc); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// TestFederationPageNotAnsweringPeer_RG5: a peer that accepts the
// connection and never answers held the Federation page for the whole
// pod timeout (twice: the peers' health, then the members' loads) before
// anything was shown. The page now waits for the peers at most its own
// wait (200ms here, against a pod timeout of 20s) and names the peer as
// not answering, in its row and its members': the page is answered while
// the peer's handler is still blocked. The API's peerWait takes 1ms..1m.
func TestFederationPageNotAnsweringPeer_RG5(t *testing.T) {
	e := newPodEnvConfig(t, podEnvConfig{pod: "fra1", podTimeout: 20 * time.Second, peerWait: 200 * time.Millisecond})
	e.seed()
	nyc1 := e.putSilentPeer("")
	b := e.browser()
	b.signin(adminToken)
	a := b.get("/federation")
	wantStatus(t, a, http.StatusOK)
	// The peer's call, started by the page, is still blocked after the
	// page was answered: it did not wait for it (on a loaded machine the
	// call may reach the peer only after the page's 200ms).
	nyc1.waitCalled(t)
	if stillBlocked := nyc1.blocked.Load(); stillBlocked == 0 {
		t.Errorf("peer nyc1 was called %d times, none of them still blocked after the page was answered; want the page answered while the peer's call is under way", nyc1.calls.Load())
	}
	wantContains(t, a, `data-peer="nyc1" data-not-answering`, "not answering: no answer within 200ms", "asked ",
		`data-member="nyc1/pool-b"`, `data-member="fra1/pool-a"`)
	if n := strings.Count(a.body, "not answering: no answer within 200ms"); n < 2 {
		t.Errorf("the page names the peer as not answering %d times, want its row and its member's:\n%s", n, pageText(a))
	}

	for _, bad := range []string{"0s", "2m", "-1s", "soon"} {
		for _, path := range []string{"/api/v1/federation", "/api/v1/globalentitlements", "/api/v1/globalentitlements/office"} {
			req, err := http.NewRequest(http.MethodGet, e.url+path+"?peerWait="+url.QueryEscape(bad), nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+adminToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"field":"peerWait"`) || !strings.Contains(string(body), "1ms to 1m0s") {
				t.Errorf("GET %s?peerWait=%s: HTTP %d %s, want 400 naming peerWait and its range", path, bad, resp.StatusCode, body)
			}
		}
	}
}

// TestUserSessionsInOtherPods_RU3: on a pod, one user's sessions page
// also lists her open sessions in the other pods' member pools, with the
// pod, and names a pod that did not answer with why; a user search, a
// pool filter and a broker that is no pod ask nothing of the others.
func TestUserSessionsInOtherPods_RU3(t *testing.T) {
	e := newPodEnv(t)
	e.seed("alice")
	far := newPodEnvNamed(t, "ams1")
	far.seed("alice", "bob")
	down := "http://127.0.0.1:1" // nothing listens on port 1
	doc := &vdibroker.Federation{Generation: 1, Sites: []vdibroker.Site{{Name: "emea"}},
		Pods: []vdibroker.Pod{{Name: "fra1", Site: "emea", URL: e.url}, {Name: "ams1", Site: "emea", URL: far.url}, {Name: "nyc1", Site: "emea", URL: down}},
		GlobalEntitlements: []vdibroker.GlobalEntitlement{{Name: "office", SessionDistribution: vdibroker.DistributionSessionCount, AllUsers: true,
			Members: []vdibroker.Member{{Pod: "fra1", HostPool: "pool-a"}, {Pod: "ams1", HostPool: "pool-a"}, {Pod: "nyc1", HostPool: "pool-n"}}}},
	}
	for _, x := range []*env{e, far} {
		d := *doc
		if _, err := x.admin.PutFederation(t.Context(), &d); err != nil {
			t.Fatal(err)
		}
	}
	farAlice, err := far.admin.ListUserSessions(t.Context(), "pool-a", vhttp.SessionQuery{User: "alice"})
	if err != nil || len(farAlice) != 1 {
		t.Fatalf("alice's session on ams1: %v %v", farAlice, err)
	}
	b := e.browser()
	b.signin(adminToken)
	a := b.get("/sessions?user=alice&exact=1")
	wantStatus(t, a, http.StatusOK)
	wantContains(t, a, `id="other-pods"`, `<tr data-session="`+farAlice[0].ID+`" data-pod="ams1">`, `data-unanswered="nyc1"`, "Pod nyc1 did not answer: unreachable")
	if strings.Count(a.body, `data-pod="ams1"`) != 1 {
		t.Errorf("want alice's one session on ams1 alone (not bob's):\n%s", a.body)
	}
	for _, path := range []string{"/sessions?user=ali", "/sessions?user=alice&exact=1&pool=pool-a"} {
		if a := b.get(path); strings.Contains(a.body, `id="other-pods"`) {
			t.Errorf("%s lists the other pods", path)
		}
	}
	plain := newEnv(t)
	plain.seed("alice")
	pb := plain.browser()
	pb.signin(adminToken)
	if a := pb.get("/sessions?user=alice&exact=1"); a.status != http.StatusOK || strings.Contains(a.body, `id="other-pods"`) {
		t.Errorf("a broker that is no pod: %d, lists other pods", a.status)
	}
}

// TestGlobalSessionActions_RU3: on one user's sessions page, her sessions
// in the other pods have Log off and (Active ones) Disconnect for the
// roles that may (Contributor, Helpdesk, admin), which post to the
// console and so to the API's globalsessions calls (R-U3): the command
// reaches the other pod's agent on its next heartbeat, and the flash
// carries the API's warnings. A Reader and a principal scoped to host
// pools are shown none and their posts are refused, a form without the
// CSRF token is refused, and none of those queues anything; a pod that
// does not answer is told in the flash of the page, which is still
// served.
func TestGlobalSessionActions_RU3(t *testing.T) {
	e, far := newFraAmsPods(t)
	id := far.activeSession("alice")
	page := "/sessions?user=alice&exact=1"
	base := "/users/alice/globalsessions/ams1/" + url.PathEscape(id)
	logoffForm, disconnectForm := `action="`+base+`/logoff"`, `action="`+base+`/disconnect"`
	// noCommands fails if ams1 queued anything for alice's session.
	noCommands := func(why string) {
		t.Helper()
		if cmds := far.heartbeat("host-1", []vdibroker.AgentSession{{ID: "7", User: "alice", State: vdibroker.StateActive}}); len(cmds) != 0 {
			t.Fatalf("%s: ams1 queued %+v", why, cmds)
		}
	}

	t.Run("Reader R-SEC", func(t *testing.T) {
		rb := e.browser()
		rb.signin(e.token(vdibroker.RoleReader))
		a := rb.get(page)
		wantStatus(t, a, http.StatusOK)
		wantContains(t, a, `data-pod="ams1"`)
		if strings.Contains(a.body, "/globalsessions/") {
			t.Errorf("a Reader is offered log off or disconnect in another pod:\n%s", a.body)
		}
		a = rb.post(base+"/logoff", url.Values{"csrf": {rb.csrf(page)}, "back": {page}})
		wantStatus(t, a, http.StatusForbidden)
		wantContains(t, a, "Refused by the broker", `data-pod="ams1"`)
	})
	t.Run("scoped Helpdesk R-SEC", func(t *testing.T) {
		tok, err := e.admin.CreateToken(t.Context(), vhttp.TokenRequest{Role: vdibroker.RoleHelpdesk, Subject: "desk-a", HostPools: []string{"pool-a"}})
		if err != nil {
			t.Fatal(err)
		}
		sb := e.browser()
		sb.signin(tok.Secret)
		if a := sb.get(page); a.status != http.StatusOK || strings.Contains(a.body, "/globalsessions/") {
			t.Errorf("a scoped Helpdesk: HTTP %d, offered log off in another pod:\n%s", a.status, a.body)
		}
		// The API refused its listing once; its next pages do not ask
		// again (each refusal an audit entry, a listing spent).
		wantStatus(t, sb.get(page), http.StatusOK)
		refused, err := e.admin.ListAudit(t.Context(), vhttp.AuditQuery{Principal: "desk-a"})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, a := range refused {
			if a.Outcome == vdibroker.AuditRefused && strings.Contains(a.Target, "globalsessions") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("a scoped Helpdesk's two pages: %d refused listings in the audit trail, want 1: %+v", n, refused)
		}
		a := sb.post(base+"/disconnect", url.Values{"csrf": {sb.csrf(page)}, "back": {page}})
		wantStatus(t, a, http.StatusForbidden)
		wantContains(t, a, "Refused by the broker")
	})
	hb := e.browser()
	hb.signin(e.token(vdibroker.RoleHelpdesk))
	t.Run("CSRF refusal", func(t *testing.T) {
		wantStatus(t, hb.post(base+"/logoff", url.Values{"csrf": {"nope"}, "back": {page}}), http.StatusForbidden)
	})
	noCommands("refused posts")

	// ams1's host says it is stopping: the API's warning is in the flash.
	if _, err := far.admin.Heartbeat(t.Context(), far.agents["host-1"], &vdibroker.HeartbeatRequest{ShuttingDown: true,
		Sessions: []vdibroker.AgentSession{{ID: "7", User: "alice", State: vdibroker.StateActive}}}); err != nil {
		t.Fatal(err)
	}
	t.Run("disconnect and log off R-U3", func(t *testing.T) {
		a := hb.get(page)
		wantStatus(t, a, http.StatusOK)
		wantContains(t, a, logoffForm, disconnectForm)
		csrf := csrfField.FindStringSubmatch(a.body)[1]
		a = hb.post(base+"/disconnect", url.Values{"csrf": {csrf}, "back": {page}})
		wantStatus(t, a, http.StatusSeeOther)
		if a.location != page {
			t.Errorf("redirected to %q, want %q", a.location, page)
		}
		wantContains(t, hb.get(a.location), "disconnect of alice&#39;s session on pod ams1 is queued", "Warning: session host host-1 is Shutdown (")
		a = hb.post(base+"/logoff", url.Values{"csrf": {csrf}, "back": {page}})
		wantStatus(t, a, http.StatusSeeOther)
		wantContains(t, hb.get(a.location), "log off of alice&#39;s session on pod ams1 is queued")
		// ams1's agent gets both on its next heartbeat.
		cmds := far.heartbeat("host-1", []vdibroker.AgentSession{{ID: "7", User: "alice", State: vdibroker.StateDisconnected}})
		var types []string
		for _, c := range cmds {
			if c.SessionID == id {
				types = append(types, c.Type)
			}
		}
		if strings.Join(types, ",") != "Disconnect,Logoff" {
			t.Fatalf("commands for alice's session on ams1: %v, want Disconnect,Logoff", types)
		}
		e.wantAudited("globalsession.disconnect", "users/alice/globalsessions/ams1/"+id+"/disconnect", "helpdesk-1")
		e.wantAudited("globalsession.logoff", "users/alice/globalsessions/ams1/"+id, "helpdesk-1")
		// Disconnected now: Log off alone.
		a = hb.get(page)
		wantContains(t, a, logoffForm)
		if strings.Contains(a.body, disconnectForm) {
			t.Errorf("a Disconnected session in another pod is offered Disconnect")
		}
	})
	t.Run("pod down", func(t *testing.T) {
		csrf := hb.csrf(page)
		far.ts.Close()
		a := hb.post(base+"/logoff", url.Values{"csrf": {csrf}, "back": {page}})
		wantStatus(t, a, http.StatusSeeOther)
		a = hb.get(a.location)
		wantStatus(t, a, http.StatusOK)
		wantContains(t, a, "log off of alice&#39;s session on pod ams1 was not confirmed: pod ams1 did not answer", `data-unanswered="ams1"`,
			// The wait its answer's Retry-After gave (the LoadTTL, 3 s).
			"Try again in 3 s, or use pod ams1&#39;s console.")
	})
}

// TestGlobalLogoffOfPendingSession_RS4: the console's log off of a
// user's session in another pod that its agent never reported says the
// session is logged off, as that pod ended it at once and answered
// "sessionEnded" (R-S4, R-U3), not that its agent will run it on its
// next heartbeat, as this pod's own log off of such a session says.
func TestGlobalLogoffOfPendingSession_RS4(t *testing.T) {
	e, far := newFraAmsPods(t) // alice's session in ams1 is Pending: host-1's agent has not reported it
	open, err := far.admin.ListUserSessions(t.Context(), "pool-a", vhttp.SessionQuery{})
	if err != nil || len(open) != 1 || open[0].State != vdibroker.StatePending {
		t.Fatalf("alice's session on ams1: %+v %v; want one Pending", open, err)
	}
	page := "/sessions?user=alice&exact=1"
	b := e.browser()
	b.signin(adminToken)
	a := b.post("/users/alice/globalsessions/ams1/"+url.PathEscape(open[0].ID)+"/logoff", url.Values{"csrf": {b.csrf(page)}, "back": {page}})
	wantStatus(t, a, http.StatusSeeOther)
	got := b.get(a.location)
	wantContains(t, got, "alice&#39;s session on pod ams1 is logged off: it ended now")
	if strings.Contains(got.body, "runs it on its next heartbeat") {
		t.Errorf("the flash says ams1's agent will run the logoff of a session already ended:\n%s", got.body)
	}
}

// newFraAmsPods is two pods of one site, fra1 (seeded) and ams1 (seeded
// with a session of alice's, Pending), each holding the same federation
// document: a global entitlement "office" of both pods' pool-a, for all
// users.
func newFraAmsPods(t *testing.T) (fra, ams *env) {
	t.Helper()
	return newFraAmsPodsAt(t, nil)
}

// newFraAmsPodsAt is newFraAmsPods whose pods read the time from now
// (nil: the real clock).
func newFraAmsPodsAt(t *testing.T, now func() time.Time) (fra, ams *env) {
	t.Helper()
	return newFraAmsPodsWith(t, now, nil)
}

// newFraAmsPodsWith is newFraAmsPodsAt whose fra1 calls the other pods
// through wrap's transport (newPodEnvWith).
func newFraAmsPodsWith(t *testing.T, now func() time.Time, wrap func(http.RoundTripper) http.RoundTripper) (fra, ams *env) {
	t.Helper()
	fra = newPodEnvWith(t, "fra1", now, wrap)
	fra.seed()
	ams = newPodEnvAt(t, "ams1", now)
	ams.seed("alice")
	doc := &vdibroker.Federation{Generation: 1, Sites: []vdibroker.Site{{Name: "emea"}},
		Pods: []vdibroker.Pod{{Name: "fra1", Site: "emea", URL: fra.url}, {Name: "ams1", Site: "emea", URL: ams.url}},
		GlobalEntitlements: []vdibroker.GlobalEntitlement{{Name: "office", SessionDistribution: vdibroker.DistributionSessionCount, AllUsers: true,
			Members: []vdibroker.Member{{Pod: "fra1", HostPool: "pool-a"}, {Pod: "ams1", HostPool: "pool-a"}}}},
	}
	for _, x := range []*env{fra, ams} {
		d := *doc
		if _, err := x.admin.PutFederation(t.Context(), &d); err != nil {
			t.Fatal(err)
		}
	}
	return fra, ams
}
