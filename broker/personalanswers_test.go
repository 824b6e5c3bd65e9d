package broker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/power"
)

// TestPersonalOwnHostAnswersHold_RA4: what alice's connect is answered
// about her own Personal host h1, which her first connect started at S
// (start VM on connect, the pool's heartbeat timeout 90 s), and that the
// answer holds when she follows it: a Retry-After sends her back when
// her desktop is up (she lands on it) or, if it is not, when its start
// has timed out (then, and only then, she is told it needs an
// administrator, ReasonStartByAdministrator). S is a whole second W plus
// 0.3 s, so the start times out at T = S + 600 s = W + 600.3; her retry
// comes at her connect plus the Retry-After in whole seconds (the
// header's). A Retry-After is never more than 30 s (power.StartRetryAfter),
// whatever the pool's heartbeat timeout (up to an hour): while her
// desktop goes down she follows each one and is told the same, with the
// wait as of then, until the retry that comes when it is down or back.
// All on the injected clock.
func TestPersonalOwnHostAnswersHold_RA4(t *testing.T) {
	const never = time.Duration(-1)
	for _, tc := range []struct {
		name string
		// hb: the pool's heartbeat timeout; 0 for the fixture's 90 s.
		hb time.Duration
		// said: after S, when her agent says its machine is going down
		// (a reboot or a shutdown look alike); never.
		said time.Duration
		// up: after S, when her agent heartbeats (its machine came
		// up, or back after a reboot); never.
		up time.Duration
		at time.Duration // after S, her connect
		// code, retry (whole seconds, 0 for none) and byAdmin (the
		// reason ReasonStartByAdministrator) of her connect's answer.
		code    string
		retry   int
		byAdmin bool
		// then: her retry after the Retry-After (after those that say
		// it goes down, until down) lands on h1 ("") or is answered
		// with this code, for an administrator (a retry of an answer
		// without Retry-After is not made).
		then string
		// last: after S, when that retry comes (0: not checked).
		last time.Duration
	}{
		// T - at = 30 s: the usual 30 s, her retry at T.
		{"starting, 30 s before its timeout", 0, never, never, 570 * time.Second, vdibroker.EHostStarting, 30, false, vdibroker.ENoCapacity, 0},
		// T - at = 20 s: 20, not 30, which sent her to W + 610.3,
		// 10 s past T, told to try again for a start timed out.
		{"starting, 20 s before its timeout", 0, never, never, 580 * time.Second, vdibroker.EHostStarting, 20, false, vdibroker.ENoCapacity, 0},
		// T - at = 19.5 s: 20 up, her retry at T + 0.5 s.
		{"starting, 19.5 s before its timeout", 0, never, never, 580*time.Second + 500*time.Millisecond, vdibroker.EHostStarting, 20, false, vdibroker.ENoCapacity, 0},
		// T - at = 0.4 s: 1 s at least, her retry at T + 0.6 s.
		{"starting, 0.4 s before its timeout", 0, never, never, 599*time.Second + 600*time.Millisecond, vdibroker.EHostStarting, 1, false, vdibroker.ENoCapacity, 0},
		// Its agent heartbeats at S + 590: her retry at T lands on it.
		{"starting, up before her retry", 0, never, 590 * time.Second, 580 * time.Second, vdibroker.EHostStarting, 20, false, "", 0},
		// Early in its start: the usual 30 s.
		{"starting, early", 0, never, never, time.Minute, vdibroker.EHostStarting, 30, false, vdibroker.EHostStarting, 0},
		{"starting, timed out", 0, never, never, 600 * time.Second, vdibroker.ENoCapacity, 0, true, "", 0},
		// Its agent says at S + 540 (W + 540.3) that it goes down: down
		// from W + 631 (W + 540.3 + 90, the next whole second), 90.7 s
		// away, past T: Retry-After 30 s, at S + 570 the same. The
		// machine reboots and heartbeats at S + 600, within the
		// heartbeat timeout: her retry then lands on it. (Before, she
		// was told at once to ask her helpdesk.)
		{"rebooting late in its start, back within the heartbeat timeout", 0, 540 * time.Second, 600 * time.Second, 540 * time.Second, vdibroker.ENoCapacity, 30, false, "", 600 * time.Second},
		// The same, but its machine stays down: her retries until it is
		// down: at S + 570, S + 600 (past T, still going down) the
		// same, then 30.7 s, 31 up, her retry at S + 631 (W + 631.3),
		// past the heartbeat timeout: for an administrator.
		{"shutting down late in its start, down", 0, 540 * time.Second, never, 540 * time.Second, vdibroker.ENoCapacity, 30, false, vdibroker.ENoCapacity, 631 * time.Second},
		// Said at S + 60: down from W + 151, 90.7 s, before T: her
		// retries at S + 90, S + 120 and S + 151 (30.7 s, 31 up), the
		// last finds it starting still (a wait that may end with her
		// desktop).
		{"shutting down early in its start", 0, time.Minute, never, time.Minute, vdibroker.ENoCapacity, 30, false, vdibroker.EHostStarting, 151 * time.Second},
		// A heartbeat timeout of an hour (the most a pool may have),
		// said at S + 60: down from W + 3661, an hour away, but she is
		// told 30 s, not 3600.7 s; her retries every 30 s are told the
		// same until the one at S + 3661, after T: for an administrator.
		{"shutting down, heartbeat timeout an hour", time.Hour, time.Minute, never, time.Minute, vdibroker.ENoCapacity, 30, false, vdibroker.ENoCapacity, 3661 * time.Second},
		// The same, 10 minutes (a minute past T, when she is told).
		{"shutting down, heartbeat timeout 10 minutes", 10 * time.Minute, 9 * time.Minute, never, 9 * time.Minute, vdibroker.ENoCapacity, 30, false, vdibroker.ENoCapacity, 1141 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc, st, fc, sim, _ := unknownFixture(t, vdibroker.Personal, "sim", 1, "h1")
			ctx := t.Context()
			if tc.hb > 0 {
				if _, err := svc.UpdatePool(ctx, "pwr", func(p *vdibroker.HostPool) error {
					p.HeartbeatTimeoutSeconds = int(tc.hb / time.Second)
					return nil
				}, vdibroker.Precondition{}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := st.UpdateSessionHost(ctx, "pwr", "h1", func(h *vdibroker.SessionHost) error { h.AssignedUsers = []string{"alice"}; return nil }); err != nil {
				t.Fatal(err)
			}
			if _, _, err := st.SetPowerState(ctx, "pwr", "h1", vdibroker.PowerStopped, fc.Now()); err != nil {
				t.Fatal(err)
			}
			s := fc.Now().Truncate(time.Second).Add(time.Second + 300*time.Millisecond)
			fc.SetTime(s)
			if code, err := connectCode(t, svc, "alice"); code != vdibroker.EHostStarting || vdibroker.ErrorRetryAfter(err) != power.StartRetryAfter {
				t.Fatalf("alice's first connect: %v (Retry-After %s), want HostStarting, 30 s", err, vdibroker.ErrorRetryAfter(err))
			}
			// The events at their times, in order, up to until.
			type event struct {
				at   time.Duration
				down bool
			}
			var events []event
			if tc.said >= 0 {
				events = append(events, event{tc.said, true})
			}
			if tc.up >= 0 {
				events = append(events, event{tc.up, false})
			}
			until := func(d time.Duration) {
				t.Helper()
				for len(events) > 0 && events[0].at <= d {
					fc.SetTime(s.Add(events[0].at))
					if _, err := svc.Heartbeat(ctx, &vdibroker.SessionHost{HostPool: "pwr", Name: "h1"}, &vdibroker.HeartbeatRequest{ShuttingDown: events[0].down}); err != nil {
						t.Fatal(err)
					}
					events = events[1:]
				}
				fc.SetTime(s.Add(d))
			}
			until(tc.at)
			code, err := connectCode(t, svc, "alice")
			// The Retry-After header's whole seconds, rounded up.
			retry := (vdibroker.ErrorRetryAfter(err) + time.Second - 1) / time.Second * time.Second
			if code != tc.code || retry != time.Duration(tc.retry)*time.Second || (vdibroker.ErrorReason(err) == vdibroker.ReasonStartByAdministrator) != tc.byAdmin {
				t.Fatalf("her connect at S + %s: %v (Retry-After %s, reason %q); want %s, Retry-After %d s, for an administrator %v",
					tc.at, err, retry, vdibroker.ErrorReason(err), tc.code, tc.retry, tc.byAdmin)
			}
			// Her desktop going down is told by its reason, which the
			// portal says in her words; a wait for a start is not.
			if goingDown := code == vdibroker.ENoCapacity && tc.retry > 0; goingDown != (vdibroker.ErrorReason(err) == vdibroker.ReasonDesktopGoingDown) {
				t.Errorf("her connect at S + %s: %v, reason %q; want %s: %v", tc.at, err, vdibroker.ErrorReason(err), vdibroker.ReasonDesktopGoingDown, goingDown)
			}
			if tc.retry == 0 {
				if !strings.Contains(err.Error(), "an administrator can start it again") {
					t.Errorf("her connect: %v, want it to say that an administrator can start it again", err)
				}
				return
			}
			// Her retry, when told; while it says her desktop goes down,
			// the next, each with at most 30 s, until it is down.
			at := tc.at + retry
			until(at)
			code, err = connectCode(t, svc, "alice")
			for tc.said >= 0 && code == vdibroker.ENoCapacity && vdibroker.ErrorReason(err) == vdibroker.ReasonDesktopGoingDown && strings.Contains(err.Error(), "is shutting down") {
				ra := vdibroker.ErrorRetryAfter(err)
				if ra <= 0 || ra > power.StartRetryAfter {
					t.Fatalf("her retry at S + %s: %v, Retry-After %s, want one of at most %s", at, err, ra, power.StartRetryAfter)
				}
				at += (ra + time.Second - 1) / time.Second * time.Second
				until(at)
				code, err = connectCode(t, svc, "alice")
			}
			if tc.last > 0 && at != tc.last {
				t.Errorf("her last retry at S + %s, want S + %s", at, tc.last)
			}
			if code != tc.then || (code == vdibroker.ENoCapacity) != (vdibroker.ErrorReason(err) == vdibroker.ReasonStartByAdministrator) {
				t.Fatalf("her retry at S + %s: %v (reason %q), want %q (lands on h1 if empty; NoCapacity for an administrator)", at, err, vdibroker.ErrorReason(err), tc.then)
			}
			if code == vdibroker.ENoCapacity && tc.said >= 0 && !strings.Contains(err.Error(), "only that its machine was going down") {
				t.Errorf("her retry: %v, want it to say that its agent said only that its machine was going down", err)
			}
			if n := sim.Calls("start", "pwr", "h1"); n != 1 {
				t.Errorf("h1 started %d times, want once (her first connect)", n)
			}
		})
	}
}

// TestPersonalOwnHostGoingDownAnswers_RA4: alice's own Personal host h1
// runs (recorded Running, its agent heartbeats) until its agent says at
// B = W + 0.3 s that its machine is going down: a restart or a shutdown
// from within the machine, not the broker's stop, which records
// Stopping. Her connect at B + 1 s is told that her desktop is shutting
// down or restarting, with a Retry-After until the first whole second
// after its agent has been silent for the heartbeat timeout (90 s): W +
// 91, 89.7 s from her connect, but at most 30 s: she is told the same
// at each retry until then. Not the placement's refusal, which
// had no Retry-After and told an administrator to start the shut-down
// host. Her retry then lands on h1 if it restarted (its agent heartbeats
// again, within the heartbeat timeout), else it starts h1 for her
// (HostStarting): her connect does, not an administrator.
func TestPersonalOwnHostGoingDownAnswers_RA4(t *testing.T) {
	for _, tc := range []struct {
		name string
		up   time.Duration // after B, when its agent heartbeats again; -1 never
		then string        // her retry's code ("" lands on h1)
	}{
		{"restarts within the heartbeat timeout", 45 * time.Second, ""},
		{"shuts down", -1, vdibroker.EHostStarting},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc, st, fc, sim, _ := unknownFixture(t, vdibroker.Personal, "sim", 1, "h1")
			ctx := t.Context()
			if _, err := st.UpdateSessionHost(ctx, "pwr", "h1", func(h *vdibroker.SessionHost) error { h.AssignedUsers = []string{"alice"}; return nil }); err != nil {
				t.Fatal(err)
			}
			recordRunning(t, svc, st, fc, "h1")
			b := fc.Now().Truncate(time.Second).Add(time.Second + 300*time.Millisecond)
			fc.SetTime(b)
			hb := func(down bool) {
				t.Helper()
				if _, err := svc.Heartbeat(ctx, &vdibroker.SessionHost{HostPool: "pwr", Name: "h1"}, &vdibroker.HeartbeatRequest{ShuttingDown: down}); err != nil {
					t.Fatal(err)
				}
			}
			hb(true)
			fc.SetTime(b.Add(time.Second))
			code, err := connectCode(t, svc, "alice")
			if code != vdibroker.ENoCapacity || vdibroker.ErrorReason(err) != vdibroker.ReasonDesktopGoingDown || !strings.Contains(err.Error(), "is shutting down or restarting") {
				t.Fatalf("her connect while it goes down: %v (reason %q), want NoCapacity saying it shuts down or restarts", err, vdibroker.ErrorReason(err))
			}
			// She follows each Retry-After, at most 30 s, and is told the
			// same until her retry at W + 91 (B + 1 s + 30 + 30 + 29.7
			// up to 30) or her desktop is back.
			at, up := time.Second, tc.up >= 0
			for code == vdibroker.ENoCapacity && vdibroker.ErrorReason(err) == vdibroker.ReasonDesktopGoingDown && strings.Contains(err.Error(), "is shutting down or restarting") {
				ra := vdibroker.ErrorRetryAfter(err)
				if ra <= 0 || ra > power.StartRetryAfter {
					t.Fatalf("her connect at B + %s while it goes down: Retry-After %s, want one of at most %s", at, ra, power.StartRetryAfter)
				}
				at += (ra + time.Second - 1) / time.Second * time.Second
				if up && at >= tc.up {
					fc.SetTime(b.Add(tc.up))
					hb(false)
					up = false
				}
				fc.SetTime(b.Add(at))
				code, err = connectCode(t, svc, "alice")
			}
			if code != tc.then || (tc.up < 0 && at != 91*time.Second) {
				t.Fatalf("her retry at B + %s: %v, want %q (lands on h1 if empty), at B + 91 s if it does not restart", at, err, tc.then)
			}
			want := 0
			if tc.then == vdibroker.EHostStarting {
				want = 1 // her retry started it
			}
			if n := sim.Calls("start", "pwr", "h1"); n != want {
				t.Errorf("h1 started %d times, want %d", n, want)
			}
		})
	}
}

