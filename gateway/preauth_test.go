package gateway

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker/gateway/tsgu"
	"github.com/vdibroker/vdibroker/gatewaytoken"
	"github.com/vdibroker/vdibroker/internal/echotest"
)

// getFrom is the status of a GET of the gateway's path from the
// address remote, without a token.
func (e *env) getFrom(remote string) int {
	r := httptest.NewRequest("GET", "https://gw"+Path, nil)
	r.RemoteAddr = remote
	w := httptest.NewRecorder()
	e.gw.ServeHTTP(w, r)
	return w.Code
}

// rawDial opens a client's channel(s) on either transport without its
// handshake: what an attacker without a token holds.
func (e *env) rawDial(ws bool) *ClientConn {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), 10*time.Second)
	defer cancel()
	cfg := DialConfig{Gateway: e.addr, TLSConfig: e.tls}
	dial := dialHTTP
	if ws {
		dial = dialWebSocket
	}
	c, err := dial(ctx, cfg, "{"+gatewaytoken.NewID()+"}") // a new one each: the last may still wait for its IN
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	return c
}

// TestHandshakeBoundedDespiteKeepalives: a client without a token that
// answers the handshake and then sends only keepalives (allowed from the
// handshake on) is closed once the handshake timeout has passed on the
// gateway's clock, as handshake_timeout: keepalives do not hold a slot of
// --max-tunnels for ever without a token (docs/gateway.md, "Refusals";
// R-GW1: a tunnel is for a token's holder).
func TestHandshakeBoundedDespiteKeepalives(t *testing.T) {
	for _, ws := range []bool{false, true} {
		name := map[bool]string{false: "two HTTP connections", true: "WebSocket"}[ws]
		t.Run(name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Now())
			e := newEnv(t, func(c *Config) { c.Clock = clk; c.HandshakeTimeout = time.Minute })
			c := e.rawDial(ws)
			if err := c.fr.WriteMessage(&tsgu.HandshakeRequest{VerMajor: 1, ExtendedAuth: tsgu.ExtendedAuthPAA}); err != nil {
				t.Fatal(err)
			}
			if m, err := c.expect(); err != nil || m.Type() != tsgu.PktHandshakeResponse {
				t.Fatalf("handshake: %v %v", m, err)
			}
			timedOut := func() bool { return refusal(e, "handshake_timeout") == 1 }
			// A keepalive every 20 s of the gateway's clock, each well
			// within the timeout of one step, for 3 minutes: three times
			// the timeout of the whole handshake.
			for range 9 {
				if err := c.fr.WriteMessage(&tsgu.Keepalive{}); err != nil {
					break // closed: checked below
				}
				clk.Step(20 * time.Second)
			}
			waitFor(t, "the handshake timeout", timedOut)
			if _, err := c.fr.ReadMessage(); err == nil {
				t.Error("the connection is still open after the handshake timeout")
			}
			waitFor(t, "the slot freed", func() bool { return e.gw.Stats().Tunnels == 0 })
			if got := refusal(e, "client_gone") + refusal(e, "protocol_error"); got != 0 {
				t.Errorf("the timeout also counted as %v other refusals", got)
			}
			if got := testutil.ToFloat64(e.gw.m.open); got != 0 {
				t.Errorf("tunnels open = %v", got)
			}
		})
	}
}

