//go:build unix

package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/gateway"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/syncbuf"
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
	scraper := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	t.Cleanup(scraper.CloseIdleConnections)

	session, token := b.connect(t, user)
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := gateway.Dial(dctx, gateway.DialConfig{Gateway: m.Addr(), TLSConfig: &tls.Config{RootCAs: roots},
		Token: token, Target: b.addr, ClientName: "test"})
	cancel()
	if err != nil {
		t.Fatalf("tunnel through the gateway for a user of 1 KiB: %v\n%s", err, logs.String())
	}
	defer conn.Close()
	if err := echo(conn); err != nil {
		t.Fatal(err)
	}
	b.waitSession(t, session, vdibroker.StateActive, "rdgw-1")

	// The gateway's check of its open tunnels names the user: the broker
	// takes it and the tunnel goes on.
	checks := func() float64 {
		return metricValue(scrapeWith(t, scraper, "https://"+m.Addr()), `vdibroker_gateway_reauthorize_checks_total{result="answered"}`)
	}
	clk.Step(time.Minute)
	for deadline := time.Now().Add(10 * time.Second); checks() < 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no check of open tunnels answered 10 s after the step:\n%s", logs.String())
		}
	}
	if err := echo(conn); err != nil {
		t.Fatalf("the tunnel after the check: %v, want it open\n%s", err, logs.String())
	}
	if n := m.Gateway.Stats().Tunnels; n != 1 {
		t.Errorf("%d tunnels open after the check, want 1", n)
	}
	conn.Close()
	b.waitSession(t, session, vdibroker.StateDisconnected, "rdgw-1")
}
