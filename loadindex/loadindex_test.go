package loadindex

import (
	"testing"

	"github.com/vdibroker/vdibroker"
)

func intp(v int) *int { return &v }

func TestSessionFactor_RIDX1(t *testing.T) {
	tests := []struct {
		name            string
		sessions, limit int
		want            int
	}{
		{"three of eight", 3, 8, 38},              // 100 × 3 / 8 = 37.5 → 38 (half away from zero)
		{"one of three", 1, 3, 33},                // 33.33 → 33
		{"full", 10, 10, 100},                     // 100
		{"over the limit clamps", 12, 10, 100},    // 120 → 100
		{"no limit uses the count", 7, 999999, 7}, // R-IDX1: limit 999999 → the count itself
		{"no limit clamps at 100", 150, 999999, 100},
		{"empty", 0, 5, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SessionFactor(tt.sessions, tt.limit); got != tt.want {
				t.Errorf("SessionFactor(%d, %d) = %d, want %d", tt.sessions, tt.limit, got, tt.want)
			}
		})
	}
}

func TestPercent_RIDX1(t *testing.T) {
	tests := []struct {
		name             string
		value, threshold float64
		want             int
	}{
		{"cpu 45 of 60", 45, 60, 75},          // 100 × 45 / 60 = 75
		{"memory 33 of 80", 33, 80, 41},       // 41.25 → 41
		{"disk queue 3 of 2", 3, 2, 100},      // 150 → clamped 100
		{"latency 2.5 of 20 ms", 2.5, 20, 13}, // 12.5 → 13
		{"threshold 0 is unused", 50, 0, 0},
		{"negative value clamps", -5, 10, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percent(tt.value, tt.threshold); got != tt.want {
				t.Errorf("Percent(%v, %v) = %d, want %d", tt.value, tt.threshold, got, tt.want)
			}
		})
	}
}

