// Package metrics exposes the broker's Prometheus metrics (SPEC §9, GET
// /metrics): counters and histograms fed by hooks the HTTP server and the
// store call (ObserveConnect, ObservePlacement, ObserveStoreTx), gauges read
// from the Store on every scrape (sessions by state, hosts by status, load
// index and heartbeat age per host), and the Go runtime and process
// collectors. NewRegistry assembles them; Handler serves a registry.
//
// The event metrics are package-level so that any package can record an
// event without plumbing; the store-backed gauges belong to one registry, so
// two brokers in one test process never read each other's store.
package metrics
