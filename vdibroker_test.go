package vdibroker

import (
	"testing"
	"time"
)

func TestPoolTimeouts(t *testing.T) {
	p := NewHostPool("pool01") // defaults 90 s and 300 s (SPEC §2)
	if got := p.HeartbeatTimeout(); got != 90*time.Second {
		t.Errorf("HeartbeatTimeout() = %v, want 1m30s", got)
	}
	if got := p.PendingTimeout(); got != 5*time.Minute {
		t.Errorf("PendingTimeout() = %v, want 5m", got)
	}
	p.HeartbeatTimeoutSeconds, p.PendingTimeoutSeconds = 10, 3600
	if p.HeartbeatTimeout() != 10*time.Second || p.PendingTimeout() != time.Hour {
		t.Errorf("timeouts %v %v, want 10s 1h", p.HeartbeatTimeout(), p.PendingTimeout())
	}
}

// TestCommandWarning_RS4: a command queued for a host that cannot carry
// it out now warns, saying since when and what happens to it; one for a
// host that can (drained or not, NeedsAssistance too) does not.
func TestCommandWarning_RS4(t *testing.T) {
	now := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	for _, tc := range []struct {
		name string
		h    SessionHost
		want string
	}{
		{"available", SessionHost{LastHeartBeat: at(-10 * time.Second)}, ""},
		{"drained", SessionHost{LastHeartBeat: at(-10 * time.Second), AllowNewSession: false}, ""},
		{"needs assistance", SessionHost{LastHeartBeat: at(-10 * time.Second), HealthError: "disk full"}, ""},
		// Last beat 09:57:00, timeout 90 s: Unavailable since 09:58:30.
		{"unavailable", SessionHost{LastHeartBeat: at(-3 * time.Minute)},
			"session host h1 is Unavailable since 2026-12-06T09:58:30Z (last heartbeat 2026-12-06T09:57:00Z): queued, the host gets the logoff when its agent reports again"},
		{"never reported", SessionHost{},
			"session host h1 is Unavailable (its agent never reported): queued, the host gets the logoff when its agent reports"},
		{"agent stopping", SessionHost{LastHeartBeat: at(-5 * time.Second), ShuttingDown: true},
			"session host h1 is Shutdown (its agent said it is stopping, last heartbeat 2026-12-06T09:59:55Z): queued, the host gets the logoff when its agent reports again"},
		{"powered off", SessionHost{LastHeartBeat: at(-time.Hour), PowerState: PowerStopped, PowerStateTime: at(-59 * time.Minute)},
			"session host h1 is Shutdown (power state Stopped since 2026-12-06T09:01:00Z, last heartbeat 2026-12-06T09:00:00Z): queued, the host gets the logoff when it is started and its agent reports again"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.h.Name = "h1"
			if got := CommandWarning(&tc.h, "the logoff", 90*time.Second, now); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}
