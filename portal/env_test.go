package portal_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/pgtest"
	"github.com/vdibroker/vdibroker/internal/testserver"
	"github.com/vdibroker/vdibroker/portal"
	"github.com/vdibroker/vdibroker/power"
	"github.com/vdibroker/vdibroker/store"
)

const adminToken = "portal-test-admin"

// suitePostgres is set while TestPortalPostgres reruns the tests on
// PostgreSQL.
var suitePostgres bool

// env is a real broker (a store, the API server, the entitlement
// service, a simulated power driver "sim") with the portal mounted at
// /portal/, served on 127.0.0.1. Pool "desk" (two hosts) has a desktop
// group of alice's ("Office desktop") and "other" (one host) bob's;
// "cold" (power driver sim, start VM on connect, limit 1) has one host,
// stopped, assigned to alice as "Cold lab". The broker is pod "pod0" of
// site "s0" (a federation of one pod until a test puts a document), or
// the pod and site newEnvAt names.
type env struct {
	t      testing.TB
	url    string
	admin  *vhttp.Client
	srv    *testserver.Server
	portal *portal.Portal
	creds  map[string]string // host -> credential
	// skew moves the broker's clock forward (advance).
	skew *atomic.Int64
	// frozen, when set, is the real time the clock stopped at (freeze).
	frozen *atomic.Int64
	// st, dsn and now make more replicas (replica).
	st  vdibroker.Store
	dsn string
	now func() time.Time
	// pod is the broker's pod name and site its site; fedSecret, when
	// set, the federation's secret (newEnvWith, newEnvAt).
	pod, site string
	fedSecret []byte
	// close stops serving the first replica's address.
	close func()
	// logger, when set, is the log of the replicas served from then on
	// (the server's access lines among them).
	logger *slog.Logger
}

// advance moves the broker's clock forward by d.
func (e *env) advance(d time.Duration) { e.skew.Add(int64(d)) }

// freeze stops the real time's part of the broker's clock, for a test of
// a rate (R-SEC) that a slow machine's real time would refill.
func (e *env) freeze() { e.frozen.Store(time.Now().UnixNano()) }

func newEnv(t testing.TB, adjust func(*portal.Config)) *env {
	t.Helper()
	return newEnvWith(t, adjust, "pod0", nil)
}

// newEnvWith is newEnv as pod pod, signing pod-to-pod calls with
// fedSecret when it is set (a federation of pods, R-G5).
func newEnvWith(t testing.TB, adjust func(*portal.Config), pod string, fedSecret []byte) *env {
	t.Helper()
	return newEnvAt(t, adjust, pod, "s0", fedSecret)
}

