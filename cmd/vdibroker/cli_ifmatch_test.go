package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	vhttp "github.com/vdibroker/vdibroker/http"
)

// hookProxy is a reverse proxy on loopback in front of the broker that
// runs after on each answer to a GET of path, before the CLI gets it.
func hookProxy(t *testing.T, b *cliBroker, path string, after func(n int)) string {
	t.Helper()
	u, err := url.Parse(b.m.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	var gets atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != path {
			proxy.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		proxy.ServeHTTP(rec, r)
		after(int(gets.Add(1)))
		for k, vs := range rec.Header() {
			w.Header()[k] = vs
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestCLIConcurrentUpdates_RE13: two administrators add a user each to
// one application group at the same moment, both having read the group
// before either writes: both users are assigned afterwards (the loser's
// PUT is refused with 412 and the CLI reads again and re-applies only her
// flags). The same for two applications' updates, and two scaling plan
// updates. A group that changes under every one of its attempts is not
// written: the update fails after 3 with a message saying so.
func TestCLIConcurrentUpdates_RE13(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "teampool")
	b.ok("hostpool", "create", "--name", "otherpool")
	b.ok("applicationgroup", "create", "--name", "team-apps", "--host-pool", "teampool", "--application-group-type", "RemoteApp",
		"--users", "alice")
	b.ok("application", "create", "--application-group", "team-apps", "--name", "word", "--file-path", `C:\word.exe`)
	b.ok("scalingplan", "create", "--name", "weekdays", "--time-zone", "UTC", "--host-pools", "teampool",
		"--schedule-name", "workweek", "--days-of-week", "Monday,Tuesday",
		"--ramp-up-start-time", "07:00", "--peak-start-time", "09:00", "--ramp-down-start-time", "17:00", "--off-peak-start-time", "19:00")

	// both runs two CLI commands whose first reads of path are both
	// answered only once both were read: neither has written yet.
	both := func(path string, a, c []string) [2]cliResult {
		t.Helper()
		var read sync.WaitGroup
		read.Add(2)
		server := hookProxy(t, b, path, func(n int) {
			if n > 2 {
				return // a read again after a refused write
			}
			read.Done()
			done := make(chan struct{})
			go func() { read.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Error("the two commands did not both read within a minute")
			}
		})
		var out [2]cliResult
		var wg sync.WaitGroup
		for i, args := range [][]string{a, c} {
			wg.Go(func() {
				out[i] = runCLI(t, append(args, "--server", server, "--token", b.m.AdminToken)...)
			})
		}
		wg.Wait()
		for i, r := range out {
			if r.code != 0 {
				t.Errorf("administrator %d: exit %d: %s", i+1, r.code, r.stderr)
			}
		}
		return out
	}

	both("/api/v1/applicationgroups/team-apps",
		[]string{"applicationgroup", "update", "--name", "team-apps", "--add-users", "bob"},
		[]string{"applicationgroup", "update", "--name", "team-apps", "--add-users", "carol"})
	ctx := context.Background()
	admin := vhttp.NewClient(b.m.URL(), b.m.AdminToken)
	g, err := admin.GetApplicationGroup(ctx, "team-apps")
	if err != nil {
		t.Fatal(err)
	}
	if users := slices.Sorted(slices.Values(g.Assignments.Users)); !slices.Equal(users, []string{"alice", "bob", "carol"}) {
		t.Errorf("after two concurrent updates the group's users are %v, want alice, bob and carol: one administrator's change was lost", users)
	}

	both("/api/v1/applicationgroups/team-apps/applications/word",
		[]string{"application", "update", "--application-group", "team-apps", "--name", "word", "--friendly-name", "Word"},
		[]string{"application", "update", "--application-group", "team-apps", "--name", "word", "--icon-path", `C:\word.ico`})
	app, err := admin.GetApplication(ctx, "team-apps", "word")
	if err != nil {
		t.Fatal(err)
	}
	if app.FriendlyName != "Word" || app.IconPath != `C:\word.ico` {
		t.Errorf("after two concurrent updates the application is %+v, want both its friendly name and its icon", app)
	}

	both("/api/v1/scalingplans/weekdays",
		[]string{"scalingplan", "update", "--name", "weekdays", "--description", "team hours"},
		[]string{"scalingplan", "update", "--name", "weekdays", "--host-pools", "teampool,otherpool"})
	p, err := admin.GetScalingPlan(ctx, "weekdays")
	if err != nil {
		t.Fatal(err)
	}
	if p.Description != "team hours" || !slices.Equal(p.HostPools, []string{"teampool", "otherpool"}) {
		t.Errorf("after two concurrent updates the plan is %q with %v, want both changes", p.Description, p.HostPools)
	}

	// Another writer after each of this update's reads: it gives up after
	// 3 attempts, says so, and writes nothing.
	var reads atomic.Int32
	server := hookProxy(t, b, "/api/v1/applicationgroups/team-apps", func(n int) {
		reads.Store(int32(n))
		if _, err := admin.PutApplicationGroup(ctx, "team-apps", map[string]any{"hostPool": "teampool", "applicationGroupType": "RemoteApp",
			"assignments": map[string]any{"users": []string{"alice", "bob", "carol"}}, "description": fmt.Sprint("write ", n)}); err != nil {
			t.Error(err)
		}
	})
	r := runCLI(t, "applicationgroup", "update", "--name", "team-apps", "--add-users", "dave", "--server", server, "--token", b.m.AdminToken)
	if r.code != 1 || !strings.Contains(r.stderr, "changed by someone else while this update ran, 3 times") ||
		!strings.Contains(r.stderr, "nothing of this update was written") || reads.Load() != 3 {
		t.Errorf("update under constant change: exit %d after %d reads: %s, want exit 1 after 3 saying nothing was written", r.code, reads.Load(), r.stderr)
	}
	if g, err := admin.GetApplicationGroup(ctx, "team-apps"); err != nil || slices.Contains(g.Assignments.Users, "dave") {
		t.Errorf("after the failed update: %+v, %v; want dave not assigned", g, err)
	}
}
