package autoscale

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vdibroker/vdibroker"
)

// Monday 30 November 2026 in UTC; the plan's zone is UTC.
var monday = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

func testPool() *vdibroker.HostPool {
	p := vdibroker.NewHostPool("p")
	p.HostPoolType, p.LoadBalancerType, p.MaxSessionLimit, p.PowerDriver = vdibroker.Pooled, vdibroker.BreadthFirst, 10, "sim"
	return p
}

func running(name string, at time.Time) *vdibroker.SessionHost {
	return &vdibroker.SessionHost{Name: name, AllowNewSession: true, PowerState: vdibroker.PowerRunning, LastHeartBeat: &at}
}

func stoppedHost(name string) *vdibroker.SessionHost {
	return &vdibroker.SessionHost{Name: name, AllowNewSession: true, PowerState: vdibroker.PowerStopped}
}

func testPlan(f func(*vdibroker.ScalingSchedule)) *vdibroker.ScalingPlan {
	sc := weekdays()
	if f != nil {
		f(&sc)
	}
	return &vdibroker.ScalingPlan{Name: "plan", TimeZone: "UTC", HostPoolType: vdibroker.Pooled, HostPools: []string{"p"}, Schedules: []vdibroker.ScalingSchedule{sc}}
}

// at moves the world's clock and refreshes the heartbeats of its running
// hosts (their agents keep heartbeating).
func (w *world) at(t time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.now = t
	for _, hs := range w.hosts {
		for _, h := range hs {
			if h.PowerState == vdibroker.PowerRunning || h.PowerState == "" {
				hb := t
				h.LastHeartBeat = &hb
			}
		}
	}
}

func newAutoscaler(w *world, holder string) *Autoscaler {
	return New(Config{Store: w, Actions: w, Holder: holder, Interval: time.Minute, Now: func() time.Time {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.now
	}})
}

func evaluate(t *testing.T, a *Autoscaler) {
	t.Helper()
	held, err := a.Evaluate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !held {
		t.Fatal("the autoscaler does not hold the lease")
	}
}

func actions(e *vdibroker.AutoscaleEvaluation) []string {
	var out []string
	for _, a := range e.Actions {
		out = append(out, a.Action+" "+a.Host)
		if a.Error != "" {
			out = append(out, "error: "+a.Error)
		}
	}
	return out
}

func wantActions(t *testing.T, e *vdibroker.AutoscaleEvaluation, want ...string) {
	t.Helper()
	if d := cmp.Diff(want, actions(e)); d != "" {
		t.Errorf("actions (-want +got):\n%s\nnote: %s", d, e.Note)
	}
}

