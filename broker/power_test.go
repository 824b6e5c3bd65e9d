package broker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/power"
	"github.com/vdibroker/vdibroker/store"
)

// powerFixture is a service on a real SQLite store with a simulated power
// driver "sim", a pool of hosts h1..hn that have heartbeated once (so
// they are Available unless stopped), all recorded Stopped.
func powerFixture(t *testing.T, typ string, limit, n int) (*Service, *store.DB, *power.Simulated, *vdibroker.HostPool) {
	t.Helper()
	ctx := t.Context()
	st, err := store.OpenWith(ctx, "", t.TempDir(), nil, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	sim := &power.Simulated{}
	svc := New(Config{Store: st, PowerDrivers: power.Set{"sim": sim}, MaintenanceInterval: time.Hour, PowerPollInterval: time.Hour})
	t.Cleanup(func() { svc.Close() })
	p := vdibroker.NewHostPool("pwr")
	p.HostPoolType = typ
	if typ == vdibroker.Personal {
		p.LoadBalancerType = vdibroker.Persistent
	}
	p.MaxSessionLimit, p.PowerDriver, p.StartVMOnConnect = limit, "sim", true
	p, _, err = svc.StorePool(ctx, "pwr", nil, p, false)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		name := "h" + string(rune('0'+i))
		now := time.Now().UTC()
		if _, err := st.PutSessionHost(ctx, &vdibroker.SessionHost{HostPool: "pwr", Name: name, Address: name + ":3389",
			Protocols: []string{"RDP"}, StandardFeatures: true, AllowNewSession: true, CreateTime: now}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.SetPowerState(ctx, "pwr", name, vdibroker.PowerStopped, now); err != nil {
			t.Fatal(err)
		}
	}
	return svc, st, sim, p
}

func heartbeat(t *testing.T, svc *Service, pool, host string) {
	t.Helper()
	if _, err := svc.Heartbeat(t.Context(), &vdibroker.SessionHost{HostPool: pool, Name: host}, &vdibroker.HeartbeatRequest{}); err != nil {
		t.Fatal(err)
	}
}

func powerOf(t *testing.T, st *store.DB, pool, host string) string {
	t.Helper()
	h, err := st.GetSessionHost(t.Context(), pool, host)
	if err != nil {
		t.Fatal(err)
	}
	return h.PowerState
}

// TestStartVMOnConnect (R-A4): a connect that finds every host stopped
// starts the first by name and answers HostStarting with Retry-After;
// connects of other users meanwhile start no second host (one host can
// take them all) and are told h1 is starting; once the host heartbeats the next connect lands on it.
func TestStartVMOnConnect(t *testing.T) {
	svc, st, sim, _ := powerFixture(t, vdibroker.Pooled, 10, 3)
	ctx := t.Context()
	_, err := svc.Connect(ctx, "pwr", vdibroker.ConnectRequest{User: "alice"}, "")
	if vdibroker.ErrorCode(err) != vdibroker.EHostStarting || vdibroker.ErrorRetryAfter(err) != power.StartRetryAfter {
		t.Fatalf("first connect: %v (retry after %s), want HostStarting after %s", err, vdibroker.ErrorRetryAfter(err), power.StartRetryAfter)
	}
	if !strings.Contains(err.Error(), `"h1" is starting`) {
		t.Errorf("message %q does not name h1", err)
	}
	svc.Power().Wait() // the driver is asked in the background
	if got := sim.Calls("start", "pwr", "h1"); got != 1 {
		t.Fatalf("h1 started %d times", got)
	}
	if got := powerOf(t, st, "pwr", "h1"); got != vdibroker.PowerStarting {
		t.Fatalf("h1 is %s", got)
	}
	for _, u := range []string{"alice", "bob", "carol"} {
		_, err := svc.Connect(ctx, "pwr", vdibroker.ConnectRequest{User: u}, "")
		if vdibroker.ErrorCode(err) != vdibroker.EHostStarting {
			t.Fatalf("%s while h1 starts: %v", u, err)
		}
		// The host they wait for is named to them too (the portal shows it).
		if power.StartingHost(err) != "h1" || !strings.Contains(err.Error(), `"h1" is starting`) {
			t.Errorf("%s while h1 starts: %q names %q, want h1", u, err, power.StartingHost(err))
		}
	}
	svc.Power().Wait()
	if sim.Calls("start", "pwr", "h2")+sim.Calls("start", "pwr", "h3") != 0 || sim.Calls("start", "pwr", "h1") != 1 {
		t.Fatalf("a second start for the same demand: h1 %d, h2 %d, h3 %d", sim.Calls("start", "pwr", "h1"), sim.Calls("start", "pwr", "h2"), sim.Calls("start", "pwr", "h3"))
	}
	heartbeat(t, svc, "pwr", "h1")
	if got := powerOf(t, st, "pwr", "h1"); got != vdibroker.PowerRunning {
		t.Fatalf("after its heartbeat h1 is %s", got)
	}
	a, err := svc.Connect(ctx, "pwr", vdibroker.ConnectRequest{User: "alice"}, "")
	if err != nil || !a.Created || a.SessionHost != "h1" {
		t.Fatalf("connect after the start: %+v, %v", a, err)
	}
	// A dry run never starts a host (R-C8 stores nothing).
	svc2, _, sim2, _ := powerFixture(t, vdibroker.Pooled, 10, 1)
	if _, err := svc2.Connect(ctx, "pwr", vdibroker.ConnectRequest{User: "x", DryRun: true}, ""); vdibroker.ErrorCode(err) != vdibroker.ENoCapacity {
		t.Fatalf("dry run: %v, want NoCapacity", err)
	}
	svc2.Power().Wait()
	if sim2.Calls("start", "pwr", "h1") != 0 {
		t.Fatal("a dry run started a host")
	}
}

// TestStartVMOnConnectDemand: with maxSessionLimit 2, three waiting users
// need ceil(3/2) = 2 hosts: the third user's connect starts h2, a fourth
// waits for the two.
func TestStartVMOnConnectDemand(t *testing.T) {
	svc, _, sim, _ := powerFixture(t, vdibroker.Pooled, 2, 3)
	ctx := t.Context()
	for _, u := range []string{"u1", "u2", "u3", "u4"} {
		if _, err := svc.Connect(ctx, "pwr", vdibroker.ConnectRequest{User: u}, ""); vdibroker.ErrorCode(err) != vdibroker.EHostStarting {
			t.Fatalf("%s: %v", u, err)
		}
	}
	svc.Power().Wait()
	if got := []int{sim.Calls("start", "pwr", "h1"), sim.Calls("start", "pwr", "h2"), sim.Calls("start", "pwr", "h3")}; got[0] != 1 || got[1] != 1 || got[2] != 0 {
		t.Fatalf("starts of h1, h2, h3: %v, want [1 1 0]", got)
	}
}

// TestStartVMOnConnectSkipsDrainedAndOff: an admin-drained stopped host is
// not started (R-C2 holds over R-A4), nor is any host of a pool without
// startVMOnConnect: the NoCapacity stands.
func TestStartVMOnConnectSkipsDrainedAndOff(t *testing.T) {
	svc, st, sim, p := powerFixture(t, vdibroker.Pooled, 10, 1)
	ctx := t.Context()
	if _, err := st.UpdateSessionHost(ctx, "pwr", "h1", func(h *vdibroker.SessionHost) error { h.AllowNewSession = false; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Connect(ctx, "pwr", vdibroker.ConnectRequest{User: "u"}, ""); vdibroker.ErrorCode(err) != vdibroker.ENoCapacity {
		t.Fatalf("only a drained stopped host: %v, want NoCapacity", err)
	}
	st.UpdateSessionHost(ctx, "pwr", "h1", func(h *vdibroker.SessionHost) error { h.AllowNewSession = true; return nil })
	p.StartVMOnConnect = false
	if _, _, err := svc.StorePool(ctx, "pwr", p, p, false); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Connect(ctx, "pwr", vdibroker.ConnectRequest{User: "u"}, ""); vdibroker.ErrorCode(err) != vdibroker.ENoCapacity {
		t.Fatalf("startVMOnConnect off: %v, want NoCapacity", err)
	}
	svc.Power().Wait()
	if sim.Calls("start", "pwr", "h1") != 0 {
		t.Fatal("started a host")
	}
}

// TestStartVMOnConnectPersonal: a Personal user's own stopped host is
// started for them, and not for anyone else.
func TestStartVMOnConnectPersonal(t *testing.T) {
	svc, st, sim, _ := powerFixture(t, vdibroker.Personal, 1, 2)
	ctx := t.Context()
	if _, err := st.UpdateSessionHost(ctx, "pwr", "h2", func(h *vdibroker.SessionHost) error { h.AssignedUsers = []string{"dana"}; return nil }); err != nil {
		t.Fatal(err)
	}
	_, err := svc.Connect(ctx, "pwr", vdibroker.ConnectRequest{User: "dana"}, "")
	if vdibroker.ErrorCode(err) != vdibroker.EHostStarting || !strings.Contains(err.Error(), `"h2"`) {
		t.Fatalf("dana: %v, want HostStarting of h2", err)
	}
	svc.Power().Wait()
	if sim.Calls("start", "pwr", "h2") != 1 || sim.Calls("start", "pwr", "h1") != 0 {
		t.Fatalf("starts: h1 %d, h2 %d", sim.Calls("start", "pwr", "h1"), sim.Calls("start", "pwr", "h2"))
	}
	heartbeat(t, svc, "pwr", "h2")
	a, err := svc.Connect(ctx, "pwr", vdibroker.ConnectRequest{User: "dana"}, "")
	if err != nil || a.SessionHost != "h2" {
		t.Fatalf("dana after the start: %+v, %v", a, err)
	}
}

// TestStartStopHost: the admin actions, their refusals and audit entries.
func TestStartStopHost(t *testing.T) {
	svc, st, sim, _ := powerFixture(t, vdibroker.Pooled, 10, 1)
	ctx := t.Context()
	if err := svc.Power().StartHost(ctx, "pwr", "h1", "admin-1"); err != nil {
		t.Fatal(err)
	}
	if err := svc.Power().StartHost(ctx, "pwr", "h1", "admin-1"); vdibroker.ErrorCode(err) != vdibroker.EConflict {
		t.Fatalf("start of a Starting host: %v, want Conflict", err)
	}
	heartbeat(t, svc, "pwr", "h1")
	if _, err := svc.Connect(ctx, "pwr", vdibroker.ConnectRequest{User: "u"}, ""); err != nil {
		t.Fatal(err)
	}
	if err := svc.Power().StopHost(ctx, "pwr", "h1", false, "admin-1"); vdibroker.ErrorCode(err) != vdibroker.EConflict {
		t.Fatalf("stop with a session: %v, want Conflict", err)
	}
	if got := powerOf(t, st, "pwr", "h1"); got != vdibroker.PowerRunning {
		t.Fatalf("a refused stop changed the state to %s", got)
	}
	if err := svc.Power().StopHost(ctx, "pwr", "h1", true, "autoscale"); err != nil {
		t.Fatal(err)
	}
	// The simulated driver answers status: Stopped is confirmed at once.
	if got := powerOf(t, st, "pwr", "h1"); got != vdibroker.PowerStopped || sim.Calls("stop", "pwr", "h1") != 1 {
		t.Fatalf("after a forced stop: %s, %d stops", got, sim.Calls("stop", "pwr", "h1"))
	}
	h, err := svc.SessionHost(ctx, "pwr", "h1")
	if err != nil || h.Status != vdibroker.StatusShutdown {
		t.Fatalf("a stopped host's status: %+v, %v; want Shutdown (R-H1)", h, err)
	}
	entries, err := st.ListAudit(ctx, vdibroker.AuditFilter{Target: "hostpools/pwr/sessionhosts/h1/"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Action+" by "+e.Principal.ID)
	}
	if want := "sessionhost.start by admin-1,sessionhost.stop by autoscale"; strings.Join(got, ",") != want {
		t.Fatalf("audit %q, want %q", strings.Join(got, ","), want)
	}
	// SetAutoscaleDrain never touches the admin's drain (R-A3).
	// A host whose agent heartbeats runs, recorded or not: no start.
	if _, err := st.PutSessionHost(ctx, &vdibroker.SessionHost{HostPool: "pwr", Name: "h9", Address: "h9:3389",
		Protocols: []string{"RDP"}, StandardFeatures: true, AllowNewSession: true, CreateTime: time.Now()}); err != nil {
		t.Fatal(err)
	}
	heartbeat(t, svc, "pwr", "h9")
	if err := svc.Power().StartHost(ctx, "pwr", "h9", "admin-1"); vdibroker.ErrorCode(err) != vdibroker.EConflict || !strings.Contains(err.Error(), "Running") {
		t.Fatalf("start of a heartbeating host: %v, want Conflict", err)
	}
	if err := svc.Power().SetAutoscaleDrain(ctx, "pwr", "h1", true); err != nil {
		t.Fatal(err)
	}
	if h, _ := st.GetSessionHost(ctx, "pwr", "h1"); !h.AutoscaleDrain || !h.AllowNewSession {
		t.Fatalf("%+v", h)
	}
}

// TestPoolPowerValidation: powerDriver must name a loaded driver and
// startVMOnConnect needs one; each refusal names its field (R-P4).
func TestPoolPowerValidation(t *testing.T) {
	svc, _, _, p := powerFixture(t, vdibroker.Pooled, 10, 0)
	ctx := t.Context()
	bad := *p
	bad.PowerDriver = "ipmi"
	_, _, err := svc.StorePool(ctx, "pwr", p, &bad, false)
	if vdibroker.ErrorField(err) != "powerDriver" || !strings.Contains(err.Error(), "(sim)") {
		t.Fatalf("unknown driver: %v", err)
	}
	bad = *p
	bad.PowerDriver = ""
	_, _, err = svc.StorePool(ctx, "pwr", p, &bad, false)
	if vdibroker.ErrorField(err) != "startVMOnConnect" {
		t.Fatalf("start on connect without a driver: %v", err)
	}
	// Stopping a host of a pool without a driver is a Conflict.
	bad.StartVMOnConnect = false
	if _, _, err := svc.StorePool(ctx, "pwr", p, &bad, false); err != nil {
		t.Fatal(err)
	}
	if err := svc.Power().StartHost(ctx, "pwr", "h1", "x"); vdibroker.ErrorCode(err) != vdibroker.EConflict {
		t.Fatalf("start without a driver: %v", err)
	}
}

// TestStoppingHostTakesNoSession: a stop the driver accepted while the
// machine still shuts down (its status says Running, so the host stays
// Stopping until the poll sees it Stopped) must not be placed on: the
// connect would land on a host whose power is going (R-A4, R-H1). The
// autoscaler lifts its drain right after the stop, so its stopped hosts
// are in the same state.
func TestStoppingHostTakesNoSession(t *testing.T) {
	ctx := t.Context()
	st, err := store.OpenWith(ctx, "", t.TempDir(), nil, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	vm := filepath.Join(t.TempDir(), "vm")
	// stop is accepted; status exits 0 (Running): the VM is still going down.
	if err := os.WriteFile(vm, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	drv := &power.Exec{Name: "lab", StartArgv: []string{vm, "start"}, StopArgv: []string{vm, "stop"}, StatusArgv: []string{vm, "status"}, Timeout: 10 * time.Second}
	svc := New(Config{Store: st, PowerDrivers: power.Set{"lab": drv}, MaintenanceInterval: time.Hour, PowerPollInterval: time.Hour})
	t.Cleanup(func() { svc.Close() })
	p := vdibroker.NewHostPool("pwr")
	p.MaxSessionLimit, p.PowerDriver = 10, "lab"
	if _, _, err := svc.StorePool(ctx, "pwr", nil, p, false); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutSessionHost(ctx, &vdibroker.SessionHost{HostPool: "pwr", Name: "h1", Address: "h1:3389",
		Protocols: []string{"RDP"}, StandardFeatures: true, AllowNewSession: true, CreateTime: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	heartbeat(t, svc, "pwr", "h1")
	if err := svc.Power().StopHost(ctx, "pwr", "h1", false, "admin-1"); err != nil {
		t.Fatal(err)
	}
	if got := powerOf(t, st, "pwr", "h1"); got != vdibroker.PowerStopping {
		t.Fatalf("h1 is %s, want Stopping (its status still says Running)", got)
	}
	a, err := svc.Connect(ctx, "pwr", vdibroker.ConnectRequest{User: "alice"}, "")
	if vdibroker.ErrorCode(err) != vdibroker.ENoCapacity {
		t.Fatalf("connect while h1 stops: %+v, %v; want NoCapacity", a, err)
	}
}
