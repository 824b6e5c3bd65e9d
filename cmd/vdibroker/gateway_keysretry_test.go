package main

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/gateway"
	"github.com/vdibroker/vdibroker/gateway/tsgu"
	"github.com/vdibroker/vdibroker/gatewaytoken"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/echotest"
	"github.com/vdibroker/vdibroker/internal/syncbuf"
)

// TestGatewayStartsBeforeItsBroker_RGW6: a gateway started while its
// broker is down (a machine's boot, an admin starting it by hand first)
// serves instead of stopping: it refuses every tunnel keys_unavailable
// (the protocol's internal error), says so in its log and its metrics
// (vdibroker_gateway_keys 0, the failed reads counted), and reads the
// keys again with backoff on its clock (1 s, then 2 s, ...), a line a
// failed read. Once the broker is up, the next read takes the keys, the
// start's check of --broker-url runs then, and a user's tunnel opens
// through it to her session host, the session Active through the
// gateway its token names, as it was given no --name (R-GW4).
func TestGatewayStartsBeforeItsBroker_RGW6(t *testing.T) {
	t.Setenv("VDIBROKER_ADMIN_TOKEN", "")
	ctx := t.Context()
	// The broker runs once to issue the gateway's token, then stops: the
	// gateway starts while it is down, and it comes back on its address.
	data := t.TempDir()
	b := &Main{Listen: "127.0.0.1:0", DataDir: data}
	if err := b.Open(ctx); err != nil {
		t.Fatal(err)
	}
	brokerAddr := strings.TrimPrefix(b.URL(), "http://")
	gwTok, err := vhttp.NewClient(b.URL(), b.AdminToken).CreateToken(ctx, vhttp.TokenRequest{Role: vdibroker.RoleGateway, Subject: "rdgw-early"})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()

	dir := t.TempDir()
	ca := newTestCA(t, dir)
	cert, key := ca.issue(t, dir, "gateway", 2, false)
	clk := clocktesting.NewFakeClock(time.Now())
	var logs syncbuf.Buffer
	// No Name: the broker names it after its Gateway token (R-GW4).
	m := &GatewayMain{Listen: "127.0.0.1:0", TLSCert: cert, TLSKey: key,
		KeysURL: "http://" + brokerAddr + "/api/v1/gateway/keys", KeysRefresh: time.Minute,
		BrokerURL: "http://" + brokerAddr + "/api/v1/gateway/tunnels", BrokerToken: gwTok.Secret,
		Config: gateway.Config{Clock: clk, RequestBurst: 1000},
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	if err := m.Open(ctx); err != nil {
		t.Fatalf("a gateway whose broker is down did not start: %v", err)
	}
	defer m.Close()
	if got := logs.String(); !strings.Contains(got, "gateway token keys not read; serving, and refusing every tunnel keys_unavailable") ||
		!strings.Contains(got, "the broker did not answer") {
		t.Errorf("the start's log does not say it serves without keys, and why:\n%s", got)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer client.CloseIdleConnections()
	// A load balancer's probe on the tunnels' port: not ready until the
	// keys are read, and says why with nothing else.
	healthz := func() (int, string) {
		t.Helper()
		resp, err := client.Get("https://" + m.Addr() + gateway.HealthPath)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := healthz(); code != http.StatusServiceUnavailable || body != `{"status":"unavailable","reason":"keys_unavailable"}`+"\n" {
		t.Errorf("GET /healthz without keys: %d %q, want 503 keys_unavailable", code, body)
	}
	metrics := scrapeWith(t, client, "https://"+m.Addr())
	if v := metricValue(metrics, "vdibroker_gateway_keys"); v != 0 {
		t.Errorf("vdibroker_gateway_keys = %v without keys, want 0", v)
	}
	if v := metricValue(metrics, "vdibroker_gateway_keys_read_failures_total"); v != 1 {
		t.Errorf("vdibroker_gateway_keys_read_failures_total = %v after the start's read, want 1", v)
	}
	dial := func(token, target string) (*gateway.ClientConn, error) {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return gateway.Dial(dctx, gateway.DialConfig{Gateway: m.Addr(), TLSConfig: &tls.Config{InsecureSkipVerify: true},
			Token: token, Target: target, ClientName: "test"})
	}
	var re *gateway.RefusedError
	if _, err := dial("v1.k1.e30.c2ln", "10.0.0.9:3389"); !errors.As(err, &re) || re.Code != tsgu.EProxyInternalError {
		t.Errorf("a tunnel without keys: %v, want refused E_PROXY_INTERNALERROR", err)
	}
	// The refusal's line is written as the client reads its answer.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), "reason=keys_unavailable"); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the refusal's log line does not say keys_unavailable:\n%s", logs.String())
		}
	}

	// The reads again: 1 s after the start, then 2 s after that; each
	// failed one is a line.
	step := func(d time.Duration) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !clk.HasWaiters(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the keyring waits on no timer of the gateway's clock")
			}
		}
		clk.Step(d)
	}
	failures := func(n uint64) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); m.keys.Failures() < n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d failed reads of the keys, want %d:\n%s", m.keys.Failures(), n, logs.String())
			}
		}
	}
	failures(2) // the start's, and the token's read at once
	step(gatewaytoken.PendingRetryFirst)
	failures(3)
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), "retryIn=2s"); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no line of the read that failed 1 s after the start, saying the next is in 2 s:\n%s", logs.String())
		}
	}

	// The broker comes up on its address.
	b = &Main{Listen: brokerAddr, DataDir: data}
	if err := b.Open(ctx); err != nil {
		t.Fatalf("the broker again on %s: %v", brokerAddr, err)
	}
	defer b.Close()
	step(2 * gatewaytoken.PendingRetryFirst)
	select {
	case <-m.keys.Loaded():
	case <-time.After(10 * time.Second):
		t.Fatalf("no keys 2 s after the broker came up:\n%s", logs.String())
	}
	select {
	case <-m.probed:
	case <-time.After(10 * time.Second):
		t.Fatal("the check of --broker-url did not run once the keys were read")
	}
	if got := logs.String(); !strings.Contains(got, "gateway token keys loaded") || !strings.Contains(got, "broker takes this gateway's reports") {
		t.Errorf("the log does not say the keys were read and the broker takes the reports:\n%s", got)
	}
	if v := metricValue(scrapeWith(t, client, "https://"+m.Addr()), "vdibroker_gateway_keys"); v < 1 {
		t.Errorf("vdibroker_gateway_keys = %v once read, want 1 or more", v)
	}
	if code, body := healthz(); code != http.StatusOK || body != `{"status":"ok"}`+"\n" {
		t.Errorf("GET /healthz once the keys are read: %d %q, want 200 ok", code, body)
	}

	// A user's tunnel now opens through it to her session host.
	admin := vhttp.NewClient(b.URL(), b.AdminToken)
	if _, err := admin.PutHostPool(ctx, "early", map[string]any{"gatewayHostName": m.Addr()}); err != nil {
		t.Fatal(err)
	}
	rt, err := admin.CreateRegistrationToken(ctx, "early", vhttp.RegistrationTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	hostAddr := echotest.Listen(t)
	reg, err := admin.Register(ctx, &vdibroker.RegisterRequest{Token: rt.Token, HostName: "eh001", Address: hostAddr, Protocols: []string{"RDP"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Heartbeat(ctx, reg.Credential, &vdibroker.HeartbeatRequest{}); err != nil {
		t.Fatal(err)
	}
	c, err := admin.Connect(ctx, "early", vhttp.ConnectRequest{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	tok := regexp.MustCompile(`gatewayaccesstoken:s:(\S+)\r\n`).FindStringSubmatch(c.RDPFile)
	if tok == nil {
		t.Fatalf("no gateway token in:\n%s", c.RDPFile)
	}
	conn, err := dial(tok[1], hostAddr)
	if err != nil {
		t.Fatalf("a tunnel once the broker is up: %v\n%s", err, logs.String())
	}
	defer conn.Close()
	go conn.Write([]byte("rdp!"))
	buf := make([]byte, 4)
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "rdp!" {
		t.Fatalf("through the tunnel: %q %v", buf, err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		u, err := admin.GetUserSession(ctx, "early", c.SessionID)
		if err == nil && u.State == vdibroker.StateActive && u.Gateway == "rdgw-early" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %+v %v, want Active through rdgw-early", u, err)
		}
	}
}

// TestGatewayKeysRoute404IsRetried_RGW6: a --keys-url ending in the
// broker's keys route that answers 404 at start is a proxy before a
// broker that is not up yet (Traefik answers so while a broker's upgrade
// leaves it no backend), not a mistake in the settings: the gateway
// starts, refusing tunnels keys_unavailable and saying so, and reads the
// keys again on its clock until the broker is back. Exit 2 there would
// leave it stopped, its unit not restarting it, long after the broker
// came back. A 404 of another path still stops it
// (TestGatewayKeysStartErrorsSayWhatToFix).
func TestGatewayKeysRoute404IsRetried_RGW6(t *testing.T) {
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	jwks, err := gatewaytoken.MarshalJWKS(map[string]ed25519.PublicKey{"k1": pub})
	if err != nil {
		t.Fatal(err)
	}
	var backend atomic.Bool // the proxy has a broker to send to
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !backend.Load() || r.URL.Path != "/api/v1/gateway/keys" {
			http.Error(w, "404 page not found", http.StatusNotFound)
			return
		}
		w.Write(jwks)
	}))
	defer proxy.Close()

	dir := t.TempDir()
	ca := newTestCA(t, dir)
	cert, key := ca.issue(t, dir, "gateway", 2, false)
	clk := clocktesting.NewFakeClock(time.Now())
	var logs syncbuf.Buffer
	m := &GatewayMain{Listen: "127.0.0.1:0", TLSCert: cert, TLSKey: key, Name: "rdgw-1",
		KeysURL: proxy.URL + "/api/v1/gateway/keys", KeysRefresh: time.Minute,
		Config: gateway.Config{Clock: clk},
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	if err := m.Open(t.Context()); err != nil {
		t.Fatalf("a gateway whose keys route answers 404 did not start: %v", err)
	}
	defer m.Close()
	if got := logs.String(); !strings.Contains(got, "refusing every tunnel keys_unavailable") ||
		!strings.Contains(got, "no keys there (HTTP 404), though it names the broker's keys route") {
		t.Errorf("the start's log does not say it serves without keys, and why:\n%s", got)
	}
	backend.Store(true)
	for deadline := time.Now().Add(10 * time.Second); !clk.HasWaiters(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the keyring waits on no timer of the gateway's clock")
		}
	}
	clk.Step(gatewaytoken.PendingRetryFirst)
	select {
	case <-m.keys.Loaded():
	case <-time.After(10 * time.Second):
		t.Fatalf("no keys 1 s after the broker was back behind its proxy:\n%s", logs.String())
	}
	if got := m.keys.KeyCount(); got != 1 {
		t.Errorf("%d keys, want 1", got)
	}
}