// TestRampDownDrainNotifyWaitLogoffStop: R-A3 across evaluations: drain the
// host with the fewest sessions, notify its users, wait
// rampDownWaitTimeMinutes from the drain (kept in the store, not slept),
// log them off, stop it once empty, then lift only the autoscale drain.
// The admin-drained host stays drained and untouched.
func TestRampDownDrainNotifyWaitLogoffStop(t *testing.T) {
	t0 := monday.Add(18*time.Hour + 30*time.Minute) // ramp-down
	w := newWorld(t0)
	admin := running("admin", t0)
	admin.AllowNewSession = false
	w.addPool(testPool(), running("h1", t0), running("h2", t0), running("h3", t0), admin)
	w.plans = []*vdibroker.ScalingPlan{testPlan(func(s *vdibroker.ScalingSchedule) {
		s.RampDownForceLogoffUsers, s.RampDownWaitTimeMinutes, s.RampDownNotificationMessage = true, 30, "bye"
	})}
	// 13 sessions on 3 hosts of 10 = 43.3%, threshold 90%: without h1 (2
	// sessions) 20 capacity, 65% ≤ 90%: drain it; without h2 too, 10
	// capacity, 130%: no more.
	for i, h := range []string{"h1", "h1", "h2", "h2", "h2", "h2", "h2", "h3", "h3", "h3", "h3", "h3", "h3"} {
		w.addSession("p", h, string(rune('a'+i)), vdibroker.StateActive, t0)
	}
	a := newAutoscaler(w, "a")

	evaluate(t, a)
	e := w.lastEval("p")
	wantActions(t, e, "Drain h1", "Notify h1")
	if e.Phase != vdibroker.PhaseRampDown || e.RunningHosts != 3 || e.AvailableCapacity != 30 || e.UsedCapacityPct != 43.3 || e.ThresholdPct != 90 || e.Hosts != 3 {
		t.Errorf("figures: %+v", e)
	}
	msgs := w.commandsOf(vdibroker.CommandSendMessage)
	if len(msgs) != 2 || msgs[0].Message != "bye" || msgs[0].SessionHost != "h1" {
		t.Fatalf("SendMessage commands: %+v", msgs)
	}
	if !w.host("p", "h1").AutoscaleDrain || !w.host("p", "h1").AllowNewSession {
		t.Fatal("h1: want the autoscale drain, not the admin's")
	}

	// 10 minutes on: still waiting; nothing new is queued.
	w.at(t0.Add(10 * time.Minute))
	evaluate(t, a)
	wantActions(t, w.lastEval("p"))
	if !strings.Contains(w.lastEval("p").Note, "h1 drained since") {
		t.Errorf("note = %q", w.lastEval("p").Note)
	}
	if n := len(w.commands); n != 2 {
		t.Fatalf("%d commands after the wait's first 10 minutes, want 2", n)
	}

	// 30 minutes after the drain: log off.
	w.at(t0.Add(30 * time.Minute))
	evaluate(t, a)
	wantActions(t, w.lastEval("p"), "Logoff h1")
	if n := len(w.commandsOf(vdibroker.CommandLogoff)); n != 2 {
		t.Fatalf("%d Logoff commands, want 2", n)
	}
	if len(w.stops) != 0 {
		t.Fatal("stopped while its sessions are still open")
	}

	// The agent logged them off; the next evaluation stops h1 and lifts
	// its autoscale drain.
	w.endSessions("h1")
	w.at(t0.Add(31 * time.Minute))
	evaluate(t, a)
	wantActions(t, w.lastEval("p"), "Stop h1", "Undrain h1")
	if d := cmp.Diff([]string{"h1"}, w.stops); d != "" {
		t.Errorf("stops (-want +got):\n%s", d)
	}
	if h := w.host("p", "h1"); h.AutoscaleDrain || h.PowerState != vdibroker.PowerStopped {
		t.Errorf("h1 after the stop: drain %v power %s", h.AutoscaleDrain, h.PowerState)
	}
	if h := w.host("p", "admin"); h.AllowNewSession || h.AutoscaleDrain || h.PowerState != vdibroker.PowerRunning {
		t.Errorf("the admin's host was touched: %+v", h)
	}
	if st := w.states["p"]; st != nil && len(st.Hosts) != 0 {
		t.Errorf("state still remembers %v", st.Hosts)
	}
}

// TestSessionDuringWaitKeepsHost: a host that gets a session while it is
// drained is not stopped, and its autoscale drain is lifted (R-A3).
func TestSessionDuringWaitKeepsHost(t *testing.T) {
	t0 := monday.Add(19 * time.Hour)
	w := newWorld(t0)
	w.addPool(testPool(), running("h1", t0), running("h2", t0))
	w.plans = []*vdibroker.ScalingPlan{testPlan(nil)} // no forced logoff
	w.addSession("p", "h1", "s1", vdibroker.StateDisconnected, t0)
	w.addSession("p", "h2", "s3", vdibroker.StateActive, t0)
	w.addSession("p", "h2", "s4", vdibroker.StateActive, t0)
	a := newAutoscaler(w, "a")
	evaluate(t, a)
	wantActions(t, w.lastEval("p"), "Drain h1")
	// A user logs on to h1 directly (the agent reports it).
	w.addSession("p", "h1", "s2", vdibroker.StateActive, t0)
	w.at(t0.Add(time.Minute))
	evaluate(t, a)
	e := w.lastEval("p")
	wantActions(t, e, "Undrain h1")
	if len(e.Actions) == 1 && !strings.Contains(e.Actions[0].Reason, "got a session") {
		t.Errorf("reason = %q", e.Actions[0].Reason)
	}
	if len(w.stops) != 0 || w.host("p", "h1").AutoscaleDrain {
		t.Errorf("stops %v, drain %v", w.stops, w.host("p", "h1").AutoscaleDrain)
	}
}

// TestSessionRightBeforeStop: the sessions are read again right before the
// stop; one that arrived after the decision keeps the host (R-A3).
func TestSessionRightBeforeStop(t *testing.T) {
	t0 := monday.Add(19 * time.Hour)
	w := newWorld(t0)
	w.addPool(testPool(), running("h1", t0), running("h2", t0))
	w.plans = []*vdibroker.ScalingPlan{testPlan(nil)}
	w.addSession("p", "h2", "s1", vdibroker.StateActive, t0)
	w.onList = func(host string, call int) {
		if host == "h1" && call == 2 { // the re-read of stop
			w.addSession("p", "h1", "late", vdibroker.StateActive, t0)
		}
	}
	a := newAutoscaler(w, "a")
	evaluate(t, a)
	e := w.lastEval("p")
	wantActions(t, e, "Drain h1", "Undrain h1")
	if len(w.stops) != 0 || len(e.Actions) != 2 {
		t.Fatalf("stopped %v", w.stops)
	}
	if !strings.Contains(e.Actions[1].Reason, "right before the stop") {
		t.Errorf("reason = %q", e.Actions[1].Reason)
	}
}

