package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"regexp"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/gateway"
	"github.com/vdibroker/vdibroker/gateway/tsgu"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/echotest"
)

// TestServeGatewayReauthorize (R-GW4): the in-process gateway of serve
// --gateway-listen checks its tunnels with the broker's service every
// --gateway-reauthorize-every on its clock: while the session is open
// the tunnel goes on; once the broker ended it (its host deleted with
// force, the host's RDP connection still up) the tunnel is closed with
// E_PROXY_SESSIONTIMEOUT at the next check.
func TestServeGatewayReauthorize(t *testing.T) {
	t.Setenv("VDIBROKER_ADMIN_TOKEN", "")
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	cert, key := ca.issue(t, dir, "broker", 2, false)
	clk := clocktesting.NewFakeClock(time.Now())
	m := &Main{Listen: "127.0.0.1:0", DataDir: t.TempDir(), TLSCert: cert, TLSKey: key,
		Gateway: GatewayFlags{Listen: "127.0.0.1:0", Name: "rdgw-inproc",
			Config: gateway.Config{Clock: clk, ReauthorizeEvery: time.Minute}}}
	if err := m.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	ctx := t.Context()
	client, err := clientTLSOptions{CAFile: ca.file}.httpClient(m.URL(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	admin := vhttp.NewClient(m.URL(), m.AdminToken)
	admin.HTTPClient = client
	if _, err := admin.PutHostPool(ctx, "inproc", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	rt, err := admin.CreateRegistrationToken(ctx, "inproc", vhttp.RegistrationTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	addr := echotest.Listen(t)
	reg, err := admin.Register(ctx, &vdibroker.RegisterRequest{Token: rt.Token, HostName: "ip001", Address: addr, Protocols: []string{"RDP"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Heartbeat(ctx, reg.Credential, &vdibroker.HeartbeatRequest{}); err != nil {
		t.Fatal(err)
	}
	c, err := admin.Connect(ctx, "inproc", vhttp.ConnectRequest{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	tok := regexp.MustCompile(`gatewayaccesstoken:s:(\S+)\r\n`).FindStringSubmatch(c.RDPFile)
	if tok == nil {
		t.Fatalf("no token in:\n%s", c.RDPFile)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := gateway.Dial(dctx, gateway.DialConfig{Gateway: m.Gateway.Addr(), TLSConfig: &tls.Config{RootCAs: roots},
		Token: tok[1], Target: addr, ClientName: "test"})
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
