package gateway

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker/gateway/tsgu"
	"github.com/vdibroker/vdibroker/gatewaytoken"
	"github.com/vdibroker/vdibroker/internal/echotest"
)

// env is a gateway on a real TLS listener on loopback, a key to mint
// tokens with, and an echo server as the session host.
type env struct {
	t      *testing.T
	gw     *Gateway
	addr   string
	tls    *tls.Config
	signer *gatewaytoken.Signer
	broker *MemoryBroker
	reg    *prometheus.Registry
	host   string // the echo host's address
	now    time.Time
}

func newEnv(t *testing.T, mut func(*Config)) *env {
	t.Helper()
	signer, err := gatewaytoken.GenerateSigner("k1")
	if err != nil {
		t.Fatal(err)
	}
	ks, err := gatewaytoken.NewKeySet(map[string]ed25519.PublicKey{"k1": signer.PublicKey()})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, signer: signer, broker: &MemoryBroker{}, reg: prometheus.NewRegistry(), host: echotest.Listen(t), now: time.Now()}
	// A burst large enough for the tests' own dials (two requests each).
	cfg := Config{Name: "gw-test", Verifier: ks, Broker: e.broker, Registry: e.reg, RequestBurst: 1000}
	if mut != nil {
		mut(&cfg)
	}
	e.gw, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(e.gw)
	srv.EnableHTTP2 = false
	srv.StartTLS()
	t.Cleanup(func() { srv.Close(); e.gw.Close() })
	e.addr = srv.Listener.Addr().String()
	e.tls = &tls.Config{InsecureSkipVerify: true} // the test's own self-signed certificate
	return e
}

func (e *env) token(mut func(*gatewaytoken.Claims)) string {
	e.t.Helper()
	c := gatewaytoken.Claims{ID: gatewaytoken.NewID(), User: "alice", Session: "s-1", Pool: "p", Host: e.host,
		NotBefore: e.now.Unix(), Expiry: e.now.Add(5 * time.Minute).Unix()}
	if mut != nil {
		mut(&c)
	}
	tok, err := e.signer.Sign(c)
	if err != nil {
		e.t.Fatal(err)
	}
	return tok
}

func (e *env) dial(tok, target string, ws bool) (*ClientConn, error) {
	ctx, cancel := context.WithTimeout(e.t.Context(), 10*time.Second)
	defer cancel()
	return Dial(ctx, DialConfig{Gateway: e.addr, TLSConfig: e.tls, Token: tok, Target: target, WebSocket: ws, ClientName: "test"})
}

func echo(t *testing.T, c *ClientConn, size int) {
	t.Helper()
	msg := bytes.Repeat([]byte("rdp!"), size/4)
	go c.Write(msg)
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("echo read: %v", err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatal("echo: bytes differ")
	}
}

func refusal(e *env, reason string) float64 {
	return testutil.ToFloat64(e.gw.m.refusals.WithLabelValues(reason))
}

