package power

import (
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
)

// TestOwnStartRetryAfter_RA4: the Retry-After of a Personal user's
// HostStarting for her own host, started at S = 08:00:00.3, whose start
// times out at T = S + 10 min: 30 s, or the wait until T in whole
// seconds, rounded up, so that her retry (her connect plus the
// Retry-After) is at or after T, never past T with a wait of 30 s.
func TestOwnStartRetryAfter_RA4(t *testing.T) {
	s := time.Date(2026, 12, 7, 8, 0, 0, 300_000_000, time.UTC)
	tm := s.Add(StartTimeout)
	for _, tc := range []struct {
		name string
		now  time.Time
		want time.Duration
	}{
		{"just started", s, 30 * time.Second},
		{"31 s before T", tm.Add(-31 * time.Second), 30 * time.Second},
		{"30 s before T", tm.Add(-30 * time.Second), 30 * time.Second},
		// 29.5 s, 30 up: her retry at T + 0.5 s.
		{"29.5 s before T", tm.Add(-29500 * time.Millisecond), 30 * time.Second},
		{"20 s before T", tm.Add(-20 * time.Second), 20 * time.Second},
		// 0.4 s, 1 up.
		{"0.4 s before T", tm.Add(-400 * time.Millisecond), time.Second},
		{"1 ns before T", tm.Add(-1), time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &vdibroker.SessionHost{PowerState: vdibroker.PowerStarting, PowerStateTime: &s}
			got := ownStartRetryAfter(h, tc.now)
			if got != tc.want {
				t.Fatalf("ownStartRetryAfter at T - %s = %s, want %s", tm.Sub(tc.now), got, tc.want)
			}
			if back := tc.now.Add(got); back.Before(tm) && got != StartRetryAfter {
				t.Errorf("her retry at %s, before T %s, though the wait was cut short", back, tm)
			}
			if !vdibroker.StartTimedOut(h, tc.now.Add(got)) && tc.now.Add(StartRetryAfter).After(tm) {
				t.Errorf("her retry at %s finds the start not timed out, though 30 s would pass T", tc.now.Add(got))
			}
		})
	}
}

// TestDesktopShuttingDownKeepsItsRetryAfter_RA4: her own host, started at
// S = 08:00:00.3, says at S + 9 min that its machine is going down, a
// reboot or a shutdown alike. The answer keeps a Retry-After until it is
// down (the first whole second after that heartbeat plus the heartbeat
// timeout, 90 s: 08:10:31, 90.7 s), at most 30 s, though the start times
// out at 08:10:00.3 before: a rebooting machine is back by then and her
// retry lands on it. It is not the helpdesk's answer but that her
// desktop goes down (ReasonDesktopGoingDown, not the pool's capacity), and
// says what happens if it does not come back, as of her retry that
// finds it down (at 08:10:31), not of the one 30 s from now (08:09:30.3,
// before the start times out).
func TestDesktopShuttingDownKeepsItsRetryAfter_RA4(t *testing.T) {
	s := time.Date(2026, 12, 7, 8, 0, 0, 300_000_000, time.UTC)
	said := s.Add(9 * time.Minute)
	h := &vdibroker.SessionHost{Name: "h1", PowerState: vdibroker.PowerStarting, PowerStateTime: &s, LastHeartBeat: &said, ShuttingDown: true}
	err := desktopShuttingDown(h, "alice", 90*time.Second, said)
	e, ok := err.(*vdibroker.Error)
	if !ok || e.Code != vdibroker.ENoCapacity || e.Reason != vdibroker.ReasonDesktopGoingDown || e.RetryAfter != 30*time.Second {
		t.Fatalf("desktopShuttingDown: %#v, want NoCapacity, reason %s, Retry-After 30 s", err, vdibroker.ReasonDesktopGoingDown)
	}
	if want := "unless it comes back by itself (a reboot), it is down from 2026-12-07T08:10:31Z and, its start timed out by then (connects do not start it again), needs an administrator, who can start it again (vdibroker sessionhost start) then"; !strings.HasSuffix(e.Message, want) {
		t.Errorf("its message %q, want it to end %q", e.Message, want)
	}
}

