package http_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// countAudit is how many entries the audit trail holds.
func countAudit(t *testing.T, e *env) int {
	t.Helper()
	list, err := e.admin.ListAudit(context.Background(), vhttp.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}

// TestUserWriteBudget_RSEC: an end user (a User token) writes at most
// UserWriteBurst times at once, then one every 2 s: each connect, logoff
// or disconnect she may ask for (R-C1, R-U3) was a session row, a
// decision record, a command row and audit entries, and a User token in
// a loop (stolen, or a broken script) filled the database. Past the
// budget: 429 with Retry-After and the JSON error body, nothing written
// and no audit entry. Another user's budget is her own; a Contributor
// and Helpdesk have none; time refills it.
func TestUserWriteBudget_RSEC(t *testing.T) {
	e := newEnvWith(t, envOptions{maintenance: time.Hour})
	e.clock.Freeze() // the budget refills with the server's clock only
	ctx := context.Background()
	pool := uniq("uwb")
	e.pool(pool, nil)
	e.desktopFor(pool, vdibroker.Assignments{Users: []string{"alice", "bob"}})
	host := e.addHosts(pool, pool+"h", 1)[0]
	aliceTok := e.userToken("alice", nil)
	alice := e.client(0, aliceTok)

	c, err := alice.Connect(ctx, pool, vhttp.ConnectRequest{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	e.heartbeat(host, vdibroker.AgentSession{ID: "42", User: "alice", State: "Active"})
	if _, err := alice.Disconnect(ctx, pool, c.SessionID); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Logoff(ctx, pool, c.SessionID); err != nil {
		t.Fatal(err)
	}
	for i := 3; i < vhttp.UserWriteBurst; i++ { // dry runs count too
		if _, err := alice.Connect(ctx, pool, vhttp.ConnectRequest{User: "alice", DryRun: true}); err != nil {
			t.Fatalf("write %d of %d: %v", i+1, vhttp.UserWriteBurst, err)
		}
	}
	audits := countAudit(t, e)
	sessions := len(e.openSessions(pool))

	session := "/api/v1/hostpools/" + pool + "/usersessions/" + c.SessionID
	for _, w := range []struct{ method, path, body string }{
		{"DELETE", session, ""},
		{"POST", session + "/disconnect", ""},
		{"POST", "/api/v1/hostpools/" + pool + "/connect", `{"user": "alice"}`},
		{"POST", "/api/v1/hostpools/" + pool + "/connect", `{"user": "alice", "dryRun": true}`},
		// Refused before the handler: not a 404 of a group that is not there.
		{"POST", "/api/v1/applicationgroups/nope/connect", `{"user": "alice", "application": "x"}`},
		{"POST", "/api/v1/globalentitlements/nope/connect", `{"user": "alice"}`},
	} {
		resp, ve, raw := rawDoAt(t, e.urls[0], w.method, w.path, aliceTok, w.body)
		if resp.StatusCode != 429 || ve == nil || ve.Code != vdibroker.ETooManyRequests || resp.Header.Get("Retry-After") != "2" {
			t.Errorf("%s %s past the budget: %d Retry-After %q %s; want 429 TooManyRequests, Retry-After 2",
				w.method, w.path, resp.StatusCode, resp.Header.Get("Retry-After"), raw)
		}
	}
	if n := countAudit(t, e); n != audits {
		t.Errorf("the refused writes added %d audit entries, want none", n-audits)
	}
	if n := len(e.openSessions(pool)); n != sessions {
		t.Errorf("%d open sessions after the refused writes, want %d", n, sessions)
	}
	if hb := e.heartbeat(host, vdibroker.AgentSession{ID: "42", User: "alice", State: "Active"}); len(hb.Commands) != 2 {
		t.Errorf("the host was handed %d commands, want the disconnect and the logoff asked within the budget", len(hb.Commands))
	}

	// Another user's budget is her own.
	if _, err := e.client(0, e.userToken("bob", nil)).Connect(ctx, pool, vhttp.ConnectRequest{User: "bob"}); err != nil {
		t.Errorf("bob's connect while alice's budget is spent: %v", err)
	}
	// A Contributor and Helpdesk have none: their scripts act for many.
	contributor := e.client(0, e.roleToken("Contributor", "automation"))
	helpdesk := e.client(0, e.roleToken("Helpdesk", "hd"))
	for i := range vhttp.UserWriteBurst + 10 {
		if _, err := contributor.Connect(ctx, pool, vhttp.ConnectRequest{User: "alice", DryRun: true}); err != nil {
			t.Fatalf("a Contributor's dry run %d: %v", i+1, err)
		}
		if _, err := helpdesk.Logoff(ctx, pool, c.SessionID); err != nil {
			t.Fatalf("Helpdesk's logoff %d: %v", i+1, err)
		}
	}

	// Time refills it: one write every 2 s, the burst in a minute.
	e.clock.Advance(2 * time.Second)
	if _, err := alice.Logoff(ctx, pool, c.SessionID); err != nil {
		t.Errorf("a logoff 2 s later: %v", err)
	}
	if _, err := alice.Logoff(ctx, pool, c.SessionID); vdibroker.ErrorCode(err) != vdibroker.ETooManyRequests {
		t.Errorf("a second at once: %v, want TooManyRequests", err)
	}
	e.clock.Advance(time.Minute)
	for i := range vhttp.UserWriteBurst {
		if _, err := alice.Connect(ctx, pool, vhttp.ConnectRequest{User: "alice", DryRun: true}); err != nil {
			t.Fatalf("a minute later, write %d: %v", i+1, err)
		}
	}
	if _, err := alice.Connect(ctx, pool, vhttp.ConnectRequest{User: "alice", DryRun: true}); vdibroker.ErrorCode(err) != vdibroker.ETooManyRequests {
		t.Errorf("write %d a minute later: %v, want TooManyRequests", vhttp.UserWriteBurst+1, err)
	}
}

// TestUserWriteBudget_EveryUserWrite (R-SEC): every route a User token
// may call that is not a read spends her budget, whatever it is (a route
// added later too), but sign-in and sign-out, which have buckets of
// their own. With her budget spent, every route is called as her: those
// she may write through answer 429; the others as they did.
func TestUserWriteBudget_EveryUserWrite(t *testing.T) {
	e := newEnvWith(t, envOptions{maintenance: time.Hour})
	e.clock.Freeze()
	ctx := context.Background()
	pool := uniq("uwr")
	e.pool(pool, nil)
	e.desktopFor(pool, vdibroker.Assignments{Users: []string{"carol"}})
	e.addHosts(pool, pool+"h", 1)
	tok := e.userToken("carol", nil)
	carol := e.client(0, tok)
	for i := range vhttp.UserWriteBurst {
		if _, err := carol.Connect(ctx, pool, vhttp.ConnectRequest{User: "carol", DryRun: true}); err != nil {
			t.Fatalf("dry run %d: %v", i+1, err)
		}
	}
	param := regexp.MustCompile(`\{[a-z]+\}`)
	var throttled []string
	for _, pattern := range e.srvs[0].Server.Routes() {
		method, path, ok := strings.Cut(pattern, " ")
		if !ok || method == "GET" || !strings.HasPrefix(path, "/api/v1/") {
			continue
		}
		path = strings.NewReplacer("{pool}", pool, "{user}", "carol").Replace(path)
		path = param.ReplaceAllString(path, "x")
		resp, _, raw := rawDoAt(t, e.urls[0], method, path, tok, "{}")
		switch {
		case resp.StatusCode == 429:
			throttled = append(throttled, pattern)
		case resp.StatusCode >= 500:
			t.Errorf("%s: %d %s", pattern, resp.StatusCode, raw)
		}
	}
	want := []string{
		"DELETE /api/v1/hostpools/{pool}/usersessions/{id}",
		"DELETE /api/v1/users/{user}/globalsessions/{pod}/{id}",
		"POST /api/v1/applicationgroups/{name}/connect",
		"POST /api/v1/globalentitlements/{name}/connect",
		"POST /api/v1/hostpools/{pool}/connect",
		"POST /api/v1/hostpools/{pool}/usersessions/{id}/disconnect",
		"POST /api/v1/users/{user}/globalsessions/{pod}/{id}/disconnect",
	}
	slices.Sort(throttled)
	if !slices.Equal(throttled, want) {
		t.Errorf("routes that answered a User past her budget 429:\n%s\nwant\n%s", strings.Join(throttled, "\n"), strings.Join(want, "\n"))
	}
}

// TestUserWriteBuckets_Bounded (R-SEC): the buckets are made only for a
// principal whose credential and role were checked, at most a bound of
// them; a flood of distinct principals past it shares one bucket and
// never pushes out, nor drains, the bucket of a user who spent some.
func TestUserWriteBuckets_Bounded(t *testing.T) {
	e := newEnvWith(t, envOptions{maintenance: time.Hour})
	e.clock.Freeze()
	ctx := context.Background()
	srv := e.srvs[0].Server
	const max = 20
	vhttp.BoundUserWriteBuckets(srv, max)
	pool := uniq("uwbb")
	e.pool(pool, nil)
	e.desktopFor(pool, vdibroker.Assignments{Users: []string{"alice"}})
	e.addHosts(pool, pool+"h", 1)
	alice := e.client(0, e.userToken("alice", nil))
	dry := func() error {
		_, err := alice.Connect(ctx, pool, vhttp.ConnectRequest{User: "alice", DryRun: true})
		return err
	}
	for range 5 {
		if err := dry(); err != nil {
			t.Fatal(err)
		}
	}

	// No bucket for a caller without a credential, nor for a Contributor.
	for i := range 50 {
		rawDoAt(t, e.urls[0], "POST", "/api/v1/hostpools/"+pool+"/connect", fmt.Sprintf("vdbt_madeup%04d", i), `{"user": "x"}`)
	}
	contributor := e.client(0, e.roleToken("Contributor", "automation"))
	for range 5 {
		if _, err := contributor.Connect(ctx, pool, vhttp.ConnectRequest{User: "alice", DryRun: true}); err != nil {
			t.Fatal(err)
		}
	}
	if n := vhttp.UserWriteBuckets(srv); n != 1 {
		t.Errorf("%d buckets after made-up tokens and a Contributor's writes, want alice's only", n)
	}

	// A flood of distinct end users (signed in to the portal, as the API
	// takes them in-process), each logging off a session it does not have.
	h := srv.Handler()
	refused := 0
	for i := range 5 * max {
		p := &vdibroker.Principal{Kind: vdibroker.PrincipalOIDC, Role: vdibroker.RoleUser, Subject: fmt.Sprintf("flood%03d", i)}
		for range 3 {
			r := httptest.NewRequestWithContext(vdibroker.WithVerified(ctx, p), "DELETE", "/api/v1/hostpools/"+pool+"/usersessions/nope", nil)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code == http.StatusTooManyRequests {
				refused++
			}
		}
	}
	if n := vhttp.UserWriteBuckets(srv); n > max {
		t.Errorf("%d buckets after a flood of %d principals, want at most %d", n, 5*max, max)
	}
	if refused == 0 {
		t.Error("the flood past the full map was not limited: each new principal got a bucket of its own")
	}
	// Alice keeps her bucket: the 25 writes left of her burst, not one more.
	for i := 5; i < vhttp.UserWriteBurst; i++ {
		if err := dry(); err != nil {
			t.Fatalf("alice's write %d after the flood: %v", i+1, err)
		}
	}
	if err := dry(); vdibroker.ErrorCode(err) != vdibroker.ETooManyRequests {
		t.Errorf("alice's write %d: %v, want TooManyRequests (the flood gave her a fresh bucket)", vhttp.UserWriteBurst+1, err)
	}
}
