package main

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/gateway"
	"github.com/vdibroker/vdibroker/gateway/tsgu"
)

// TestServeGatewayReauthorize (R-GW4): the in-process gateway of serve
// --gateway-listen checks its tunnels with the broker's service every
// --gateway-reauthorize-every on its clock: while the session is open
// the tunnel goes on; once the broker ended it (its host deleted with
// force, the host's RDP connection still up) the tunnel is closed with
// E_PROXY_SESSIONTIMEOUT at the next check.
func TestServeGatewayReauthorize(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	g := startInprocGateway(t, gateway.Config{Clock: clk, ReauthorizeEvery: time.Minute})
	m, client, admin, addr, c, roots, ctx := g.m, g.client, g.admin, g.addr, g.c, g.roots, t.Context()
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := gateway.Dial(dctx, gateway.DialConfig{Gateway: m.Gateway.Addr(), TLSConfig: &tls.Config{RootCAs: roots},
		Token: g.token, Target: addr, ClientName: "test"})
	cancel()
	if err != nil {
		t.Fatalf("tunnel through the in-process gateway: %v", err)
	}
	defer conn.Close()
	echoOnce := func() error {
		go conn.Write([]byte("rdp!"))
		buf := make([]byte, 4)
		_, err := io.ReadFull(conn, buf)
		return err
	}
	if err := echoOnce(); err != nil {
		t.Fatal(err)
	}
	checks := func() float64 {
		return metricValue(scrapeWith(t, client, m.URL()), `vdibroker_gateway_reauthorize_checks_total{result="answered"}`)
	}
	waitChecks := func(n float64) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); checks() < n; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%v checks answered 10 s after the step, want %v", checks(), n)
			}
		}
	}
	// A minute with the session open: checked, and the tunnel goes on.
	clk.Step(time.Minute)
	waitChecks(1)
	if err := echoOnce(); err != nil {
		t.Fatalf("the tunnel of an open session after a check: %v", err)
	}
	// The broker ends the session; the host's connection stays up.
	if err := admin.DeleteSessionHost(ctx, "inproc", "ip001", true); err != nil {
		t.Fatal(err)
	}
	if u, err := admin.GetUserSession(ctx, "inproc", c.SessionID); err != nil || u.State != vdibroker.StateLoggedOff {
		t.Fatalf("session %+v %v, want ended", u, err)
	}
	clk.Step(time.Minute)
	waitChecks(2)
	errc := make(chan error, 1)
	go func() { _, err := io.ReadAll(conn); errc <- err }()
	select {
	case err := <-errc:
		var re *gateway.RefusedError
		if !errors.As(err, &re) || re.Code != tsgu.EProxySessionTimeout {
			t.Fatalf("the ended session's client saw %v, want a close with E_PROXY_SESSIONTIMEOUT", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the tunnel of the ended session is still open 10 s after the check")
	}
}
