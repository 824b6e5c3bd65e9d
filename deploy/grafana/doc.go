// Package grafana holds vdibroker's Grafana dashboard (vdibroker.json):
// connects by outcome, connect and decision latency, used capacity per
// pool (R-A1), hosts by status, heartbeat lag, load index and sessions per
// host, and the store. Import it in Grafana (Dashboards, New, Import) and
// pick the Prometheus data source that scrapes the brokers' /metrics.
//
// Every replica of a broker on one PostgreSQL database exports the same
// store gauges (sessions, hosts, per-host figures), read from the shared
// database: the panels take their max per pool (and host) before they sum,
// so two replicas count each session once. Event counters and histograms
// (connects, decisions, heartbeats) count each replica's own events and
// are summed. Its tests check that every metric it queries is one the
// broker serves, and (VDIBROKER_TEST_PROMETHEUS=1) every panel's queries
// against a real Prometheus scraping two replicas.
package grafana

import _ "embed"

// Dashboard is vdibroker.json.
//
//go:embed vdibroker.json
var Dashboard []byte
