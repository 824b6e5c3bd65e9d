package main

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestCLIUserTokenPoolListRequests_RU3 (R-U3, R-SEC): usersession list
// --host-pool P with a User token sends two requests, through a proxy on
// loopback in front of a real broker: whoami (the role picks the list to
// read, the subject is her name when --user is left out) and her own
// sessions; no second whoami, and no read of the pool's list, which the
// broker would refuse. With --user the same two, and an admin token's
// list is whoami and the pool's list.
func TestCLIUserTokenPoolListRequests_RU3(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "office")
	b.addHost("office", "office-01")
	b.ok("connect", "--host-pool", "office", "--user", "carol@contoso.com")
	carol := strings.TrimSpace(b.ok("token", "create", "--role", "User", "--subject", "carol@contoso.com", "--query", "token", "-o", "tsv"))
	u, err := url.Parse(b.m.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	var mu sync.Mutex
	var calls []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls = append(calls, r.Method+" "+r.URL.Path)
		mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	const whoami, hers, pools = "GET /api/v1/whoami", "GET /api/v1/users/carol@contoso.com/sessions", "GET /api/v1/hostpools/office/usersessions"
	for _, tc := range []struct {
		name, token string
		args        []string
		want        []string
	}{
		{"her token", carol, nil, []string{whoami, hers}},
		{"her token with --user", carol, []string{"--user", "carol@contoso.com"}, []string{whoami, hers}},
		{"the admin token", b.m.AdminToken, nil, []string{whoami, pools}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			calls = nil
			mu.Unlock()
			args := append([]string{"usersession", "list", "--host-pool", "office", "--query", "[].user", "-o", "tsv", "--server", srv.URL, "--token", tc.token}, tc.args...)
			if r := runCLI(t, args...); r.code != 0 || r.stdout != "carol@contoso.com\n" {
				t.Errorf("exit %d, stdout %q, stderr %q; want her session", r.code, r.stdout, r.stderr)
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(calls, tc.want) {
				t.Errorf("requests %q, want %q", calls, tc.want)
			}
		})
	}
}