// TestDesktopDownRetryAfterBounded_RA4: the Retry-After of the answers
// that her own desktop is going down (a Starting host whose agent said
// so, desktopShuttingDown; a Running one, desktopGoingDown) is the wait
// until it is down, B + timeout, at the next whole second, but never
// more than 30 s (StartRetryAfter), whatever the pool's heartbeat timeout
// (up to an hour), and a shortened one brings her back while its agent's
// word holds (at or before B + timeout). Its agent said so at B = 08:05:00.3; her host was
// started at S = 08:00:00.3 (the start times out at 08:10:00.3).
func TestDesktopDownRetryAfterBounded_RA4(t *testing.T) {
	s := time.Date(2026, 12, 7, 8, 0, 0, 300_000_000, time.UTC)
	b := s.Add(5 * time.Minute)
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		now     time.Time
		want    time.Duration
	}{
		// Down from 09:05:01, 3600.7 s away: 30 s.
		{"an hour's timeout, at once", time.Hour, b, 30 * time.Second},
		// Down from 08:15:01: 600.7 s away: 30 s.
		{"10 minutes' timeout, at once", 10 * time.Minute, b, 30 * time.Second},
		// Down from 08:06:31: 90.7 s away: 30 s.
		{"90 s timeout, at once", 90 * time.Second, b, 30 * time.Second},
		// 30.7 s before 08:06:31: 30 s, her retry at 08:06:30.3, the
		// timeout's end, its agent's word still holds.
		{"90 s timeout, 30.7 s before down", 90 * time.Second, b.Add(60 * time.Second), 30 * time.Second},
		// 30.1 s before 08:06:31 (08:06:00.9): 30 s would bring her
		// back at 08:06:30.9, after its agent's word (08:06:30.3) and
		// before it is down: 29 s, then 1.1 s, 2 up, to 08:06:31.9, as
		// 30.1 s, 31 up, would.
		{"90 s timeout, 30.1 s before down", 90 * time.Second, b.Add(60*time.Second + 600*time.Millisecond), 29 * time.Second},
		// 31 s before (08:06:00): 30 s, to 08:06:30.
		{"90 s timeout, 31 s before down", 90 * time.Second, b.Add(59*time.Second + 700*time.Millisecond), 30 * time.Second},
		// 20.7 s before 08:06:31: that.
		{"90 s timeout, 20.7 s before down", 90 * time.Second, b.Add(70 * time.Second), 20700 * time.Millisecond},
		// At the timeout's instant, 08:06:30.3: 0.7 s.
		{"90 s timeout, at its end", 90 * time.Second, b.Add(90 * time.Second), 700 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			starting := &vdibroker.SessionHost{Name: "h1", PowerState: vdibroker.PowerStarting, PowerStateTime: &s, LastHeartBeat: &b, ShuttingDown: true}
			running := &vdibroker.SessionHost{Name: "h1", PowerState: vdibroker.PowerRunning, PowerStateTime: &s, LastHeartBeat: &b, ShuttingDown: true}
			if !vdibroker.ShuttingDownAfterStart(starting, tc.timeout, tc.now) || !goingDown(running, tc.timeout, tc.now) {
				t.Fatalf("at %s, timeout %s: not going down", tc.now, tc.timeout)
			}
			for name, err := range map[string]error{
				"desktopShuttingDown": desktopShuttingDown(starting, "alice", tc.timeout, tc.now),
				"desktopGoingDown":    desktopGoingDown(running, "alice", tc.timeout, tc.now),
			} {
				if got := vdibroker.ErrorRetryAfter(err); got != tc.want {
					t.Errorf("%s: Retry-After %s, want %s (%v)", name, got, tc.want, err)
				}
				if back := tc.now.Add(ceilSeconds(tc.want)); back.Before(vdibroker.StartAfterShutdownFrom(starting, tc.timeout)) && back.After(b.Add(tc.timeout)) {
					t.Errorf("%s: her retry at %s, after its agent's word and before it is down", name, back)
				}
			}
		})
	}
}