// TestZeroActiveSessions: with rampDownStopHostsWhen ZeroActiveSessions a
// host with only disconnected sessions is stopped (forced).
func TestZeroActiveSessions(t *testing.T) {
	t0 := monday.Add(19 * time.Hour)
	w := newWorld(t0)
	w.addPool(testPool(), running("h1", t0), running("h2", t0))
	w.plans = []*vdibroker.ScalingPlan{testPlan(func(s *vdibroker.ScalingSchedule) {
		s.RampDownStopHostsWhen = vdibroker.StopWhenZeroActiveSessions
	})}
	w.addSession("p", "h1", "s1", vdibroker.StateDisconnected, t0)
	w.addSession("p", "h2", "s2", vdibroker.StateActive, t0)
	w.addSession("p", "h2", "s3", vdibroker.StateActive, t0)
	evaluate(t, newAutoscaler(w, "a"))
	wantActions(t, w.lastEval("p"), "Drain h1", "Stop h1", "Undrain h1")
	if len(w.lastEval("p").Actions) == 3 && !strings.Contains(w.lastEval("p").Actions[1].Reason, "1 disconnected") {
		t.Errorf("reason = %q", w.lastEval("p").Actions[1].Reason)
	}
}

// TestRampUpStartsOnceAndLoadBalancer: R-A2: ramp-up starts for the
// demand, a starting host counts so the next evaluation starts no second
// one; leftover autoscale drains are lifted; the phase's load balancer is
// applied, and the admin's restored when the plan no longer covers the
// pool.
func TestRampUpStartsOnceAndLoadBalancer(t *testing.T) {
	t0 := monday.Add(7*time.Hour + 30*time.Minute)
	w := newWorld(t0)
	left := running("left", t0)
	left.AutoscaleDrain = true
	w.addPool(testPool(), running("h1", t0), left, stoppedHost("h3"), stoppedHost("h4"))
	w.plans = []*vdibroker.ScalingPlan{testPlan(func(s *vdibroker.ScalingSchedule) {
		s.RampUpLoadBalancingAlgorithm = vdibroker.DepthFirst
	})}
	// 13 sessions (7 on h1, 6 on left): need ceil(1300/600) = 3 hosts; h1
	// and left (undrained) make 2: start h3.
	for i := range 13 {
		host := "h1"
		if i >= 7 {
			host = "left"
		}
		w.addSession("p", host, string(rune('a'+i)), vdibroker.StateActive, t0)
	}
	a := newAutoscaler(w, "a")
	evaluate(t, a)
	wantActions(t, w.lastEval("p"), "SetLoadBalancer ", "Undrain left", "Start h3")
	if w.pools["p"].LoadBalancerType != vdibroker.DepthFirst {
		t.Errorf("load balancer %s", w.pools["p"].LoadBalancerType)
	}
	w.at(t0.Add(time.Minute))
	evaluate(t, a)
	wantActions(t, w.lastEval("p"))
	if e := w.lastEval("p"); e.StartingHosts != 1 {
		t.Errorf("starting hosts %d", e.StartingHosts)
	}
	if d := cmp.Diff([]string{"h3"}, w.starts); d != "" {
		t.Errorf("starts (-want +got):\n%s", d)
	}

	// The plan is deleted: the admin's BreadthFirst comes back.
	w.plans = nil
	evaluate(t, a)
	wantActions(t, w.lastEval("p"), "SetLoadBalancer ")
	if w.pools["p"].LoadBalancerType != vdibroker.BreadthFirst {
		t.Errorf("load balancer %s after the plan went", w.pools["p"].LoadBalancerType)
	}
	if _, ok := w.states["p"]; ok {
		t.Error("state kept after the restore")
	}
}

// TestAdminChangeOfLoadBalancerIsKept: an admin who changes the load
// balancer while the plan applies its own is not overwritten on release.
func TestAdminChangeOfLoadBalancerIsKept(t *testing.T) {
	t0 := monday.Add(12 * time.Hour)
	w := newWorld(t0)
	w.addPool(testPool(), running("h1", t0))
	w.plans = []*vdibroker.ScalingPlan{testPlan(func(s *vdibroker.ScalingSchedule) { s.PeakLoadBalancingAlgorithm = vdibroker.DepthFirst })}
	a := newAutoscaler(w, "a")
	evaluate(t, a)
	w.plans = nil
	w.pools["p"].LoadBalancerType = vdibroker.BreadthFirst + "x"
	evaluate(t, a)
	if w.pools["p"].LoadBalancerType != vdibroker.BreadthFirst+"x" {
		t.Errorf("load balancer %s, want the admin's RoundRobin", w.pools["p"].LoadBalancerType)
	}
}

