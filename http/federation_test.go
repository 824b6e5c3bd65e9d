package http_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	nethttp "net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/broker/outage"
	"github.com/vdibroker/vdibroker/federation"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/intercept"
	"github.com/vdibroker/vdibroker/internal/testserver"
	"github.com/vdibroker/vdibroker/store"
)

const testFedSecret = "http-test-federation-secret"

// fedPodsTLS is fedPods with every pod serving HTTPS (httptest's TLS
// server), the pod clients trusting the test certificate.
func fedPodsTLS(t *testing.T, n int) []*env {
	return fedPodsWith(t, n, 1, 5, vdibroker.DistributionNone, true, nil)
}

func fedPods(t *testing.T, n, hosts, limit int, policy string) []*env {
	return fedPodsWith(t, n, hosts, limit, policy, false, nil)
}

// fedPodsWith starts n in-process pods (pod0..), pod0 and pod1 in site s0, the
// rest in s1, each with its own SQLite store, a pool office-<pod> of hosts
// hosts with limit limit, and the federation document applied. Unlike the
// end-to-end test (cmd/vdibroker), this one runs under the race detector.
// wrap, when set, serves pod i through wrap(i, its handler).
func fedPodsWith(t *testing.T, n, hosts, limit int, policy string, tls bool, wrap func(i int, h nethttp.Handler) nethttp.Handler) []*env {
	t.Helper()
	return fedPodsOn(t, "", n, hosts, limit, policy, tls, wrap)
}