// TestPreauthPacketBounded: before its token is admitted a client may
// announce no packet longer than a tunnel create with the longest token:
// one announcing 60 KB is closed at its header, as protocol_error, instead
// of holding a 64 KiB buffer while it trickles the rest; a tunnel create
// with a cookie of gatewaytoken.MaxTokenLen characters still reaches the
// token's check (docs/gateway.md, "Refusals"; R-GW1).
func TestPreauthPacketBounded(t *testing.T) {
	for _, ws := range []bool{false, true} {
		name := map[bool]string{false: "two HTTP connections", true: "WebSocket"}[ws]
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, nil)
			handshake := func(c *ClientConn) {
				t.Helper()
				for _, d := range c.deadliners {
					d.SetDeadline(time.Now().Add(10 * time.Second))
				}
				if err := c.fr.WriteMessage(&tsgu.HandshakeRequest{VerMajor: 1, ExtendedAuth: tsgu.ExtendedAuthPAA}); err != nil {
					t.Fatal(err)
				}
				if m, err := c.expect(); err != nil || m.Type() != tsgu.PktHandshakeResponse {
					t.Fatalf("handshake: %v %v", m, err)
				}
			}
			c := e.rawDial(ws)
			handshake(c)
			hdr := tsgu.Marshal(&tsgu.TunnelCreate{})
			binary.LittleEndian.PutUint32(hdr[4:], 60_000)
			if err := c.fr.WritePacket(hdr); err != nil { // the header and a few bytes of 60,000
				t.Fatal(err)
			}
			if m, err := c.fr.ReadMessage(); err == nil {
				t.Fatalf("after a 60 KB header: %v, want the connection closed", m.Type())
			} else if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
				t.Fatalf("the gateway waits for the 60 KB packet's body: %v", err)
			}
			waitFor(t, "the refusal", func() bool { return refusal(e, "protocol_error") == 1 })

			long := e.rawDial(ws)
			handshake(long)
			err := long.fr.WriteMessage(&tsgu.TunnelCreate{FieldsPresent: tsgu.TunnelFieldPAACookie | tsgu.TunnelFieldReauth,
				PAACookie: utf16z(strings.Repeat("x", gatewaytoken.MaxTokenLen))})
			if err != nil {
				t.Fatal(err)
			}
			m, err := long.expect()
			if r, ok := m.(*tsgu.TunnelResponse); err != nil || !ok || r.StatusCode != tsgu.EProxyCookieAuthenticationDenied {
				t.Fatalf("a cookie of %d characters: %v %v, want a token refusal", gatewaytoken.MaxTokenLen, m, err)
			}
			waitFor(t, "the refusal", func() bool { return refusal(e, "token_malformed") == 1 })
		})
	}
}

// TestHandshakesPerAddress: one address holds at most
// MaxHandshakesPerAddress connections without an admitted token (an OUT
// channel waiting for its IN, a handshake): the next is refused 429 as
// address_handshakes, token or not, until one ends; a tunnel whose token
// was admitted no longer counts (docs/gateway.md, "Refusals"; R-GW1).
func TestHandshakesPerAddress(t *testing.T) {
	for _, ws := range []bool{false, true} {
		name := map[bool]string{false: "two HTTP connections", true: "WebSocket"}[ws]
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, func(c *Config) { c.MaxHandshakesPerAddress = 2 })
			raw := func() (*ClientConn, error) {
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				defer cancel()
				id := "{" + gatewaytoken.NewID() + "}"
				if ws {
					return dialWebSocket(ctx, DialConfig{Gateway: e.addr, TLSConfig: e.tls}, id)
				}
				return dialHTTP(ctx, DialConfig{Gateway: e.addr, TLSConfig: e.tls}, id)
			}
			busy := func(err error) bool {
				re, ok := errors.AsType[*RefusedError](err)
				return ok && re.HTTPStatus == http.StatusTooManyRequests
			}
			var held []*ClientConn
			for range 2 {
				c, err := raw()
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				held = append(held, c)
			}
			if c, err := raw(); !busy(err) {
				if c != nil {
					c.Close()
				}
				t.Fatalf("a third connection without a token: %v, want 429", err)
			}
			if c, err := e.dial(e.token(nil), e.host, ws); !busy(err) {
				if c != nil {
					c.Close()
				}
				t.Fatalf("a token holder from the busy address: %v, want 429", err)
			}
			if got := refusal(e, "address_handshakes"); got != 2 {
				t.Errorf("address_handshakes refusals = %v, want 2", got)
			}
			held[0].Close()
			waitFor(t, "the slot given back", func() bool { return e.gw.Stats().Preauth == 1 })
			open, err := e.dial(e.token(nil), e.host, ws)
			if err != nil {
				t.Fatalf("after a slot was given back: %v", err)
			}
			defer open.Close()
			echo(t, open, 100)
			// The open tunnel holds no slot: one more without a token fits.
			c, err := raw()
			if err != nil {
				t.Fatalf("with an admitted tunnel and one handshake held: %v", err)
			}
			defer c.Close()
			if st := e.gw.Stats(); st.Preauth != 2 || st.PreauthAddresses != 1 {
				t.Errorf("stats %+v, want 2 connections without a token from 1 address", st)
			}
		})
	}
}

