package vdibroker_test

import (
	"slices"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/loadindex"
)

func TestResample_RLI6(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	sample := func(cpu float64, s int) *vdibroker.Metrics {
		return &vdibroker.Metrics{CPUPercent: cpu, SampledAt: at(s)}
	}
	// Four sessions logged on before the sample at 0 s, four placed at 1 s.
	old := func() []vdibroker.SampleSession {
		return []vdibroker.SampleSession{{Since: at(-60)}, {Since: at(-50)}, {Since: at(-40)}, {Since: at(-30)}}
	}
	placed := func(pending bool) []vdibroker.SampleSession {
		return []vdibroker.SampleSession{{Pending: pending, Since: at(1)}, {Pending: pending, Since: at(1)}, {Pending: pending, Since: at(1)}, {Pending: pending, Since: at(1)}}
	}
	s0 := sample(40, 0)
	stored := vdibroker.MetricsSample{Metrics: s0, Sessions: 4}
	tests := []struct {
		name     string
		stored   vdibroker.MetricsSample
		reported *vdibroker.Metrics
		now      int
		open     []vdibroker.SampleSession
		want     vdibroker.MetricsSample
	}{
		{"no sample keeps the stored one", stored, nil, 10, append(old(), placed(false)...), stored},
		// The heartbeat at 10 s repeats the sample of 0 s: the four placed
		// at 1 s stay an estimate (taking the repeat as new set the base to 8).
		{"the same sample again keeps the base", stored, sample(40, 0), 10, append(old(), placed(false)...), stored},
		{"an older sample is ignored", stored, sample(90, -30), 10, old(), stored},
		// A new sample at 30 s while the four placed are still Pending:
		// their load is not in it (base 4, not 8).
		{"a new sample leaves Pending sessions out", stored, sample(41, 30), 35, append(old(), placed(true)...), vdibroker.MetricsSample{Metrics: sample(41, 30), Sessions: 4}},
		// The four logged on by 30 s: in the sample (base 8).
		{"a new sample counts logged-on sessions placed before it", stored, sample(80, 30), 35, append(old(), placed(false)...), vdibroker.MetricsSample{Metrics: sample(80, 30), Sessions: 8}},
		// One placed at 32 s and seen by the heartbeat at 35 s that
		// brings the sample of 30 s: not in it.
		{"sessions placed after sampledAt are left out", stored, sample(80, 30), 35, append(old(), vdibroker.SampleSession{Since: at(32)}), vdibroker.MetricsSample{Metrics: sample(80, 30), Sessions: 4}},
		{"a first sample", vdibroker.MetricsSample{}, sample(40, 0), 5, old(), vdibroker.MetricsSample{Metrics: sample(40, 0), Sessions: 4}},
		// Undated (the vdibroker agent always dates it): taken as sampled now, so it
		// is always new and counts what was on the host by now.
		{"an undated sample is sampled now", stored, &vdibroker.Metrics{CPUPercent: 50}, 10, append(old(), placed(false)...), vdibroker.MetricsSample{Metrics: &vdibroker.Metrics{CPUPercent: 50}, Sessions: 8}},
		// R-SEC: a sample dated years ahead (a wrong clock, or a host's
		// credential in other hands) is kept as sampled now; kept as
		// dated, every later sample of the host would be older and
		// ignored. The four placed at 1 s are on the host by 10 s: base 8.
		{"a sample dated far ahead is sampled now", stored, sample(0, 10*365*24*3600), 10, append(old(), placed(false)...), vdibroker.MetricsSample{Metrics: sample(0, 10), Sessions: 8}},
		// A clock 5 minutes fast keeps its dates (and a repeat stays one).
		{"a sample MaxSampleAhead ahead keeps its date", stored, sample(50, 310), 10, append(old(), placed(false)...), vdibroker.MetricsSample{Metrics: sample(50, 310), Sessions: 8}},
		{"a repeat of a sample a little ahead keeps the base", vdibroker.MetricsSample{Metrics: sample(50, 310), Sessions: 4}, sample(50, 310), 20, append(old(), placed(false)...), vdibroker.MetricsSample{Metrics: sample(50, 310), Sessions: 4}},
		// One stored before the bound, dated years ahead, gives way.
		{"a stored sample dated far ahead gives way", vdibroker.MetricsSample{Metrics: sample(0, 10*365*24*3600), Sessions: 4}, sample(90, 5), 10, append(old(), placed(false)...), vdibroker.MetricsSample{Metrics: sample(90, 5), Sessions: 8}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := vdibroker.Resample(tt.stored, tt.reported, at(tt.now), slices.Values(tt.open))
			if got.Sessions != tt.want.Sessions || (got.Metrics == nil) != (tt.want.Metrics == nil) ||
				(got.Metrics != nil && *got.Metrics != *tt.want.Metrics) {
				t.Errorf("Resample = %+v %+v, want %+v %+v", got.Metrics, got.Sessions, tt.want.Metrics, tt.want.Sessions)
			}
		})
	}
	// The example of the doc comment, through loadindex.Compute: the
	// index stays 80 over a repeated sample.
	lb := vdibroker.LoadBalancing{CPUThreshold: 100}
	index := func(s vdibroker.MetricsSample, sessions int) int {
		return loadindex.Compute(lb, vdibroker.NoSessionLimit, loadindex.Host{Sessions: sessions, Metrics: s.Metrics, MetricsSessions: s.Sessions}, loadindex.Pool{})
	}
	if got := index(stored, 8); got != 80 { // 40 + 40/4 × 4
		t.Fatalf("after 4 placements: index %d, want 80", got)
	}
	again := vdibroker.Resample(stored, sample(40, 0), at(10), slices.Values(append(old(), placed(true)...)))
	if got := index(again, 8); got != 80 {
		t.Errorf("after a heartbeat repeating the sample: index %d, want 80", got)
	}
}
