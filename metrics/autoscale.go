package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vdibroker/vdibroker"
)

// Autoscale metrics: evaluations and their actions, and each
// pool's figures at its last evaluation (R-A1).
var (
	autoscaleEvaluations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "autoscale_evaluations_total",
		Help: "Autoscale evaluations recorded, by host pool and phase.",
	}, []string{"pool", "phase"})
	autoscaleActions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "autoscale_actions_total",
		Help: "Autoscale actions (Start, Drain, Undrain, Notify, Logoff, Stop, SetLoadBalancer) by host pool, action and outcome (ok or failed).",
	}, []string{"pool", "action", "outcome"})
	autoscaleRunning = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "autoscale_running_hosts",
		Help: "Running placeable hosts of a pool at its last autoscale evaluation (R-A1).",
	}, []string{"pool"})
	autoscaleUsed = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "autoscale_used_capacity_percent",
		Help: "Used capacity of a pool at its last autoscale evaluation, in percent (R-A1).",
	}, []string{"pool"})
)

// ObserveAutoscale records one evaluation (autoscale.Config.Observe).
func ObserveAutoscale(e *vdibroker.AutoscaleEvaluation) {
	autoscaleEvaluations.WithLabelValues(e.HostPool, e.Phase).Inc()
	for _, a := range e.Actions {
		outcome := "ok"
		if a.Error != "" {
			outcome = "failed"
		}
		autoscaleActions.WithLabelValues(e.HostPool, a.Action, outcome).Inc()
	}
	autoscaleRunning.WithLabelValues(e.HostPool).Set(float64(e.RunningHosts))
	autoscaleUsed.WithLabelValues(e.HostPool).Set(e.UsedCapacityPct)
}