// TestAddressLimitsByIPv6Prefix: the per-address limits count an IPv6
// address by its /64, so a client given a /64 cannot pass them once per
// address of it; IPv4 addresses, and IPv4 in IPv6, count one by one.
func TestAddressLimitsByIPv6Prefix(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	e := newEnv(t, func(c *Config) { c.Clock = clk; c.RequestBurst = 1; c.RequestRate = 1 })
	for _, tc := range []struct {
		remote string
		want   int
	}{
		{"[2001:db8:1:2::1]:4000", http.StatusMethodNotAllowed},
		{"[2001:db8:1:2::2]:4000", http.StatusTooManyRequests}, // the same /64
		{"[2001:db8:1:2:ffff:ffff:ffff:ffff]:4000", http.StatusTooManyRequests},
		{"[2001:db8:1:3::1]:4000", http.StatusMethodNotAllowed}, // the next /64
		{"192.0.2.1:4000", http.StatusMethodNotAllowed},
		{"192.0.2.2:4000", http.StatusMethodNotAllowed},
		{"[::ffff:192.0.2.2]:4000", http.StatusTooManyRequests}, // 192.0.2.2 again
	} {
		if got := e.getFrom(tc.remote); got != tc.want {
			t.Errorf("from %s: %d, want %d", tc.remote, got, tc.want)
		}
	}
	if got := e.gw.Stats().Addresses; got != 4 {
		t.Errorf("%d addresses tracked, want 4 (two /64s, two IPv4)", got)
	}
}

