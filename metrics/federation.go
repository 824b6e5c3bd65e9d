package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vdibroker/vdibroker"
)

// Federation metrics: global connects by outcome and chosen
// pod, pod-to-pod call latency and failures by peer and operation.
var (
	globalConnects = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vdibroker_global_connects_total",
		Help: "Global entitlement connects by outcome (Created, Reconnect, DryRun or an error code) and the pod that took them.",
	}, []string{"outcome", "pod"})
	podCallDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "vdibroker_pod_call_duration_seconds",
		Help:    "Pod-to-pod API calls by peer and operation (loads, sessions, connect).",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2, 5},
	}, []string{"peer", "op"})
	podCallFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vdibroker_pod_call_failures_total",
		Help: "Pod-to-pod API calls that failed (unreachable, timeout, refused signature) by peer and operation.",
	}, []string{"peer", "op"})
)

// RegisterFederation adds the federation metrics to reg.
func RegisterFederation(reg *prometheus.Registry) {
	reg.MustRegister(globalConnects, podCallDuration, podCallFailures)
}

// ObserveGlobalConnect records one global connect (broker.GlobalConfig).
func ObserveGlobalConnect(outcome, pod string) {
	if outcome == "" {
		outcome = vdibroker.EInternal
	}
	globalConnects.WithLabelValues(outcome, pod).Inc()
}

// ObservePodCall records one pod-to-pod call (broker.GlobalConfig).
func ObservePodCall(peer, op string, d time.Duration, err error) {
	podCallDuration.WithLabelValues(peer, op).Observe(d.Seconds())
	if err != nil {
		podCallFailures.WithLabelValues(peer, op).Inc()
	}
}
