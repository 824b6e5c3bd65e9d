package broker

import (
	"slices"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/autoscale"
	"github.com/vdibroker/vdibroker/power"
	"github.com/vdibroker/vdibroker/store"
)

// Start VM on connect of hosts recorded Running whose agents went silent
// (R-A4): a machine turned off outside the broker (deallocated in the
// cloud portal, a power cut) after its agent heartbeated reads Unknown
// once its agent is silent for longer than heartbeatTimeoutSeconds, and
// is started like the other Unknown hosts, after them.

// recordRunning records hosts Running as the broker does: a start
// (Starting) followed by the agent's heartbeat (PowerAfterHeartbeat).
func recordRunning(t *testing.T, svc *Service, st *store.DB, fc *clocktesting.FakeClock, hosts ...string) {
	t.Helper()
	for _, h := range hosts {
		if _, _, err := st.SetPowerState(t.Context(), "pwr", h, vdibroker.PowerStarting, fc.Now()); err != nil {
			t.Fatal(err)
		}
		heartbeat(t, svc, "pwr", h)
		if got := powerOf(t, st, "pwr", h); got != vdibroker.PowerRunning {
			t.Fatalf("%s recorded %q after its heartbeat, want Running", h, got)
		}
	}
}

// readPower is host's power state as the API shows it.
func readPower(t *testing.T, svc *Service, host string) string {
	t.Helper()
	h, err := svc.SessionHost(t.Context(), "pwr", host)
	if err != nil {
		t.Fatal(err)
	}
	return h.PowerState
}

// TestStartVMOnConnectSilentRunningHost (R-A4): of two hosts recorded
// Running, the one whose agent went silent reads Unknown and is started
// by a connect that finds no capacity; the one whose agent heartbeats
// reads Running and is never started, by a connect or an admin, even
// while users wait for more capacity.
func TestStartVMOnConnectSilentRunningHost(t *testing.T) {
	svc, st, fc, sim, _ := unknownFixture(t, vdibroker.Pooled, "sim", 1, "h1", "h2")
	recordRunning(t, svc, st, fc, "h1", "h2")
	if code, err := connectCode(t, svc, "alice"); code != "" {
		t.Fatalf("alice: %v", err)
	}
	fc.Step(2 * time.Minute) // past heartbeatTimeoutSeconds (90)
	heartbeat(t, svc, "pwr", "h1")
	if got := []string{readPower(t, svc, "h1"), readPower(t, svc, "h2")}; got[0] != vdibroker.PowerRunning || got[1] != vdibroker.PowerUnknown {
		t.Fatalf("h1, h2 read %v, want [Running Unknown]", got)
	}
	if got := powerOf(t, st, "pwr", "h2"); got != vdibroker.PowerRunning {
		t.Fatalf("h2 recorded %q, want Running (the read changes, not the record)", got)
	}
	// h1 (alice's, limit 1) is full: bob's connect starts h2.
	if code, err := connectCode(t, svc, "bob"); code != vdibroker.EHostStarting || power.StartingHost(err) != "h2" {
		t.Fatalf("bob: %v, want HostStarting of h2", err)
	}
	// carol needs a second host; h1 runs and is not started.
	if code, err := connectCode(t, svc, "carol"); code != vdibroker.EHostStarting || power.StartingHost(err) != "h2" {
		t.Fatalf("carol: %v, want HostStarting of h2", err)
	}
	if code, err := svc.Power().StartHost(t.Context(), "pwr", "h1", "admin-1"), vdibroker.EConflict; vdibroker.ErrorCode(code) != err {
		t.Fatalf("admin's start of heartbeating h1: %v, want Conflict", code)
	}
	if got := []int{sim.Calls("start", "pwr", "h1"), sim.Calls("start", "pwr", "h2")}; got[0] != 0 || got[1] != 1 {
		t.Fatalf("starts of h1, h2: %v, want [0 1]", got)
	}
	if got := powerOf(t, st, "pwr", "h2"); got != vdibroker.PowerStarting {
		t.Fatalf("h2 is %s, want Starting", got)
	}
	heartbeat(t, svc, "pwr", "h2")
	if r, err := svc.Connect(t.Context(), "pwr", vdibroker.ConnectRequest{User: "bob"}, ""); err != nil || r.SessionHost != "h2" {
		t.Fatalf("bob after h2's heartbeat: %+v, %v; want h2", r, err)
	}
}

