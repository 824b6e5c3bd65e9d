package vdibroker

import (
	"testing"
	"time"
)

// TestShuttingDownAfterStartEdges (R-A4, R-A2): the window in which a
// Starting host's agent is taken as saying its machine goes down (not
// capacity to come, the admin's start refused) opens strictly after the
// Starting record and closes once the agent has been silent for longer
// than the heartbeat timeout; StartAfterShutdownFrom, the time told to
// the user and the admin, is the first whole second outside it.
func TestShuttingDownAfterStartEdges(t *testing.T) {
	const timeout = 90 * time.Second
	start := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := start.Add(d); return &x }
	host := func(state string, hb *time.Time) *SessionHost {
		return &SessionHost{PowerState: state, PowerStateTime: at(0), LastHeartBeat: hb}
	}
	said := start.Add(1500 * time.Millisecond)
	for _, c := range []struct {
		name string
		h    *SessionHost
		now  time.Time
		want bool
	}{
		{"heartbeat at the record's instant", host(PowerStarting, at(0)), start.Add(time.Second), false},
		{"heartbeat before the record", host(PowerStarting, at(-time.Second)), start.Add(time.Second), false},
		{"heartbeat just after the record", host(PowerStarting, at(time.Nanosecond)), start.Add(time.Second), true},
		{"no heartbeat", host(PowerStarting, nil), start.Add(time.Second), false},
		{"no record time", &SessionHost{PowerState: PowerStarting, LastHeartBeat: &said}, said, false},
		{"not Starting", host(PowerRunning, &said), said, false},
		{"silent for the timeout", host(PowerStarting, &said), said.Add(timeout), true},
		{"silent for longer", host(PowerStarting, &said), said.Add(timeout + time.Nanosecond), false},
	} {
		if got := ShuttingDownAfterStart(c.h, timeout, c.now); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	h := host(PowerStarting, &said)
	from := StartAfterShutdownFrom(h, timeout)
	if want := start.Add(92 * time.Second); !from.Equal(want) {
		t.Fatalf("from %s, want %s (the first whole second after %s)", from, want, said.Add(timeout))
	}
	if ShuttingDownAfterStart(h, timeout, from) || !ShuttingDownAfterStart(h, timeout, from.Add(-time.Second)) {
		t.Errorf("at %s (from) and a second before: want out of the window, then in it", from)
	}
	// A heartbeat on a whole second: from is the second after, not that
	// instant (still in the window).
	whole := start.Add(2 * time.Second)
	h = host(PowerStarting, &whole)
	if from := StartAfterShutdownFrom(h, timeout); !from.Equal(whole.Add(timeout+time.Second)) || ShuttingDownAfterStart(h, timeout, from) {
		t.Errorf("heartbeat on a whole second: from %s, want %s and out of the window", from, whole.Add(timeout+time.Second))
	}
}
