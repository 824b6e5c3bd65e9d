package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker/gateway/tsgu"
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
