package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/console"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/testserver"
	"github.com/vdibroker/vdibroker/power"
	"github.com/vdibroker/vdibroker/store"
)

// newPowerEnv is newEnv with a simulated power driver "sim", which pool-a
// (seeded) uses.
func newPowerEnv(t *testing.T) (*env, *power.Simulated) {
	t.Helper()
	return newPowerEnvAt(t, nil)
}

// newPowerEnvAt is newPowerEnv whose server and console read the time
// from now (nil: the real clock).
func newPowerEnvAt(t *testing.T, now func() time.Time) (*env, *power.Simulated) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, "", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	sim := &power.Simulated{}
	srv := testserver.New(testserver.Config{Store: st, AdminToken: adminToken, PowerDrivers: power.Set{"sim": sim}, Now: now})
	t.Cleanup(func() { srv.Close() })
	c := console.New(console.Config{API: srv.Handler(), Store: st, Sessions: st, Now: now})
	t.Cleanup(func() { c.Close() })
	srv.Mux().Handle("/", c)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	e := &env{t: t, url: ts.URL, store: st, admin: vhttp.NewClient(ts.URL, adminToken), agents: map[string]string{}}
	e.seed("alice") // alice on host-1 (DepthFirst)
	if _, err := e.admin.PatchHostPool(ctx, "pool-a", map[string]any{"powerDriver": "sim"}); err != nil {
		t.Fatal(err)
	}
	return e, sim
}

