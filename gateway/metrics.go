package gateway

import "github.com/prometheus/client_golang/prometheus"

// metrics are the gateway's Prometheus metrics, on the registry the caller
// gives (the gateway's own /metrics in `vdibroker gateway`).
type metrics struct {
	open      prometheus.Gauge
	bytes     *prometheus.CounterVec
	toHost    prometheus.Counter
	toClient  prometheus.Counter
	refusals  *prometheus.CounterVec
	handshake prometheus.Histogram
	closed    *prometheus.CounterVec
	logDrops  prometheus.Counter
	checks    *prometheus.CounterVec
	// closesPending and closeReports: the close reports kept to send
	// again (closes.go).
	closesPending prometheus.Gauge
	closeReports  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		open: prometheus.NewGauge(prometheus.GaugeOpts{Name: "vdibroker_gateway_tunnels_open",
			Help: "Tunnels open now (authorised, from tunnel create to close)."}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vdibroker_gateway_tunnel_bytes_total",
			Help: "RDP bytes carried through tunnels, by direction (to_host, to_client)."}, []string{"direction"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vdibroker_gateway_refusals_total",
			Help: "Requests and tunnels refused, by reason."}, []string{"reason"}),
		handshake: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "vdibroker_gateway_handshake_seconds",
			Help:    "Time from a client's first request to its channel open (includes waiting for a starting host).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vdibroker_gateway_tunnels_closed_total",
			Help: "Tunnels closed, by reason."}, []string{"reason"}),
		logDrops: prometheus.NewCounter(prometheus.CounterOpts{Name: "vdibroker_gateway_refusal_logs_dropped_total",
			Help: "Refusal log lines not written because they came faster than the log's rate limit."}),
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vdibroker_gateway_reauthorize_checks_total",
			Help: "Checks of open tunnels with the broker (--reauthorize-every), by result: answered, or failed (the broker did not answer: the tunnels stay)."}, []string{"result"}),
		closesPending: prometheus.NewGauge(prometheus.GaugeOpts{Name: "vdibroker_gateway_close_reports_pending",
			Help: "Tunnel close reports the broker did not take, kept to send again."}),
		closeReports: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vdibroker_gateway_close_reports_retried_total",
			Help: "Tunnel close reports sent again, by result: delivered, refused (the broker refused it: dropped), or dropped (older than a day, or beyond the 10,000 kept)."}, []string{"result"}),
	}
	m.toHost, m.toClient = m.bytes.WithLabelValues("to_host"), m.bytes.WithLabelValues("to_client")
	if reg != nil {
		reg.MustRegister(m.open, m.bytes, m.refusals, m.handshake, m.closed, m.logDrops, m.checks, m.closesPending, m.closeReports)
	}
	return m
}
