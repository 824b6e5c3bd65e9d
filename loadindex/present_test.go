package loadindex

import (
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
)

func TestPresent_RH1_RIDX(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	ago := func(s int) *time.Time { t := now.Add(-time.Duration(s) * time.Second); return &t }
	lb := vdibroker.DefaultLoadBalancing()
	lb.CPUThreshold = 80
	pool := &vdibroker.HostPool{LoadBalancerType: vdibroker.LoadIndex, MaxSessionLimit: 10, HeartbeatTimeoutSeconds: 90, LoadBalancing: lb}
	hosts := []*vdibroker.SessionHost{
		// cpu 40 with 4 sessions, 6 now: 40 + 40/4 × 2 = 60 → 100 × 60/80 = 75;
		// sessions 100 × 6/10 = 60; the larger: 75.
		{Name: "a", LastHeartBeat: ago(5), Sessions: 6, Metrics: &vdibroker.Metrics{CPUPercent: 40}, MetricsSessions: 4},
		// No session at its sample: the pool's mean per session (below)
		// 9.6 × 2 placed = 19.2 → 100 × 19.2/80 = 24; sessions 20: 24.
		// Unavailable (120 s > 90 s).
		{Name: "b", LastHeartBeat: ago(120), Sessions: 2, Metrics: &vdibroker.Metrics{CPUPercent: 0}},
		// Never sampled, never heard from: sessions factor 0; Unavailable.
		{Name: "c"},
		// Shutting down: Shutdown (R-H1), index as usual: 100 × 8/80 = 10, sessions 10.
		{Name: "d", LastHeartBeat: ago(1), ShuttingDown: true, Sessions: 1, Metrics: &vdibroker.Metrics{CPUPercent: 8}, MetricsSessions: 1},
	}
	// Mean per session over the hosts sampled with sessions (a and d):
	// (40 + 8) / (4 + 1) = 9.6.
	Present(pool, hosts, now)
	want := []struct {
		status string
		index  int
	}{{vdibroker.StatusAvailable, 75}, {vdibroker.StatusUnavailable, 24}, {vdibroker.StatusUnavailable, 0}, {vdibroker.StatusShutdown, 10}}
	for i, h := range hosts {
		if h.Status != want[i].status || h.LoadIndex != want[i].index {
			t.Errorf("%s: status %s index %d, want %s %d", h.Name, h.Status, h.LoadIndex, want[i].status, want[i].index)
		}
	}
	// show: only the hosts named are filled, from all of the pool.
	one := *hosts[1]
	one.Status, one.LoadIndex = "", 0
	Present(pool, hosts, now, &one)
	if one.Status != vdibroker.StatusUnavailable || one.LoadIndex != 24 {
		t.Errorf("shown alone: %s %d, want Unavailable 24", one.Status, one.LoadIndex)
	}
}
