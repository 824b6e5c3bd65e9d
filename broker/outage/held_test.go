package outage

import (
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
)

// TestHeldHeartbeatKeepsTheNewer (review): a write that failed gives back
// an older heartbeat than one held meanwhile; the newer sessions stay, and
// both heartbeats' command results are kept.
func TestHeldHeartbeatKeepsTheNewer(t *testing.T) {
	var hh heldHeartbeats
	k := hostKey{"p", "h1"}
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	newer := &vdibroker.HeartbeatRequest{Sessions: []vdibroker.AgentSession{{ID: "2", User: "bob", State: vdibroker.StateActive}},
		Results: []vdibroker.CommandResult{{ID: "c2", Success: true}}}
	older := &vdibroker.HeartbeatRequest{Sessions: []vdibroker.AgentSession{{ID: "1", User: "alice", State: vdibroker.StateActive}},
		Results: []vdibroker.CommandResult{{ID: "c1", Success: true}}}
	hh.hold(k, newer, t0.Add(10*time.Second))
	hh.hold(k, older, t0)
	got := hh.take(k)
	if got == nil || !got.at.Equal(t0.Add(10*time.Second)) || len(got.hb.Sessions) != 1 || got.hb.Sessions[0].User != "bob" {
		t.Fatalf("held %+v, want the newer heartbeat (bob, at +10s)", got)
	}
	if len(got.hb.Results) != 2 {
		t.Errorf("held results %+v, want both c1 and c2", got.hb.Results)
	}
}
