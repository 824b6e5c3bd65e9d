package http_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
)

// TestStaleMetricsCompensationSurvivesHeartbeats_RLI6: a sample of 40 %
// CPU taken with 4 sessions, then 4 placements: the host's CPU factor is
// estimated at 40 + 40/4 × 4 = 80 until the next sample. The agent sends
// its last sample again with every heartbeat (every 10 s, samples every
// 30 s); such a heartbeat must not reset the estimate. Before, it
// re-baselined to the current count (8, Pending included) and the index
// fell back to 40, so a logon storm piled onto the host again.
func TestStaleMetricsCompensationSurvivesHeartbeats_RLI6(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	// The CPU factor alone: index = 100 × cpu / cpuThreshold (R-IDX1).
	e.pool("rli6", map[string]any{"loadBalancerType": "LoadIndex", "maxSessionLimit": 50,
		"loadBalancing": map[string]any{"includeSessionCount": false, "cpuThreshold": 100}})
	host := e.addHosts("rli6", "rli6h", 1)[0]

	var logged []vdibroker.AgentSession
	for i := range 4 {
		user := fmt.Sprintf("early%d", i)
		e.mustConnect("rli6", user)
		logged = append(logged, vdibroker.AgentSession{ID: fmt.Sprint(i), User: user, State: vdibroker.StateActive})
	}
	sample := &vdibroker.Metrics{CPUPercent: 40, SampledAt: e.clock.Now().UTC()}
	heartbeat := func() {
		t.Helper()
		if _, err := e.heartbeatErr(host, &vdibroker.HeartbeatRequest{Metrics: sample, Sessions: logged}); err != nil {
			t.Fatal(err)
		}
	}
	loadIndex := func() int {
		t.Helper()
		h, err := e.admin.GetSessionHost(ctx, "rli6", host)
		if err != nil {
			t.Fatal(err)
		}
		return h.LoadIndex
	}
	e.clock.Advance(time.Second)
	heartbeat() // the sample: 40 % with the 4 sessions logged on
	if got := loadIndex(); got != 40 {
		t.Fatalf("load index after the sample = %d, want 40", got)
	}
	for i := range 4 {
		e.mustConnect("rli6", fmt.Sprintf("storm%d", i)) // Pending: not in the sample
	}
	if got := loadIndex(); got != 80 {
		t.Fatalf("load index after 4 placements = %d, want 80 (40 + 40/4 × 4)", got)
	}
	for range 3 {
		e.clock.Advance(10 * time.Second)
		heartbeat() // the same sample again; the storm's users not logged on yet
		if got := loadIndex(); got != 80 {
			t.Fatalf("load index after a heartbeat repeating the sample = %d, want 80 (R-LI6)", got)
		}
	}
	// A new sample is the truth again: 70 % with the 8 sessions it saw.
	for i := range 4 {
		logged = append(logged, vdibroker.AgentSession{ID: fmt.Sprint("s", i), User: fmt.Sprintf("storm%d", i), State: vdibroker.StateActive})
	}
	e.clock.Advance(time.Second)
	sample = &vdibroker.Metrics{CPUPercent: 70, SampledAt: e.clock.Now().UTC()}
	heartbeat()
	if got := loadIndex(); got != 70 {
		t.Fatalf("load index after a new sample = %d, want 70", got)
	}
}