// fedPodsOn is fedPodsWith on PostgreSQL at dsn, each pod in a schema of
// its own (its own database, as pods have), or SQLite when dsn is "".
func fedPodsOn(t *testing.T, dsn string, n, hosts, limit int, policy string, tls bool, wrap func(i int, h nethttp.Handler) nethttp.Handler) []*env {
	t.Helper()
	var envs []*env
	doc := &vdibroker.Federation{Generation: 1, Sites: []vdibroker.Site{{Name: "s0"}, {Name: "s1"}}}
	ge := vdibroker.GlobalEntitlement{Name: "office", SessionDistribution: policy}
	for i := range n {
		podDSN := ""
		if dsn != "" {
			podDSN = schemaDSN(t, dsn)
		}
		st, err := store.Open(context.Background(), podDSN, t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		name, site := fmt.Sprintf("pod%d", i), "s0"
		if i >= 2 {
			site = "s1"
		}
		peers := vhttp.NewPodClient(name, []byte(testFedSecret))
		calls := &callCounter{n: map[string]int{}}
		clk := &clock{}
		// A pod timeout of a minute bounds a hang only: these pods
		// answer, and under -race beside a CI run their calls to each
		// other were seen to take past the 2 s this was. A test whose
		// peer must not answer holds its call (wrap) or closes it (down).
		srv := testserver.New(testserver.Config{Store: st, Now: clk.Now, AdminToken: adminToken, Pod: name, Site: site,
			Peers: peers, PodTimeout: time.Minute, FederationSecret: []byte(testFedSecret), OneProcessStore: dsn == ""})
		var h nethttp.Handler = srv.Handler()
		if wrap != nil {
			h = wrap(i, h)
		}
		ts := httptest.NewUnstartedServer(h)
		if tls {
			// Every httptest TLS server has the same certificate: its
			// client trusts them all.
			ts.StartTLS()
			peers.HTTPClient = ts.Client()
		} else {
			ts.Start()
		}
		calls.rt = peers.HTTPClient.Transport
		peers.HTTPClient.Transport = calls
		t.Cleanup(func() { ts.Close(); srv.Close(); st.Close() })
		admin := vhttp.NewClient(ts.URL, adminToken)
		admin.HTTPClient = ts.Client()
		e := &env{t: t, store: st, clock: clk, srvs: []*testserver.Server{srv}, urls: []string{ts.URL},
			admin: admin, agents: map[string]string{}, calls: calls, down: ts.Close}
		t.Cleanup(e.checkAuditActions)
		pool := "office-" + name
		e.pool(pool, map[string]any{"maxSessionLimit": limit})
		e.addHosts(pool, name+"-h", hosts)
		envs = append(envs, e)
		doc.Pods = append(doc.Pods, vdibroker.Pod{Name: name, Site: site, URL: ts.URL})
		ge.Members = append(ge.Members, vdibroker.Member{Pod: name, HostPool: pool})
	}
	doc.GlobalEntitlements = []vdibroker.GlobalEntitlement{ge}
	for _, e := range envs {
		d := *doc
		if _, err := e.admin.PutFederation(context.Background(), &d); err != nil {
			t.Fatalf("put federation: %v", err)
		}
	}
	return envs
}

// callCounter counts the calls through it by URL (host and path).
type callCounter struct {
	rt nethttp.RoundTripper
	mu sync.Mutex
	n  map[string]int
}

func (c *callCounter) RoundTrip(r *nethttp.Request) (*nethttp.Response, error) {
	c.mu.Lock()
	c.n[r.URL.Scheme+"://"+r.URL.Host+r.URL.Path]++
	c.mu.Unlock()
	return c.rt.RoundTrip(r)
}

// take returns the counts since the last take.
func (c *callCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

// TestGlobalConnectConcurrent: users connect at once through every pod;
// each gets one session, no pool goes over its limit (the chosen pod's
// database enforces it, R-C4), and the refusals once all is full are
// NoCapacity.
func TestGlobalConnectConcurrent(t *testing.T) {
	// 3 pods × 2 hosts × limit 3 = 18 places for 24 users.
	envs := fedPods(t, 3, 2, 3, vdibroker.DistributionSessionCount)
	var wg sync.WaitGroup
	var mu sync.Mutex
	placed := map[string]string{} // user -> pod
	refused := 0
	for i := range 24 {
		wg.Go(func() {
			user := fmt.Sprintf("user%02d", i)
			a, err := envs[i%3].admin.GlobalConnect(t.Context(), "office", vdibroker.GlobalConnectRequest{User: user})
			mu.Lock()
			defer mu.Unlock()
			switch vdibroker.ErrorCode(err) {
			case "":
				placed[user] = a.Pod
			case vdibroker.ENoCapacity:
				refused++
			default:
				t.Errorf("%s: %v", user, err)
			}
		})
	}
	wg.Wait()
	if len(placed) != 18 || refused != 6 {
		t.Fatalf("placed %d, refused %d; want 18 and 6", len(placed), refused)
	}
	for i, e := range envs {
		for h, n := range e.sessionsPerHost(fmt.Sprintf("office-pod%d", i)) {
			if n != 3 {
				t.Errorf("pod%d host %s has %d sessions, want 3 (full, never over)", i, h, n)
			}
		}
	}
	// Every placed user reconnects to the same pod from any pod (R-G1).
	for user, pod := range placed {
		a, err := envs[2].admin.GlobalConnect(t.Context(), "office", vdibroker.GlobalConnectRequest{User: user})
		if err != nil || a.Pod != pod || !a.Reconnect {
			t.Fatalf("%s again: %+v %v; want a reconnect on %s", user, a, err, pod)
		}
	}
}

// TestGlobalConnectCountsItsOwnPlacements_RG2: a pod's global connects
// read its own member pools' loads from a cache, as they read their
// peers', and count each session they place in it, on this pod as on a
// peer: eight users connecting one after another through pod0, two equal
// pods under SessionCount, alternate between them (4 and 4), where a
// cache that missed this pod's own placements would keep pod0 the least
// loaded and put 7 or 8 of them there.
func TestGlobalConnectCountsItsOwnPlacements_RG2(t *testing.T) {
	envs := fedPods(t, 2, 4, 10, vdibroker.DistributionSessionCount)
	perPod := map[string]int{}
	for i := range 8 {
		a, err := envs[0].admin.GlobalConnect(t.Context(), "office", vdibroker.GlobalConnectRequest{User: fmt.Sprintf("alt%d", i)})
		if err != nil {
			t.Fatalf("alt%d: %v", i, err)
		}
		perPod[a.Pod]++
	}
	if perPod["pod0"] != 4 || perPod["pod1"] != 4 {
		t.Errorf("sessions per pod %v; want 4 on each (each placement counted before the next decision)", perPod)
	}
}

// TestGlobalConnectRoles: a User token connects only itself and names no
// groups; a dry run stores nothing.
func TestGlobalConnectRoles(t *testing.T) {
	envs := fedPods(t, 2, 1, 5, vdibroker.DistributionNone)
	tok, err := envs[0].admin.CreateToken(t.Context(), vhttp.TokenRequest{Role: vdibroker.RoleUser, Subject: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	user := envs[0].client(0, tok.Secret)
	_, err = user.GlobalConnect(t.Context(), "office", vdibroker.GlobalConnectRequest{User: "bob"})
	wantCode(t, err, vdibroker.EPermission)
	_, err = user.GlobalConnect(t.Context(), "office", vdibroker.GlobalConnectRequest{User: "alice", Groups: []string{"admins"}})
	wantCode(t, err, vdibroker.EPermission, "groups")
	a, err := user.GlobalConnect(t.Context(), "office", vdibroker.GlobalConnectRequest{User: "alice", DryRun: true})
	if err != nil || !a.DryRun || a.SessionID != "" || a.Pod != "pod0" {
		t.Fatalf("dry run: %+v %v; want pod0 (None: the connected pod first), no session", a, err)
	}
	if n := envs[0].sessionsPerHost("office-pod0")["pod0-h001"]; n != 0 {
		t.Fatalf("dry run stored a session: %d", n)
	}
	a, err = user.GlobalConnect(t.Context(), "office", vdibroker.GlobalConnectRequest{User: "alice"})
	if err != nil || !a.Created || a.Pod != "pod0" {
		t.Fatalf("connect: %+v %v", a, err)
	}
	_, err = envs[0].admin.GlobalConnect(t.Context(), "nothing", vdibroker.GlobalConnectRequest{User: "alice"})
	wantCode(t, err, vdibroker.ENotFound)
}

// TestGlobalConnectOverHTTPS: pods reach each other over HTTPS as well as
// plain HTTP; the signature is the same.
func TestGlobalConnectOverHTTPS(t *testing.T) {
	envs := fedPodsTLS(t, 3)
	// Fill pod0's pool (limit 5): None then goes on to pod1, over HTTPS.
	for i := range 5 {
		envs[0].mustConnect("office-pod0", fmt.Sprintf("local%d", i))
	}
	a, err := envs[0].admin.GlobalConnect(t.Context(), "office", vdibroker.GlobalConnectRequest{User: "alice"})
	if err != nil || a.Pod != "pod1" || !a.Created {
		t.Fatalf("global connect over HTTPS: %+v %v; want a new session on pod1", a, err)
	}
	st, err := envs[0].admin.GetFederation(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range st.Peers {
		if p.Health != "ok" {
			t.Errorf("peer %s over HTTPS: health %q", p.Pod, p.Health)
		}
	}
}

// TestPodCallFromAnUnlistedPod: the federation secret is not enough; the
// calling pod must be in the document.
func TestPodCallFromAnUnlistedPod(t *testing.T) {
	envs := fedPods(t, 2, 1, 5, vdibroker.DistributionNone)
	c := vhttp.NewPodClient("intruder", []byte(testFedSecret))
	_, err := c.Loads(t.Context(), vdibroker.Pod{Name: "pod0", URL: envs[0].urls[0]})
	wantCode(t, err, vdibroker.EPermission, "intruder")
	c = vhttp.NewPodClient("pod1", []byte(testFedSecret))
	if _, err := c.Loads(t.Context(), vdibroker.Pod{Name: "pod0", URL: envs[0].urls[0]}); err != nil {
		t.Fatalf("listed pod refused: %v", err)
	}
}

// TestPodCallReplayOneProcessStore_RG5: a pod whose store is its own
// (SQLite) keeps the nonces of the calls that only read (loads, sessions)
// in memory: a replay is refused while it runs, and after a restart by
// the call's time (signed before the pod started); a connect's nonce is
// committed to the store (here on its own before its 404, as it places
// nothing), so its replay is refused after a restart by the nonce
// itself, even within the second it was signed. Fresh calls
// are answered throughout. A restart is a new server on the same store.
func TestPodCallReplayOneProcessStore_RG5(t *testing.T) {
	st, err := store.Open(t.Context(), "", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var mu sync.Mutex
	now := time.Now()
	clk := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	secret := []byte(testFedSecret)
	start := func() string {
		srv := testserver.New(testserver.Config{Store: st, AdminToken: adminToken, Pod: "pod1", Site: "s",
			Peers: vhttp.NewPodClient("pod1", secret), FederationSecret: secret, OneProcessStore: true, Now: clk})
		ts := httptest.NewServer(srv.Handler())
		t.Cleanup(func() { ts.Close(); srv.Close() })
		return ts.URL
	}
	url := start()
	doc := &vdibroker.Federation{Generation: 1, Sites: []vdibroker.Site{{Name: "s"}},
		Pods: []vdibroker.Pod{{Name: "pod1", Site: "s", URL: "https://pod1.example.test"}, {Name: "pod2", Site: "s", URL: "https://pod2.example.test"}}}
	if _, err := vhttp.NewClient(url, adminToken).PutFederation(t.Context(), doc); err != nil {
		t.Fatal(err)
	}
	connectBody := `{"globalEntitlement":"none","hostPool":"none","user":"alice"}`
	sign := func(method, path, body string) nethttp.Header {
		return signedBy("pod2", secret, method, path, body, clk())
	}
	call := func(url, method, path, body string, h nethttp.Header) int {
		t.Helper()
		return podCallStatus(t, url, method, path, body, h)
	}
	loads, connect := sign("GET", federation.LoadsPath, ""), sign("POST", federation.ConnectPath, connectBody)
	if got := call(url, "GET", federation.LoadsPath, "", loads); got != nethttp.StatusOK {
		t.Fatalf("a signed loads call: %d, want 200", got)
	}
	if got := call(url, "GET", federation.LoadsPath, "", loads); got != nethttp.StatusUnauthorized {
		t.Errorf("the loads call replayed: %d, want 401", got)
	}
	// The connect names no member pool: 404 once its signature passed.
	if got := call(url, "POST", federation.ConnectPath, connectBody, connect); got != nethttp.StatusNotFound {
		t.Fatalf("a signed connect call: %d, want 404 (past the signature)", got)
	}

	// The pod restarts (a new process's memory) within the second the
	// calls were signed: the connect's nonce, in the store, refuses it.
	url = start()
	if got := call(url, "POST", federation.ConnectPath, connectBody, connect); got != nethttp.StatusUnauthorized {
		t.Errorf("the connect call replayed after a restart: %d, want 401 (its nonce is in the store)", got)
	}
	// And again two seconds later: the loads call is from before it.
	mu.Lock()
	now = now.Add(2 * time.Second)
	mu.Unlock()
	url = start()
	if got := call(url, "GET", federation.LoadsPath, "", loads); got != nethttp.StatusUnauthorized {
		t.Errorf("the loads call replayed after a restart: %d, want 401 (signed before the pod started)", got)
	}
	if got := call(url, "GET", federation.LoadsPath, "", sign("GET", federation.LoadsPath, "")); got != nethttp.StatusOK {
		t.Errorf("a new signed loads call after the restart: %d, want 200", got)
	}
}

// TestGlobalConnectConcurrentReconnects_RG1: twelve users with sessions
// on pod1 and six with none connect through pod0 all at once; their
// look-ups at pod1 share calls (global.Service.callSessions), and each
// finds its own session and nobody else's: a reconnect to its session on
// pod1 for each of the twelve, a new session on pod0 (None: the
// connected pod's pool first) for each of the six.
func TestGlobalConnectConcurrentReconnects_RG1(t *testing.T) {
	envs := fedPods(t, 2, 2, 20, vdibroker.DistributionNone)
	var users []string
	ids := map[string]string{} // user -> its session on pod1
	for i := range 18 {
		users = append(users, fmt.Sprintf("back%02d", i))
		if i < 12 {
			ids[users[i]] = envs[1].mustConnect("office-pod1", users[i]).SessionID
		}
	}
	answers := make([]*vdibroker.GlobalAnswer, len(users))
	errs := make([]error, len(users))
	var wg sync.WaitGroup
	for i, u := range users {
		wg.Go(func() {
			answers[i], errs[i] = envs[0].admin.GlobalConnect(t.Context(), "office", vdibroker.GlobalConnectRequest{User: u})
		})
	}
	wg.Wait()
	for i, u := range users {
		a, id := answers[i], ids[u]
		switch {
		case errs[i] != nil:
			t.Errorf("%s: %v", u, errs[i])
		case id != "" && (a.Pod != "pod1" || !a.Reconnect || a.SessionID != id):
			t.Errorf("%s: %s on %s (reconnect %v); want a reconnect to its session %s on pod1", u, a.SessionID, a.Pod, a.Reconnect, id)
		case id == "" && (a.Pod != "pod0" || !a.Created):
			t.Errorf("%s (no session anywhere): on %s (created %v); want a new session on pod0", u, a.Pod, a.Created)
		}
	}
}

// TestPodSessionsUsers_RG5: a peer (holding the federation secret) asks
// for several users' sessions in one call: each user's own, at most
// MaxPodSessionUsers users, each a valid user name, and user or users,
// not both; what it may cause is bounded by the users and pools of one
// call (at most MaxPodSessionPools pools; 400 naming the field, however
// many the 1 MiB body would hold).
func TestPodSessionsUsers_RG5(t *testing.T) {
	envs := fedPods(t, 2, 1, 5, vdibroker.DistributionNone)
	a := envs[0].mustConnect("office-pod0", "alice")
	envs[0].mustConnect("office-pod0", "bob")
	c := vhttp.NewPodClient("pod1", []byte(testFedSecret))
	pod0 := vdibroker.Pod{Name: "pod0", URL: envs[0].urls[0]}
	got, err := c.Sessions(t.Context(), pod0, vdibroker.PodSessionsRequest{Users: []string{"ALICE", "carol"}, HostPools: []string{"office-pod0"}})
	if err != nil || len(got) != 1 || got[0].ID != a.SessionID {
		t.Fatalf("alice's and carol's sessions: %+v %v; want alice's %s alone", got, err, a.SessionID)
	}
	many := make([]string, vdibroker.MaxPodSessionUsers+1)
	for i := range many {
		many[i] = fmt.Sprintf("user%d", i)
	}
	for _, tc := range []struct {
		name  string
		req   vdibroker.PodSessionsRequest
		field string
	}{
		{"too many users", vdibroker.PodSessionsRequest{Users: many}, "users"},
		{"user and users", vdibroker.PodSessionsRequest{User: "alice", Users: []string{"bob"}}, "users"},
		{"a bad user name", vdibroker.PodSessionsRequest{Users: []string{"alice", ""}}, "users[1]"},
		{"too many host pools", vdibroker.PodSessionsRequest{User: "alice", HostPools: poolNames(vdibroker.MaxPodSessionPools + 1)}, "hostPools"},
	} {
		_, err := c.Sessions(t.Context(), pod0, tc.req)
		if e := wantCode(t, err, vdibroker.EInvalid); e != nil && e.Field != tc.field {
			t.Errorf("%s: field %q, want %q", tc.name, e.Field, tc.field)
		}
	}
	// As many pools as a call takes, alice's among them (R-G1).
	pools := append(poolNames(vdibroker.MaxPodSessionPools-1), "office-pod0")
	if got, err := c.Sessions(t.Context(), pod0, vdibroker.PodSessionsRequest{User: "alice", HostPools: pools}); err != nil || len(got) != 1 {
		t.Errorf("alice's sessions in %d pools: %+v %v; want hers", len(pools), got, err)
	}
}

// poolNames is n pool names, pool0...
func poolNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("pool%d", i)
	}
	return out
}

// TestPodConnectNonceInItsPlacement_RG5: two replicas of one pod share its
// store, without nonces in memory (as on PostgreSQL). A signed connect
// that makes a session records its nonce in the placement's commit, with
// no commit of its own; replayed on the other replica it is refused,
// both while the user's session is open (a reconnect, whose nonce is
// recorded on its own before it is answered) and after it ended, when the
// replay would make a session: none is made. A freshly signed connect is
// placed. On SQLite (one store handle) and on PostgreSQL (one a replica).
func TestPodConnectNonceInItsPlacement_RG5(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			dsn := ""
			if engine == "postgres" {
				dsn = schemaDSN(t, postgresDSN(t))
			}
			var nonceCommits atomic.Int32
			count := func(ctx context.Context, op string, call func(context.Context) error) error {
				if op == intercept.OpUseNonces {
					nonceCommits.Add(1)
				}
				return call(ctx)
			}
			secret := []byte(testFedSecret)
			var urls []string
			var st vdibroker.Store
			for range 2 {
				rs := st // SQLite: the one handle
				if rs == nil || dsn != "" {
					var err error
					if rs, err = store.Open(t.Context(), dsn, t.TempDir(), nil); err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { rs.Close() })
				}
				if st == nil {
					st = rs
				}
				srv := testserver.New(testserver.Config{Store: intercept.NewStore(rs, count), AdminToken: adminToken, Pod: "pod1", Site: "s",
					Peers: vhttp.NewPodClient("pod1", secret), FederationSecret: secret})
				ts := httptest.NewServer(srv.Handler())
				t.Cleanup(func() { ts.Close(); srv.Close() })
				urls = append(urls, ts.URL)
			}
			e := &env{t: t, store: st, clock: &clock{}, urls: urls, admin: vhttp.NewClient(urls[0], adminToken), agents: map[string]string{}}
			e.pool("office", map[string]any{"maxSessionLimit": 5})
			e.addHosts("office", "h", 1)
			doc := &vdibroker.Federation{Generation: 1, Sites: []vdibroker.Site{{Name: "s"}},
				Pods:               []vdibroker.Pod{{Name: "pod1", Site: "s", URL: urls[0]}, {Name: "pod2", Site: "s", URL: "https://pod2.example.test"}},
				GlobalEntitlements: []vdibroker.GlobalEntitlement{{Name: "office", Members: []vdibroker.Member{{Pod: "pod1", HostPool: "office"}}}}}
			if _, err := e.admin.PutFederation(t.Context(), doc); err != nil {
				t.Fatal(err)
			}
			body := `{"globalEntitlement":"office","hostPool":"office","user":"alice"}`
			sign := func() nethttp.Header {
				return signedBy("pod2", secret, "POST", federation.ConnectPath, body, time.Now())
			}
			call := func(replica int, h nethttp.Header) int {
				t.Helper()
				return podCallStatus(t, urls[replica], "POST", federation.ConnectPath, body, h)
			}
			open := func() []*vdibroker.UserSession {
				t.Helper()
				list, err := st.OpenSessionsOfUsers(t.Context(), []string{"alice"}, []string{"office"})
				if err != nil {
					t.Fatal(err)
				}
				return list
			}

			h := sign()
			if got := call(0, h); got != nethttp.StatusCreated {
				t.Fatalf("a signed connect on replica A: %d, want 201", got)
			}
			if n := nonceCommits.Load(); n != 0 {
				t.Errorf("the connect that made a session committed its nonce on its own (%d commits); want it in the placement's", n)
			}
			if got := call(1, h); got != nethttp.StatusUnauthorized {
				t.Errorf("the connect replayed on replica B while alice's session is open: %d, want 401", got)
			}
			list := open()
			if len(list) != 1 {
				t.Fatalf("alice has %d open sessions, want 1", len(list))
			}
			if err := st.EndSession(t.Context(), "office", list[0].ID, vdibroker.EndLoggedOffByAdmin, time.Now()); err != nil {
				t.Fatal(err)
			}
			if got := call(1, h); got != nethttp.StatusUnauthorized {
				t.Errorf("the connect replayed on replica B after alice logged off: %d, want 401", got)
			}
			if list := open(); len(list) != 0 {
				t.Errorf("the refused replay left alice %d open sessions, want none", len(list))
			}
			before := nonceCommits.Load()
			if got := call(1, sign()); got != nethttp.StatusCreated {
				t.Errorf("a freshly signed connect on replica B: %d, want 201", got)
			}
			if n := nonceCommits.Load(); n != before {
				t.Errorf("the fresh connect committed its nonce on its own; want it in the placement's")
			}
		})
	}
}

