package gateway

import (
	"context"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker/gateway/tsgu"
	"github.com/vdibroker/vdibroker/gatewaytoken"
)

// checkingBroker is a MemoryBroker whose CheckTunnels is check (nil: the
// MemoryBroker's), each call sent to calls first.
type checkingBroker struct {
	*MemoryBroker
	check func(ctx context.Context, gateway string, tunnels []TunnelEvent) ([]string, error)
	calls chan []TunnelEvent
}

func (b *checkingBroker) CheckTunnels(ctx context.Context, gateway string, tunnels []TunnelEvent) ([]string, error) {
	b.calls <- tunnels
	if b.check != nil {
		return b.check(ctx, gateway, tunnels)
	}
	return b.MemoryBroker.CheckTunnels(ctx, gateway, tunnels)
}

// reauthEnv is a gateway on a fake clock that checks its tunnels with
// broker every minute, and two tunnels through it: of session s-1 and
// s-2.
func reauthEnv(t *testing.T, check func(context.Context, string, []TunnelEvent) ([]string, error)) (e *env, clk *clocktesting.FakeClock, b *checkingBroker, c1, c2 *ClientConn) {
	t.Helper()
	clk = clocktesting.NewFakeClock(time.Now())
	b = &checkingBroker{check: check, calls: make(chan []TunnelEvent, 100)}
	e = newEnv(t, func(c *Config) {
		c.Clock, c.ReauthorizeEvery = clk, time.Minute
		b.MemoryBroker = c.Broker.(*MemoryBroker)
		c.Broker = b
	})
	e.now = clk.Now()
	e.gw.checkBatch = 1 // two tunnels: two checks each minute
	var err error
	if c1, err = e.dial(e.token(nil), e.host, false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c1.Close() })
	if c2, err = e.dial(e.token(func(c *gatewaytoken.Claims) { c.Session = "s-2" }), e.host, true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c2.Close() })
	echo(t, c1, 100)
	echo(t, c2, 100)
	return e, clk, b, c1, c2
}

// minute steps the clock to the next check and returns its first call:
// once it came, the check before has done all it does.
func minute(t *testing.T, clk *clocktesting.FakeClock, b *checkingBroker) []TunnelEvent {
	t.Helper()
	clk.Step(time.Minute)
	return next(t, b)
}

// next returns the next call of a check.
func next(t *testing.T, b *checkingBroker) []TunnelEvent {
	t.Helper()
	select {
	case ts := <-b.calls:
		return ts
	case <-time.After(10 * time.Second):
		t.Fatal("no check of the tunnels within 10 s of the step")
		return nil
	}
}

// TestReauthorizeClosesEndedSession (R-GW4): every ReauthorizeEvery the
// gateway asks the broker about its open tunnels, a batch at a time; the
// tunnel of a session the broker ended is closed with
// E_PROXY_SESSIONTIMEOUT and reported closed as session_ended, the other
// goes on.
func TestReauthorizeClosesEndedSession(t *testing.T) {
	e, clk, b, c1, c2 := reauthEnv(t, nil)
	// A minute with both sessions open: two checks of one tunnel each.
	if ts := minute(t, clk, b); len(ts) != 1 || ts[0].Gateway != "gw-test" {
		t.Fatalf("first check asked about %+v, want one tunnel of gw-test", ts)
	}
	if ts := next(t, b); len(ts) != 1 {
		t.Fatalf("second check of the minute asked about %d tunnels, want 1", len(ts))
	}
	echo(t, c1, 100)

	e.broker.EndSession("s-1")
	minute(t, clk, b)
	next(t, b)                        // both tunnels were open at the minute
	for _, d := range c1.deadliners { // bounds a broken test's wait
		d.SetDeadline(time.Now().Add(10 * time.Second))
	}
	_, err := io.ReadAll(c1)
	var re *RefusedError
	if !errors.As(err, &re) || re.Code != tsgu.EProxySessionTimeout {
		t.Fatalf("the ended session's client saw %v, want a close with E_PROXY_SESSIONTIMEOUT", err)
	}
	minute(t, clk, b) // the minute before is done with
	echo(t, c2, 100)
	// The metric counts the close before its report is sent: wait for
	// the report itself.
	var closes []string
	waitFor(t, "the close report", func() bool {
		closes = closes[:0]
		for _, ev := range e.broker.Events() {
			if ev.Reason == "close:session_ended" {
				closes = append(closes, ev.Session)
			}
		}
		return len(closes) > 0
	})
	if got := testutil.ToFloat64(e.gw.m.closed.WithLabelValues("session_ended")); got != 1 {
		t.Errorf("tunnels closed as session_ended = %v, want 1", got)
	}
	if len(closes) != 1 || closes[0] != "s-1" {
		t.Errorf("closes reported as session_ended: %v, want [s-1]", closes)
	}
	if got := testutil.ToFloat64(e.gw.m.checks.WithLabelValues("answered")); got < 4 {
		t.Errorf("answered checks = %v, want at least 4", got)
	}
}

