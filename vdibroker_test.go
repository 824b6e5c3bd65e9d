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
