package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// TestMetricsTokenAnyHeaderCharacters (R-SEC): a metrics token is only
// compared with what a scraper sends, so --metrics-token-file takes any
// token a client can send in a header, as serve always took: spaces, a
// tab and letters of any script inside, with a CRLF line end, at start
// and on SIGHUP (reload); such a token then opens /metrics over HTTP and
// nothing else does. A line break or another control character inside
// is no token: it is kept out. A token the gateway sends stays one word
// of printable ASCII.
func TestMetricsTokenAnyHeaderCharacters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.token")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("correct horse battery staple\r\n")
	f, err := newTokenFile("--metrics-token-file", path, "", tokenChecked, minMetricsToken)
	if err != nil || f.get() != "correct horse battery staple" {
		t.Fatalf("a token with spaces at start: %q, %v; want it taken", f.get(), err)
	}
	srv := httptest.NewServer(requireBearer(f.get, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	defer srv.Close()
	scrape := func(token string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	for _, tok := range []string{"correct horse battery staple", "métriques\tsecrètes-2026", "مفتاح-المقاييس-٢٠٢٦-abc"} {
		write(tok + "\n")
		if err := f.reload(); err != nil || f.get() != tok {
			t.Errorf("reload of %q: %q, %v; want it taken", tok, f.get(), err)
			continue
		}
		if got := scrape(tok); got != http.StatusOK {
			t.Errorf("GET /metrics with %q: %d, want 200", tok, got)
		}
		if got := scrape("metrics-0123456789abcdef"); got != http.StatusUnauthorized {
			t.Errorf("GET /metrics with another token while %q is in force: %d, want 401", tok, got)
		}
	}
	kept := f.get()
	for _, bad := range []string{"metrics-first-0123\nmetrics-second-0123", "metrics-\x00-0123456789", "metrics-\x1b[31m-0123456789"} {
		write(bad)
		if err := f.reload(); err == nil || f.get() != kept {
			t.Errorf("%q: %q, %v; want the token kept and an error", bad, f.get(), err)
		}
	}
	write("vdbt_a token")
	if _, err := newTokenFile("--broker-token-file", path, "", tokenSent, 0); err == nil {
		t.Error("a token the gateway sends with a space inside was taken")
	}
}