// TestTunnelBothTransports: a valid token opens a tunnel on either
// transport; 200 KB cross it both ways intact (data packets are at most
// 64 KiB, so they are split and joined); the broker hears open, channel
// and close with the token's claims and the byte counts.
func TestTunnelBothTransports(t *testing.T) {
	for _, ws := range []bool{false, true} {
		name := map[bool]string{false: "two HTTP connections", true: "WebSocket"}[ws]
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, nil)
			c, err := e.dial(e.token(nil), e.host, ws)
			if err != nil {
				t.Fatal(err)
			}
			echo(t, c, 200_000)
			if got := testutil.ToFloat64(e.gw.m.open); got != 1 {
				t.Errorf("tunnels open = %v, want 1", got)
			}
			c.CloseChannel()
			c.Close()
			waitFor(t, "the close report", func() bool { return len(e.broker.Events()) == 3 })
			ev := e.broker.Events()
			kinds := []string{strings.Split(ev[0].Reason, ":")[0], strings.Split(ev[1].Reason, ":")[0], strings.Split(ev[2].Reason, ":")[0]}
			if strings.Join(kinds, ",") != "open,channel,close" {
				t.Fatalf("events %v", kinds)
			}
			last := ev[2]
			if last.User != "alice" || last.Host != e.host || last.Client != "127.0.0.1" || last.Gateway != "gw-test" ||
				last.BytesToHost != 200_000 || last.BytesToClient != 200_000 || !last.Reached {
				t.Errorf("close report %+v", last)
			}
			if got := testutil.ToFloat64(e.gw.m.open); got != 0 {
				t.Errorf("tunnels open after close = %v", got)
			}
		})
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRefusals: what the gateway refuses, each with the protocol's error
// code at the step it belongs to and counted by reason: a token for
// another host, expired, not yet valid, altered, signed by an unknown key,
// used by a second client, none at all.
func TestRefusals(t *testing.T) {
	e := newEnv(t, nil)
	other, _ := gatewaytoken.GenerateSigner("k2")
	otherTok, _ := other.Sign(gatewaytoken.Claims{ID: "x", User: "u", Session: "s", Pool: "p", Host: e.host,
		NotBefore: e.now.Unix(), Expiry: e.now.Add(time.Minute).Unix()})
	valid := e.token(nil)
	parts := strings.Split(valid, ".")
	altered := e.token(func(c *gatewaytoken.Claims) { c.Host = "127.0.0.1:1" })
	altered = strings.Join([]string{parts[0], parts[1], strings.Split(altered, ".")[2], parts[3]}, ".")
	used := e.token(nil)
	c, err := e.dial(used, e.host, false)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()

	tests := []struct {
		name, tok, target string
		step              tsgu.PacketType
		code              uint32
		reason            string
	}{
		{"another host", valid, "127.0.0.1:3389", tsgu.PktChannelResponse, tsgu.EProxyRAPAccessDenied, "target_mismatch"},
		{"same host, other port", e.token(nil), "127.0.0.1:1", tsgu.PktChannelResponse, tsgu.EProxyRAPAccessDenied, "target_mismatch"},
		{"expired", e.token(func(c *gatewaytoken.Claims) {
			c.NotBefore, c.Expiry = e.now.Add(-10*time.Minute).Unix(), e.now.Add(-time.Minute).Unix()
		}), e.host, tsgu.PktTunnelResponse, tsgu.EProxyCookieAuthenticationDenied, "token_expired"},
		{"not yet valid", e.token(func(c *gatewaytoken.Claims) {
			c.NotBefore, c.Expiry = e.now.Add(10*time.Minute).Unix(), e.now.Add(20*time.Minute).Unix()
		}), e.host, tsgu.PktTunnelResponse, tsgu.EProxyCookieAuthenticationDenied, "token_not_yet_valid"},
		{"altered", altered, e.host, tsgu.PktTunnelResponse, tsgu.EProxyCookieAuthenticationDenied, "token_bad_signature"},
		{"unknown key", otherTok, e.host, tsgu.PktTunnelResponse, tsgu.EProxyCookieAuthenticationDenied, "token_unknown_key"},
		{"garbage", "not-a-token", e.host, tsgu.PktTunnelResponse, tsgu.EProxyCookieAuthenticationDenied, "token_malformed"},
		{"second client", used, e.host, tsgu.PktTunnelResponse, tsgu.EProxyCookieAuthenticationDenied, "token_reused"},
		{"no token", "", e.host, tsgu.PktTunnelResponse, tsgu.EProxyCookieBadPacket, "no_token"},
	}
	for _, tt := range tests {
		for _, ws := range []bool{false, true} {
			t.Run(tt.name, func(t *testing.T) {
				before := refusal(e, tt.reason)
				tok := tt.tok
				if tt.reason == "target_mismatch" {
					tok = e.token(nil) // a fresh id: each is used once
				}
				c, err := e.dial(tok, tt.target, ws)
				var re *RefusedError
				if !errors.As(err, &re) || re.Step != tt.step || re.Code != tt.code {
					if c != nil {
						c.Close()
					}
					t.Fatalf("dial: %v, want %v 0x%08X", err, tt.step, tt.code)
				}
				waitFor(t, "the refusal counted", func() bool { return refusal(e, tt.reason) == before+1 })
			})
		}
	}
	waitFor(t, "no tunnel left", func() bool { return e.gw.Stats().Tunnels == 0 })
	if got := testutil.ToFloat64(e.gw.m.open); got != 0 {
		t.Errorf("tunnels open = %v after refusals", got)
	}
}