// TestConsolePower (R-A4): the pool page shows each host's power
// state with Start/Stop for a Contributor, not for a Reader; a stop with
// the session's CSRF token stops the host through the API, a forged token
// or a Reader is refused and the driver is never asked; a stop of a host
// with sessions is refused with the API's reason; the host page shows the
// state and the stopped host's check, and offers the actions the API
// accepts (Stop for a Running host, Start for a Stopped one).
func TestConsolePower(t *testing.T) {
	e, sim := newPowerEnv(t)
	ctx := context.Background()
	b := e.browser()
	b.signin(e.token(vdibroker.RoleContributor))
	page := b.get("/pools/pool-a")
	wantContains(t, page, `data-power="Running"`, `data-action="stop" data-host="host-2"`)
	// The host page offers what the API accepts: Stop for a Running
	// host, no Start (it would be 409).
	if hp := b.get("/pools/pool-a/hosts/host-2"); !strings.Contains(hp.body, `data-action="stop"`) || strings.Contains(hp.body, `data-action="start"`) {
		t.Fatal("the host page of a Running host lacks Stop or offers Start")
	}

	rb := e.browser()
	rb.signin(e.token(vdibroker.RoleReader))
	if rp := rb.get("/pools/pool-a"); strings.Contains(rp.body, `data-action="stop"`) || !strings.Contains(rp.body, `data-power="Running"`) {
		t.Fatal("a Reader sees power buttons, or no power state")
	}
	a := rb.post("/pools/pool-a/hosts/host-2/power", url.Values{"action": {"stop"}, "csrf": {rb.csrf("/pools/pool-a")}})
	wantStatus(t, a, http.StatusForbidden)
	wantStatus(t, b.post("/pools/pool-a/hosts/host-2/power", url.Values{"action": {"stop"}, "csrf": {"forged"}}), http.StatusForbidden)
	if sim.Calls("stop", "pool-a", "host-2") != 0 {
		t.Fatal("a refused request stopped host-2")
	}

	csrf := b.csrf("/pools/pool-a")
	a = b.post("/pools/pool-a/hosts/host-1/power", url.Values{"action": {"stop"}, "csrf": {csrf}})
	wantStatus(t, a, http.StatusConflict)
	wantContains(t, a, "open sessions")
	a = b.post("/pools/pool-a/hosts/host-2/power", url.Values{"action": {"stop"}, "csrf": {csrf}, "back": {"host"}})
	wantStatus(t, a, http.StatusSeeOther)
	if a.location != "/pools/pool-a/hosts/host-2" {
		t.Fatalf("back to %q", a.location)
	}
	if h, err := e.admin.GetSessionHost(ctx, "pool-a", "host-2"); err != nil || h.PowerState != vdibroker.PowerStopped || sim.Calls("stop", "pool-a", "host-2") != 1 {
		t.Fatalf("after the stop: %+v, %v", h, err)
	}
	hp := b.get(a.location)
	wantContains(t, hp, "host-2 is stopping", `id="host-power">Stopped`, "Its power driver stopped it", `id="power-form"`, `data-action="start"`)
	if strings.Contains(hp.body, `data-action="stop"`) {
		t.Fatal("the host page offers Stop for a Stopped host")
	}
	wantContains(t, b.get("/pools/pool-a"), `data-action="start" data-host="host-2"`)

	// A host registered and never heard of is Unknown: with
	// startVMOnConnect its page says a connect may start it (R-A4).
	if _, err := e.admin.PutSessionHost(ctx, "pool-a", "host-9", vhttp.SessionHostRequest{Address: vhttp.Ptr("host-9:3389")}); err != nil {
		t.Fatal(err)
	}
	const may = "Its power state is Unknown: a connect that finds no capacity may start it"
	if hp := b.get("/pools/pool-a/hosts/host-9"); !strings.Contains(hp.body, `id="host-power">Unknown`) || strings.Contains(hp.body, may) {
		t.Fatal("host-9's page without startVMOnConnect: no Unknown power state, or says a connect may start it")
	}
	if _, err := e.admin.PatchHostPool(ctx, "pool-a", map[string]any{"startVMOnConnect": true}); err != nil {
		t.Fatal(err)
	}
	wantContains(t, b.get("/pools/pool-a/hosts/host-9"), may, "unless its driver failed in the last 10 minutes")

	// A host recorded Running whose agent is silent (its machine turned
	// off outside the broker) reads Unknown too, and may be started.
	if _, err := e.admin.PutSessionHost(ctx, "pool-a", "host-8", vhttp.SessionHostRequest{Address: vhttp.Ptr("host-8:3389")}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.store.SetPowerState(ctx, "pool-a", "host-8", vdibroker.PowerRunning, time.Now()); err != nil {
		t.Fatal(err)
	}
	wantContains(t, b.get("/pools/pool-a/hosts/host-8"), `id="host-power">Unknown`, may, "nothing says the machine runs")
	wantContains(t, b.get("/pools/pool-a"), `data-action="start" data-host="host-8"`)
}

// TestConsoleRestartsTimedOutStart (R-A4): a host started from the
// console whose agent never reports stays Starting. For the first 10
// minutes (the start timeout) neither page offers Start for it (the host
// page offers Stop) nor says it is stuck; from then on both pages show
// Start and say it has been starting for 10 minutes without its agent
// reporting, and the Start asks the driver again, after which Start is
// gone from both again.
func TestConsoleRestartsTimedOutStart(t *testing.T) {
	var offset atomic.Int64
	base := time.Now()
	now := func() time.Time { return base.Add(time.Duration(offset.Load())) }
	e, sim := newPowerEnvAt(t, now)
	b := e.browser()
	b.signin(e.token(vdibroker.RoleContributor))
	csrf := b.csrf("/pools/pool-a")
	for _, action := range []string{"stop", "start"} {
		wantStatus(t, b.post("/pools/pool-a/hosts/host-2/power", url.Values{"action": {action}, "csrf": {csrf}}), http.StatusSeeOther)
	}
	if sim.Calls("start", "pool-a", "host-2") != 1 {
		t.Fatal("the console's start did not reach the driver")
	}
	const startButton, stuck = `data-action="start" data-host="host-2"`, "It has been starting for 10 minutes without its agent reporting"
	offset.Store(int64(vdibroker.HostStartTimeout - time.Minute))
	if pp := b.get("/pools/pool-a"); strings.Contains(pp.body, startButton) || strings.Contains(pp.body, "without its agent reporting") || !strings.Contains(pp.body, `data-power="Starting"`) {
		t.Fatal("the pool page offers Start, or says the start is stuck, for a host Starting for 9 minutes")
	}
	// The host page offers Stop (to give up the start), not Start.
	if hp := b.get("/pools/pool-a/hosts/host-2"); strings.Contains(hp.body, "without its agent reporting") ||
		strings.Contains(hp.body, `data-action="start"`) || !strings.Contains(hp.body, `data-action="stop"`) {
		t.Fatal("the host page says the start is stuck, offers Start or lacks Stop after 9 minutes")
	}
	offset.Store(int64(vdibroker.HostStartTimeout))
	wantContains(t, b.get("/pools/pool-a"), startButton, stuck)
	wantContains(t, b.get("/pools/pool-a/hosts/host-2"), `id="host-power">Starting`, stuck, `data-action="start"`, `data-action="stop"`)
	wantStatus(t, b.post("/pools/pool-a/hosts/host-2/power", url.Values{"action": {"start"}, "csrf": {csrf}, "back": {"host"}}), http.StatusSeeOther)
	if n := sim.Calls("start", "pool-a", "host-2"); n != 2 {
		t.Fatalf("%d starts after the console's Start of a timed-out start, want 2", n)
	}
	if pp := b.get("/pools/pool-a"); strings.Contains(pp.body, startButton) {
		t.Fatal("the pool page offers Start again right after the restart")
	}
	if hp := b.get("/pools/pool-a/hosts/host-2"); strings.Contains(hp.body, `data-action="start"`) || strings.Contains(hp.body, "without its agent reporting") {
		t.Fatal("the host page offers Start, or says the start is stuck, right after the restart")
	}
}

// TestConsoleNoStartOfHostShuttingDown (R-A4): a host whose start timed
// out but whose agent said since that it shuts down is not offered Start
// (the API would answer 409) on either page until its agent has been
// silent for the pool's heartbeat timeout (90 seconds); the pages say
// why and when, and the host page still offers Stop.
func TestConsoleNoStartOfHostShuttingDown(t *testing.T) {
	var offset atomic.Int64
	base := time.Now()
	now := func() time.Time { return base.Add(time.Duration(offset.Load())) }
	e, _ := newPowerEnvAt(t, now)
	b := e.browser()
	b.signin(e.token(vdibroker.RoleContributor))
	csrf := b.csrf("/pools/pool-a")
	for _, action := range []string{"stop", "start"} {
		wantStatus(t, b.post("/pools/pool-a/hosts/host-2/power", url.Values{"action": {action}, "csrf": {csrf}}), http.StatusSeeOther)
	}
	offset.Store(int64(vdibroker.HostStartTimeout - 30*time.Second))
	if _, err := e.store.ApplyHeartbeat(context.Background(), "pool-a", "host-2", &vdibroker.HeartbeatRequest{ShuttingDown: true}, now()); err != nil {
		t.Fatal(err)
	}
	offset.Store(int64(vdibroker.HostStartTimeout))
	const startButton = `data-action="start" data-host="host-2"`
	// The wait is to the first whole second past the heartbeat timeout,
	// rounded up: 60 s to the timeout and at most 1 s more.
	const why = "It has been starting for 10 minutes, and its agent said 30s ago that it is shutting down: Start is offered once its agent has been silent for longer than the heartbeat timeout, in 1m 1s"
	pp := b.get("/pools/pool-a")
	wantContains(t, pp, why)
	if strings.Contains(pp.body, startButton) {
		t.Fatal("the pool page offers Start for a host whose agent said it shuts down 30 s ago")
	}
	hp := b.get("/pools/pool-a/hosts/host-2")
	wantContains(t, hp, why, `data-action="stop"`)
	if strings.Contains(hp.body, `data-action="start"`) {
		t.Fatal("the host page offers Start for a host whose agent said it shuts down 30 s ago")
	}
	// The heartbeat timeout to the instant: its agent is still heard, as
	// the API reads it (409), so no Start, and a wait of 1 s, not 0 s.
	offset.Store(int64(vdibroker.HostStartTimeout + 60*time.Second))
	pp = b.get("/pools/pool-a")
	wantContains(t, pp, "that it is shutting down: Start is offered once its agent has been silent for longer than the heartbeat timeout, in 1s")
	if strings.Contains(pp.body, startButton) {
		t.Fatal("the pool page offers Start for a host whose agent said it shuts down the heartbeat timeout ago to the instant")
	}
	offset.Store(int64(vdibroker.HostStartTimeout + 61*time.Second)) // silent for 91 s
	wantContains(t, b.get("/pools/pool-a"), startButton, "without its agent reporting")
	wantContains(t, b.get("/pools/pool-a/hosts/host-2"), `data-action="start"`, "without its agent reporting")
}