// TestPodConnectInAnOutage_RG5: during a store outage a signed connect's
// nonce cannot be recorded, so the connect is refused (503) and places
// nothing: not even within this replica's escrow (outage placement,
// R-OUT2), where a session would be written when the store is back for a
// connect its caller was told failed (and placed elsewhere), and where a
// replay of it to each other replica would place one more. (The pod
// holds the federation's document for a second: a pod connect within it
// reaches the connect path.) The user's own connect during the outage
// then gets a new session, not one the refused pod connect left.
func TestPodConnectInAnOutage_RG5(t *testing.T) {
	rs, err := store.Open(t.Context(), "", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	var down atomic.Bool
	escrows := make(chan struct{}, 64)
	hook := func(ctx context.Context, op string, call func(context.Context) error) error {
		if down.Load() && op != intercept.OpClose {
			return errors.New("connection refused")
		}
		err := call(ctx)
		if op == intercept.OpPutEscrows && err == nil {
			select {
			case escrows <- struct{}{}:
			default:
			}
		}
		return err
	}
	secret := []byte(testFedSecret)
	srv := testserver.New(testserver.Config{Store: intercept.NewStore(rs, hook), AdminToken: adminToken, Pod: "pod1", Site: "s",
		Peers: vhttp.NewPodClient("pod1", secret), FederationSecret: secret, MaintenanceInterval: 500 * time.Millisecond,
		OutagePlacement: outage.Placement{Enabled: true, Share: 100, MaxPerHost: 2, Renew: time.Second, Replica: "r1"}})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { down.Store(false); ts.Close(); srv.Close() })
	e := &env{t: t, store: rs, clock: &clock{}, urls: []string{ts.URL}, admin: vhttp.NewClient(ts.URL, adminToken), agents: map[string]string{}}
	e.pool("office", map[string]any{"maxSessionLimit": 5})
	e.addHosts("office", "h", 1)
	doc := &vdibroker.Federation{Generation: 1, Sites: []vdibroker.Site{{Name: "s"}},
		Pods:               []vdibroker.Pod{{Name: "pod1", Site: "s", URL: ts.URL}, {Name: "pod2", Site: "s", URL: "https://pod2.example.test"}},
		GlobalEntitlements: []vdibroker.GlobalEntitlement{{Name: "office", Members: []vdibroker.Member{{Pod: "pod1", HostPool: "office"}}}}}
	if _, err := e.admin.PutFederation(t.Context(), doc); err != nil {
		t.Fatal(err)
	}
	// An escrow is used once a second renewal confirms it: two renewals
	// that began after the host heartbeat.
	for len(escrows) > 0 {
		<-escrows
	}
	for range 3 {
		select {
		case <-escrows:
		case <-time.After(10 * time.Second):
			t.Fatal("the escrows were not renewed")
		}
	}

	podConnect := func(user string) int {
		t.Helper()
		body := `{"globalEntitlement":"office","hostPool":"office","user":"` + user + `"}`
		return podCallStatus(t, ts.URL, "POST", federation.ConnectPath, body,
			signedBy("pod2", secret, "POST", federation.ConnectPath, body, time.Now()))
	}
	// Bob's connect before the outage: the pod holds the federation's
	// document, as it does between calls.
	if got := podConnect("bob"); got != nethttp.StatusCreated {
		t.Fatalf("a signed connect before the outage: %d, want 201", got)
	}

	// The outage, and carol's connect that finds it (refused: it was
	// decided before the store was found down).
	down.Store(true)
	if _, err := e.connect("office", "carol"); vdibroker.ErrorCode(err) != vdibroker.EStoreUnavailable {
		t.Fatalf("carol's connect as the store goes down: %v, want StoreUnavailable", err)
	}
	if got := podConnect("alice"); got != nethttp.StatusServiceUnavailable {
		t.Fatalf("a signed connect during the outage: %d, want 503", got)
	}
	a, err := e.connect("office", "alice")
	if err != nil {
		t.Fatalf("alice's own connect during the outage: %v", err)
	}
	if a.Reconnect || !a.Created {
		t.Errorf("alice's own connect during the outage reconnected her to session %s: the refused pod connect placed it", a.SessionID)
	}
}

