package broker

import (
	"slices"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/power"
)

// TestAutoscalerStartsAnotherForHostShuttingDown (R-A2, R-A4): in
// ramp-up, alice's session fills h1 (limit 1, threshold 60%), so the
// demand needs a second host and the autoscaler starts h2, the first
// stopped one. h2's agent then says, after that start, that it shuts down
// (its machine was still going down): h2 stays Starting, but it is not
// capacity to come, so the next evaluation starts h3 for the same demand,
// records h2 neither running nor starting, and does not start h2 again.
func TestAutoscalerStartsAnotherForHostShuttingDown(t *testing.T) {
	svc, st, fc, sim, _ := unknownFixture(t, vdibroker.Pooled, "sim", 1, "h1", "h2", "h3")
	ctx := t.Context()
	recordRunning(t, svc, st, fc, "h1")
	for _, h := range []string{"h2", "h3"} {
		if _, _, err := st.SetPowerState(ctx, "pwr", h, vdibroker.PowerStopped, fc.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if code, err := connectCode(t, svc, "alice"); code != "" {
		t.Fatalf("alice: %v", err)
	}
	evaluate := rampUpPlan(t, svc, st, fc, 0)
	if got := evaluate(); !slices.Equal(got, []string{"h2"}) {
		t.Fatalf("starts %v for alice's session, want [h2]", got)
	}
	fc.Step(time.Second)
	if _, err := svc.Heartbeat(ctx, &vdibroker.SessionHost{HostPool: "pwr", Name: "h2"}, &vdibroker.HeartbeatRequest{ShuttingDown: true}); err != nil {
		t.Fatal(err)
	}
	if got := powerOf(t, st, "pwr", "h2"); got != vdibroker.PowerStarting {
		t.Fatalf("h2 recorded %s after its agent said it shuts down, want Starting", got)
	}
	if got := evaluate(); !slices.Equal(got, []string{"h3"}) {
		t.Fatalf("starts %v once h2's agent said it shuts down, want [h3]", got)
	}
	evals, err := st.ListAutoscaleEvaluations(ctx, "pwr", 0, 1)
	if err != nil || evals[0].RunningHosts != 1 || evals[0].StartingHosts != 0 {
		t.Fatalf("the evaluation that started h3: %+v, %v; want 1 running, 0 starting (h2 is going down)", evals, err)
	}
	if got := []int{sim.Calls("start", "pwr", "h2"), sim.Calls("start", "pwr", "h3")}; !slices.Equal(got, []int{1, 1}) {
		t.Fatalf("starts of h2, h3: %v, want [1 1]", got)
	}
}

// TestHeldConnectDecidedAgainWhenItsHostShutsDown (R-A4, R-U4): alice's
// connect with a wait starts h1 and is held for it. h1's agent then says,
// after the start, that it shuts down: h1 is no longer capacity to come,
// so the held connect is decided again at once (not left waiting for a
// machine going down until its wait is over): it starts h2 and waits for
// it, and h2's first heartbeat answers it with a session there. The
// clock moves only for the heartbeat's time.
func TestHeldConnectDecidedAgainWhenItsHostShutsDown(t *testing.T) {
	svc, st, fc, _ := waitFixture(t, 1, 2, time.Minute, 0, 10000*time.Hour)
	ctx := t.Context()
	r := heldConnect(t, ctx, svc, "alice", 90*time.Second, 1)
	if powerOf(t, st, "pwr", "h1") != vdibroker.PowerStarting {
		t.Fatal("the held connect started no host")
	}
	fc.Step(time.Second)
	if _, err := svc.Heartbeat(ctx, &vdibroker.SessionHost{HostPool: "pwr", Name: "h1"}, &vdibroker.HeartbeatRequest{ShuttingDown: true}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); powerOf(t, st, "pwr", "h2") != vdibroker.PowerStarting; {
		if time.Now().After(deadline) {
			t.Fatal("h1's agent said it shuts down, and the connect held for h1 did not start h2 within 10 s")
		}
		time.Sleep(time.Millisecond) // a goroutine to be scheduled, not a clock
	}
	notYet(t, r, "once h2 starts")
	// The driver's start of h2 called (its goroutine counted before the
	// host read Starting), then waited for: a Wait that only followed
	// the store's Starting would not be ordered after that count.
	sim, _ := fixtureSims.Load(svc)
	for deadline := time.Now().Add(10 * time.Second); sim.(*power.Simulated).Calls("start", "pwr", "h2") == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the driver was not asked to start h2 within 10 s")
		}
		time.Sleep(time.Millisecond) // a goroutine to be scheduled, not a clock
	}
	svc.Power().Wait()
	heartbeat(t, svc, "pwr", "h2")
	if got := answer(t, r); got.err != nil || got.a.SessionHost != "h2" {
		t.Fatalf("held connect after h2's heartbeat: %+v, %v; want a session on h2", got.a, got.err)
	}
}
