package main

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// TestStrictTransportOverOwnTLS (R-SEC): a broker serving HTTPS itself
// tells browsers to keep to HTTPS for its name, on pages and API alike;
// not over plain HTTP, not for localhost (browsers would pin every port
// of it), and not when --hsts-max-age is 0.
func TestStrictTransportOverOwnTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	cert, key := ca.issue(t, dir, "broker", 2, false)
	start := func(tlsOn bool, maxAge time.Duration) *Main {
		m := &Main{Listen: "127.0.0.1:0", DataDir: t.TempDir(), HSTSMaxAge: maxAge}
		if tlsOn {
			m.TLSCert, m.TLSKey = cert, key
		}
		if err := m.Open(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	pem, err := os.ReadFile(ca.file)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	hsts := func(m *Main, host, path string) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, m.URL()+path, nil)
		req.Host = host
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.Header.Get("Strict-Transport-Security")
	}
	year := defaultHSTSMaxAge
	tlsOn := start(true, year)
	for _, path := range []string{"/signin", "/portal/signin", "/api/v1/hostpools", "/healthz"} {
		if got := hsts(tlsOn, "vdi.example.com", path); got != "max-age=31536000" {
			t.Errorf("GET %s over the broker's TLS: Strict-Transport-Security %q, want max-age=31536000", path, got)
		}
	}
	for _, host := range []string{"localhost", "localhost:8443", "broker.localhost", "LOCALHOST."} {
		if got := hsts(tlsOn, host, "/signin"); got != "" {
			t.Errorf("Host %s: Strict-Transport-Security %q, want none (a browser would pin every port of it)", host, got)
		}
	}
	if got := hsts(start(false, year), "vdi.example.com", "/signin"); got != "" {
		t.Errorf("over plain HTTP: Strict-Transport-Security %q, want none", got)
	}
	if got := hsts(start(true, 0), "vdi.example.com", "/signin"); got != "" {
		t.Errorf("with --hsts-max-age 0: Strict-Transport-Security %q, want none", got)
	}
}

// TestHSTSMaxAgeFlag: serve's default is a year, and a value out of
// 0..2 years, or not whole seconds, is a usage error naming the flag.
func TestHSTSMaxAgeFlag(t *testing.T) {
	if def := newServeCmd().Flags().Lookup("hsts-max-age").DefValue; def != defaultHSTSMaxAge.String() {
		t.Errorf("--hsts-max-age defaults to %s, want %s", def, defaultHSTSMaxAge)
	}
	for _, v := range []string{"-1s", "17521h"} {
		r := runCLI(t, "serve", "--hsts-max-age", v, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0")
		if r.code != 2 || !strings.Contains(r.stderr, "--hsts-max-age: must be 0 (no header) ..17520h, got") {
			t.Errorf("serve --hsts-max-age %s: exit %d, %q; want 2 naming the flag and 0..17520h", v, r.code, r.stderr)
		}
	}
	// max-age is whole seconds: 500ms would be sent as max-age=0, which
	// makes browsers forget the policy (RFC 6797, 6.1.1).
	for _, v := range []string{"500ms", "1.5s"} {
		r := runCLI(t, "serve", "--hsts-max-age", v, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0")
		if r.code != 2 || !strings.Contains(r.stderr, "--hsts-max-age: must be whole seconds") {
			t.Errorf("serve --hsts-max-age %s: exit %d, %q; want 2 asking for whole seconds", v, r.code, r.stderr)
		}
	}
}
