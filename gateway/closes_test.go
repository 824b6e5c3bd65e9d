package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker/gatewaytoken"
)

// closingBroker is a MemoryBroker whose close reports go through the
// gateway's HTTPBroker to a broker on loopback that answers with status
// (0: takes the report into the MemoryBroker).
type closingBroker struct {
	*MemoryBroker
	http   *HTTPBroker
	status atomic.Int32
	mu     sync.Mutex
	tried  []string // the token ids of the close reports the broker was sent
}

func (b *closingBroker) TunnelClose(ctx context.Context, ev TunnelEvent) error {
	return b.http.TunnelClose(ctx, ev)
}

func (b *closingBroker) sent() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.tried...)
}

// closesEnv is a gateway on a fake clock whose broker takes close reports
// over HTTP as b.status says.
func closesEnv(t *testing.T) (*env, *clocktesting.FakeClock, *closingBroker) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Now())
	b := &closingBroker{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev TunnelEvent
		if err := json.NewDecoder(r.Body).Decode(&ev); err != nil || r.URL.Path != "/close" {
			http.Error(w, "bad report", http.StatusBadRequest)
			return
		}
		b.mu.Lock()
		b.tried = append(b.tried, ev.TokenID)
		b.mu.Unlock()
		if code := int(b.status.Load()); code != 0 {
			http.Error(w, `{"code":"StoreUnavailable","message":"the store is down"}`, code)
			return
		}
		b.MemoryBroker.TunnelClose(r.Context(), ev)
	}))
	t.Cleanup(srv.Close)
	b.http = &HTTPBroker{URL: srv.URL, Client: &http.Client{Timeout: 5 * time.Second}}
	e := newEnv(t, func(c *Config) {
		c.Clock = clk
		b.MemoryBroker = c.Broker.(*MemoryBroker)
		c.Broker = b
	})
	e.now = clk.Now()
	return e, clk, b
}

// closeTunnel opens a tunnel of session through e, closes it and waits
// until the gateway has tried to report its close; it returns the
// token's id.
func closeTunnel(t *testing.T, e *env, b *closingBroker, session string) string {
	t.Helper()
	id := gatewaytoken.NewID()
	c, err := e.dial(e.token(func(c *gatewaytoken.Claims) { c.ID, c.Session = id, session }), e.host, false)
	if err != nil {
		t.Fatal(err)
	}
	echo(t, c, 100)
	n := len(b.sent())
	c.CloseChannel()
	c.Close()
	waitFor(t, "the close report of "+session, func() bool { return len(b.sent()) > n })
	return id
}

// closesTaken returns the sessions of the close reports the broker took.
func closesTaken(b *closingBroker) []string {
	var s []string
	for _, ev := range b.Events() {
		if len(ev.Reason) >= 6 && ev.Reason[:6] == "close:" {
			s = append(s, ev.Session)
		}
	}
	return s
}

// TestCloseReportsSentAgain (R-GW3): a close report the broker does not
// take (its store down: 503) is kept and sent again every
// closeRetryEvery, one call a round while the broker still fails, and
// every kept report, oldest first, once it takes them again.
func TestCloseReportsSentAgain(t *testing.T) {
	e, clk, b := closesEnv(t)
	b.status.Store(http.StatusServiceUnavailable)
	first := closeTunnel(t, e, b, "s-1")
	second := closeTunnel(t, e, b, "s-2")
	waitFor(t, "two reports kept", func() bool { return e.gw.pendingCloses() == 2 })
	if got := testutil.ToFloat64(e.gw.m.closesPending); got != 2 {
		t.Errorf("pending close reports metric = %v, want 2", got)
	}

	// The broker still down: a round sends the oldest only.
	clk.Step(closeRetryEvery)
	waitFor(t, "a round's call", func() bool { return len(b.sent()) == 3 })
	e.gw.retryCloses() // a round of its own, after the ticker's: still one call
	if got := b.sent(); len(got) != 4 || got[2] != first || got[3] != first {
		t.Fatalf("reports sent %v, want the two closes, then the oldest (%s) once a round", got, first)
	}
	if got := closesTaken(b); len(got) != 0 {
		t.Fatalf("the broker took %v while down", got)
	}

	b.status.Store(0)
	clk.Step(closeRetryEvery)
	waitFor(t, "both reports taken", func() bool { return len(closesTaken(b)) == 2 })
	if got := closesTaken(b); got[0] != "s-1" || got[1] != "s-2" {
		t.Errorf("closes taken %v, want [s-1 s-2], oldest first", got)
	}
	if got := b.sent(); got[len(got)-1] != second {
		t.Errorf("last report sent %s, want %s", got[len(got)-1], second)
	}
	waitFor(t, "nothing kept", func() bool { return testutil.ToFloat64(e.gw.m.closesPending) == 0 })
	if got := testutil.ToFloat64(e.gw.m.closeReports.WithLabelValues("delivered")); got != 2 {
		t.Errorf("close reports delivered when sent again = %v, want 2", got)
	}
	for _, ev := range b.Events() {
		if ev.Reason == "close:closed" && (ev.Session == "s-1" || ev.Session == "s-2") && !ev.Reached {
			t.Errorf("the close report sent again lost its fields: %+v", ev)
		}
		// It says when it was sent, on the gateway's clock as At is: the
		// broker tells it late by these two alone (R-GW3).
		if strings.HasPrefix(ev.Reason, "close:") && ev.SentAt.Sub(ev.At) < closeRetryEvery {
			t.Errorf("the close report sent again says it was sent at %v, closed at %v: want %v later at least", ev.SentAt, ev.At, closeRetryEvery)
		}
	}
}

