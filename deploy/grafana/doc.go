// Package grafana holds vdibroker's Grafana dashboard (vdibroker.json):
// connects by outcome, connect and decision latency, used capacity per
// pool (R-A1), hosts by status, heartbeat lag, load index and sessions per
// host, and the store. Import it in Grafana (Dashboards, New, Import) and
// pick the Prometheus data source that scrapes the brokers' /metrics. Its
// test checks that every metric it queries is one the broker serves.
package grafana

import _ "embed"

// Dashboard is vdibroker.json.
//
//go:embed vdibroker.json
var Dashboard []byte