// TestTargetPolicy: with target ports and networks set, a token opens
// only a host whose port they allow and that resolves to an address in
// them, and the gateway connects to the address it checked, never one
// outside; a host's agent registering another address (its database's,
// say) does not make the gateway a way into that network
// (docs/gateway.md, "Refusals"; R-GW1). A dual-stack host whose name
// also resolves to an address outside (its IPv6 address, with
// --target-networks naming the IPv4 network) is reached at the one
// inside, not refused.
func TestTargetPolicy(t *testing.T) {
	_, portS, _ := net.SplitHostPort(echotest.Listen(t))
	for _, tc := range []struct {
		name     string
		ports    []uint16
		networks []string
		host     string // the token's host, port added
		resolves []string
		refused  bool
	}{
		{"no policy", nil, nil, "127.0.0.1", nil, false},
		{"allowed", []uint16{3389, 0}, []string{"127.0.0.0/8"}, "127.0.0.1", nil, false},
		{"a name resolving inside", nil, []string{"127.0.0.0/8"}, "rdsh01.test", []string{"127.0.0.1"}, false},
		{"another port", []uint16{3389}, nil, "127.0.0.1", nil, true},
		{"another network", nil, []string{"10.0.0.0/8"}, "127.0.0.1", nil, true},
		{"a name resolving outside", nil, []string{"127.0.0.0/8"}, "db.test", []string{"10.1.2.3"}, true},
		{"a name resolving inside and outside", nil, []string{"127.0.0.0/8"}, "rdsh02.test", []string{"2001:db8::5", "10.1.2.3", "127.0.0.1"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var dialled []string
			var mu sync.Mutex
			e := newEnv(t, func(c *Config) {
				for _, p := range tc.ports {
					if p == 0 {
						n, _ := strconv.Atoi(portS)
						p = uint16(n)
					}
					c.TargetPorts = append(c.TargetPorts, p)
				}
				for _, n := range tc.networks {
					c.TargetNetworks = append(c.TargetNetworks, netip.MustParsePrefix(n))
				}
				c.LookupNetIP = func(_ context.Context, _, host string) ([]netip.Addr, error) {
					var out []netip.Addr
					for _, a := range tc.resolves {
						out = append(out, netip.MustParseAddr(a))
					}
					return out, nil
				}
				c.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
					mu.Lock()
					dialled = append(dialled, addr)
					mu.Unlock()
					_, p, _ := net.SplitHostPort(addr)
					var d net.Dialer
					return d.DialContext(ctx, network, "127.0.0.1:"+p)
				}
			})
			host := net.JoinHostPort(tc.host, portS)
			c, err := e.dial(e.token(func(c *gatewaytoken.Claims) { c.Host = host }), host, true)
			if tc.refused {
				var re *RefusedError
				if !errors.As(err, &re) || re.Step != tsgu.PktChannelResponse || re.Code != tsgu.EProxyRAPAccessDenied {
					if c != nil {
						c.Close()
					}
					t.Fatalf("dial: %v, want E_PROXY_RAP_ACCESSDENIED at the channel", err)
				}
				waitFor(t, "the refusal", func() bool { return refusal(e, "target_not_allowed") == 1 })
				if len(dialled) != 0 {
					t.Errorf("the gateway connected to %v", dialled)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			echo(t, c, 100)
			want := host
			if len(tc.resolves) > 0 {
				// The address checked, not the name again: the
				// first inside the networks.
				want = net.JoinHostPort(tc.resolves[len(tc.resolves)-1], portS)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(dialled) != 1 || dialled[0] != want {
				t.Errorf("connected to %v, want %s", dialled, want)
			}
		})
	}
}

// TestAddressTableFullEvictsOldest: the table of addresses the request
// rate is kept for holds MaxAddresses; when it is full of addresses seen
// within the minute, a new address takes the place of the one seen
// longest ago instead of being refused: a client with more addresses
// than the table holds (an IPv6 /48 holds 65,536 /64s) kept it full and
// every new client, without any token, was refused rate_limited (R-GW1).
// The addresses still in the table keep their rate.
func TestAddressTableFullEvictsOldest(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	e := newEnv(t, func(c *Config) { c.Clock = clk; c.RequestBurst = 1; c.RequestRate = 0.001; c.MaxAddresses = 2 })
	steps := []struct {
		remote string
		want   int
	}{
		{"[2001:db8:0:1::1]:4000", http.StatusMethodNotAllowed}, // its burst of 1
		{"[2001:db8:0:2::1]:4000", http.StatusMethodNotAllowed}, // the table full
		{"[2001:db8:0:3::1]:4000", http.StatusMethodNotAllowed}, // in place of :1::, seen longest ago
		{"[2001:db8:0:2::1]:4000", http.StatusTooManyRequests},  // :2:: kept, its burst used
		{"[2001:db8:0:1::1]:4000", http.StatusMethodNotAllowed}, // :1:: again, as new, in place of :3::
	}
	for i, s := range steps {
		clk.Step(time.Second) // within the minute: none is stale
		if got := e.getFrom(s.remote); got != s.want {
			t.Errorf("step %d, from %s: %d, want %d", i+1, s.remote, got, s.want)
		}
		if got := e.gw.Stats().Addresses; got > 2 {
			t.Errorf("step %d: %d addresses tracked, want at most 2", i+1, got)
		}
	}
}

// TestPendingChannelsFullClosesOldest: MaxPendingChannels OUT channels
// wait for their IN channel at most; when that many wait, the one waiting
// longest is closed, counted pending_full, to make room for a new one,
// which a client then joins at once: a client's IN channel follows its
// OUT channel within a round trip, and refusing new ones let OUT
// channels left waiting (20 an address, 50 addresses for the default
// 1,000, each held the handshake timeout) refuse every client of the
// two-connection transport, without any token (docs/gateway.md,
// "Refusals"; R-GW1).
func TestPendingChannelsFullClosesOldest(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now()) // the waits do not end
	e := newEnv(t, func(c *Config) { c.Clock = clk; c.MaxPendingChannels = 2 })
	waiting := func() *bufio.Reader { // an OUT channel whose IN never comes
		t.Helper()
		c, err := tls.Dial("tcp", e.addr, e.tls)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if err := request(c, methodOut, DialConfig{Gateway: e.addr}, "{"+gatewaytoken.NewID()+"}", false); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("OUT channel: %v %v", resp, err)
		}
		if _, err := io.ReadFull(br, make([]byte, 10)); err != nil { // the seed
			t.Fatal(err)
		}
		return br
	}
	oldest := waiting()
	clk.Step(time.Second)
	waiting()
	c, err := e.dial(e.token(nil), e.host, false)
	if err != nil {
		t.Fatalf("a client while %d OUT channels wait: %v", 2, err)
	}
	defer c.Close()
	echo(t, c, 100)
	if _, err := oldest.ReadByte(); err != io.EOF {
		t.Errorf("the OUT channel waiting longest: read %v, want it closed (EOF)", err)
	}
	if got := refusal(e, "pending_full"); got != 1 {
		t.Errorf("pending_full refusals = %v, want 1", got)
	}
	if got := e.gw.Stats().PendingChannels; got != 1 {
		t.Errorf("%d OUT channels waiting, want 1 (the newer)", got)
	}
}