// TestHeldConnectOfOwnHostStartTimingOut_RA4 (R-U4): alice's connect,
// with a wait of 90 s, is held for her own Personal host h1, whose start
// (at S) times out 20 s later. No event comes then, but from then her
// connect is answered for an administrator: it is decided again at the
// timeout, not held until its wait ends on a start that timed out. A
// wait that ends before the timeout is decided once more then: its
// Retry-After is what holds at its end (the 10 s left), not the 30 s of
// its first decision, which would reach past the timeout.
func TestHeldConnectOfOwnHostStartTimingOut_RA4(t *testing.T) {
	for _, tc := range []struct {
		name  string
		wait  time.Duration
		left  time.Duration // T - her connect
		step  time.Duration // the clock's step after she is held
		code  string
		retry time.Duration
	}{
		{"its start times out within her wait", 90 * time.Second, 20 * time.Second, 20 * time.Second, vdibroker.ENoCapacity, 0},
		{"her wait ends first", 60 * time.Second, 70 * time.Second, 60 * time.Second, vdibroker.EHostStarting, 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc, st, fc, _, _ := unknownFixture(t, vdibroker.Personal, "sim", 1, "h1")
			ctx := t.Context()
			if _, err := st.UpdateSessionHost(ctx, "pwr", "h1", func(h *vdibroker.SessionHost) error { h.AssignedUsers = []string{"alice"}; return nil }); err != nil {
				t.Fatal(err)
			}
			if _, _, err := st.SetPowerState(ctx, "pwr", "h1", vdibroker.PowerStarting, fc.Now().Add(tc.left-power.StartTimeout)); err != nil {
				t.Fatal(err)
			}
			base := fc.Waiters()
			r := heldConnect(t, ctx, svc, "alice", tc.wait, 1)
			// The wait's bound and, within it, the start's timeout.
			want := base + 2
			if tc.left > tc.wait {
				want = base + 1
			}
			for deadline := time.Now().Add(10 * time.Second); fc.Waiters() < want; {
				if time.Now().After(deadline) {
					t.Fatalf("her held connect has %d timers on the clock within 10 s, want %d", fc.Waiters()-base, want-base)
				}
				time.Sleep(time.Millisecond) // a goroutine to be scheduled, not a clock
			}
			fc.Step(tc.step - time.Second)
			notYet(t, r, "a second before")
			fc.Step(time.Second)
			got := answer(t, r)
			if vdibroker.ErrorCode(got.err) != tc.code || vdibroker.ErrorRetryAfter(got.err) != tc.retry ||
				(tc.code == vdibroker.ENoCapacity) != (vdibroker.ErrorReason(got.err) == vdibroker.ReasonStartByAdministrator) {
				t.Fatalf("her held connect: %+v, %v (Retry-After %s); want %s, Retry-After %s", got.a, got.err, vdibroker.ErrorRetryAfter(got.err), tc.code, tc.retry)
			}
		})
	}
}