// TestHTTPRefusals: requests refused before any packet: another scheme
// than PAA (401 naming PAA), a bad connection id, a wrong method or path,
// an IN channel with no OUT channel, and the per-address rate limit.
func TestHTTPRefusals(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	e := newEnv(t, func(c *Config) { c.Clock = clk; c.RequestBurst = 5; c.RequestRate = 1 })
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: e.tls}}
	do := func(method, path string, h map[string]string) *http.Response {
		req, _ := http.NewRequest(method, "https://"+e.addr+path, nil)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	good := map[string]string{headerConnectionID: "{0123-abcd}", headerAuthScheme: "PAA"}
	if r := do(methodOut, Path, map[string]string{headerConnectionID: "{1}"}); r.StatusCode != 401 || r.Header.Get("WWW-Authenticate") != "PAA" {
		t.Errorf("no PAA: %d %q", r.StatusCode, r.Header.Get("WWW-Authenticate"))
	}
	if r := do(methodOut, Path, map[string]string{headerConnectionID: strings.Repeat("a", 65), headerAuthScheme: "PAA"}); r.StatusCode != 400 {
		t.Errorf("long connection id: %d", r.StatusCode)
	}
	if r := do("GET", Path, good); r.StatusCode != 405 {
		t.Errorf("GET: %d", r.StatusCode)
	}
	if r := do(methodOut, "/other", good); r.StatusCode != 404 {
		t.Errorf("other path: %d", r.StatusCode)
	}
	req, _ := http.NewRequest(methodIn, "https://"+e.addr+Path, strings.NewReader(strings.Repeat("x", 100)))
	req.Header.Set(headerConnectionID, "{dead}")
	req.Header.Set(headerAuthScheme, "PAA")
	req.TransferEncoding = []string{"chunked"}
	if r, err := client.Do(req); err != nil || r.StatusCode != 400 {
		t.Errorf("IN without OUT: %v %v", r, err)
	}
	// 5 requests used the burst of 5 (the clock stands still): the 6th is refused.
	if r := do(methodOut, "/other", good); r.StatusCode != 429 {
		t.Errorf("6th request: %d, want 429", r.StatusCode)
	}
	clk.Step(2 * time.Second) // two tokens back at 1 a second
	if r := do(methodOut, "/other", good); r.StatusCode != 404 {
		t.Errorf("after the limiter refilled: %d, want 404", r.StatusCode)
	}
	for _, reason := range []string{"unsupported_auth", "bad_request", "bad_method", "not_found", "no_out_channel", "rate_limited"} {
		if refusal(e, reason) == 0 {
			t.Errorf("refusal %s not counted", reason)
		}
	}
}

// TestPerUserLimit: a user holding MaxTunnelsPerUser tunnels is refused
// another (E_PROXY_MAXCONNECTIONSREACHED) until one closes; another user
// is not.
func TestPerUserLimit(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxTunnelsPerUser = 2 })
	var open []*ClientConn
	for range 2 {
		c, err := e.dial(e.token(nil), e.host, true)
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, c)
	}
	_, err := e.dial(e.token(nil), e.host, true)
	var re *RefusedError
	if !errors.As(err, &re) || re.Code != tsgu.EProxyMaxConnectionsReached {
		t.Fatalf("third tunnel: %v", err)
	}
	bob, err := e.dial(e.token(func(c *gatewaytoken.Claims) { c.User = "bob" }), e.host, true)
	if err != nil {
		t.Fatalf("another user: %v", err)
	}
	bob.Close()
	open[0].Close()
	waitFor(t, "a slot freed", func() bool { return e.gw.Stats().Tunnels == 1 })
	c, err := e.dial(e.token(nil), e.host, true)
	if err != nil {
		t.Fatalf("after a close: %v", err)
	}
	c.Close()
	open[1].Close()
}