// TestStartVMOnConnectSilentRunningLast (R-A4): a Stopped host, then an
// Unknown one never heard of, then one recorded Running whose agent is
// silent, whatever their names.
func TestStartVMOnConnectSilentRunningLast(t *testing.T) {
	svc, st, fc, sim, _ := unknownFixture(t, vdibroker.Pooled, "sim", 1, "h1", "h2", "h3")
	recordRunning(t, svc, st, fc, "h1")
	if _, _, err := st.SetPowerState(t.Context(), "pwr", "h3", vdibroker.PowerStopped, fc.Now()); err != nil {
		t.Fatal(err)
	}
	fc.Step(2 * time.Minute)
	for _, step := range []struct{ user, host string }{{"u1", "h3"}, {"u2", "h2"}, {"u3", "h1"}} {
		if code, err := connectCode(t, svc, step.user); code != vdibroker.EHostStarting || power.StartingHost(err) != step.host {
			t.Fatalf("%s: %v, want HostStarting of %s", step.user, err, step.host)
		}
	}
	for _, h := range []string{"h1", "h2", "h3"} {
		if sim.Calls("start", "pwr", h) != 1 || powerOf(t, st, "pwr", h) != vdibroker.PowerStarting {
			t.Fatalf("%s: %d starts, %s; want 1, Starting", h, sim.Calls("start", "pwr", h), powerOf(t, st, "pwr", h))
		}
	}
}