// signedBy is the headers of a pod-to-pod call from pod, signed at at
// with the federation's secret.
func signedBy(pod string, secret []byte, method, path, body string, at time.Time) nethttp.Header {
	h := nethttp.Header{}
	for k, v := range federation.Sign(secret, method, path, pod, []byte(body), at) {
		h.Set(k, v)
	}
	return h
}

// podCallStatus sends a pod-to-pod call with headers h and returns its
// status.
func podCallStatus(t testing.TB, url, method, path, body string, h nethttp.Header) int {
	t.Helper()
	req, _ := nethttp.NewRequest(method, url+path, strings.NewReader(body))
	req.Header = h
	resp, err := nethttp.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// recordingTransport keeps the last request's headers and body.
type recordingTransport struct {
	rt   nethttp.RoundTripper
	mu   sync.Mutex
	h    nethttp.Header
	body string
}

func (c *recordingTransport) RoundTrip(r *nethttp.Request) (*nethttp.Response, error) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
	}
	c.mu.Lock()
	c.h, c.body = r.Header.Clone(), string(body)
	c.mu.Unlock()
	return c.rt.RoundTrip(r)
}

// TestPodCallReplayedToAnotherPod_RG5: a signed call captured on its way
// to pod0 and sent within its 60 s to pod1, which never saw its nonce, is
// refused (401): a pod's signature names the pod it is for. Without it, a
// sessions call would tell whoever captured it the user's sessions in
// pod1's pools of the same names, a connect would make a session there,
// and a whole list would drop the sender's entries at pod1.
func TestPodCallReplayedToAnotherPod_RG5(t *testing.T) {
	envs := fedPods(t, 3, 1, 5, vdibroker.DistributionNone)
	c := vhttp.NewPodClient("pod2", []byte(testFedSecret))
	rec := &recordingTransport{rt: c.HTTPClient.Transport}
	c.HTTPClient.Transport = rec
	req := vdibroker.PodSessionsRequest{User: "alice", HostPools: []string{"office-pod0", "office-pod1"}}
	if _, err := c.Sessions(t.Context(), vdibroker.Pod{Name: "pod0", URL: envs[0].urls[0]}, req); err != nil {
		t.Fatalf("a signed sessions call to pod0: %v", err)
	}
	if got := podCallStatus(t, envs[1].urls[0], "POST", federation.SessionsPath, rec.body, rec.h); got != nethttp.StatusUnauthorized {
		t.Errorf("the call to pod0 sent to pod1: %d, want 401", got)
	}
	// The same call signed for pod1 is taken there.
	if _, err := c.Sessions(t.Context(), vdibroker.Pod{Name: "pod1", URL: envs[1].urls[0]}, req); err != nil {
		t.Errorf("a signed sessions call to pod1: %v", err)
	}
}

