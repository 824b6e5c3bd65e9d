//go:build unix

package main

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker/internal/syncbuf"
)

// scrapeStatus is the status of GET url with "Authorization: Bearer
// token" (no header without a token).
func scrapeStatus(t *testing.T, c *http.Client, url, token string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// metricsTokenSteps sends SIGHUP (hup) after each change of a metrics
// token file and checks what /metrics takes then (R-SEC): the token
// written in place of the first is taken and the first refused; a file
// that does not read (too short for serve, two lines, empty, missing)
// keeps the token in force and says why at error; lines counts the
// reload's log lines of a kind, which the step waits for.
func metricsTokenSteps(t *testing.T, file string, scrape func(token string) int, hup func(), lines func(kind string) int) {
	t.Helper()
	const first, second = "metrics-first-0123456789", "metrics-second-0123456789"
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	reload := func(kind string) {
		t.Helper()
		n := lines(kind)
		hup()
		e2eEventually(t, "the SIGHUP line "+kind, 10*time.Second, func() bool { return lines(kind) > n })
	}
	if got := scrape(first); got != http.StatusOK {
		t.Fatalf("at start, the file's token: %d, want 200", got)
	}
	if got := scrape(""); got != http.StatusUnauthorized {
		t.Fatalf("at start, no token: %d, want 401", got)
	}
	write(second + "\n")
	reload("SIGHUP: token file read")
	if got := scrape(first); got != http.StatusUnauthorized {
		t.Errorf("after SIGHUP, the replaced token: %d, want 401", got)
	}
	if got := scrape(second); got != http.StatusOK {
		t.Errorf("after SIGHUP, the new token: %d, want 200", got)
	}
	for _, bad := range []struct{ name, text string }{
		{"two lines", first + "\n" + second + "\n"},
		{"empty", "\n"},
		{"missing", ""},
	} {
		if bad.name == "missing" {
			os.Remove(file)
		} else {
			write(bad.text)
		}
		reload("SIGHUP: token file not read")
		if got := scrape(second); got != http.StatusOK {
			t.Errorf("after SIGHUP with a file %s, the token in force: %d, want 200 (kept)", bad.name, got)
		}
		if got := scrape(first); got != http.StatusUnauthorized {
			t.Errorf("after SIGHUP with a file %s, the first token: %d, want 401", bad.name, got)
		}
	}
}

// TestServeMetricsTokenFileSIGHUP: a real serve process reads
// --metrics-token-file again on SIGHUP (R-SEC; docs/operations.md), so a
// leaked token is replaced without a restart; a token under 16
// characters, as at start, keeps the one in force; the lines name the
// flag and never the token.
func TestServeMetricsTokenFileSIGHUP(t *testing.T) {
	bin := selfBin(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "metrics.token")
	if err := os.WriteFile(file, []byte("metrics-first-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, base := e2eServeAt(t, bin, filepath.Join(dir, "data"), "vdb_admin_metrics_hup_0123456789", "127.0.0.1:0",
		"--log-level", "warn", "--metrics-token-file", file)
	scrape := func(token string) int { return scrapeStatus(t, http.DefaultClient, base+"/metrics", token) }
	hup := func() {
		if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	lines := func(kind string) int { return strings.Count(p.stderr.String(), kind) }
	metricsTokenSteps(t, file, scrape, hup, lines)
	// Too short for serve: kept.
	if err := os.WriteFile(file, []byte("short-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := lines("want at least 16")
	hup()
	e2eEventually(t, "the SIGHUP line of a short token", 10*time.Second, func() bool { return lines("want at least 16") > n })
	if got := scrape("metrics-second-0123456789"); got != http.StatusOK {
		t.Errorf("after a short token, the token in force: %d, want 200 (kept)", got)
	}
	if log := p.stderr.String(); strings.Contains(log, "metrics-first") || strings.Contains(log, "metrics-second") || strings.Contains(log, "short-token") {
		t.Errorf("a token is in the log:\n%s", log)
	}
}

// TestGatewayMetricsTokenFileSIGHUP: the standalone gateway reads
// --metrics-token-file again on SIGHUP (docs/gateway.md), without
// dropping its tunnels as a restart would.
func TestGatewayMetricsTokenFileSIGHUP(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	cert, key := ca.issue(t, dir, "gateway", 2, false)
	doc := testKeysDoc(t)
	keysFile := filepath.Join(dir, "keys.json")
	if err := os.WriteFile(keysFile, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "metrics.token")
	if err := os.WriteFile(file, []byte("metrics-first-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	m := &GatewayMain{Listen: "127.0.0.1:0", TLSCert: cert, TLSKey: key, Name: "rdgw-metrics",
		KeysFile: keysFile, KeysRefresh: 4 * time.Minute, MetricsTokenFile: file,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if err := m.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer client.CloseIdleConnections()
	scrape := func(token string) int { return scrapeStatus(t, client, "https://"+m.Addr()+"/metrics", token) }
	hup := func() {
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	lines := func(kind string) int { return strings.Count(logs.String(), kind) }
	metricsTokenSteps(t, file, scrape, hup, lines)
	if log := logs.String(); strings.Contains(log, "metrics-first") || strings.Contains(log, "metrics-second") {
		t.Errorf("a token is in the log:\n%s", log)
	}
}
