package gateway

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker/gateway/tsgu"
	"github.com/vdibroker/vdibroker/gatewaytoken"
)

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
	c, err := dial(ctx, cfg, "{0123456789abcdef}")
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
