package gateway

import "net/http"

// HealthPath is the gateway's health route, on its own listener beside
// Path: a load balancer probes the port it balances.
const HealthPath = "/healthz"

// Health is the answer of the gateway's GET /healthz, shaped as the
// broker's (status ok, 200; 503 otherwise).
type Health struct {
	// Status is ok (tunnels are admitted), unavailable (none is, for
	// Reason), or live (?live).
	Status string `json:"status"`
	// Reason is why no tunnel is admitted, as the refusals count it:
	// keys_unavailable (no token keys read yet, R-GW6) or closing (the
	// gateway stops).
	Reason string `json:"reason,omitempty"`
}

// The answers, encoded once: an anonymous caller's probe allocates no
// answer of its own.
var (
	healthOK      = []byte(`{"status":"ok"}` + "\n")
	healthLive    = []byte(`{"status":"live"}` + "\n")
	healthNoKeys  = []byte(`{"status":"unavailable","reason":"keys_unavailable"}` + "\n")
	healthClosing = []byte(`{"status":"unavailable","reason":"closing"}` + "\n")
)

// keyCounter is a Verifier that may hold no keys yet
// (*gatewaytoken.Keyring, started before its broker).
type keyCounter interface{ KeyCount() int }

// Unavailable is why the gateway admits no tunnel now: "" when it does,
// else the refusal reason its tunnels get (closing, keys_unavailable).
// Whether the broker answers is not known without asking it: a tunnel's
// open asks, and is refused broker_unavailable when it does not.
func (g *Gateway) Unavailable() string {
	g.mu.Lock()
	closed := g.closed
	g.mu.Unlock()
	if closed {
		return "closing"
	}
	if kc, ok := g.cfg.Verifier.(keyCounter); ok && kc.KeyCount() == 0 {
		return "keys_unavailable"
	}
	return ""
}

// ServeHealth answers GET /healthz on the gateway's listener: 200
// {"status":"ok"} while it admits tunnels, 503 with the reason it does
// not (Unavailable); ?live answers 200 whenever the process serves, as
// the broker's does, so an orchestrator does not restart a gateway
// waiting for its broker. It needs no credential and says nothing but
// that reason: no URL, key id or version. Unlike the tunnel requests it
// is neither rate limited per address (a probe would take an entry of
// the address table) nor logged: it costs a lock and a constant answer,
// and the listener's per-address connection limit bounds its callers.
func (g *Gateway) ServeHealth(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	status, body := http.StatusOK, healthOK
	if r.URL.Query().Has("live") {
		body = healthLive
	} else {
		switch g.Unavailable() {
		case "closing":
			status, body = http.StatusServiceUnavailable, healthClosing
		case "keys_unavailable":
			status, body = http.StatusServiceUnavailable, healthNoKeys
		}
	}
	w.WriteHeader(status)
	w.Write(body)
}