// TestHeldConnectOfOwnHostLetsGoOfItsTimers_RA4 (R-U4): alice's connect
// held for her own Personal host h1, starting, whose start times out
// within her wait, has two timers on the clock (her wait's bound and the
// timeout); when her caller goes away, it is answered and both are gone
// from the clock, and her place is free.
func TestHeldConnectOfOwnHostLetsGoOfItsTimers_RA4(t *testing.T) {
	svc, st, fc, _, _ := unknownFixture(t, vdibroker.Personal, "sim", 1, "h1")
	ctx := t.Context()
	if _, err := st.UpdateSessionHost(ctx, "pwr", "h1", func(h *vdibroker.SessionHost) error { h.AssignedUsers = []string{"alice"}; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.SetPowerState(ctx, "pwr", "h1", vdibroker.PowerStarting, fc.Now().Add(20*time.Second-power.StartTimeout)); err != nil {
		t.Fatal(err)
	}
	base := fc.Waiters()
	cctx, cancel := context.WithCancel(ctx)
	r := heldConnect(t, cctx, svc, "alice", 90*time.Second, 1)
	for deadline := time.Now().Add(10 * time.Second); fc.Waiters() < base+2; {
		if time.Now().After(deadline) {
			t.Fatalf("her held connect has %d timers on the clock within 10 s, want 2", fc.Waiters()-base)
		}
		time.Sleep(time.Millisecond) // a goroutine to be scheduled, not a clock
	}
	cancel()
	if got := answer(t, r); got.err == nil {
		t.Fatalf("her connect after her caller left: %+v", got.a)
	}
	if n := fc.Waiters() - base; n != 0 {
		t.Errorf("%d timers left on the clock after her caller left, want none", n)
	}
	if n := svc.waits.held(); n != 0 {
		t.Errorf("%d connects held after her caller left, want none", n)
	}
}

// TestDesktopGoingDownReasonIsHersAlone_RA4: the reason DesktopGoingDown
// (the portal's "the computer of ... is restarting or shutting down", in
// place of "no session host can take it") is given only where it is
// true: to a Personal user whose own host, in a pool that starts hosts
// on connect, is recorded Running and whose agent said that its machine
// goes down. The same host going down answers the placement's plain
// NoCapacity, without the reason, in a pool that does not start hosts
// on connect (nothing brings it back but an administrator), in a pooled
// pool (another host may take her later), and to a Personal user of
// whom it is not (bob: no host of his is going down).
func TestDesktopGoingDownReasonIsHersAlone_RA4(t *testing.T) {
	for _, tc := range []struct {
		name      string
		typ       string
		onConnect bool
		user      string
		reason    string
	}{
		{"her own desktop, a pool that starts hosts on connect", vdibroker.Personal, true, "alice", vdibroker.ReasonDesktopGoingDown},
		{"her own desktop, a pool that does not start hosts on connect", vdibroker.Personal, false, "alice", ""},
		{"another's desktop", vdibroker.Personal, true, "bob", ""},
		{"a pooled pool", vdibroker.Pooled, true, "alice", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc, st, fc, sim, _ := unknownFixture(t, tc.typ, "sim", 1, "h1")
			ctx := t.Context()
			if tc.typ == vdibroker.Personal {
				if _, err := st.UpdateSessionHost(ctx, "pwr", "h1", func(h *vdibroker.SessionHost) error { h.AssignedUsers = []string{"alice"}; return nil }); err != nil {
					t.Fatal(err)
				}
			}
			if !tc.onConnect {
				p, err := svc.Pool(ctx, "pwr")
				if err != nil {
					t.Fatal(err)
				}
				q := *p
				q.StartVMOnConnect = false
				if _, _, err := svc.StorePool(ctx, "pwr", p, &q, false); err != nil {
					t.Fatal(err)
				}
			}
			recordRunning(t, svc, st, fc, "h1")
			if _, err := svc.Heartbeat(ctx, &vdibroker.SessionHost{HostPool: "pwr", Name: "h1"}, &vdibroker.HeartbeatRequest{ShuttingDown: true}); err != nil {
				t.Fatal(err)
			}
			fc.Step(time.Second)
			code, err := connectCode(t, svc, tc.user)
			if code != vdibroker.ENoCapacity || vdibroker.ErrorReason(err) != tc.reason {
				t.Fatalf("%s's connect while h1 goes down: %v (reason %q); want NoCapacity, reason %q", tc.user, err, vdibroker.ErrorReason(err), tc.reason)
			}
			if n := sim.Calls("start", "pwr", "h1"); n != 0 {
				t.Errorf("h1, up and going down, started %d times", n)
			}
		})
	}
}