// TestLeaseOneActs: of two autoscalers on one store only the lease holder
// evaluates; the other takes over once the holder stops renewing and the
// lease (two intervals) expired.
func TestLeaseOneActs(t *testing.T) {
	t0 := monday.Add(12 * time.Hour)
	w := newWorld(t0)
	w.addPool(testPool(), running("h1", t0))
	w.plans = []*vdibroker.ScalingPlan{testPlan(nil)}
	a, b := newAutoscaler(w, "a"), newAutoscaler(w, "b")
	evaluate(t, a)
	if held, err := b.Evaluate(t.Context()); held || err != nil {
		t.Fatalf("b evaluated while a holds the lease: %v %v", held, err)
	}
	if n := len(w.evals); n != 1 {
		t.Fatalf("%d evaluations, want a's one", n)
	}
	// a dies (stops renewing). After one interval the lease still holds.
	w.at(t0.Add(time.Minute))
	if held, _ := b.Evaluate(t.Context()); held {
		t.Fatal("b took the lease one interval after a's last renewal")
	}
	w.at(t0.Add(2 * time.Minute))
	evaluate(t, b)
	if e := w.lastEval("p"); e.Holder != "b" {
		t.Errorf("holder %s", e.Holder)
	}
}

// TestPersonalStopsAfterLogoff: a personal host without sessions is
// stopped stopHostAfterLogoffMinutes after it was first seen empty.
func TestPersonalStopsAfterLogoff(t *testing.T) {
	t0 := monday.Add(12 * time.Hour)
	w := newWorld(t0)
	p := testPool()
	p.HostPoolType, p.LoadBalancerType = vdibroker.Personal, vdibroker.Persistent
	w.addPool(p, running("d1", t0), running("d2", t0), running("d3", t0))
	w.plans = []*vdibroker.ScalingPlan{testPlan(func(s *vdibroker.ScalingSchedule) {
		s.StopHostAfterLogoffMinutes, s.StopHostAfterDisconnectMinutes = 30, 60
	})}
	w.addSession("p", "d2", "s1", vdibroker.StateActive, t0)
	w.addSession("p", "d3", "s2", vdibroker.StateDisconnected, t0)
	a := newAutoscaler(w, "a")
	evaluate(t, a)
	wantActions(t, w.lastEval("p"))
	w.at(t0.Add(30 * time.Minute))
	evaluate(t, a)
	wantActions(t, w.lastEval("p"), "Stop d1")
	w.at(t0.Add(60 * time.Minute))
	evaluate(t, a)
	wantActions(t, w.lastEval("p"), "Stop d3")
	if d := cmp.Diff([]string{"d1", "d3"}, w.stops); d != "" {
		t.Errorf("stops (-want +got):\n%s", d)
	}
}

// TestNoPowerDriver: figures are recorded, nothing is started or stopped,
// and the note says why.
func TestNoPowerDriver(t *testing.T) {
	t0 := monday.Add(8 * time.Hour)
	w := newWorld(t0)
	p := testPool()
	p.PowerDriver = ""
	w.addPool(p, running("h1", t0), stoppedHost("h2"))
	w.plans = []*vdibroker.ScalingPlan{testPlan(nil)}
	for i := range 9 {
		w.addSession("p", "h1", string(rune('a'+i)), vdibroker.StateActive, t0)
	}
	evaluate(t, newAutoscaler(w, "a"))
	e := w.lastEval("p")
	wantActions(t, e)
	if !strings.Contains(e.Note, "no powerDriver") || e.UsedCapacityPct != 90 {
		t.Errorf("evaluation %+v", e)
	}
}

// TestRunReleasesTheLease: Run evaluates at once, and when its context ends
// it gives the lease up, so another replica acts at its next evaluation
// instead of two intervals later.
func TestRunReleasesTheLease(t *testing.T) {
	t0 := monday.Add(12 * time.Hour)
	w := newWorld(t0)
	w.addPool(testPool(), running("h1", t0))
	w.plans = []*vdibroker.ScalingPlan{testPlan(nil)}
	seen := make(chan *vdibroker.AutoscaleEvaluation, 1)
	a := New(Config{Store: w, Actions: w, Holder: "a", Interval: time.Hour, Now: func() time.Time { return t0 },
		Observe: func(e *vdibroker.AutoscaleEvaluation) {
			select {
			case seen <- e:
			default:
			}
		}})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	if e := <-seen; e.Holder != "a" || e.HostPool != "p" {
		t.Fatalf("first evaluation %+v", e)
	}
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("Run returned %v", err)
	}
	b := newAutoscaler(w, "b")
	evaluate(t, b) // at t0: a's lease would still run for two hours
}