// TestReauthorizeKeepsTunnelsWithoutAnswer (R-GW4): a broker that cannot
// be reached, or answers 503 (its store down), closes nothing, even of a
// session it ended: an outage must not cut every user off. The failures
// are counted.
func TestReauthorizeKeepsTunnelsWithoutAnswer(t *testing.T) {
	unavailable := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"code":"StoreUnavailable","message":"the store is down"}`, http.StatusServiceUnavailable)
	}))
	t.Cleanup(unavailable.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	for name, url := range map[string]string{"503": unavailable.URL, "unreachable": gone} {
		t.Run(name, func(t *testing.T) {
			hb := &HTTPBroker{URL: url, Client: &http.Client{Timeout: 5 * time.Second}}
			e, clk, b, c1, c2 := reauthEnv(t, hb.CheckTunnels)
			e.broker.EndSession("s-1")
			// One call a minute: the round ends at its failed batch.
			minute(t, clk, b)
			minute(t, clk, b)
			minute(t, clk, b) // the first two minutes' checks are done with
			echo(t, c1, 100)
			echo(t, c2, 100)
			if got := testutil.ToFloat64(e.gw.m.closed.WithLabelValues("session_ended")); got != 0 {
				t.Errorf("tunnels closed as session_ended = %v, want 0", got)
			}
			if got := testutil.ToFloat64(e.gw.m.checks.WithLabelValues("failed")); got < 2 {
				t.Errorf("failed checks = %v, want at least 2", got)
			}
		})
	}
}

// TestReauthorizeStopsAtFailure (R-GW4): a round of checks ends at the
// first batch the broker does not answer (an older broker's 404 in a
// rolling upgrade, one that is down): a gateway with many batches makes
// one call and writes one line each ReauthorizeEvery, not one per batch,
// each of which may wait its timeout.
func TestReauthorizeStopsAtFailure(t *testing.T) {
	older := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(older.Close)
	hb := &HTTPBroker{URL: older.URL, Client: &http.Client{Timeout: 5 * time.Second}}
	e, _, b, c1, c2 := reauthEnv(t, hb.CheckTunnels) // batches of one tunnel
	e.gw.reauthorize()                               // the clock never steps: this is the only round
	if n := len(b.calls); n != 1 {
		t.Errorf("a round against a broker answering 404 made %d calls, want 1", n)
	}
	if got := testutil.ToFloat64(e.gw.m.checks.WithLabelValues("failed")); got != 1 {
		t.Errorf("failed checks = %v, want 1", got)
	}
	echo(t, c1, 100)
	echo(t, c2, 100)
}

// TestHTTPBrokerCheckAnswer: only a 200 answer that holds the list
// closes tunnels; a 200 without it (a proxy's page, null) is no answer.
func TestHTTPBrokerCheckAnswer(t *testing.T) {
	for _, tt := range []struct {
		body    string
		want    []string
		wantErr bool
	}{
		{`{"open":["a","b"]}`, []string{"a", "b"}, false},
		{`{"open":[]}`, []string{}, false},
		{`{"open":null}`, nil, true},
		{`<html>maintenance</html>`, nil, true},
		{`{}`, nil, true},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/tunnels/check" || r.Header.Get("Authorization") != "Bearer tok" {
				http.Error(w, "wrong request", 400)
				return
			}
			io.WriteString(w, tt.body)
		}))
		got, err := (&HTTPBroker{URL: srv.URL + "/tunnels", Token: "tok"}).CheckTunnels(t.Context(), "gw", []TunnelEvent{{TokenID: "a"}})
		srv.Close()
		if (err != nil) != tt.wantErr || len(got) != len(tt.want) {
			t.Errorf("answer %s: %v %v, want %v (error %v)", tt.body, got, err, tt.want, tt.wantErr)
		}
	}
}

// TestHTTPBrokerTokenFunc: every report the gateway sends the broker
// (tunnel open, channel open, close, check) carries TokenFunc's answer at
// the time it is sent, in place of Token: a token file read again on
// SIGHUP replaces the credential of an open tunnel's later reports too
// (R-GW4).
func TestHTTPBrokerTokenFunc(t *testing.T) {
	var mu sync.Mutex
	got := map[string]string{} // path: Authorization
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got[r.URL.Path] = r.Header.Get("Authorization")
		mu.Unlock()
		io.WriteString(w, `{"open":[]}`)
	}))
	defer srv.Close()
	tok := "first"
	b := &HTTPBroker{URL: srv.URL + "/tunnels", Token: "static", TokenFunc: func() string { mu.Lock(); defer mu.Unlock(); return tok }}
	ctx, ev := t.Context(), TunnelEvent{TokenID: "a"}
	if err := b.TunnelOpen(ctx, ev); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	tok = "second"
	mu.Unlock()
	if err := b.ChannelOpen(ctx, ev); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CheckTunnels(ctx, "gw", []TunnelEvent{ev}); err != nil {
		t.Fatal(err)
	}
	if err := b.TunnelClose(ctx, ev); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"/tunnels/open": "Bearer first", "/tunnels/channel": "Bearer second", "/tunnels/check": "Bearer second", "/tunnels/close": "Bearer second"}
	mu.Lock()
	defer mu.Unlock()
	if !maps.Equal(got, want) {
		t.Errorf("Authorization by path: %v, want %v", got, want)
	}
}