// TestFullGatewayEvictsHandshakes: a gateway holding MaxTunnels, some of
// them handshakes whose token was not accepted, closes the oldest of
// those for a new client, counted handshake_evicted, and answers 503
// gateway_full only when every slot holds a tunnel whose token was: 20
// handshakes an address, held the handshake timeout each, from 500 IPv6
// /64s took the default 10,000 slots and refused every client, without
// any token (docs/gateway.md, "Refusals"; R-GW1).
func TestFullGatewayEvictsHandshakes(t *testing.T) {
	for _, ws := range []bool{false, true} {
		name := map[bool]string{false: "two HTTP connections", true: "WebSocket"}[ws]
		t.Run(name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Now()) // the handshakes do not time out
			e := newEnv(t, func(c *Config) { c.Clock = clk; c.MaxTunnels = 2 })
			// One at a time: a WebSocket's handshake is registered after
			// its upgrade is answered, so the second dial's could be
			// registered first, and the "older" be the newer.
			older := e.rawDial(ws)
			waitFor(t, "the older handshake held", func() bool { return e.gw.Stats().Tunnels == 1 })
			newer := e.rawDial(ws)
			waitFor(t, "two handshakes held", func() bool { return e.gw.Stats().Tunnels == 2 })
			for _, c := range []*ClientConn{older, newer} {
				for _, d := range c.deadliners {
					d.SetDeadline(time.Now().Add(10 * time.Second))
				}
			}
			// answers says whether c's handshake is still served.
			answers := func(c *ClientConn) bool {
				if err := c.fr.WriteMessage(&tsgu.HandshakeRequest{VerMajor: 1, ExtendedAuth: tsgu.ExtendedAuthPAA}); err != nil {
					return false
				}
				m, err := c.expect()
				return err == nil && m.Type() == tsgu.PktHandshakeResponse
			}

			var open []*ClientConn
			for i, evicted := range []*ClientConn{older, newer} {
				c, err := e.dial(e.token(nil), e.host, ws)
				if err != nil {
					t.Fatalf("client %d on a gateway full of handshakes without a token: %v", i+1, err)
				}
				defer c.Close()
				open = append(open, c)
				if answers(evicted) {
					t.Fatalf("client %d: the oldest handshake is still served", i+1)
				}
				if i == 0 && !answers(newer) {
					t.Fatal("client 1: the newer handshake was closed, not the oldest")
				}
				waitFor(t, fmt.Sprintf("client %d: the eviction counted", i+1), func() bool { return refusal(e, "handshake_evicted") == float64(i+1) })
			}

			// Both slots hold a tunnel whose token was accepted: neither
			// is closed for a new client, who is told.
			c, err := e.dial(e.token(nil), e.host, ws)
			if re, ok := errors.AsType[*RefusedError](err); !ok || re.HTTPStatus != http.StatusServiceUnavailable {
				if c != nil {
					c.Close()
				}
				t.Fatalf("a third client with both slots open: %v, want HTTP 503", err)
			}
			if got := refusal(e, "gateway_full"); got != 1 {
				t.Errorf("gateway_full refusals = %v, want 1", got)
			}
			for _, c := range open {
				echo(t, c, 100)
			}
			if got := refusal(e, "client_gone") + refusal(e, "protocol_error") + refusal(e, "handshake_timeout"); got != 0 {
				t.Errorf("the evictions also counted as %v other refusals", got)
			}
		})
	}
}