// TestMaxTunnels: a gateway holds MaxTunnels tunnels, the last slot
// included, and refuses one more as gateway_full, on either transport
// with HTTP 503 to its request: the client is told, where it once had
// its connection closed after the OUT channel's 200 or the WebSocket's
// upgrade, with nothing to say why (docs/gateway.md, "Refusals"; R-GW1).
func TestMaxTunnels(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxTunnels = 2 })
	var open []*ClientConn
	for i := range 2 {
		c, err := e.dial(e.token(func(c *gatewaytoken.Claims) { c.User = fmt.Sprintf("user%d", i) }), e.host, true)
		if err != nil {
			t.Fatalf("tunnel %d of 2: %v", i+1, err)
		}
		open = append(open, c)
	}
	for _, ws := range []bool{false, true} {
		c, err := e.dial(e.token(func(c *gatewaytoken.Claims) { c.User = "user3" }), e.host, ws)
		if re, ok := errors.AsType[*RefusedError](err); !ok || re.HTTPStatus != http.StatusServiceUnavailable {
			if c != nil {
				c.Close()
			}
			t.Fatalf("a third tunnel on a gateway of 2 (WebSocket %v): %v, want HTTP 503", ws, err)
		}
	}
	waitFor(t, "the refusals", func() bool { return refusal(e, "gateway_full") == 2 })
	for _, c := range open {
		echo(t, c, 100)
		c.Close()
	}
}

// TestIdleAndLifetime: a tunnel idle for its token's idle time is closed
// with E_PROXY_SESSIONTIMEOUT, and so is one that outlives its lifetime,
// traffic or not; the gateway's clock is stepped, nothing sleeps.
func TestIdleAndLifetime(t *testing.T) {
	for _, tt := range []struct {
		name   string
		claims func(*gatewaytoken.Claims)
		busy   bool
		reason string
	}{
		{"idle", func(c *gatewaytoken.Claims) { c.IdleSeconds = 60 }, false, "idle_timeout"},
		{"lifetime while busy", func(c *gatewaytoken.Claims) { c.IdleSeconds, c.LifetimeSeconds = 3600, 120 }, true, "lifetime"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Now())
			e := newEnv(t, func(c *Config) { c.Clock = clk })
			e.now = clk.Now()
			c, err := e.dial(e.token(tt.claims), e.host, false)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			echo(t, c, 100)
			// 15 s timers (a quarter of the idle minute); step through 4
			// minutes, with traffic at each step when busy.
			closed := func() bool { return testutil.ToFloat64(e.gw.m.closed.WithLabelValues(tt.reason)) == 1 }
			msg := []byte("keep busy")
			for i := 0; i < 16; i++ {
				waitFor(t, "the watchdog's timer or the close", func() bool { return clk.HasWaiters() || closed() })
				if closed() {
					break
				}
				if tt.busy {
					if _, err := c.Write(msg); err != nil {
						break
					}
					if _, err := io.ReadFull(c, make([]byte, len(msg))); err != nil {
						break // closed: checked below
					}
				}
				clk.Step(15 * time.Second)
			}
			waitFor(t, "the close", closed)
			if !tt.busy {
				_, err = io.ReadAll(c)
			} else {
				_, err = io.ReadAll(c)
				if err == nil { // the close came while the loop read
					t.Log("close packet consumed by the loop")
					return
				}
			}
			var re *RefusedError
			if !errors.As(err, &re) || re.Code != tsgu.EProxySessionTimeout {
				t.Fatalf("client saw %v, want a close with E_PROXY_SESSIONTIMEOUT", err)
			}
		})
	}
}

