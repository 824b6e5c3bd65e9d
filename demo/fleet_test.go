package demo

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/autoscale"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/testserver"
	"github.com/vdibroker/vdibroker/power"
	"github.com/vdibroker/vdibroker/store"
)

// startBroker serves the real API (no console, no /metrics: the fleet
// needs neither) on a SQLite store in a temp dir, with the fleet's power
// driver.
func startBroker(t *testing.T, drivers power.Set) (url, token string) {
	t.Helper()
	st, err := store.Open(t.Context(), "", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	const admin = "fleet-test-admin"
	srv := testserver.New(testserver.Config{Store: st, AdminToken: admin, PowerDrivers: drivers})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ts.Close()
		srv.Close()
		st.Close()
	})
	return ts.URL, admin
}

// TestFleet: Start leaves every simulated host Available but the five
// office hosts it powered off for autoscale, office-08 drained and the
// first wave of users placed; the agents soon report users Active
// (R-S2) and the drained host never gets a new session (R-C2). After Close
// the agents stop heartbeating.
func TestFleet(t *testing.T) {
	f := &Fleet{
		Rand:      rand.New(rand.NewPCG(3, 4)),
		Heartbeat: 100 * time.Millisecond,
		UserTick:  20 * time.Millisecond,
	}
	f.URL, f.AdminToken = startBroker(t, f.PowerDrivers())
	if err := f.Start(t.Context()); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	ctx := context.Background()
	c := vhttp.NewClient(f.URL, f.AdminToken)

	if got, want := f.Pools(), 3; got != want {
		t.Errorf("Pools() = %d, want %d", got, want)
	}
	hosts := 0
	for _, p := range demoPools {
		hs, err := c.ListSessionHosts(ctx, p.name)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hs {
			off := p.name == autoscalePool && slices.Contains(stoppedAtStart, h.Name)
			switch {
			case off && (h.Status != vdibroker.StatusShutdown || h.PowerState != vdibroker.PowerStopped):
				t.Errorf("%s/%s is %s, power %s right after Start, want Shutdown and Stopped (powered off for autoscale)", p.name, h.Name, h.Status, h.PowerState)
			case !off && !vdibroker.Placeable(h.Status):
				t.Errorf("%s/%s is %s right after Start, want Available", p.name, h.Name, h.Status)
			}
		}
		hosts += len(hs)
	}
	if hosts != f.Hosts() || hosts != 20 {
		t.Errorf("%d hosts registered, Hosts() = %d, want 20 (8+6+6)", hosts, f.Hosts())
	}
	drained, err := c.GetSessionHost(ctx, "office-breadth", "office-08")
	if err != nil {
		t.Fatal(err)
	}
	if drained.AllowNewSession {
		t.Error("office-08 is not drained after Start")
	}

	// The users act every 20ms: within a few heartbeats some sessions are
	// Active (the agents report their users), none on the drained host.
	deadline := time.Now().Add(30 * time.Second)
	for {
		active := 0
		for _, p := range demoPools {
			ss, err := c.ListUserSessions(ctx, p.name, vhttp.SessionQuery{State: vdibroker.StateActive})
			if err != nil {
				t.Fatal(err)
			}
			active += len(ss)
		}
		if active > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no session became Active: the simulated agents do not report their users")
		}
		time.Sleep(50 * time.Millisecond)
	}
	ss, err := c.ListUserSessions(ctx, "office-breadth", vhttp.SessionQuery{SessionHost: "office-08"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 0 {
		t.Errorf("drained office-08 has %d sessions, want none (R-C2)", len(ss))
	}

	// Close stops the agents: no heartbeat arrives afterwards.
	if err := f.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	before, err := c.GetSessionHost(ctx, "dev-depth", "dev-01")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * f.Heartbeat)
	after, err := c.GetSessionHost(ctx, "dev-depth", "dev-01")
	if err != nil {
		t.Fatal(err)
	}
	if before.LastHeartBeat == nil || after.LastHeartBeat == nil || !after.LastHeartBeat.Equal(*before.LastHeartBeat) {
		t.Errorf("dev-01 heartbeat moved from %v to %v after Close", before.LastHeartBeat, after.LastHeartBeat)
	}
}

