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
// reboot or a shutdown alike. The answer keeps its Retry-After until it
// is down (the first whole second after that heartbeat plus the
// heartbeat timeout, 90 s: 08:10:31, 90.7 s), though the start times out
// at 08:10:00.3 before: a rebooting machine is back by then and her
// retry lands on it. It is not the helpdesk's answer (no reason), and
// says what happens if it does not come back.
func TestDesktopShuttingDownKeepsItsRetryAfter_RA4(t *testing.T) {
	s := time.Date(2026, 12, 7, 8, 0, 0, 300_000_000, time.UTC)
	said := s.Add(9 * time.Minute)
	h := &vdibroker.SessionHost{Name: "h1", PowerState: vdibroker.PowerStarting, PowerStateTime: &s, LastHeartBeat: &said, ShuttingDown: true}
	err := desktopShuttingDown(h, "alice", 90*time.Second, said)
	e, ok := err.(*vdibroker.Error)
	if !ok || e.Code != vdibroker.ENoCapacity || e.Reason != "" || e.RetryAfter != 90700*time.Millisecond {
		t.Fatalf("desktopShuttingDown: %#v, want NoCapacity, no reason, Retry-After 90.7 s", err)
	}
	if want := "unless it comes back by itself (a reboot), it is down from 2026-12-07T08:10:31Z and, its start timed out by then (connects do not start it again), needs an administrator, who can start it again (vdibroker sessionhost start) then"; !strings.HasSuffix(e.Message, want) {
		t.Errorf("its message %q, want it to end %q", e.Message, want)
	}
}
