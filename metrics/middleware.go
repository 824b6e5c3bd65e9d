package metrics

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// now is the clock InstrumentAPI times requests with (tests set it).
var now = time.Now

// InstrumentAPI wraps the broker's HTTP handler and records every connect
// (POST /api/v1/hostpools/{pool}/connect) in vdibroker_connects_total and
// vdibroker_connect_duration_seconds, with the result code read from the
// answer: OK (201), Reconnect or DryRun (200), or the error's code
// (NoCapacity, HostStarting, NotAssigned...). Other requests pass through
// untouched. Wrapping the handler keeps the HTTP server free of metrics code.
//
// Agent heartbeats (POST /api/v1/agent/heartbeat) are counted in
// vdibroker_heartbeats_total and timed in
// vdibroker_heartbeat_duration_seconds, by result code: the time beside
// the store's (vdibroker_store_tx_duration_seconds{op="ApplyHeartbeat"})
// tells an agent's wait on the broker from its wait on the network.
//
// A connect is counted under its pool only when the answer shows the pool
// exists (a session, a dry run, NoCapacity, HostStarting, NotAssigned, a
// conflict); every other answer (400, 401, 403, 404, an outage's 503...) is
// counted under pool "", so made-up pool names cannot grow the label set.
func InstrumentAPI(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/api/v1/agent/heartbeat" {
			start := now()
			cw := &captureWriter{ResponseWriter: w}
			next.ServeHTTP(cw, r)
			ObserveHeartbeat(answerCode(cw.statusOr200(), cw.body.Bytes()), now().Sub(start))
			return
		}
		pool, ok := connectPool(r)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		start := now()
		cw := &captureWriter{ResponseWriter: w}
		next.ServeHTTP(cw, r)
		status := cw.statusOr200()
		code := answerCode(status, cw.body.Bytes())
		if !poolKnown(status, code) {
			pool = ""
		}
		ObserveConnect(pool, code, now().Sub(start))
	})
}

// connectPool returns the pool of a connect request.
func connectPool(r *http.Request) (string, bool) {
	if r.Method != http.MethodPost {
		return "", false
	}
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/api/v1/hostpools/")
	if !ok {
		return "", false
	}
	esc, ok := strings.CutSuffix(rest, "/connect")
	if !ok || esc == "" || strings.Contains(esc, "/") {
		return "", false
	}
	pool, err := url.PathUnescape(esc)
	if err != nil {
		return "", false
	}
	return pool, true
}

// answerCode reads the result code of a connect answer. A 201 is always a
// new session (OK), so the common answer is not parsed again.
func answerCode(status int, body []byte) string {
	if status == http.StatusCreated {
		return CodeOK
	}
	if status >= 400 {
		var e struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if json.Unmarshal(body, &e) == nil && e.Error.Code != "" && len(e.Error.Code) <= 32 {
			return e.Error.Code
		}
		return "HTTP" + strconv.Itoa(status)
	}
	var a struct {
		Reconnect bool `json:"reconnect"`
		DryRun    bool `json:"dryRun"`
	}
	_ = json.Unmarshal(body, &a)
	return ConnectCode(nil, a.Reconnect, a.DryRun)
}

// captureWriter keeps the status and the first bytes of the body (a
// connect answer is small; the cap bounds memory for anything else).
type captureWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

const captureLimit = 64 << 10

func (w *captureWriter) statusOr200() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

func (w *captureWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *captureWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if room := captureLimit - w.body.Len(); room > 0 {
		w.body.Write(b[:min(len(b), room)])
	}
	return w.ResponseWriter.Write(b)
}

func (w *captureWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// poolKnown reports whether a connect answered status with code could only
// come from a pool that exists.
func poolKnown(status int, code string) bool {
	switch {
	case status/100 == 2:
		return true
	case status == http.StatusConflict:
		return true
	}
	switch code {
	case "NoCapacity", "HostStarting", "NotAssigned":
		return true
	}
	return false
}
