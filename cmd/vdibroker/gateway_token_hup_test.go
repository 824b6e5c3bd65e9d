//go:build unix

package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker/gatewaytoken"
	"github.com/vdibroker/vdibroker/internal/syncbuf"
)

// TestGatewayKeysTokenFileSIGHUP: the standalone gateway fetches the
// broker's keys with --keys-token-file's token, and after SIGHUP with the
// token the file holds then, which it logs at warn (R-GW4; docs/gateway.md,
// the Gateway token).
func TestGatewayKeysTokenFileSIGHUP(t *testing.T) {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := gatewaytoken.MarshalJWKS(map[string]ed25519.PublicKey{"k": pub})
	if err != nil {
		t.Fatal(err)
	}
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