// TestFleetAutoscale: Start puts the office pool under a scaling plan in
// the machine's time zone whose ramp-up has begun; a host the broker
// starts through the fleet's power driver runs its agent again once the
// simulated boot is over (Available, Running), and one it stops sends its
// last heartbeat (Shutdown, Stopped) and keeps quiet.
func TestFleetAutoscale(t *testing.T) {
	f := &Fleet{Rand: rand.New(rand.NewPCG(5, 6)), Heartbeat: 100 * time.Millisecond, UserTick: time.Hour, PowerStartDelay: 200 * time.Millisecond}
	f.URL, f.AdminToken = startBroker(t, f.PowerDrivers())
	if err := f.Start(t.Context()); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	ctx := t.Context()
	c := vhttp.NewClient(f.URL, f.AdminToken)

	plan, err := c.GetScalingPlan(ctx, AutoscalePlan)
	if err != nil {
		t.Fatal(err)
	}
	if plan.TimeZone != localZone() || !slices.Equal(plan.HostPools, []string{autoscalePool}) {
		t.Errorf("plan: zone %q (want %q), pools %v", plan.TimeZone, localZone(), plan.HostPools)
	}
	where, ok, err := autoscale.PhaseAt(plan, time.Now())
	if err != nil || !ok || where.Phase != vdibroker.PhaseRampUp {
		t.Errorf("the plan's phase now: %+v %v %v, want RampUp (begun a minute ago)", where, ok, err)
	}
	if later, _, _ := autoscale.PhaseAt(plan, time.Now().Add(9*time.Minute)); later.Phase != vdibroker.PhaseRampDown {
		t.Errorf("in 9 minutes: %s, want RampDown", later.Phase)
	}

	host := func(name string) *vdibroker.SessionHost {
		t.Helper()
		h, err := c.GetSessionHost(ctx, autoscalePool, name)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	waitFor := func(name, status, power string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			h := host(name)
			if h.Status == status && h.PowerState == power {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s is %s, power %s; want %s, %s", name, h.Status, h.PowerState, status, power)
			}
		}
	}
	if _, err := c.StartSessionHost(ctx, autoscalePool, "office-04"); err != nil {
		t.Fatal(err)
	}
	waitFor("office-04", vdibroker.StatusAvailable, vdibroker.PowerRunning)

	if _, err := c.StopSessionHost(ctx, autoscalePool, "office-01", true); err != nil {
		t.Fatal(err)
	}
	waitFor("office-01", vdibroker.StatusShutdown, vdibroker.PowerStopped)
	// The driver's stop makes the host Shutdown at once; its agent's last
	// heartbeat (Shutdown) is sent after that, by the agent's run, and has
	// been answered once that run has ended.
	f.mu.Lock()
	stopped := f.byName[autoscalePool+"/office-01"].done
	f.mu.Unlock()
	select {
	case <-stopped:
	case <-time.After(time.Minute):
		t.Fatal("office-01's agent still runs a minute after its stop")
	}
	before := host("office-01").LastHeartBeat
	time.Sleep(5 * f.Heartbeat)
	if after := host("office-01").LastHeartBeat; before == nil || after == nil || !after.Equal(*before) {
		t.Errorf("office-01 heartbeats after its stop: %v, then %v", before, after)
	}
}

// TestFleetFullOfficeQuiet: a connect to the office pool whose running
// hosts are full starts a stopped one (start VM on connect, R-A4) and is
// answered HostStarting; like NoCapacity that is the demo at work, and
// its log (Warn and up by default, kept readable) says nothing of it.
func TestFleetFullOfficeQuiet(t *testing.T) {
	var logged bytes.Buffer
	var mu sync.Mutex
	f := &Fleet{Rand: rand.New(rand.NewPCG(7, 8)), Heartbeat: 100 * time.Millisecond, UserTick: time.Hour, PowerStartDelay: time.Hour,
		Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logged}, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	f.URL, f.AdminToken = startBroker(t, f.PowerDrivers())
	if err := f.Start(t.Context()); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	c := vhttp.NewClient(f.URL, f.AdminToken)
	for _, h := range []string{"office-01", "office-02"} { // office-08 is drained already
		if _, err := c.PatchSessionHost(t.Context(), autoscalePool, h, map[string]any{"allowNewSession": false}); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.connectAs(t.Context(), "probe", autoscalePool, true, 0); vdibroker.ErrorCode(err) != vdibroker.EHostStarting {
		t.Fatalf("a connect to the full office pool: %v, want HostStarting (a stopped host started for it)", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Contains(logged.String(), "demo: connect") {
		t.Errorf("the fleet logged the office pool's HostStarting:\n%s", logged.String())
	}
}

// lockedWriter is w under mu: the agents log from their goroutines.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestPickPoolLeavesRoom: the simulated users' connects go to pools in
// proportion to their places left below three quarters of capacity, so
// they never fill a pool and the portal's user finds a place in each
// (R-U1); with every pool at three quarters they connect nowhere.
func TestPickPoolLeavesRoom(t *testing.T) {
	f := &Fleet{Rand: rand.New(rand.NewPCG(1, 2)), users: map[string]*simUser{}}
	fill := func(pool string, n int) {
		for i := range n {
			f.users[fmt.Sprintf("%s-user%03d", pool, i)] = &simUser{pool: pool}
		}
	}
	picks := func() map[string]int {
		got := map[string]int{}
		for range 3000 {
			got[f.pickPool()]++
		}
		return got
	}
	if got := picks(); got["dev-depth"] == 0 || got["rds-loadindex"] == 0 || got[autoscalePool] == 0 || got[""] != 0 {
		t.Fatalf("picks of an empty fleet: %v; want every pool", got)
	}
	fill("dev-depth", 6*6*3/4) // six hosts of six sessions, three quarters taken
	if got := picks(); got["dev-depth"] != 0 || got["rds-loadindex"] == 0 {
		t.Fatalf("picks with dev-depth at three quarters: %v; want none of it", got)
	}
	fill("rds-loadindex", 6*12*3/4)
	fill(autoscalePool, 8*10*3/4)
	if got := picks(); got[""] != 3000 {
		t.Fatalf("picks with every pool at three quarters: %v; want none", got)
	}
}