// newEnvAt is newEnvWith as a pod of site site.
func newEnvAt(t testing.TB, adjust func(*portal.Config), pod, site string, fedSecret []byte) *env {
	t.Helper()
	ctx := context.Background()
	dsn := ""
	if suitePostgres {
		dsn = pgtest.SchemaDSN(t, "vdibroker_portal_", "portal PostgreSQL test")
	}
	st, err := store.Open(ctx, dsn, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	skew, frozen := &atomic.Int64{}, &atomic.Int64{}
	now := func() time.Time {
		if f := frozen.Load(); f != 0 {
			return time.Unix(0, f).Add(time.Duration(skew.Load()))
		}
		return time.Now().Add(time.Duration(skew.Load()))
	}
	e := &env{t: t, creds: map[string]string{}, skew: skew, frozen: frozen, st: st, dsn: dsn, now: now, pod: pod, site: site, fedSecret: fedSecret}
	e.srv, e.portal, e.url = e.serve(st, adjust)
	e.admin = vhttp.NewClient(e.url, adminToken)
	e.pool("desk", map[string]any{}, 2)
	e.pool("other", map[string]any{}, 1)
	e.pool("cold", map[string]any{"powerDriver": "sim", "startVMOnConnect": true, "maxSessionLimit": 1}, 1)
	if _, err := e.admin.StopSessionHost(ctx, "cold", "cold-1", false); err != nil {
		t.Fatal(err)
	}
	// Stopped long enough that its agent's last heartbeat is old: once
	// started, it takes sessions when its agent heartbeats again.
	e.advance(5 * time.Minute)
	for _, h := range []string{"desk-1", "desk-2", "other-1"} {
		e.heartbeat(h)
	}
	for name, g := range map[string]map[string]any{
		"desk-desktop":  {"hostPool": "desk", "applicationGroupType": "Desktop", "friendlyName": "Office desktop", "assignments": map[string]any{"users": []string{"alice"}}},
		"other-desktop": {"hostPool": "other", "applicationGroupType": "Desktop", "friendlyName": "Bob's desktop", "assignments": map[string]any{"users": []string{"bob"}}},
		"cold-desktop":  {"hostPool": "cold", "applicationGroupType": "Desktop", "friendlyName": "Cold lab", "assignments": map[string]any{"users": []string{"alice"}}},
	} {
		if _, err := e.admin.PutApplicationGroup(ctx, name, g); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// serve runs a replica on st: a broker (API server) with the portal
// mounted, on 127.0.0.1.
func (e *env) serve(st vdibroker.Store, adjust func(*portal.Config)) (*testserver.Server, *portal.Portal, string) {
	cfg := testserver.Config{Store: st, AdminToken: adminToken, PowerDrivers: power.Set{"sim": &power.Simulated{Now: e.now}},
		MaintenanceInterval: time.Hour, Now: e.now, Pod: e.pod, Site: e.site, Logger: e.logger}
	if e.fedSecret != nil {
		peers := vhttp.NewPodClient(e.pod, e.fedSecret)
		peers.Now = e.now // signed by the same clock the peers check with
		// A minute bounds a hang only: the pods here answer (a gone one
		// refuses the connection), and in-process pods' calls to each
		// other were seen to take past 2 s under -race beside a CI run.
		cfg.Peers, cfg.PodTimeout, cfg.FederationSecret = peers, time.Minute, e.fedSecret
	}
	srv := testserver.New(cfg)
	e.t.Cleanup(func() { srv.Close() })
	pcfg := portal.Config{API: srv.Handler(), Sessions: st, Launches: st, Audit: srv.Broker, MaxWait: 30 * time.Second,
		SpendWrite: srv.Server.UserWriteSpend, Clock: envClock{now: e.now}}
	if adjust != nil {
		adjust(&pcfg)
	}
	p := portal.New(pcfg)
	e.t.Cleanup(func() { p.Close() })
	srv.Mux().Handle(portal.Prefix, p)
	ts := httptest.NewServer(srv.Handler())
	e.t.Cleanup(ts.Close)
	if e.close == nil {
		e.close = ts.Close
	}
	return srv, p, ts.URL
}

// replica serves another replica of the broker and its portal on the
// env's database (on PostgreSQL through a connection pool of its own, as
// another process has; SQLite is one process's file) and returns its
// URL.
func (e *env) replica() string {
	e.t.Helper()
	st := e.st
	if e.dsn != "" {
		var err error
		if st, err = store.Open(context.Background(), e.dsn, e.t.TempDir(), nil); err != nil {
			e.t.Fatal(err)
		}
		e.t.Cleanup(func() { st.Close() })
	}
	_, _, url := e.serve(st, nil)
	return url
}

// pool makes a pool with n hosts that heartbeat (pool-1, pool-2...).
func (e *env) pool(name string, body map[string]any, n int) {
	e.t.Helper()
	ctx := context.Background()
	if _, err := e.admin.PutHostPool(ctx, name, body); err != nil {
		e.t.Fatal(err)
	}
	rt, err := e.admin.CreateRegistrationToken(ctx, name, vhttp.RegistrationTokenRequest{ExpiresInSeconds: 3600})
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		host := name + "-" + string(rune('0'+i))
		reg, err := e.admin.Register(ctx, &vdibroker.RegisterRequest{Token: rt.Token, HostName: host, Address: host + ".example.test:3389"})
		if err != nil {
			e.t.Fatal(err)
		}
		e.creds[host] = reg.Credential
		e.heartbeat(host)
	}
}

// heartbeat reports host's sessions and returns the commands queued for
// it.
func (e *env) heartbeat(host string, sessions ...vdibroker.AgentSession) []vdibroker.Command {
	e.t.Helper()
	res, err := e.admin.Heartbeat(context.Background(), e.creds[host], &vdibroker.HeartbeatRequest{Sessions: sessions})
	if err != nil {
		e.t.Fatalf("heartbeat %s: %v", host, err)
	}
	return res.Commands
}

// activeAtDesk connects user to the pool "desk" and reports her session
// Active (agent session "1") by its host's heartbeat.
func (e *env) activeAtDesk(user string) *vhttp.ConnectResult {
	e.t.Helper()
	c, err := e.admin.Connect(context.Background(), "desk", vhttp.ConnectRequest{User: user})
	if err != nil {
		e.t.Fatal(err)
	}
	e.heartbeat(c.SessionHost, vdibroker.AgentSession{ID: "1", User: user, State: vdibroker.StateActive})
	return c
}

// userToken is a User token of subject.
func (e *env) userToken(subject string) string {
	e.t.Helper()
	tr, err := e.admin.CreateToken(context.Background(), vhttp.TokenRequest{Role: vdibroker.RoleUser, Subject: subject})
	if err != nil {
		e.t.Fatal(err)
	}
	return tr.Secret
}

// drain drains hosts of pool: no new sessions there (R-C5).
func (e *env) drain(pool string, hosts ...string) {
	e.t.Helper()
	for _, h := range hosts {
		if _, err := e.admin.PatchSessionHost(context.Background(), pool, h, map[string]any{"allowNewSession": false}); err != nil {
			e.t.Fatal(err)
		}
	}
}

// browser is a cookie jar client that does not follow redirects, of
// the replica at url.
type browser struct {
	e   *env
	c   *http.Client
	url string
}

func (e *env) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{e: e, url: e.url, c: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// at is the same browser (its cookies) sent to the replica at url, as a
// load balancer may send it.
func (b *browser) at(url string) *browser { return &browser{e: b.e, c: b.c, url: url} }

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// get GETs path with headers h (pairs).
func (b *browser) get(path string, h ...string) (*http.Response, string) {
	b.e.t.Helper()
	req, _ := http.NewRequest("GET", b.url+path, nil)
	for i := 0; i+1 < len(h); i += 2 {
		req.Header.Set(h[i], h[i+1])
	}
	return b.do(req)
}

// do sends req and reads its answer's body.
func (b *browser) do(req *http.Request) (*http.Response, string) {
	b.e.t.Helper()
	res, err := b.c.Do(req)
	if err != nil {
		b.e.t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res, string(body)
}

// post POSTs a form to path from this site.
func (b *browser) post(path string, form url.Values) (*http.Response, string) {
	b.e.t.Helper()
	req, _ := http.NewRequest("POST", b.url+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", b.url)
	return b.do(req)
}

// signIn signs the browser in with token and returns its CSRF token.
func (b *browser) signIn(token string) string {
	b.e.t.Helper()
	_, page := b.get("/portal/signin")
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		b.e.t.Fatalf("no CSRF token on the sign-in page: %s", page)
	}
	res, body := b.post("/portal/signin", url.Values{"csrf": {m[1]}, "token": {token}, "next": {"/portal/"}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/portal/" {
		b.e.t.Fatalf("sign-in: %d %s %s", res.StatusCode, res.Header.Get("Location"), body)
	}
	_, home := b.get("/portal/")
	m = csrfRE.FindStringSubmatch(home)
	if m == nil {
		b.e.t.Fatalf("no CSRF token on the home page: %s", home)
	}
	return m[1]
}

// launch opens resource and returns the launch's page path.
func (b *browser) launch(csrf, resource string) string {
	b.e.t.Helper()
	res, body := b.post("/portal/launch", url.Values{"csrf": {csrf}, "resource": {resource}})
	loc := res.Header.Get("Location")
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/portal/launches/") {
		b.e.t.Fatalf("launch %s: %d %s %s", resource, res.StatusCode, loc, body)
	}
	return loc
}

// launchStatus is a launch's status answer.
type launchStatus struct {
	State, Title, Message, Waited, File string
	Percent                             int
}

func (b *browser) status(launch string) (int, launchStatus) {
	b.e.t.Helper()
	res, body := b.get(launch + "/status")
	var s launchStatus
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		b.e.t.Fatalf("status of %s: %d %s", launch, res.StatusCode, body)
	}
	return res.StatusCode, s
}

// await polls a launch's status until its state is not "waiting" or
// until cond holds (a real HTTP poll of a connect that runs on its own;
// bounded).
func (b *browser) await(launch string, cond func(launchStatus) bool) launchStatus {
	b.e.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, s := b.status(launch)
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			b.e.t.Fatalf("launch %s: still %+v", launch, s)
		}
	}
}

func ended(s launchStatus) bool { return s.State != "waiting" }

// TestPortalPostgres reruns the portal's tests that touch the store on
// PostgreSQL.
func TestPortalPostgres(t *testing.T) {
	pgtest.SchemaDSN(t, "vdibroker_portal_probe_", "portal PostgreSQL test")
	suitePostgres = true
	t.Cleanup(func() { suitePostgres = false })
	t.Run("Launch", TestLaunch_RU1_RU7)
	t.Run("OwnSessions", TestOwnSessions_RU3)
	t.Run("Reconnect", TestReconnectDisconnected_RU3_RC1)
	t.Run("OtherPods", TestOtherPodsSessions_RU3_RG1)
	t.Run("ReconnectTheRowsSession", TestReconnectTheRowsSession_RU3_RG1)
	t.Run("ReconnectTheRowsSessionPersonal", TestReconnectTheRowsSessionPersonal_RU3_RC1)
	t.Run("ReconnectLocalRowOutOfGlobalScope", TestReconnectLocalRowOutOfGlobalScope_RU3_RC1_RG1)
	t.Run("NoReconnectWhereItCannotReach", TestNoReconnectWhereItCannotReach_RU3_RG1)
	t.Run("EveryLoggingOffShown", TestEveryLoggingOffShown_RU3)
	t.Run("ConfirmationKeepsLoggingOff", TestConfirmationKeepsLoggingOff_RU3)
	t.Run("OtherPodsSessionsWhere", TestOtherPodsSessionsWhere_RU3_RU6)
	t.Run("StartingHost", TestLaunchWaitsForStartingHost_RU4)
	t.Run("StartingSaysTheAnswersWait", TestLaunchStartingSaysTheAnswersWait_RU4_RA4)
	t.Run("ShuttingDownSaysTheAnswersWait", TestLaunchShuttingDownSaysTheAnswersWait_RA4)
	t.Run("DesktopGoingDown", TestLaunchDesktopGoingDown_RU4_RA4)
	t.Run("DesktopNeedsHelpdesk", TestLaunchDesktopNeedsHelpdesk_RA4)
	t.Run("AcrossReplicas", TestLaunchAcrossReplicas_RU4_RU7)
	t.Run("Bounds", TestLaunchBounds_RU7)
	t.Run("FailedLaunchesHoldNoSlot", TestFailedLaunchesHoldNoLaunchSlot_RU7)
	t.Run("RemoteAppAndGlobal", TestLaunchRemoteAppAndGlobal_RU1_RE9)
	t.Run("StateChangesNeedThisSite", TestStateChangesNeedThisSite_RU7)
	t.Run("NoHostRunsTheApplication", TestApplicationNoHostRunsInUsersWords_RE12_RU6)
	t.Run("ReferenceFindsTheRefusal", TestLaunchReferenceFindsTheRefusal_RU7)
	t.Run("WriteBudget", TestWriteBudget_RSEC_RU7)
	t.Run("ThroughGatewaySaysOnce", TestLaunchThroughGatewaySaysOnce_RU4_RGW1)
}

// envClock is the real clock but for Now and Since, which read the
// broker's (env.now): the portal's time moves with the test's advance
// and freeze, as one server's does.
type envClock struct {
	clock.RealClock
	now func() time.Time
}

func (c envClock) Now() time.Time                  { return c.now() }
func (c envClock) Since(t time.Time) time.Duration { return c.now().Sub(t) }