// TestStartWait: a token naming a starting host holds the client while the
// host's port refuses, sending keepalives, and opens the channel when the
// port answers; without the wait claim the first refusal is final.
func TestStartWait(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	var mu sync.Mutex
	up := false
	var dials int
	e := newEnv(t, func(c *Config) {
		c.Clock = clk
		c.KeepaliveInterval = time.Second
		c.MaxStartWait = time.Minute
		// Passed while the host is still down (at 7.75 s below): the
		// bound of the whole handshake ends at the channel create, and
		// does not cut a starting host's wait.
		c.HandshakeTimeout = 5 * time.Second
		c.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			mu.Lock()
			defer mu.Unlock()
			dials++
			if !up {
				return nil, errors.New("connect: connection refused")
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
	})
	e.now = clk.Now()
	if _, err := e.dial(e.token(nil), e.host, true); err == nil || !strings.Contains(err.Error(), "0x800759DD") {
		t.Fatalf("no wait claim, host down: %v, want E_PROXY_TS_CONNECTFAILED", err)
	}
	done := make(chan error, 1)
	var conn *ClientConn
	go func() {
		c, err := e.dial(e.token(func(c *gatewaytoken.Claims) { c.StartWaitSeconds = 600 }), e.host, true)
		conn = c
		done <- err
	}()
	// The backoff's timer after the n-th dial (of the test's): the
	// handshake's own timer is stopped before the first dial.
	backoff := func(n int) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return dials >= n && clk.HasWaiters()
		}
	}
	// Backoff 250 ms, 500 ms, 1 s, 2 s, 4 s: 7.75 s of the gateway's
	// clock, past the handshake timeout.
	for i, d := range []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second} {
		waitFor(t, "a backoff timer", backoff(2+i))
		clk.Step(d)
	}
	// The dial the last step made is refused (the host is still down:
	// set up only once it was, not while it runs) and its backoff set.
	waitFor(t, "the last backoff", backoff(7))
	mu.Lock()
	up = true
	mu.Unlock()
	clk.Step(5 * time.Second)
	if err := <-done; err != nil {
		t.Fatalf("held dial: %v", err)
	}
	defer conn.Close()
	echo(t, conn, 100)
	mu.Lock()
	defer mu.Unlock()
	if dials != 1+7 {
		t.Errorf("dials = %d, want 1 (no wait) + 7 (6 refused, 1 answered)", dials)
	}
}

// TestPerUserLimitWithoutCase: the per-user limit counts a user's tunnels
// under every spelling of the name together, as the broker compares users
// (R-E5, R-GW4).
func TestPerUserLimitWithoutCase(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxTunnelsPerUser = 1 })
	c, err := e.dial(e.token(nil), e.host, true)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = e.dial(e.token(func(c *gatewaytoken.Claims) { c.User = "ALICE" }), e.host, true)
	var re *RefusedError
	if !errors.As(err, &re) || re.Code != tsgu.EProxyMaxConnectionsReached {
		t.Fatalf("a tunnel of ALICE while alice holds one: %v, want E_PROXY_MAXCONNECTIONSREACHED", err)
	}
}

// closeReports is a MemoryBroker that hands each close report to the
// test as it comes, so a test waits for it rather than polling.
type closeReports struct {
	*MemoryBroker
	closes chan TunnelEvent
}

func (b closeReports) TunnelClose(ctx context.Context, ev TunnelEvent) error {
	err := b.MemoryBroker.TunnelClose(ctx, ev)
	b.closes <- ev
	return err
}