// TestStartVMOnConnectSkipsDrainedSilentRunning (R-A4 with R-C2, R-A3,
// R-PE4): a silent Running host drained by an admin or by the autoscaler
// is not started (the NoCapacity stands); in a Personal pool the user's
// own is, drained or not.
func TestStartVMOnConnectSkipsDrainedSilentRunning(t *testing.T) {
	svc, st, fc, sim, _ := unknownFixture(t, vdibroker.Pooled, "sim", 1, "h1", "h2")
	ctx := t.Context()
	recordRunning(t, svc, st, fc, "h1", "h2")
	if _, err := st.UpdateSessionHost(ctx, "pwr", "h1", func(h *vdibroker.SessionHost) error { h.AllowNewSession = false; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetAutoscaleDrain(ctx, "pwr", "h2", true); err != nil {
		t.Fatal(err)
	}
	fc.Step(2 * time.Minute)
	if code, err := connectCode(t, svc, "alice"); code != vdibroker.ENoCapacity {
		t.Fatalf("alice: %v, want NoCapacity", err)
	}
	if sim.Calls("start", "pwr", "h1")+sim.Calls("start", "pwr", "h2") != 0 {
		t.Fatal("a drained host was started")
	}

	psvc, pst, pfc, psim, _ := unknownFixture(t, vdibroker.Personal, "sim", 1, "p1")
	if _, err := pst.UpdateSessionHost(ctx, "pwr", "p1", func(h *vdibroker.SessionHost) error {
		h.AssignedUsers, h.AllowNewSession = []string{"dana"}, false
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	recordRunning(t, psvc, pst, pfc, "p1")
	pfc.Step(2 * time.Minute)
	if code, err := connectCode(t, psvc, "dana"); code != vdibroker.EHostStarting || power.StartingHost(err) != "p1" || psim.Calls("start", "pwr", "p1") != 1 {
		t.Fatalf("dana: %v after %d starts, want HostStarting of p1 after 1", err, psim.Calls("start", "pwr", "p1"))
	}
}

// TestStartVMOnConnectSilentRunningFailedStart (R-A4): a silent Running
// host whose start the driver fails is Unknown, and connects leave it
// alone for power.FailedStartBackoff, as any failed host.
func TestStartVMOnConnectSilentRunningFailedStart(t *testing.T) {
	svc, st, fc, _, broken := unknownFixture(t, vdibroker.Pooled, "broken", 1, "h1")
	recordRunning(t, svc, st, fc, "h1")
	fc.Step(2 * time.Minute)
	if code, err := connectCode(t, svc, "alice"); code != vdibroker.EHostStarting || power.StartingHost(err) != "h1" {
		t.Fatalf("alice: %v, want HostStarting of h1", err)
	}
	if got := powerOf(t, st, "pwr", "h1"); got != vdibroker.PowerUnknown {
		t.Fatalf("h1 is %s after its failed start, want Unknown", got)
	}
	fc.Step(power.FailedStartBackoff - time.Second)
	for _, u := range []string{"alice", "bob", "carol"} {
		if code, err := connectCode(t, svc, u); code != vdibroker.ENoCapacity {
			t.Fatalf("%s within the backoff: %v, want NoCapacity", u, err)
		}
	}
	if broken.calls("h1") != 1 {
		t.Fatalf("h1 started %d times within the backoff, want 1", broken.calls("h1"))
	}
}

// TestStartVMOnConnectCrashedAgent (R-A4): a host whose agent crashed
// while its machine runs reads Unknown like one turned off; a connect
// starts it once (a no-op for a driver), and it stays Starting while its
// agent is silent. For 10 minutes (power.StartTimeout) connects are told
// it starts and the driver is not asked again; after that it counts as
// nothing, is not started again and the NoCapacity stands; once the
// agent is back it is Running and takes sessions.
func TestStartVMOnConnectCrashedAgent(t *testing.T) {
	svc, st, fc, sim, _ := unknownFixture(t, vdibroker.Pooled, "sim", 10, "h1")
	recordRunning(t, svc, st, fc, "h1")
	fc.Step(2 * time.Minute)
	for _, u := range []string{"alice", "bob", "carol", "alice"} {
		if code, err := connectCode(t, svc, u); code != vdibroker.EHostStarting || power.StartingHost(err) != "h1" {
			t.Fatalf("%s: %v, want HostStarting of h1", u, err)
		}
	}
	fc.Step(power.StartTimeout)
	if code, err := connectCode(t, svc, "dave"); code != vdibroker.ENoCapacity {
		t.Fatalf("dave after the start timeout: %v, want NoCapacity", err)
	}
	if n := sim.Calls("start", "pwr", "h1"); n != 1 || powerOf(t, st, "pwr", "h1") != vdibroker.PowerStarting {
		t.Fatalf("h1: %d starts, %s; want 1, Starting", n, powerOf(t, st, "pwr", "h1"))
	}
	heartbeat(t, svc, "pwr", "h1")
	if r, err := svc.Connect(t.Context(), "pwr", vdibroker.ConnectRequest{User: "dave"}, ""); err != nil || r.SessionHost != "h1" {
		t.Fatalf("dave after h1's agent is back: %+v, %v", r, err)
	}
}

// What serve gives the autoscaler.
var _ autoscale.Actions = AutoscaleActions{}

// TestAutoscalerStartsSilentRunningHosts (R-A2, R-A4): with a ramp-up
// floor of every host, the autoscaler starts the same hosts in the same
// order as start VM on connect: Stopped, Unknown, then recorded Running
// with a silent agent; not the one whose agent heartbeats (it is running
// capacity), nor a silent one an admin or the autoscaler drains. A host a
// connect started that is still Starting after the start timeout (a
// crashed agent on a running machine) no longer counts as capacity to
// come, and is not started again; nor is one the autoscaler started.
func TestAutoscalerStartsSilentRunningHosts(t *testing.T) {
	svc, st, fc, sim, _ := unknownFixture(t, vdibroker.Pooled, "sim", 10, "h1", "h2", "h3", "h4", "h5", "h6", "h7")
	ctx := t.Context()
	recordRunning(t, svc, st, fc, "h1", "h4", "h5", "h6", "h7")
	if _, _, err := st.SetPowerState(ctx, "pwr", "h3", vdibroker.PowerStopped, fc.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpdateSessionHost(ctx, "pwr", "h5", func(h *vdibroker.SessionHost) error { h.AllowNewSession = false; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetAutoscaleDrain(ctx, "pwr", "h6", true); err != nil {
		t.Fatal(err)
	}
	// h7's agent crashed and an admin started it (a no-op): it stays
	// Starting.
	fc.Step(2 * time.Minute)
	if err := svc.Power().StartHost(ctx, "pwr", "h7", "admin-1"); err != nil {
		t.Fatal(err)
	}
	heartbeat(t, svc, "pwr", "h4")

	evaluate := everyHostPlan(t, svc, st, fc)
	// 08:02, ramp-up. Managed: h1..h4, h6, h7 (h5 is an admin's); h4
	// runs and h7 starts: h3 (Stopped), h2 (Unknown), then h1 (silent
	// Running); h6 is the autoscaler's drain.
	if got := evaluate(); !slices.Equal(got, []string{"h3", "h2", "h1"}) {
		t.Fatalf("starts %v, want [h3 h2 h1]", got)
	}
	for _, h := range []string{"h4", "h5", "h6"} {
		if n := sim.Calls("start", "pwr", h); n != 0 {
			t.Fatalf("%s started %d times", h, n)
		}
	}
	// Ten minutes on, h2 and h1 came up, h3 and h7 did not: neither
	// counts as capacity to come, neither is started again, and the
	// floor finds nothing left to start.
	fc.Step(power.StartTimeout)
	for _, h := range []string{"h1", "h2", "h4"} {
		heartbeat(t, svc, "pwr", h)
	}
	if got := evaluate(); len(got) != 0 {
		t.Fatalf("starts %v after the start timeout, want none", got)
	}
	evals, err := st.ListAutoscaleEvaluations(ctx, "pwr", 0, 1)
	if err != nil || evals[0].RunningHosts != 3 || evals[0].StartingHosts != 0 {
		t.Fatalf("after the start timeout: %+v, %v; want 3 running, 0 starting", evals, err)
	}
	if got := []int{sim.Calls("start", "pwr", "h3"), sim.Calls("start", "pwr", "h7")}; got[0] != 1 || got[1] != 1 {
		t.Fatalf("starts of h3, h7: %v, want [1 1]", got)
	}
}

// everyHostPlan stores a scaling plan for "pwr" whose ramp-up (07:00 to
// 09:00) keeps every host running, and returns an evaluation by an
// autoscaler acting through svc, as serve wires it (HeardSince from svc's
// store health): the hosts it started.
func everyHostPlan(t *testing.T, svc *Service, st *store.DB, fc *clocktesting.FakeClock) func() []string {
	t.Helper()
	return rampUpPlan(t, svc, st, fc, 100)
}

// rampUpPlan is everyHostPlan with a ramp-up floor of minPct of the
// hosts (its capacity threshold 60%).
func rampUpPlan(t *testing.T, svc *Service, st *store.DB, fc *clocktesting.FakeClock, minPct int) func() []string {
	t.Helper()
	ctx := t.Context()
	plan := &vdibroker.ScalingPlan{Name: "plan", TimeZone: "UTC", HostPoolType: vdibroker.Pooled, HostPools: []string{"pwr"}, Schedules: []vdibroker.ScalingSchedule{{
		Name: "every day", DaysOfWeek: []string{"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"},
		RampUpStartTime: "07:00", PeakStartTime: "09:00", RampDownStartTime: "18:00", OffPeakStartTime: "22:00",
		RampUpCapacityThresholdPct: 60, RampUpMinimumHostsPct: minPct, RampDownCapacityThresholdPct: 90,
		RampDownStopHostsWhen: vdibroker.StopWhenZeroSessions,
	}}}
	plan.FillDefaults()
	if err := plan.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutScalingPlan(ctx, plan, vdibroker.Precondition{}); err != nil {
		t.Fatal(err)
	}
	a := autoscale.New(autoscale.Config{Store: st, Actions: AutoscaleActions{svc}, Holder: "a", Interval: time.Minute, Now: fc.Now,
		HeardSince: svc.StoreHealth().HeardSince})
	return func() []string {
		t.Helper()
		if held, err := a.Evaluate(ctx); err != nil || !held {
			t.Fatalf("evaluate: held %v, %v", held, err)
		}
		evals, err := st.ListAutoscaleEvaluations(ctx, "pwr", 0, 1)
		if err != nil || len(evals) == 0 {
			t.Fatalf("evaluations: %v, %v", evals, err)
		}
		var starts []string
		for _, x := range evals[0].Actions {
			if x.Action == vdibroker.ActionStart {
				if x.Error != "" {
					t.Fatalf("start of %s: %s", x.Host, x.Error)
				}
				starts = append(starts, x.Host)
			}
		}
		return starts
	}
}

// TestNoStartOfSilentHostsRightAfterARestart (R-A4, R-A2): the broker was
// down for 5 minutes (an upgrade, its machine's reboot); when it is back,
// every host's last heartbeat in the store is 5 minutes old and reads
// Unknown, though the machines run and their agents' next heartbeats are
// seconds away. Neither a connect nor the autoscaler starts any of them
// until the broker has run for the pool's heartbeat timeout (90 s); then
// the one whose agent is still silent is started, and not the one whose
// agent came back.
func TestNoStartOfSilentHostsRightAfterARestart(t *testing.T) {
	svc, st, fc, sim, _ := unknownFixture(t, vdibroker.Pooled, "sim", 1, "h1", "h2")
	recordRunning(t, svc, st, fc, "h1", "h2")
	svc.Close()
	fc.Step(5 * time.Minute)
	svc = New(Config{Store: st, Clock: fc, PowerDrivers: power.Set{"sim": sim},
		MaintenanceInterval: 1000 * time.Hour, PowerPollInterval: 1000 * time.Hour})
	t.Cleanup(func() { svc.Close() })
	evaluate := everyHostPlan(t, svc, st, fc)

	fc.Step(time.Second)
	if got := []string{readPower(t, svc, "h1"), readPower(t, svc, "h2")}; got[0] != vdibroker.PowerUnknown || got[1] != vdibroker.PowerUnknown {
		t.Fatalf("h1, h2 read %v right after the restart, want [Unknown Unknown]", got)
	}
	for _, u := range []string{"alice", "bob", "carol"} {
		if code, err := connectCode(t, svc, u); code != vdibroker.ENoCapacity {
			t.Fatalf("%s right after the restart: %v, want NoCapacity", u, err)
		}
	}
	if got := evaluate(); len(got) != 0 {
		t.Fatalf("the autoscaler right after the restart started %v, want none", got)
	}
	evals, err := st.ListAutoscaleEvaluations(t.Context(), "pwr", 0, 1)
	if err != nil || !strings.Contains(evals[0].Note, "have not reported since the broker started") {
		t.Fatalf("the evaluation's note: %+v, %v; want it to say why nothing starts", evals, err)
	}
	// h1's agent is back; h2's stays silent for the timeout.
	heartbeat(t, svc, "pwr", "h1")
	fc.Step(90 * time.Second)
	if got := evaluate(); !slices.Equal(got, []string{"h2"}) {
		t.Fatalf("the autoscaler once the broker heard its hosts for the timeout started %v, want [h2]", got)
	}
	if got := []int{sim.Calls("start", "pwr", "h1"), sim.Calls("start", "pwr", "h2")}; got[0] != 0 || got[1] != 1 {
		t.Fatalf("starts of h1, h2: %v, want [0 1]", got)
	}
}

// TestAutoscalerNeverRestartsATimedOutStart (R-A2, R-A4): the
// autoscaler's plan never picks a host Starting, and its start through
// AutoscaleActions, as serve wires it, refuses one too (defence in depth):
// within the start timeout, and after it, when an admin's start is
// accepted; the driver is not asked, and the refusal says only an admin
// starts it again. A Stopped host it starts.
func TestAutoscalerNeverRestartsATimedOutStart(t *testing.T) {
	svc, st, fc, sim, _ := unknownFixture(t, vdibroker.Pooled, "sim", 10, "h1", "h2")
	ctx := t.Context()
	act := AutoscaleActions{svc}
	if err := act.StartHost(ctx, "pwr", "h1", autoscale.By); err != nil || sim.Calls("start", "pwr", "h1") != 1 {
		t.Fatalf("the autoscaler's start of an Unknown host: %v, %d starts", err, sim.Calls("start", "pwr", "h1"))
	}
	fc.Step(power.StartTimeout - time.Minute)
	const why = "the autoscaler never starts a Starting host again: only an admin does, once its start timed out"
	err := act.StartHost(ctx, "pwr", "h1", autoscale.By)
	if vdibroker.ErrorCode(err) != vdibroker.EConflict || !strings.Contains(err.Error(), why) {
		t.Fatalf("the autoscaler's start of a host Starting for 9 minutes: %v, want Conflict saying %q", err, why)
	}
	fc.Step(time.Minute) // its start timed out
	err = act.StartHost(ctx, "pwr", "h1", autoscale.By)
	if vdibroker.ErrorCode(err) != vdibroker.EConflict || !strings.Contains(err.Error(), why) {
		t.Fatalf("the autoscaler's start of a host whose start timed out: %v, want Conflict saying %q", err, why)
	}
	if n := sim.Calls("start", "pwr", "h1"); n != 1 {
		t.Fatalf("the autoscaler's refused starts asked the driver: %d starts, want 1", n)
	}
	if h, err := st.GetSessionHost(ctx, "pwr", "h1"); err != nil || h.PowerState != vdibroker.PowerStarting || !h.PowerStateTime.Equal(fc.Now().Add(-power.StartTimeout)) {
		t.Fatalf("h1 after the refused starts: %+v, %v; want Starting since its first start", h, err)
	}
	if err := svc.Power().StartHost(ctx, "pwr", "h1", "admin-1"); err != nil || sim.Calls("start", "pwr", "h1") != 2 {
		t.Fatalf("an admin's start of the host whose start timed out: %v, %d starts, want accepted", err, sim.Calls("start", "pwr", "h1"))
	}
	if _, _, err := st.SetPowerState(ctx, "pwr", "h2", vdibroker.PowerStopped, fc.Now()); err != nil {
		t.Fatal(err)
	}
	if err := act.StartHost(ctx, "pwr", "h2", autoscale.By); err != nil || sim.Calls("start", "pwr", "h2") != 1 {
		t.Fatalf("the autoscaler's start of a Stopped host: %v, %d starts", err, sim.Calls("start", "pwr", "h2"))
	}
}
