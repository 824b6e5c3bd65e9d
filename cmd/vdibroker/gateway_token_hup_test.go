//go:build unix

package main

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/syncbuf"
)

// TestGatewayKeysTokenFileSIGHUP: the standalone gateway fetches the
// broker's keys with --keys-token-file's token, and after SIGHUP with the
// token the file holds then, which it logs at warn (R-GW4; docs/gateway.md,
// the Gateway token).
func TestGatewayKeysTokenFileSIGHUP(t *testing.T) {
	doc := testKeysDoc(t)
	auth := make(chan string, 16)
	keys := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth <- r.Header.Get("Authorization")
		w.Write(doc)
	}))
	defer keys.Close()
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	cert, key := ca.issue(t, dir, "gateway", 2, false)
	tokenFile := filepath.Join(dir, "keys.token")
	if err := os.WriteFile(tokenFile, []byte("vdbt_first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// --keys-refresh long enough that the only fetches are Open's and
	// SIGHUP's.
	// At --log-level warn the reload's line still shows: the operator
	// waits for it on every gateway before deleting the old token.
	var logs syncbuf.Buffer
	m := &GatewayMain{Listen: "127.0.0.1:0", TLSCert: cert, TLSKey: key, Name: "rdgw-hup",
		KeysURL: keys.URL, KeysTokenFile: tokenFile, KeysRefresh: 4 * time.Minute,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if err := m.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	next := func() string {
		t.Helper()
		select {
		case a := <-auth:
			return a
		case <-time.After(10 * time.Second):
			t.Fatal("no fetch of the keys")
			return ""
		}
	}
	if got := next(); got != "Bearer vdbt_first" {
		t.Fatalf("at start: %q, want Bearer vdbt_first", got)
	}
	if err := os.WriteFile(tokenFile, []byte("vdbt_second\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if got := next(); got != "Bearer vdbt_second" {
		t.Fatalf("after SIGHUP: %q, want Bearer vdbt_second", got)
	}
	// Logged before the keys are fetched again.
	if !strings.Contains(logs.String(), "SIGHUP: token file read") {
		t.Errorf("no line of the reload at --log-level warn:\n%s", logs.String())
	}
}

// TestGatewaySIGHUPBeforeFirstKeyFetch: a gateway process sent SIGHUP
// while its first fetch of the keys is under way (a reload by an
// operator or a configuration tool right after the start) goes on
// starting, instead of ending as a SIGHUP not caught does, and answers
// the SIGHUP once it is ready: it reads --keys-token-file again and
// fetches the keys with the new token. Then it serves.
func TestGatewaySIGHUPBeforeFirstKeyFetch(t *testing.T) {
	doc := testKeysDoc(t)
	// The first fetch is answered only once release is closed.
	auth, release := make(chan string, 16), make(chan struct{})
	var fetches atomic.Int32
	keys := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth <- r.Header.Get("Authorization")
		if fetches.Add(1) == 1 {
			<-release
		}
		w.Write(doc)
	}))
	defer keys.Close()
	releaseOnce := sync.OnceFunc(func() { close(release) })
	defer releaseOnce()
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	cert, key := ca.issue(t, dir, "gateway", 2, false)
	tokenFile := filepath.Join(dir, "keys.token")
	if err := os.WriteFile(tokenFile, []byte("vdbt_first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout syncbuf.Buffer
	p := e2eStart(t, selfBin(t), nil, &stdout, "gateway", "--listen", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key,
		"--name", "rdgw-early-hup", "--keys-url", keys.URL, "--keys-token-file", tokenFile, "--keys-refresh", "4m")
	next := func(what string) string {
		t.Helper()
		select {
		case a := <-auth:
			return a
		case <-p.done:
			t.Fatalf("the gateway ended (%v) waiting for %s:\n%s", p.err, what, p.stderr.String())
		case <-time.After(20 * time.Second):
			t.Fatalf("no %s", what)
		}
		return ""
	}
	if got := next("first fetch of the keys"); got != "Bearer vdbt_first" {
		t.Fatalf("first fetch: %q, want Bearer vdbt_first", got)
	}
	// The gateway is inside its first fetch: SIGHUP now.
	if err := os.WriteFile(tokenFile, []byte("vdbt_second\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	releaseOnce()
	if got := next("fetch of the SIGHUP once ready"); got != "Bearer vdbt_second" {
		t.Fatalf("the SIGHUP's fetch: %q, want Bearer vdbt_second", got)
	}
	var addr string
	e2eEventually(t, "the gateway listening", 20*time.Second, func() bool {
		var ok bool
		addr, ok = strings.CutPrefix(strings.TrimSpace(stdout.String()), "vdibroker gateway listening on ")
		return ok
	})
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer client.CloseIdleConnections()
	if got := scrapeStatus(t, client, "https://"+addr+"/metrics", ""); got != http.StatusOK {
		t.Errorf("GET /metrics: %d, want 200", got)
	}
	select {
	case <-p.done:
		t.Fatalf("the gateway ended: %v\n%s", p.err, p.stderr.String())
	default:
	}
	if log := p.stderr.String(); !strings.Contains(log, "SIGHUP: token file read") {
		t.Errorf("no line of the reload:\n%s", log)
	}
}

// TestGatewaySIGHUPChecksTheNewBrokerToken_RGW4 (docs/gateway.md,
// "Deploying with the broker", 4): a SIGHUP that reads a new Gateway
// token into --broker-token-file has the gateway check it with a real
// broker as its start does, and say so: the broker's warnings at start
// ask the operator to write a token to the file and send SIGHUP, and
// without this nothing said whether the broker took it. Given --name, a
// token of another gateway is warned of (every tunnel would be refused
// credential_refused), and the right one again is taken. Given no
// --name, the gateway takes the new token's name: the warning names the
// old and the new name, as the tunnels admitted under the old one are
// closed at the next check of open tunnels.
func TestGatewaySIGHUPChecksTheNewBrokerToken_RGW4(t *testing.T) {
	b := startCLIBroker(t)
	api := vhttp.NewClient(b.m.URL(), b.m.AdminToken)
	own, err := api.CreateToken(t.Context(), vhttp.TokenRequest{Role: "Gateway", Subject: "rdgw"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := api.CreateToken(t.Context(), vhttp.TokenRequest{Role: "Gateway", Subject: "rdgw-other"})
	if err != nil {
		t.Fatal(err)
	}
	f := newGatewayFiles(t)
	start := func(t *testing.T, name string) *testGateway {
		t.Helper()
		f.writeToken(t, own.Secret)
		return f.open(t, b.m.URL(), &GatewayMain{Name: name})
	}
	const takes = "broker takes this gateway's reports"
	t.Run("--name", func(t *testing.T) {
		g := start(t, "rdgw")
		g.hup(t, other.Secret, "--name: the broker's Gateway token in --broker-token-file is another gateway's", 1)
		if got := g.logs.String(); !strings.Contains(got, `for gateway \"rdgw-other\", not \"rdgw\"`) {
			t.Errorf("the warning does not name both gateways:\n%s", got)
		}
		g.hup(t, own.Secret, takes, 2)
		if got := g.logs.String(); strings.Contains(got, "given no --name, takes its name") {
			t.Errorf("a gateway given --name warned of a new name:\n%s", got)
		}
	})
	t.Run("no --name", func(t *testing.T) {
		g := start(t, "")
		g.hup(t, other.Secret, "gateway=rdgw-other", 1)
		got := g.logs.String()
		for _, w := range []string{"level=WARN", "the new Gateway token is another gateway's", `records its reports as \"rdgw-other\"`,
			`none of those admitted as \"rdgw\"`, `--subject \"rdgw\"`, "was=rdgw", "tunnelsOpen=0"} {
			if !strings.Contains(got, w) {
				t.Errorf("after SIGHUP with another gateway's token the log lacks %q:\n%s", w, got)
			}
		}
	})
}
