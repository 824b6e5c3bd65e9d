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

// gatewayFiles are what standalone gateways under test read: a
// certificate for 127.0.0.1 from a test CA, and a file for their Gateway
// token; with an HTTPS client trusting that CA.
type gatewayFiles struct {
	cert, key, tokenFile string
	roots                *x509.CertPool
	client               *http.Client
}

func newGatewayFiles(t *testing.T) *gatewayFiles {
	t.Helper()
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	f := &gatewayFiles{tokenFile: filepath.Join(dir, "gateway.token"), roots: x509.NewCertPool()}
	f.cert, f.key = ca.issue(t, dir, "gateway", 2, false)
	f.roots.AddCert(ca.cert)
	f.client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: f.roots}}}
	t.Cleanup(f.client.CloseIdleConnections)
	return f
}

// writeToken writes secret to the token file, as an operator rotating
// the Gateway token does.
func (f *gatewayFiles) writeToken(t *testing.T, secret string) {
	t.Helper()
	if err := os.WriteFile(f.tokenFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// testGateway is a standalone gateway on loopback, started by
// gatewayFiles.open; logs holds its log at info.
type testGateway struct {
	*GatewayMain
	files *gatewayFiles
	logs  *syncbuf.Buffer
}

// open starts m (its Name and Config the caller's) on loopback with f's
// certificate and token file and the broker at broker, closes it at the
// test's end, and returns once its start has checked the broker.
func (f *gatewayFiles) open(t *testing.T, broker string, m *GatewayMain) *testGateway {
	t.Helper()
	g := &testGateway{GatewayMain: m, files: f, logs: &syncbuf.Buffer{}}
	m.Listen, m.TLSCert, m.TLSKey = "127.0.0.1:0", f.cert, f.key
	m.KeysURL, m.BrokerURL, m.BrokerTokenFile = broker+"/api/v1/gateway/keys", broker+"/api/v1/gateway/tunnels", f.tokenFile
	m.Logger = slog.New(slog.NewTextHandler(g.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if err := m.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	<-m.probed
	return g
}

// hup writes secret to the token file, sends SIGHUP and waits for the
// n-th line of the log holding line.
func (g *testGateway) hup(t *testing.T, secret, line string, n int) {
	t.Helper()
	g.files.writeToken(t, secret)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); strings.Count(g.logs.String(), line) < n; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %d lines %q after SIGHUP:\n%s", n, line, g.logs.String())
		}
	}
}

// stepCheck steps clk, the gateway's, by a minute (its ReauthorizeEvery)
// and waits for its first check of open tunnels the broker answered.
func (g *testGateway) stepCheck(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	clk.Step(time.Minute)
	for deadline := time.Now().Add(10 * time.Second); metricValue(scrapeWith(t, g.files.client, "https://"+g.Addr()),
		`vdibroker_gateway_reauthorize_checks_total{result="answered"}`) < 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gateway %q: no check of open tunnels answered 10 s after the step:\n%s", g.Name, g.logs.String())
		}
	}
}

// tunnel connects user and opens the tunnel of its .rdp through g (to
// be closed at the test's end, if not before), sends bytes through it,
// and waits for the session to be Active through gateway gw.
func (b *gatewayBroker) tunnel(t *testing.T, g *testGateway, user, gw string) (session string, conn *gateway.ClientConn) {
	t.Helper()
	session, token := b.connect(t, user)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	conn, err := gateway.Dial(ctx, gateway.DialConfig{Gateway: g.Addr(), TLSConfig: &tls.Config{RootCAs: g.files.roots},
		Token: token, Target: b.addr, ClientName: "test"})
	if err != nil {
		t.Fatalf("tunnel through gateway %q for a user of %d bytes: %v\n%s", gw, len(user), err, g.logs.String())
	}
	t.Cleanup(func() { conn.Close() })
	if err := echo(conn); err != nil {
		t.Fatal(err)
	}
	b.waitSession(t, session, vdibroker.StateActive, gw)
	return session, conn
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
	f := newGatewayFiles(t)
	f.writeToken(t, own.Secret)
	clk := clocktesting.NewFakeClock(time.Now())
	g := f.open(t, b.m.URL(), &GatewayMain{Config: gateway.Config{Clock: clk, ReauthorizeEvery: time.Minute}})
	session, conn := b.tunnel(t, g, "alice", "rdgw-1")

	// SIGHUP with the token for RDGW-1.: taken, no rename said.
	const takes = "broker takes this gateway's reports"
	g.hup(t, caps.Secret, takes, 2)
	if got := g.logs.String(); strings.Contains(got, "the new Gateway token is another gateway's") || !strings.Contains(got, "gateway=RDGW-1.") {
		t.Errorf("after SIGHUP with a token for RDGW-1.: want it taken under that name, and no rename warned of:\n%s", got)
	}

	// The next check of open tunnels: the tunnel goes on.
	g.stepCheck(t, clk)
	if err := echo(conn); err != nil {
		t.Fatalf("the tunnel after the check under RDGW-1.: %v, want it open", err)
	}
	if n := g.Gateway.Stats().Tunnels; n != 1 {
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
	f := newGatewayFiles(t)
	f.writeToken(t, secret)
	for _, name := range []string{"rdgw-a", "rdgw-b"} {
		clk := clocktesting.NewFakeClock(time.Now())
		g := f.open(t, b.m.URL(), &GatewayMain{Name: name, Config: gateway.Config{Clock: clk, ReauthorizeEvery: time.Minute}})
		_, conn := b.tunnel(t, g, "user-of-"+name, name)
		// Its check of open tunnels, under its name, keeps its tunnel.
		g.stepCheck(t, clk)
		if err := echo(conn); err != nil {
			t.Fatalf("%s's tunnel after its check: %v, want it open", name, err)
		}
	}
}