// TestCloseReason_RGW3: the close report of a tunnel over the two HTTP
// connections says how the client left, whichever connection the gateway
// sees go first: CloseChannel and then both connections dropped is
// client_closed (it was aborted for some of 50 when OUT's end came
// first), both dropped without it client_gone, and OUT alone dropped
// with IN kept open aborted once OutGrace has passed on the gateway's
// clock, which the test steps.
func TestCloseReason_RGW3(t *testing.T) {
	for _, tc := range []struct {
		name  string
		drop  func(*ClientConn)
		want  string
		times int
	}{
		{"CloseChannel, then both", func(c *ClientConn) { c.CloseChannel(); c.Close() }, "client_closed", 50},
		{"both", func(c *ClientConn) { c.Close() }, "client_gone", 10},
		{"OUT alone", func(c *ClientConn) { c.closers[1].Close() }, "aborted", 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Now())
			reports := closeReports{MemoryBroker: &MemoryBroker{}, closes: make(chan TunnelEvent, 1)}
			e := newEnv(t, func(c *Config) { c.Broker, c.Clock = reports, clk })
			e.broker, e.now = reports.MemoryBroker, clk.Now()
			got := map[string]int{}
			for range tc.times {
				c, err := e.dial(e.token(nil), e.host, false)
				if err != nil {
					t.Fatal(err)
				}
				echo(t, c, 1000)
				tc.drop(c)
				if tc.want == "aborted" {
					// The tunnel's watchdog and its grace.
					waitFor(t, "the grace's timer", func() bool { return clk.Waiters() == 2 })
					clk.Step(5 * time.Second)
				}
				select {
				case ev := <-reports.closes:
					got[ev.Reason]++
				case <-t.Context().Done():
					t.Fatal("no close report")
				}
				c.Close()
			}
			if got[tc.want] != tc.times {
				t.Errorf("close reasons of %d tunnels: %v, want %s for each", tc.times, got, tc.want)
			}
		})
	}
}

// stuckHost is a session host's connection that takes nothing: a write
// blocks until the connection is closed, as one to a host whose receive
// window stays full. wrote is closed at the first write.
type stuckHost struct {
	net.Conn
	once   sync.Once
	wrote  chan struct{}
	closed chan struct{}
}

func (h *stuckHost) Write(p []byte) (int, error) {
	h.once.Do(func() { close(h.wrote) })
	<-h.closed
	return 0, net.ErrClosed
}

func (h *stuckHost) Close() error {
	select {
	case <-h.closed:
	default:
		close(h.closed)
	}
	return h.Conn.Close()
}

// TestOutGraceEndsStuckHost_RGW3: a client that drops both connections
// while the gateway's write to its host blocks (the host reads nothing)
// has its tunnel, and the host's connection, ended when OutGrace has
// passed: the pump, stuck in that write, never reads the IN connection's
// end. A read deadline on IN left both open for the idle timeout, an
// hour by default.
func TestOutGraceEndsStuckHost_RGW3(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	reports := closeReports{MemoryBroker: &MemoryBroker{}, closes: make(chan TunnelEvent, 1)}
	host := &stuckHost{wrote: make(chan struct{}), closed: make(chan struct{})}
	e := newEnv(t, func(c *Config) {
		c.Broker, c.Clock = reports, clk
		c.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			conn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			host.Conn = conn
			return host, nil
		}
	})
	e.broker, e.now = reports.MemoryBroker, clk.Now()
	c, err := e.dial(e.token(nil), e.host, false)
	if err != nil {
		t.Fatal(err)
	}
	go c.Write([]byte("to a host that reads nothing"))
	<-host.wrote
	c.Close()
	waitFor(t, "the grace's timer", func() bool { return clk.Waiters() == 2 })
	clk.Step(5 * time.Second)
	select {
	case ev := <-reports.closes:
		if ev.Reason != "aborted" {
			t.Errorf("close reason %q, want aborted", ev.Reason)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no close report 10 s after OutGrace passed: the tunnel holds its host")
	}
	select {
	case <-host.closed:
	default:
		t.Error("the host's connection is still open")
	}
}