// TestPodConnectOnlyIntoTheNamedEntitlementsPools_RG5: a pod-to-pod
// connect places the user only in a pool that this pod's document lists
// as a member of the global entitlement the call names (R-E9: being
// entitled to a global entitlement is enough in its member pools, not in
// another's). A call naming an entitlement this pod does not know, or one
// whose members leave that pool out, is 404 and places nothing: a peer (or
// one on an older document) cannot open a pool's desktop on the word of
// an entitlement that does not grant it.
func TestPodConnectOnlyIntoTheNamedEntitlementsPools_RG5(t *testing.T) {
	envs := fedPods(t, 2, 1, 5, vdibroker.DistributionNone)
	st, err := envs[0].admin.GetFederation(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	doc := *st.Document
	doc.Generation++
	doc.GlobalEntitlements = append(slices.Clone(doc.GlobalEntitlements), vdibroker.GlobalEntitlement{
		Name: "pod0-only", Members: []vdibroker.Member{{Pod: "pod0", HostPool: "office-pod0"}}})
	for _, e := range envs {
		d := doc
		if _, err := e.admin.PutFederation(t.Context(), &d); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, entitlement, user string
		want                    int
	}{
		{"an entitlement this pod does not know", "no-such-entitlement", "alice", nethttp.StatusNotFound},
		{"an entitlement without this pool", "pod0-only", "bob", nethttp.StatusNotFound},
		{"an entitlement with this pool", "office", "carol", nethttp.StatusCreated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := fmt.Sprintf(`{"globalEntitlement":%q,"hostPool":"office-pod1","user":%q}`, tc.entitlement, tc.user)
			h := signedBy("pod0", []byte(testFedSecret), "POST", federation.ConnectPath, body, time.Now())
			if got := podCallStatus(t, envs[1].urls[0], "POST", federation.ConnectPath, body, h); got != tc.want {
				t.Errorf("pod connect naming %s: %d, want %d", tc.entitlement, got, tc.want)
			}
			sessions, err := envs[1].store.ListUserSessions(t.Context(), vdibroker.SessionFilter{HostPool: "office-pod1", User: tc.user})
			if err != nil {
				t.Fatal(err)
			}
			if placed := len(sessions) > 0; placed != (tc.want == nethttp.StatusCreated) {
				t.Errorf("sessions of %s in office-pod1: %d", tc.user, len(sessions))
			}
		})
	}
}

