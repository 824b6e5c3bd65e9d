// Package loadgen is vdibroker's load generator, behind `vdibroker bench
// connect` and `vdibroker bench heartbeat`; the numbers in BENCHMARKS.md and
// docs/benchmarks-history.md come from it.
//
// Connect sends connects (POST /api/v1/hostpools/{pool}/connect) to a
// running broker from a number of concurrent workers, each for a distinct
// user, and measures the rate, the latency percentiles and the errors by
// HTTP status and error code. Baseline (in-process) and BaselineAt (a bare
// server elsewhere, see BareHandler) run the same load against a bare
// net/http server answering a JSON body of the same size, so the broker's
// own cost can be read as a ratio measured side by side (MedianRatio over
// several Rounds).
//
// Heartbeat is the host agents' load: it registers a number of hosts and
// sends each one's heartbeat, with its sessions and a metrics sample, every
// interval, spread evenly, and measures the offered and handled rates, the
// latency, how late heartbeats went out, and the broker's resident memory
// and CPU time (ReadProc, from /proc), for the bound of the history's "Heartbeat
// load" (docs/benchmarks-history.md):
// 10,000 hosts with 25 sessions each, heartbeating every 10 s, on one broker.
//
// RunPod is `vdibroker bench pod`: it builds a full pod's state in one
// broker (hosts registered and heartbeating, every seat's session placed
// by a connect and reported by its agent, a week of LoggedOff history
// bulk-loaded with the broker stopped) and measures dry runs, connects,
// listings, /metrics and console pages in a large and a small pool side
// by side, against its targets (BENCHMARKS.md "bench pod targets"; the
// runs that shaped it: docs/benchmarks-history.md "bench pod").
//
// It speaks plain net/http and encoding/json with the root package's types,
// so it measures the wire and nothing else; only RunPod's history load
// writes to the broker's database, while the broker is stopped.
package loadgen