// TestCloseReportRefusedNotKept (R-GW3): a report the broker refuses (a
// 4xx: a malformed report, a revoked Gateway token; 404: a token it did
// not issue) is not sent again, as it would be refused again; a 429 is.
func TestCloseReportRefusedNotKept(t *testing.T) {
	for _, tt := range []struct {
		status int
		kept   int
	}{{http.StatusBadRequest, 0}, {http.StatusUnauthorized, 0}, {http.StatusNotFound, 0},
		{http.StatusTooManyRequests, 1}, {http.StatusBadGateway, 1}} {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			e, _, b := closesEnv(t)
			b.status.Store(int32(tt.status))
			closeTunnel(t, e, b, "s-1")
			// The report's handling after the call is synchronous in the
			// tunnel's end; wait for the tunnel to be gone.
			waitFor(t, "the tunnel's end", func() bool { return testutil.ToFloat64(e.gw.m.open) == 0 && e.gw.Stats().Tunnels == 0 })
			if got := e.gw.pendingCloses(); got != tt.kept {
				t.Errorf("answer %d: %d reports kept, want %d", tt.status, got, tt.kept)
			}
		})
	}
}

// TestCloseReportsBounded (R-GW3, R-SEC): at most maxCloseRetries
// reports are kept (the oldest dropped first), and one older than
// closeRetryFor is dropped without a call: a broker's long outage costs
// bounded memory.
func TestCloseReportsBounded(t *testing.T) {
	e, clk, b := closesEnv(t)
	b.status.Store(http.StatusServiceUnavailable)
	old := clk.Now()
	for i := range maxCloseRetries + 5 {
		e.gw.keepClose(TunnelEvent{TokenID: "t-" + string(rune('a'+i%26)) + time.Duration(i).String(), Session: "s", At: old})
	}
	if got := e.gw.pendingCloses(); got != maxCloseRetries {
		t.Fatalf("%d reports kept, want %d", got, maxCloseRetries)
	}
	if got := testutil.ToFloat64(e.gw.m.closeReports.WithLabelValues("dropped")); got != 5 {
		t.Errorf("dropped = %v, want 5", got)
	}
	e.gw.closes.mu.Lock()
	firstKept := e.gw.closes.events[0].TokenID
	e.gw.closes.mu.Unlock()
	if want := "t-f" + time.Duration(5).String(); firstKept != want {
		t.Errorf("oldest kept %s, want %s (the five oldest dropped)", firstKept, want)
	}

	clk.Step(closeRetryFor + time.Minute)
	waitFor(t, "the old reports dropped", func() bool { return e.gw.pendingCloses() == 0 })
	if got := b.sent(); len(got) != 0 {
		t.Errorf("reports older than a day were sent: %d calls", len(got))
	}
	e.gw.closes.mu.Lock()
	defer e.gw.closes.mu.Unlock()
	if e.gw.closes.events != nil {
		t.Error("the emptied list kept its array")
	}
}

// TestHTTPBrokerCloseRefusals: HTTPBroker's answer to a close tells a
// refusal (final) from a broker that did not take it (sent again).
func TestHTTPBrokerCloseRefusals(t *testing.T) {
	var status atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(int(status.Load()))
	}))
	t.Cleanup(srv.Close)
	hb := &HTTPBroker{URL: srv.URL, Client: &http.Client{Timeout: 5 * time.Second}}
	for code, final := range map[int]bool{400: true, 401: true, 403: true, 404: true, 409: true,
		408: false, 429: false, 500: false, 502: false, 503: false} {
		status.Store(int32(code))
		err := hb.TunnelClose(t.Context(), TunnelEvent{TokenID: "x"})
		if err == nil || finalRefusal(err) != final {
			t.Errorf("HTTP %d: %v, final %v, want final %v", code, err, finalRefusal(err), final)
		}
	}
	status.Store(204)
	if err := hb.TunnelClose(t.Context(), TunnelEvent{TokenID: "x"}); err != nil {
		t.Errorf("HTTP 204: %v", err)
	}
	if finalRefusal(context.DeadlineExceeded) || finalRefusal(errors.New("dial tcp: connection refused")) {
		t.Error("a timeout or an unreachable broker is taken for a refusal")
	}
}