// TestPodCallRefusedWhenTheDocumentCannotBeRead_RG5: a signed call whose
// pod this pod cannot check against its document (the document's read
// failed) is refused, not taken: a pod's check of its callers fails
// closed. The look-up, which reads no document itself, told a pod the
// document does not list (a removed one still holding the secret) where a
// user's sessions are, while the document's read failed.
func TestPodCallRefusedWhenTheDocumentCannotBeRead_RG5(t *testing.T) {
	rs, err := store.Open(t.Context(), "", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	var failDoc atomic.Bool
	hook := func(ctx context.Context, op string, call func(context.Context) error) error {
		if failDoc.Load() && op == intercept.OpGetFederation {
			return errors.New("reading the federation document failed")
		}
		return call(ctx)
	}
	secret := []byte(testFedSecret)
	srv := testserver.New(testserver.Config{Store: intercept.NewStore(rs, hook), AdminToken: adminToken, Pod: "pod1", Site: "s",
		Peers: vhttp.NewPodClient("pod1", secret), FederationSecret: secret})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { ts.Close(); srv.Close() })
	// Failing from before the document is stored: no read of it is ever
	// cached (global.docTTL).
	failDoc.Store(true)
	doc := &vdibroker.Federation{Generation: 1, Sites: []vdibroker.Site{{Name: "s"}},
		Pods: []vdibroker.Pod{{Name: "pod1", Site: "s", URL: ts.URL}, {Name: "pod2", Site: "s", URL: "https://pod2.example.test"}}}
	if _, err := vhttp.NewClient(ts.URL, adminToken).PutFederation(t.Context(), doc); err != nil {
		t.Fatal(err)
	}
	removed := vhttp.NewPodClient("removed", secret)
	if _, err := removed.Lookup(t.Context(), vdibroker.Pod{Name: "pod1", URL: ts.URL}, vdibroker.PodLookupRequest{User: "alice"}); err == nil {
		t.Error("a look-up from a pod the document does not list was answered while the document could not be read")
	}
}