func TestCompute_RIDX2(t *testing.T) {
	m := &vdibroker.Metrics{CPUPercent: 45, MemoryPercent: 72, DiskQueueLength: 1, DiskReadLatencyMs: 10, DiskWriteLatencyMs: 30}
	lb := func(f func(*vdibroker.LoadBalancing)) vdibroker.LoadBalancing {
		l := vdibroker.DefaultLoadBalancing()
		l.IncludeSessionCount = false
		f(&l)
		return l
	}
	tests := []struct {
		name string
		lb   vdibroker.LoadBalancing
		h    Host
		want int
	}{
		{
			// No factor enabled and no custom script: the session factor,
			// 100 × 4 / 10 = 40.
			"no factor falls back to sessions", lb(func(*vdibroker.LoadBalancing) {}),
			Host{Sessions: 4, Metrics: m, MetricsSessions: 4}, 40,
		},
		{
			// cpu 100 × 45/60 = 75, memory 100 × 72/90 = 80, sessions 40:
			// the largest, 80.
			"largest enabled factor wins", lb(func(l *vdibroker.LoadBalancing) {
				l.CPUThreshold, l.MemoryThreshold, l.IncludeSessionCount = 60, 90, true
			}),
			Host{Sessions: 4, Metrics: m, MetricsSessions: 4}, 80,
		},
		{
			// disk queue 100 × 1/4 = 25, read 100 × 10/50 = 20, write 100 × 30/40 = 75.
			"disk factors", lb(func(l *vdibroker.LoadBalancing) {
				l.DiskQueueLengthThreshold, l.DiskReadLatencyThreshold, l.DiskWriteLatencyThreshold = 4, 50, 40
			}),
			Host{Sessions: 4, Metrics: m, MetricsSessions: 4}, 75,
		},
		{
			// Enabled cpu factor but no sample yet: cpu counts 0, and sessions
			// are not included, so 0.
			"no sample is idle", lb(func(l *vdibroker.LoadBalancing) { l.CPUThreshold = 60 }),
			Host{Sessions: 4}, 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Compute(tt.lb, 10, tt.h, Pool{}); got != tt.want {
				t.Errorf("Compute = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestCustomScript_RIDX3(t *testing.T) {
	lb := vdibroker.DefaultLoadBalancing()
	lb.UseCustomScript = true
	reporting := Host{Metrics: &vdibroker.Metrics{CustomLoadValue: intp(130)}}
	silent := Host{Metrics: &vdibroker.Metrics{CPUPercent: 99}}
	invalid := Host{Metrics: &vdibroker.Metrics{CustomLoadValue: intp(-3)}}
	tests := []struct {
		name          string
		h             Host
		pool          Pool
		want, display int
	}{
		{"value above 100 is capped", reporting, Pool{AnyCustom: true}, 100, 100},
		{"silent host counts 25 and shows -1", silent, Pool{AnyCustom: true}, 25, -1},
		{"negative value is not valid", invalid, Pool{AnyCustom: true}, 25, -1},
		{"nobody reports: load balancing off", silent, Pool{}, -1, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Compute(lb, 10, tt.h, tt.pool); got != tt.want {
				t.Errorf("Compute = %d, want %d", got, tt.want)
			}
			if got := Displayed(lb, 10, tt.h, tt.pool); got != tt.display {
				t.Errorf("Displayed = %d, want %d", got, tt.display)
			}
		})
	}
}

func TestPreference_RIDX4(t *testing.T) {
	for idx, want := range map[int]string{-1: "", 0: Light, 24: Light, 25: Normal, 74: Normal, 75: Heavy, 99: Heavy, 100: Blocked} {
		if got := Preference(idx); got != want {
			t.Errorf("Preference(%d) = %q, want %q", idx, got, want)
		}
	}
}

func TestStaleMetrics_RLI6(t *testing.T) {
	lb := vdibroker.DefaultLoadBalancing()
	lb.IncludeSessionCount = false
	lb.CPUThreshold = 100
	tests := []struct {
		name string
		h    Host
		pool Pool
		want int
	}{
		{
			// cpu 40 % sampled with 4 sessions, now 6: 40 + 40/4 × 2 = 60.
			"raised by the per-session share", Host{Sessions: 6, MetricsSessions: 4, Metrics: &vdibroker.Metrics{CPUPercent: 40}},
			Pool{}, 60,
		},
		{
			// Sessions ended since the sample: no lowering, still 40.
			"fewer sessions keep the sample", Host{Sessions: 2, MetricsSessions: 4, Metrics: &vdibroker.Metrics{CPUPercent: 40}},
			Pool{}, 40,
		},
		{
			// No session at sample time, 3 placed since, pool mean 7.5 % per
			// session: 5 + 7.5 × 3 = 27.5 → 28.
			"empty at sample uses the pool mean", Host{Sessions: 3, MetricsSessions: 0, Metrics: &vdibroker.Metrics{CPUPercent: 5}},
			Pool{PerSession: Factors{CPU: 7.5}}, 28,
		},
		{
			// Mean unknown (0): stays 5.
			"unknown mean adds nothing", Host{Sessions: 3, Metrics: &vdibroker.Metrics{CPUPercent: 5}},
			Pool{}, 5,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Compute(lb, 10, tt.h, tt.pool); got != tt.want {
				t.Errorf("Compute = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestMean_RLI6(t *testing.T) {
	var m Mean
	if got := m.PerSession(); got != (Factors{}) {
		t.Fatalf("empty mean = %+v, want zero", got)
	}
	a := &vdibroker.Metrics{CPUPercent: 30, MemoryPercent: 60}
	b := &vdibroker.Metrics{CPUPercent: 50, MemoryPercent: 20}
	m.Add(a, 2)
	m.Add(b, 6)
	m.Add(&vdibroker.Metrics{CPUPercent: 90}, 0) // no session at sample: not counted
	// (30 + 50) / (2 + 6) = 10 cpu per session; (60 + 20) / 8 = 10 memory.
	if got := m.PerSession(); got.CPU != 10 || got.Memory != 10 {
		t.Errorf("PerSession = %+v, want cpu 10 memory 10", got)
	}
	m.Remove(b, 6)
	// 30 / 2 = 15.
	if got := m.PerSession(); got.CPU != 15 {
		t.Errorf("after Remove, cpu per session = %v, want 15", got.CPU)
	}
	m.Remove(a, 2)
	if got := m.PerSession(); got != (Factors{}) {
		t.Errorf("after removing all = %+v, want zero", got)
	}
}

func TestPoolOf_RIDX3_RLI6(t *testing.T) {
	hosts := []Host{
		{Sessions: 5, MetricsSessions: 4, Metrics: &vdibroker.Metrics{CPUPercent: 20}},
		{Sessions: 2, MetricsSessions: 0, Metrics: &vdibroker.Metrics{CPUPercent: 3, CustomLoadValue: intp(40)}},
		{Sessions: 1},
	}
	p := PoolOf(hosts)
	// Only the first host was sampled with sessions: 20 / 4 = 5 per session.
	if !p.AnyCustom || p.PerSession.CPU != 5 {
		t.Errorf("PoolOf = %+v, want AnyCustom and 5 cpu per session", p)
	}
	if p := PoolOf(hosts[:1]); p.AnyCustom {
		t.Errorf("no custom value reported, got AnyCustom")
	}
}
