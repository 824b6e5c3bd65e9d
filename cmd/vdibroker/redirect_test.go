package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestCLIFollowsNoRedirect_RSEC: the admin CLI (and every client built
// by clientTLSOptions.httpClient: the agent's, the gateway's) follows no
// redirect. Go's client keeps the Authorization header on a redirect to
// the same host name on another port, so a 307 from the --server URL sent
// the token on to whatever listened there; now the command fails naming
// the redirect, and nothing reaches the other port.
func TestCLIFollowsNoRedirect_RSEC(t *testing.T) {
	var reached atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		if r.Header.Get("Authorization") != "" {
			t.Errorf("the token reached the other port: %q", r.Header.Get("Authorization"))
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"value":[]}`))
	}))
	defer other.Close()
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	defer redirecting.Close()

	res := runCLI(t, "hostpool", "list", "--server", redirecting.URL, "--token", "vdb_admin_secret-of-the-admin")
	if res.code != 1 || !strings.Contains(res.stderr, "redirected to "+other.URL) || !strings.Contains(res.stderr, "not followed") {
		t.Errorf("hostpool list through a redirect: exit %d\n%s\nwant 1 naming the redirect", res.code, res.stderr)
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the redirect was followed %d times", n)
	}
}

// TestCLIRedirectIsNotUnreachable: a refused redirect is said as such,
// not as "cannot reach the broker at" the redirect's target, which for a
// relative Location was an empty name ("cannot reach the broker at  (set
// --server ...)"): the broker was reached and answered with a redirect.
func TestCLIRedirectIsNotUnreachable(t *testing.T) {
	for _, loc := range []string{"/elsewhere/api/v1/hostpools", "http://127.0.0.1:1/api/v1/hostpools"} {
		redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", loc)
			w.WriteHeader(http.StatusMovedPermanently)
		}))
		res := runCLI(t, "hostpool", "list", "--server", redirecting.URL, "--token", "vdb_admin_secret-of-the-admin")
		redirecting.Close()
		if res.code != 1 || strings.Contains(res.stderr, "cannot reach") || !strings.Contains(res.stderr, "redirected to") {
			t.Errorf("Location %s: exit %d, stderr %q", loc, res.code, res.stderr)
		}
		checkCLIError(t, res)
	}
}
