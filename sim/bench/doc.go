// Package bench is vdibroker's load generator: it sends connects (POST
// /api/v1/hostpools/{pool}/connect) to a running broker from a number of
// concurrent workers, each for a distinct user, and measures the rate, the
// latency percentiles and the errors by HTTP status and error code. Baseline
// runs the same load against a bare in-process net/http server answering a
// JSON body of the same size, so the broker's own cost can be read as a
// ratio measured side by side.
//
// It speaks plain net/http and encoding/json with the root package's types,
// so it measures the wire and nothing else.
package bench
