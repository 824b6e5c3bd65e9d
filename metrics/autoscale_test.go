package metrics_test

import (
	"testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/metrics"
)

// TestAutoscaleMetrics: an evaluation moves the evaluation and action
// counters (failed actions apart) and sets the pool's gauges.
func TestAutoscaleMetrics(t *testing.T) {
	h := metrics.Handler(metrics.NewRegistry(metrics.Config{}))
	// Counters are process-wide (a test run more than once sees its
	// earlier runs'): compared with before.
	before := scrape(t, h)
	was := func(name string, labels map[string]string) float64 {
		v, _ := before[name].value(labels)
		return v
	}
	evals := was("vdibroker_autoscale_evaluations_total", map[string]string{"pool": "mtest-as", "phase": "RampDown"})
	drains := was("vdibroker_autoscale_actions_total", map[string]string{"pool": "mtest-as", "action": "Drain", "outcome": "ok"})
	stops := was("vdibroker_autoscale_actions_total", map[string]string{"pool": "mtest-as", "action": "Stop", "outcome": "failed"})
	metrics.ObserveAutoscale(&vdibroker.AutoscaleEvaluation{HostPool: "mtest-as", Phase: vdibroker.PhaseRampDown, RunningHosts: 3, UsedCapacityPct: 42.5,
		Actions: []vdibroker.AutoscaleAction{{Action: vdibroker.ActionDrain, Host: "h1"}, {Action: vdibroker.ActionDrain, Host: "h2"},
			{Action: vdibroker.ActionStop, Host: "h3", Error: "driver failed"}}})
	fams := scrape(t, h)
	pool := map[string]string{"pool": "mtest-as"}
	if got := get(t, fams, "vdibroker_autoscale_evaluations_total", map[string]string{"pool": "mtest-as", "phase": "RampDown"}); got != evals+1 {
		t.Errorf("evaluations_total = %v, want %v", got, evals+1)
	}
	if got := get(t, fams, "vdibroker_autoscale_actions_total", map[string]string{"pool": "mtest-as", "action": "Drain", "outcome": "ok"}); got != drains+2 {
		t.Errorf("actions_total{Drain,ok} = %v, want %v", got, drains+2)
	}
	if got := get(t, fams, "vdibroker_autoscale_actions_total", map[string]string{"pool": "mtest-as", "action": "Stop", "outcome": "failed"}); got != stops+1 {
		t.Errorf("actions_total{Stop,failed} = %v, want %v", got, stops+1)
	}
	if got := get(t, fams, "vdibroker_autoscale_running_hosts", pool); got != 3 {
		t.Errorf("running_hosts = %v, want 3", got)
	}
	if got := get(t, fams, "vdibroker_autoscale_used_capacity_percent", pool); got != 42.5 {
		t.Errorf("used_capacity_percent = %v, want 42.5", got)
	}
}
