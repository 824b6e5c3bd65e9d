package loadindex

import (
	"slices"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
)

func TestResample_RLI6(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	sample := func(cpu float64, s int) *vdibroker.Metrics {
		return &vdibroker.Metrics{CPUPercent: cpu, SampledAt: at(s)}
	}
	// Four sessions logged on before the sample at 0 s, four placed at 1 s.
	old := func() []Session {
		return []Session{{Since: at(-60)}, {Since: at(-50)}, {Since: at(-40)}, {Since: at(-30)}}
	}
	placed := func(pending bool) []Session {
		return []Session{{Pending: pending, Since: at(1)}, {Pending: pending, Since: at(1)}, {Pending: pending, Since: at(1)}, {Pending: pending, Since: at(1)}}
	}
	s0 := sample(40, 0)
	stored := Sample{Metrics: s0, Sessions: 4}
	tests := []struct {
		name     string
		stored   Sample
		reported *vdibroker.Metrics
		now      int
		open     []Session
		want     Sample
	}{
		{"no sample keeps the stored one", stored, nil, 10, append(old(), placed(false)...), stored},
		// The heartbeat at 10 s repeats the sample of 0 s: the four placed
		// at 1 s stay an estimate (the bug of issue 13 set the base to 8).
		{"the same sample again keeps the base", stored, sample(40, 0), 10, append(old(), placed(false)...), stored},
		{"an older sample is ignored", stored, sample(90, -30), 10, old(), stored},
		// A new sample at 30 s while the four placed are still Pending:
		// their load is not in it (base 4, not 8).
		{"a new sample leaves Pending sessions out", stored, sample(41, 30), 35, append(old(), placed(true)...), Sample{sample(41, 30), 4}},
		// The four logged on by 30 s: in the sample (base 8).
		{"a new sample counts logged-on sessions placed before it", stored, sample(80, 30), 35, append(old(), placed(false)...), Sample{sample(80, 30), 8}},
		// One placed at 32 s and seen by the heartbeat at 35 s that
		// brings the sample of 30 s: not in it.
		{"sessions placed after sampledAt are left out", stored, sample(80, 30), 35, append(old(), Session{Since: at(32)}), Sample{sample(80, 30), 4}},
		{"a first sample", Sample{}, sample(40, 0), 5, old(), Sample{sample(40, 0), 4}},
		// Undated (the vdibroker agent always dates it): taken as sampled now, so it
		// is always new and counts what was on the host by now.
		{"an undated sample is sampled now", stored, &vdibroker.Metrics{CPUPercent: 50}, 10, append(old(), placed(false)...), Sample{&vdibroker.Metrics{CPUPercent: 50}, 8}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Resample(tt.stored, tt.reported, at(tt.now), slices.Values(tt.open))
			if got.Sessions != tt.want.Sessions || (got.Metrics == nil) != (tt.want.Metrics == nil) ||
				(got.Metrics != nil && *got.Metrics != *tt.want.Metrics) {
				t.Errorf("Resample = %+v %+v, want %+v %+v", got.Metrics, got.Sessions, tt.want.Metrics, tt.want.Sessions)
			}
		})
	}
	// The example of the doc comment and issue 13, through Compute: the
	// index stays 80 over a repeated sample.
	lb := vdibroker.LoadBalancing{CPUThreshold: 100}
	index := func(s Sample, sessions int) int {
		return Compute(lb, vdibroker.NoSessionLimit, Host{Sessions: sessions, Metrics: s.Metrics, MetricsSessions: s.Sessions}, Pool{})
	}
	if got := index(stored, 8); got != 80 { // 40 + 40/4 × 4
		t.Fatalf("after 4 placements: index %d, want 80", got)
	}
	again := Resample(stored, sample(40, 0), at(10), slices.Values(append(old(), placed(true)...)))
	if got := index(again, 8); got != 80 {
		t.Errorf("after a heartbeat repeating the sample: index %d, want 80", got)
	}
}

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
