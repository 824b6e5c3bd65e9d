//go:build unix

package main

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/gateway"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestGatewayLongestUserTunnels_RGW1 (R-GW1, R-GW3, R-GW4, R-SEC): a
// user of the longest name the broker takes in bytes, 256 characters of
// four bytes each (1 KiB), connects through a real gateway on loopback
// with the access token the real broker signed: the tunnel opens and
// carries bytes, the gateway's report of it is taken (the session turns
// Active through it), its check of open tunnels keeps it, and its close
// disconnects the session. Each step names that user to the broker in a
// report the broker validates, and records it in the store's tunnels.
func TestGatewayLongestUserTunnels_RGW1(t *testing.T) {
	user := strings.Repeat("\U0001D538", vdibroker.MaxUserLen) // 𝔸, 4 bytes
	if n, b := utf8.RuneCountInString(user), len(user); n != 256 || b != 1024 {
		t.Fatalf("user of %d characters, %d bytes; want 256 and 1024", n, b)
	}
	b := startGatewayBroker(t)
	ctx := t.Context()
	own, err := b.admin.CreateToken(ctx, vhttp.TokenRequest{Role: vdibroker.RoleGateway, Subject: "rdgw-1"})
	if err != nil {
		t.Fatal(err)
	}
	f := newGatewayFiles(t)
	f.writeToken(t, own.Secret)
	clk := clocktesting.NewFakeClock(time.Now())
	g := f.open(t, b.m.URL(), &GatewayMain{Config: gateway.Config{Clock: clk, ReauthorizeEvery: time.Minute}})
	session, conn := b.tunnel(t, g, user, "rdgw-1")

	// The gateway's check of its open tunnels names the user: the broker
	// takes it and the tunnel goes on.
	g.stepCheck(t, clk)
	if err := echo(conn); err != nil {
		t.Fatalf("the tunnel after the check: %v, want it open\n%s", err, g.logs.String())
	}
	if n := g.Gateway.Stats().Tunnels; n != 1 {
		t.Errorf("%d tunnels open after the check, want 1", n)
	}
	conn.Close()
	b.waitSession(t, session, vdibroker.StateDisconnected, "rdgw-1")
}
