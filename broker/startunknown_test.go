package broker

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/power"
	"github.com/vdibroker/vdibroker/store"
)

// Start VM on connect of hosts whose power state is Unknown (R-A4): a
// host the broker never saw running, turned off before its driver was
// asked, or whose driver failed, is started like a Stopped one, after the
// Stopped ones, unless its agent heartbeats or its driver failed within
// power.FailedStartBackoff.

// brokenDriver fails every start (the hypervisor is unreachable) and
// counts them; it has no status action.
type brokenDriver struct {
	mu     sync.Mutex
	starts map[string]int
}

func (b *brokenDriver) Start(_ context.Context, t power.Target) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.starts == nil {
		b.starts = map[string]int{}
	}
	b.starts[t.Host]++
	return errors.New("hypervisor unreachable")
}

func (b *brokenDriver) Stop(context.Context, power.Target) error { return nil }
func (b *brokenDriver) Status(context.Context, power.Target) (string, error) {
	return vdibroker.PowerUnknown, power.ErrNoStatus
}

func (b *brokenDriver) calls(host string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.starts[host]
}

// unknownFixture is a service on a real SQLite store and a fake clock,
// with the drivers "sim" (simulated) and "broken" (brokenDriver), and a
// pool "pwr" of type typ whose driver is drv, with start VM on connect
// and maxSessionLimit limit, holding hosts registered and never heard of:
// their power state is not recorded and no agent has heartbeated, so
// they read Unknown.
func unknownFixture(t *testing.T, typ, drv string, limit int, hosts ...string) (*Service, *store.DB, *clocktesting.FakeClock, *power.Simulated, *brokenDriver) {
	t.Helper()
	ctx := t.Context()
	st, err := store.OpenWith(ctx, "", t.TempDir(), nil, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	fc := clocktesting.NewFakeClock(time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC))
	sim, broken := &power.Simulated{Now: fc.Now}, &brokenDriver{}
	svc := New(Config{Store: st, Clock: fc, PowerDrivers: power.Set{"sim": sim, "broken": broken},
		MaintenanceInterval: 1000 * time.Hour, PowerPollInterval: 1000 * time.Hour})
	t.Cleanup(func() { svc.Close() })
	p := vdibroker.NewHostPool("pwr")
	p.HostPoolType = typ
	if typ == vdibroker.Personal {
		p.LoadBalancerType = vdibroker.Persistent
	}
	p.MaxSessionLimit, p.PowerDriver, p.StartVMOnConnect = limit, drv, true
	if _, _, err := svc.StorePool(ctx, "pwr", nil, p, false); err != nil {
		t.Fatal(err)
	}
	for _, name := range hosts {
		if _, err := st.PutSessionHost(ctx, &vdibroker.SessionHost{HostPool: "pwr", Name: name, Address: name + ":3389",
			Protocols: []string{"RDP"}, StandardFeatures: true, AllowNewSession: true, CreateTime: fc.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	// The broker has run past the pool's heartbeat timeout (90 s): an
	// agent that has not reported is silent (vdibroker.AgentSilent).
	fc.Step(2 * time.Minute)
	return svc, st, fc, sim, broken
}

// connectCode connects user to "pwr" and returns the error's code ("" on
// success) and the error.
func connectCode(t *testing.T, svc *Service, user string) (string, error) {
	t.Helper()
	_, err := svc.Connect(t.Context(), "pwr", vdibroker.ConnectRequest{User: user}, "")
	svc.Power().Wait() // the driver is asked in the background
	if err == nil {
		return "", nil
	}
	return vdibroker.ErrorCode(err), err
}

// TestStartVMOnConnectUnknownHost (R-A4): a host registered and turned off
// (no heartbeat ever) and one whose agent went silent (its last heartbeat
// older than heartbeatTimeoutSeconds) are Unknown; a connect that finds
// no capacity starts the first by name, audited as the broker's
// (principal broker, id connect). A host whose agent heartbeats is never
// started on connect, even while its power state reads Unknown (its agent
// says it shuts down).
func TestStartVMOnConnectUnknownHost(t *testing.T) {
	svc, st, fc, sim, _ := unknownFixture(t, vdibroker.Pooled, "sim", 10, "h1", "h2", "h3")
	ctx := t.Context()
	// h1's agent heartbeats, saying it shuts down: Shutdown, no capacity,
	// and not a host to start (it is up).
	heartbeat(t, svc, "pwr", "h2")
	fc.Step(2 * time.Minute) // past the pool's heartbeat timeout (90 s): h2 is silent
	if _, err := svc.Heartbeat(ctx, &vdibroker.SessionHost{HostPool: "pwr", Name: "h1"}, &vdibroker.HeartbeatRequest{ShuttingDown: true}); err != nil {
		t.Fatal(err)
	}
	h1, err := svc.SessionHost(ctx, "pwr", "h1")
	if err != nil || h1.PowerState != vdibroker.PowerUnknown || h1.Status != vdibroker.StatusShutdown {
		t.Fatalf("h1: %+v, %v; want Unknown and Shutdown", h1, err)
	}
	code, err := connectCode(t, svc, "alice")
	if code != vdibroker.EHostStarting || power.StartingHost(err) != "h2" {
		t.Fatalf("connect with h2 silent: %v (host %q), want HostStarting of h2", err, power.StartingHost(err))
	}
	if got := powerOf(t, st, "pwr", "h2"); got != vdibroker.PowerStarting || sim.Calls("start", "pwr", "h2") != 1 {
		t.Fatalf("h2 is %s after %d starts, want Starting after 1", got, sim.Calls("start", "pwr", "h2"))
	}
	if sim.Calls("start", "pwr", "h1") != 0 {
		t.Fatal("h1, whose agent heartbeats, was started")
	}
	entries, err := st.ListAudit(ctx, vdibroker.AuditFilter{Target: "hostpools/pwr/sessionhosts/h2/"})
	if err != nil || len(entries) != 1 {
		t.Fatalf("audit of h2: %+v, %v; want one entry", entries, err)
	}
	if e := entries[0]; e.Action != "sessionhost.start" || e.Principal.Kind != power.PrincipalBroker || e.Principal.ID != "connect" {
		t.Fatalf("audit of h2: %s by %s/%s, want sessionhost.start by broker/connect", e.Action, e.Principal.Kind, e.Principal.ID)
	}
	// More users than h2 takes (limit 10): h3, never heard of, is started
	// for the eleventh.
	for i := range 9 {
		if code, err := connectCode(t, svc, "u"+string(rune('a'+i))); code != vdibroker.EHostStarting || power.StartingHost(err) != "h2" {
			t.Fatalf("user %d while h2 starts: %v", i, err)
		}
	}
	if sim.Calls("start", "pwr", "h3") != 0 {
		t.Fatal("h3 started for 10 waiting users, whom h2 takes")
	}
	if code, err := connectCode(t, svc, "uz"); code != vdibroker.EHostStarting || power.StartingHost(err) != "h3" {
		t.Fatalf("the eleventh user: %v, want HostStarting of h3", err)
	}
	if sim.Calls("start", "pwr", "h3") != 1 || sim.Calls("start", "pwr", "h1") != 0 {
		t.Fatalf("starts: h1 %d, h3 %d; want 0 and 1", sim.Calls("start", "pwr", "h1"), sim.Calls("start", "pwr", "h3"))
	}
	heartbeat(t, svc, "pwr", "h2")
	a, err := svc.Connect(ctx, "pwr", vdibroker.ConnectRequest{User: "alice"}, "")
	if err != nil || a.SessionHost != "h2" {
		t.Fatalf("alice after h2's heartbeat: %+v, %v", a, err)
	}
}

// TestStartVMOnConnectStoppedBeforeUnknown (R-A4): a Stopped host is
// started before an Unknown one whatever their names; the bound of
// waiting users on starting hosts counts the Unknown host's start like a
// Stopped one's (2 waiting users, limit 2: one host; a third: a second).
func TestStartVMOnConnectStoppedBeforeUnknown(t *testing.T) {
	svc, st, fc, sim, _ := unknownFixture(t, vdibroker.Pooled, "sim", 2, "h1", "h2", "h3", "h4")
	if _, _, err := st.SetPowerState(t.Context(), "pwr", "h3", vdibroker.PowerStopped, fc.Now()); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct{ user, host string }{
		{"u1", "h3"}, // Stopped first, though h1 and h2 come before it by name
		{"u2", "h3"}, // room on h3: nothing more starts
		{"u3", "h1"}, // the first Unknown by name
		{"u4", "h1"}, // 4 users, 2 hosts of 2 starting: nothing more starts (the first by name is named)
	} {
		code, err := connectCode(t, svc, step.user)
		if code != vdibroker.EHostStarting || !strings.Contains(err.Error(), `"`+step.host+`"`) {
			t.Fatalf("%s: %v, want HostStarting naming %s", step.user, err, step.host)
		}
	}
	got := []int{sim.Calls("start", "pwr", "h1"), sim.Calls("start", "pwr", "h2"), sim.Calls("start", "pwr", "h3"), sim.Calls("start", "pwr", "h4")}
	if got[0] != 1 || got[1] != 0 || got[2] != 1 || got[3] != 0 {
		t.Fatalf("starts of h1..h4: %v, want [1 0 1 0]", got)
	}
	for _, h := range []string{"h1", "h3"} {
		if p := powerOf(t, st, "pwr", h); p != vdibroker.PowerStarting {
			t.Fatalf("%s is %s", h, p)
		}
	}
	// A fifth user: 5 waiting need 3 hosts, h2 is the next Unknown.
	if code, err := connectCode(t, svc, "u5"); code != vdibroker.EHostStarting || power.StartingHost(err) != "h2" {
		t.Fatalf("u5: %v, want HostStarting of h2", err)
	}
}

// TestStartVMOnConnectSkipsDrainedUnknown (R-A4 with R-C2, R-A3): an
// Unknown host drained by an admin or by the autoscaler is never started
// on connect; the next one is. In a Personal pool the user's own Unknown
// host is started for them, drained or not (R-PE4).
func TestStartVMOnConnectSkipsDrainedUnknown(t *testing.T) {
	svc, st, _, sim, _ := unknownFixture(t, vdibroker.Pooled, "sim", 10, "h1", "h2", "h3")
	ctx := t.Context()
	if _, err := st.UpdateSessionHost(ctx, "pwr", "h1", func(h *vdibroker.SessionHost) error { h.AllowNewSession = false; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetAutoscaleDrain(ctx, "pwr", "h2", true); err != nil {
		t.Fatal(err)
	}
	if code, err := connectCode(t, svc, "u"); code != vdibroker.EHostStarting || power.StartingHost(err) != "h3" {
		t.Fatalf("connect: %v, want HostStarting of h3", err)
	}
	if sim.Calls("start", "pwr", "h1")+sim.Calls("start", "pwr", "h2") != 0 {
		t.Fatalf("a drained host was started: h1 %d, h2 %d", sim.Calls("start", "pwr", "h1"), sim.Calls("start", "pwr", "h2"))
	}
	if got := []string{powerOf(t, st, "pwr", "h1"), powerOf(t, st, "pwr", "h2")}; got[0] != "" || got[1] != "" {
		t.Fatalf("drained hosts' power states: %q, want them unrecorded", got)
	}

	// Personal (Automatic): dana's own drained Unknown host is started
	// for her; erin, without a host, gets the unassigned one, and nobody
	// gets frank's.
	psvc, pst, _, psim, _ := unknownFixture(t, vdibroker.Personal, "sim", 1, "p1", "p2", "p3")
	if _, err := pst.UpdateSessionHost(ctx, "pwr", "p2", func(h *vdibroker.SessionHost) error {
		h.AssignedUsers, h.AllowNewSession = []string{"dana"}, false
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := pst.UpdateSessionHost(ctx, "pwr", "p1", func(h *vdibroker.SessionHost) error { h.AssignedUsers = []string{"frank"}; return nil }); err != nil {
		t.Fatal(err)
	}
	if code, err := connectCode(t, psvc, "dana"); code != vdibroker.EHostStarting || power.StartingHost(err) != "p2" {
		t.Fatalf("dana: %v, want HostStarting of p2", err)
	}
	if code, err := connectCode(t, psvc, "erin"); code != vdibroker.EHostStarting || power.StartingHost(err) != "p3" {
		t.Fatalf("erin: %v, want HostStarting of p3", err)
	}
	if got := []int{psim.Calls("start", "pwr", "p1"), psim.Calls("start", "pwr", "p2"), psim.Calls("start", "pwr", "p3")}; got[0] != 0 || got[1] != 1 || got[2] != 1 {
		t.Fatalf("starts of p1..p3: %v, want [0 1 1]", got)
	}
}

// TestStartVMOnConnectFailedStartBackoff (R-A4): a start the driver fails
// leaves the host Unknown, and connects do not ask the driver again for
// power.FailedStartBackoff (a broken hypervisor is not called on every
// connect): the next host is started, and once none is left the
// NoCapacity stands. After the backoff a connect tries again, Stopped
// hosts' failures and Unknown ones' alike. An admin's start is not held
// back.
func TestStartVMOnConnectFailedStartBackoff(t *testing.T) {
	svc, st, fc, _, broken := unknownFixture(t, vdibroker.Pooled, "broken", 1, "h1", "h2")
	ctx := t.Context()
	if _, _, err := st.SetPowerState(ctx, "pwr", "h1", vdibroker.PowerStopped, fc.Now()); err != nil {
		t.Fatal(err)
	}
	// h1 (Stopped) is started and fails, then h2 (Unknown) is.
	for _, want := range []string{"h1", "h2"} {
		if code, err := connectCode(t, svc, "alice"); code != vdibroker.EHostStarting || power.StartingHost(err) != want {
			t.Fatalf("alice: %v, want HostStarting of %s", err, want)
		}
		if got := powerOf(t, st, "pwr", want); got != vdibroker.PowerUnknown {
			t.Fatalf("after its failed start %s is %q, want Unknown", want, got)
		}
	}
	// Both failed a moment ago: no start, however many connects.
	fc.Step(power.FailedStartBackoff - time.Second)
	for _, u := range []string{"alice", "bob", "carol", "alice"} {
		if code, err := connectCode(t, svc, u); code != vdibroker.ENoCapacity {
			t.Fatalf("%s within the backoff: %v, want NoCapacity", u, err)
		}
	}
	if broken.calls("h1") != 1 || broken.calls("h2") != 1 {
		t.Fatalf("starts within the backoff: h1 %d, h2 %d; want 1 and 1", broken.calls("h1"), broken.calls("h2"))
	}
	// After it, a connect asks again, the first by name.
	fc.Step(time.Second)
	if code, err := connectCode(t, svc, "bob"); code != vdibroker.EHostStarting || power.StartingHost(err) != "h1" {
		t.Fatalf("bob after the backoff: %v, want HostStarting of h1", err)
	}
	if broken.calls("h1") != 2 {
		t.Fatalf("h1 started %d times, want 2", broken.calls("h1"))
	}
	// An admin may start h1 (failed a moment ago) at any time.
	if err := svc.Power().StartHost(ctx, "pwr", "h1", "admin-1"); vdibroker.ErrorCode(err) != vdibroker.EInternal || broken.calls("h1") != 3 {
		t.Fatalf("admin's start: %v after %d calls; want the driver's failure (Internal) after 3", err, broken.calls("h1"))
	}
}

// TestStartVMOnConnectPersonalStartTimedOut (R-A4, R-PE4): a Personal
// user whose own host was started on connect waits for it (HostStarting)
// until its start times out; then she is told NoCapacity naming the host
// and what an administrator can do, not to wait for ever, and the host is
// not started again by her connects.
func TestStartVMOnConnectPersonalStartTimedOut(t *testing.T) {
	svc, st, fc, sim, _ := unknownFixture(t, vdibroker.Personal, "sim", 1, "p1")
	if _, err := st.UpdateSessionHost(t.Context(), "pwr", "p1", func(h *vdibroker.SessionHost) error { h.AssignedUsers = []string{"dana"}; return nil }); err != nil {
		t.Fatal(err)
	}
	if code, err := connectCode(t, svc, "dana"); code != vdibroker.EHostStarting || power.StartingHost(err) != "p1" {
		t.Fatalf("dana: %v, want HostStarting of p1", err)
	}
	fc.Step(vdibroker.HostStartTimeout - time.Minute)
	if code, err := connectCode(t, svc, "dana"); code != vdibroker.EHostStarting {
		t.Fatalf("dana %s after the start: %v, want HostStarting", vdibroker.HostStartTimeout-time.Minute, err)
	}
	fc.Step(time.Minute)
	code, err := connectCode(t, svc, "dana")
	if code != vdibroker.ENoCapacity || !strings.Contains(err.Error(), `"p1"`) || !strings.Contains(err.Error(), "sessionhost start") {
		t.Fatalf("dana once the start timed out: %v, want NoCapacity naming p1 and what an administrator can do", err)
	}
	if n := sim.Calls("start", "pwr", "p1"); n != 1 {
		t.Fatalf("p1 started %d times, want 1", n)
	}
}
