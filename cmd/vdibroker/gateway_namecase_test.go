//go:build unix

package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/gateway"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/echotest"
	"github.com/vdibroker/vdibroker/internal/syncbuf"
)

// gatewayBroker is a real broker on loopback whose connects go through
// an RD gateway (serve --gateway-hostname), with pool gwcase and its host
// gwc001, an echo server standing for its RDP port.
type gatewayBroker struct {
	m     *Main
	admin *vhttp.Client
	addr  string // the host's RDP address
}

func startGatewayBroker(t *testing.T) *gatewayBroker {
	t.Helper()
	m := &Main{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Gateway: GatewayFlags{HostName: "rdgw.test"}}
	if err := m.Open(t.Context()); err != nil {
		t.Fatalf("start broker: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	g := &gatewayBroker{m: m, admin: vhttp.NewClient(m.URL(), m.AdminToken), addr: echotest.Listen(t)}
	ctx := t.Context()
	if _, err := g.admin.PutHostPool(ctx, "gwcase", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	rt, err := g.admin.CreateRegistrationToken(ctx, "gwcase", vhttp.RegistrationTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := g.admin.Register(ctx, &vdibroker.RegisterRequest{Token: rt.Token, HostName: "gwc001", Address: g.addr, Protocols: []string{"RDP"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.admin.Heartbeat(ctx, reg.Credential, &vdibroker.HeartbeatRequest{}); err != nil {
		t.Fatal(err)
	}
	return g
}

// connect places user and returns the session id and the gateway access
// token of its .rdp.
func (g *gatewayBroker) connect(t *testing.T, user string) (session, token string) {
	t.Helper()
	c, err := g.admin.Connect(t.Context(), "gwcase", vhttp.ConnectRequest{User: user})
	if err != nil {
		t.Fatal(err)
	}
	tok := regexp.MustCompile(`gatewayaccesstoken:s:(\S+)\r\n`).FindStringSubmatch(c.RDPFile)
	if tok == nil {
		t.Fatalf("no gateway access token in:\n%s", c.RDPFile)
	}
	return c.SessionID, tok[1]
}

// waitSession waits until the session is in state through gateway.
func (g *gatewayBroker) waitSession(t *testing.T, id, state, gw string) {
	t.Helper()
	var u *vdibroker.UserSession
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var err error
		if u, err = g.admin.GetUserSession(t.Context(), "gwcase", id); err == nil && u.State == state && u.Gateway == gw {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s: %+v, want %s through %q", id, u, state, gw)
		}
	}
}

// echo writes through conn and reads the host's echo back.
func echo(conn io.ReadWriter) error {
	go conn.Write([]byte("rdp!"))
	buf := make([]byte, 4)
	_, err := io.ReadFull(conn, buf)
	return err
}

// TestGatewayCaseOnlyRenameKeepsTunnels_RGW4 (R-GW4, R-SEC): gateway
// names compare as host names do, ignoring the case of ASCII letters and
// one trailing dot (RDGW-1 and rdgw-1. are rdgw-1). A standalone gateway
// given no --name, whose Gateway token is for rdgw-1, is sent SIGHUP with
// a new token for RDGW-1 (a rotation whose admin wrote the name in
// capitals): it warns of no rename, and its tunnel admitted as rdgw-1
// goes on at the next check of open tunnels, where the broker's check
// found none admitted under RDGW-1 and the gateway closed it (its user
// connected again). The tunnel's close is then taken under the new
// spelling and disconnects the session: the broker finds the tunnel
// admitted as rdgw-1 for it.
func TestGatewayCaseOnlyRenameKeepsTunnels_RGW4(t *testing.T) {
	b := startGatewayBroker(t)
	ctx := t.Context()
	own, err := b.admin.CreateToken(ctx, vhttp.TokenRequest{Role: vdibroker.RoleGateway, Subject: "rdgw-1"})
	if err != nil {
		t.Fatal(err)
	}
	caps, err := b.admin.CreateToken(ctx, vhttp.TokenRequest{Role: vdibroker.RoleGateway, Subject: "edge team", Gateway: "RDGW-1."})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	cert, key := ca.issue(t, dir, "gateway", 2, false)
	tokenFile := filepath.Join(dir, "gateway.token")
	if err := os.WriteFile(tokenFile, []byte(own.Secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	logs := &syncbuf.Buffer{}
	m := &GatewayMain{Listen: "127.0.0.1:0", TLSCert: cert, TLSKey: key,
		KeysURL: b.m.URL() + "/api/v1/gateway/keys", BrokerURL: b.m.URL() + "/api/v1/gateway/tunnels", BrokerTokenFile: tokenFile,
		Config: gateway.Config{Clock: clk, ReauthorizeEvery: time.Minute},
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	if err := m.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	<-m.probed
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	t.Cleanup(client.CloseIdleConnections)

	session, token := b.connect(t, "alice")
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := gateway.Dial(dctx, gateway.DialConfig{Gateway: m.Addr(), TLSConfig: &tls.Config{RootCAs: roots},
		Token: token, Target: b.addr, ClientName: "test"})
	cancel()
	if err != nil {
		t.Fatalf("tunnel through the gateway: %v", err)
	}
	defer conn.Close()
	if err := echo(conn); err != nil {
		t.Fatal(err)
	}
	b.waitSession(t, session, vdibroker.StateActive, "rdgw-1")

	// SIGHUP with the token for RDGW-1.: taken, no rename said.
	if err := os.WriteFile(tokenFile, []byte(caps.Secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	const takes = "broker takes this gateway's reports"
	for deadline := time.Now().Add(10 * time.Second); strings.Count(logs.String(), takes) < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no second %q after SIGHUP:\n%s", takes, logs.String())
		}
	}
	if got := logs.String(); strings.Contains(got, "the new Gateway token is another gateway's") || !strings.Contains(got, "gateway=RDGW-1.") {
		t.Errorf("after SIGHUP with a token for RDGW-1.: want it taken under that name, and no rename warned of:\n%s", got)
	}

	// The next check of open tunnels: the tunnel goes on.
	checks := func() float64 {
		return metricValue(scrapeWith(t, client, "https://"+m.Addr()), `vdibroker_gateway_reauthorize_checks_total{result="answered"}`)
	}
	clk.Step(time.Minute)
	for deadline := time.Now().Add(10 * time.Second); checks() < 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no check of open tunnels answered 10 s after the step:\n%s", logs.String())
		}
	}
	if err := echo(conn); err != nil {
		t.Fatalf("the tunnel after the check under RDGW-1.: %v, want it open", err)
	}
	if n := m.Gateway.Stats().Tunnels; n != 1 {
		t.Errorf("%d tunnels open after the check, want 1", n)
	}

	// Its close, reported as RDGW-1., disconnects the session.
	conn.Close()
	b.waitSession(t, session, vdibroker.StateDisconnected, "rdgw-1")
}

// TestGatewaysSharingALegacyTokenKeepTheirNames_RGW4 (R-GW4; docs/gateway.md,
// "Upgrading"): a Gateway token issued before tokens named their gateway
// (its gateway empty, as migration 00078 leaves it) keeps working under
// the name each report gives. Two real gateways holding that one token,
// started with --name rdgw-a and rdgw-b, each admit a tunnel: the broker
// records each session through the gateway that reported it, not the
// token's subject, and each gateway's check of open tunnels keeps its own.
func TestGatewaysSharingALegacyTokenKeepTheirNames_RGW4(t *testing.T) {
	b := startGatewayBroker(t)
	ctx := t.Context()
	const secret = "vdbt_from_an_earlier_release"
	if err := b.m.Store.CreateToken(ctx, &vdibroker.Token{ID: "oldgw", Role: vdibroker.RoleGateway, Subject: "gateways",
		Hash: vdibroker.HashSecret(secret), CreateTime: time.Now()}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	cert, key := ca.issue(t, dir, "gateway", 2, false)
	tokenFile := filepath.Join(dir, "gateway.token")
	if err := os.WriteFile(tokenFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	t.Cleanup(client.CloseIdleConnections)
	for _, name := range []string{"rdgw-a", "rdgw-b"} {
		clk := clocktesting.NewFakeClock(time.Now())
		m := &GatewayMain{Listen: "127.0.0.1:0", TLSCert: cert, TLSKey: key, Name: name,
			KeysURL: b.m.URL() + "/api/v1/gateway/keys", BrokerURL: b.m.URL() + "/api/v1/gateway/tunnels", BrokerTokenFile: tokenFile,
			Config: gateway.Config{Clock: clk, ReauthorizeEvery: time.Minute}}
		if err := m.Open(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		<-m.probed
		session, token := b.connect(t, "user-of-"+name)
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		conn, err := gateway.Dial(dctx, gateway.DialConfig{Gateway: m.Addr(), TLSConfig: &tls.Config{RootCAs: roots},
			Token: token, Target: b.addr, ClientName: "test"})
		cancel()
		if err != nil {
			t.Fatalf("tunnel through %s: %v", name, err)
		}
		t.Cleanup(func() { conn.Close() })
		if err := echo(conn); err != nil {
			t.Fatal(err)
		}
		b.waitSession(t, session, vdibroker.StateActive, name)
		// Its check of open tunnels, under its name, keeps its tunnel.
		clk.Step(time.Minute)
		for deadline := time.Now().Add(10 * time.Second); metricValue(scrapeWith(t, client, "https://"+m.Addr()),
			`vdibroker_gateway_reauthorize_checks_total{result="answered"}`) < 1; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no check of open tunnels answered 10 s after the step", name)
			}
		}
		if err := echo(conn); err != nil {
			t.Fatalf("%s's tunnel after its check: %v, want it open", name, err)
		}
	}
}
