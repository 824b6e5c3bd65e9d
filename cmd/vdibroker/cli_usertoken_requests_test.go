package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
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

// TestCLIUserTokenLogoffRequests_RU3 (R-U3, R-SEC): usersession logoff
// and disconnect --host-pool P --user U with a User token, answered 404
// (the pool deleted between her listing and the command, through a
// proxy on loopback in front of a real broker), send whoami once: it
// told the command her role, so the name hint after the 404 (which
// reads nothing with a token that may not read, R-SEC) asks no second
// whoami. The error is the broker's message alone, as before. --id of
// a session that is not there asks whoami once, for the hint.
func TestCLIUserTokenLogoffRequests_RU3(t *testing.T) {
	b := startCLIBroker(t)
	const user = "carol@contoso.com"
	carol := strings.TrimSpace(b.ok("token", "create", "--role", "User", "--subject", user, "--query", "token", "-o", "tsv"))
	u, err := url.Parse(b.m.URL())
	if err != nil {
		t.Fatal(err)
	}
	admin := vhttp.NewClient(b.m.URL(), b.m.AdminToken)
	proxy := httputil.NewSingleHostReverseProxy(u)
	var mu sync.Mutex
	var calls []string
	var deletePool string // deleted once her sessions are listed
	var deleteErr error
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls = append(calls, r.Method+" "+r.URL.Path)
		pool := deletePool
		mu.Unlock()
		proxy.ServeHTTP(w, r)
		if pool != "" && r.URL.Path == "/api/v1/users/"+user+"/sessions" {
			_, err := admin.DeleteHostPool(r.Context(), pool, true)
			mu.Lock()
			deleteErr = err
			mu.Unlock()
		}
	}))
	t.Cleanup(srv.Close)
	const whoami, hers = "GET /api/v1/whoami", "GET /api/v1/users/" + user + "/sessions"
	for _, tc := range []struct {
		name    string
		pool    string
		args    []string
		deleted bool // the pool goes once her sessions are listed
		want    func(pool, id string) []string
		stderr  string // %[1]q the pool, %[2]q her session's id
	}{
		{"logoff --user, the pool gone", "gone-logoff", []string{"usersession", "logoff", "--user", user}, true,
			func(pool, id string) []string {
				return []string{whoami, hers, "DELETE /api/v1/hostpools/" + pool + "/usersessions/" + id}
			}, "error: user session %[2]q not found in host pool %[1]q\n"},
		{"disconnect --user, the pool gone", "gone-disconnect", []string{"usersession", "disconnect", "--user", user}, true,
			func(pool, id string) []string {
				return []string{whoami, hers, "POST /api/v1/hostpools/" + pool + "/usersessions/" + id + "/disconnect"}
			}, "error: user session %[2]q not found in host pool %[1]q\n"},
		{"logoff --id of no session", "office", []string{"usersession", "logoff", "--id", "nosuch"}, false,
			func(pool, id string) []string {
				return []string{"DELETE /api/v1/hostpools/" + pool + "/usersessions/nosuch", whoami}
			}, "error: user session \"nosuch\" not found in host pool %[1]q\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, pool := &cliBroker{tb: t, m: b.m}, tc.pool
			b.ok("hostpool", "create", "--name", pool)
			cred := b.addHost(pool, pool+"-01")
			id := strings.TrimSpace(b.ok("connect", "--host-pool", pool, "--user", user, "--query", "sessionId", "-o", "tsv"))
			// Active, as a disconnect needs: her agent reports her logon.
			if _, err := vhttp.NewClient(b.m.URL(), "").Heartbeat(t.Context(), cred, &vdibroker.HeartbeatRequest{
				Sessions: []vdibroker.AgentSession{{ID: "1", User: user, State: vdibroker.StateActive}}}); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			calls, deleteErr = nil, nil
			if tc.deleted {
				deletePool = pool
			}
			mu.Unlock()
			t.Cleanup(func() {
				mu.Lock()
				deletePool = ""
				mu.Unlock()
			})
			r := runCLI(t, append(slices.Clone(tc.args), "--host-pool", pool, "--server", srv.URL, "--token", carol)...)
			if want := fmt.Sprintf(tc.stderr, pool, id); r.code != 1 || r.stdout != "" || r.stderr != want {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 1, stderr %q", r.code, r.stdout, r.stderr, want)
			}
			mu.Lock()
			defer mu.Unlock()
			if deleteErr != nil {
				t.Fatalf("delete %s: %v", pool, deleteErr)
			}
			if want := tc.want(pool, id); !slices.Equal(calls, want) {
				t.Errorf("requests %q, want %q", calls, want)
			}
		})
	}
}