// TestLeaseLostMidEvaluation: an evaluation that outlasts half an interval
// renews the lease before the next pool; when another replica has taken
// it meanwhile, it stops there and acts on no further pool.
func TestLeaseLostMidEvaluation(t *testing.T) {
	t0 := monday.Add(12 * time.Hour)
	w := newWorld(t0)
	w.addPool(testPool(), running("h1", t0))
	calls := 0
	a := New(Config{Store: w, Actions: w, Holder: "a", Interval: time.Minute, Now: func() time.Time {
		calls++
		if calls == 1 {
			return t0
		}
		// Later calls: the first acquire is long past, and "b" took the
		// lease (a stalled, say, longer than the lease).
		w.mu.Lock()
		w.lease.holder, w.lease.expire = "b", t0.Add(time.Hour)
		w.mu.Unlock()
		return t0.Add(3 * time.Minute)
	}})
	w.plans = []*vdibroker.ScalingPlan{testPlan(nil)}
	held, err := a.Evaluate(t.Context())
	if !held || err == nil || !strings.Contains(err.Error(), "lease lost") {
		t.Fatalf("held %v, err %v; want the lease lost", held, err)
	}
	if len(w.evals) != 0 {
		t.Errorf("%d evaluations recorded after the lease was lost", len(w.evals))
	}
}

// TestStartTimeout: a host the autoscaler started that has not come up
// within the start timeout no longer holds the demand: the next
// evaluation starts another. A host whose power state was never recorded
// and whose agent heartbeats is running capacity. An admin's start of a
// host whose start timed out makes it capacity to come again.
func TestStartTimeout(t *testing.T) {
	t0 := monday.Add(8 * time.Hour)
	w := newWorld(t0)
	never := running("h0", t0)
	never.PowerState = "" // no driver has told of it: its heartbeat says it runs
	w.addPool(testPool(), never, running("h1", t0), stoppedHost("h2"), stoppedHost("h3"), stoppedHost("h4"))
	w.plans = []*vdibroker.ScalingPlan{testPlan(nil)}
	// 13 sessions on 2 hosts of 10, ramp-up 60%: need 3.
	for i := range 13 {
		w.addSession("p", []string{"h0", "h1"}[i%2], string(rune('a'+i)), vdibroker.StateActive, t0)
	}
	a := New(Config{Store: w, Actions: w, Holder: "a", Interval: time.Minute, StartTimeout: 10 * time.Minute, Now: func() time.Time {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.now
	}})
	evaluate(t, a)
	wantActions(t, w.lastEval("p"), "Start h2")
	if e := w.lastEval("p"); e.RunningHosts != 2 {
		t.Errorf("running %d, want 2 (h0 heartbeats)", e.RunningHosts)
	}
	w.at(t0.Add(9 * time.Minute))
	evaluate(t, a)
	wantActions(t, w.lastEval("p"))
	w.at(t0.Add(10 * time.Minute))
	evaluate(t, a)
	wantActions(t, w.lastEval("p"), "Start h3")
	if d := cmp.Diff([]string{"h2", "h3"}, w.starts); d != "" {
		t.Errorf("starts (-want +got):\n%s", d)
	}

	// An admin starts h2 again (its start timed out, R-A4): Starting
	// since t0+12m. With 19 sessions (need 4: 1900 / (10 * 60) = 3.17)
	// h0, h1, h3 and h2 cover it: h2 is capacity to come again, though
	// the autoscaler's own start of it is 12 minutes old.
	restarted := t0.Add(12 * time.Minute)
	w.at(restarted)
	w.mu.Lock()
	w.host("p", "h2").PowerStateTime = &restarted
	w.mu.Unlock()
	for i := range 6 {
		w.addSession("p", []string{"h0", "h1"}[i%2], "late"+string(rune('a'+i)), vdibroker.StateActive, restarted)
	}
	evaluate(t, a)
	wantActions(t, w.lastEval("p"))
	// Ten minutes after the restart it counts as nothing again.
	w.at(restarted.Add(10 * time.Minute))
	evaluate(t, a)
	wantActions(t, w.lastEval("p"), "Start h4")
}
