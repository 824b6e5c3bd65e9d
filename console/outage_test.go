package console_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/console"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestOutageHeader (R-OUT1): while the store is down every page's header
// says so, the sign-in page included; the reason (which may name the
// database's address) only to a signed-in user; nothing once it is back.
// The end-to-end test (cmd/vdibroker TestOutageE2E) checks the header of
// a real outage.
func TestOutageHeader(t *testing.T) {
	var down atomic.Pointer[console.Outage]
	e := newEnvWith(t, func(c *console.Config) {
		c.Outage = func() *console.Outage { return down.Load() }
	})
	e.seed("alice")
	b := e.browser()
	b.signin(adminToken)
	pages := []string{"/", "/sessions", "/hostpools/pool-a", "/rules", "/audit"}
	for _, p := range append(pages, "/signin") {
		if a := b.get(p); strings.Contains(a.body, `id="outage"`) {
			t.Errorf("%s shows the outage header while the store is up", p)
		}
	}
	down.Store(&console.Outage{Since: time.Date(2026, 12, 1, 19, 4, 5, 0, time.UTC), Reason: "dial tcp 10.0.0.7:5432: connection refused"})
	for _, p := range pages {
		a := b.get(p)
		wantContains(t, a, `id="outage"`, "Database unavailable", "since 19:04:05 UTC", "new users are refused", "dial tcp 10.0.0.7:5432")
	}
	anon := e.browser()
	a := anon.get("/signin")
	wantContains(t, a, `id="outage"`, "Database unavailable")
	if strings.Contains(a.body, "10.0.0.7") {
		t.Errorf("the sign-in page shows the outage's reason to a visitor who is not signed in:\n%s", a.body)
	}
	// Nor to a Reader or a Helpdesk: the reason is for admins and
	// Contributors, as /healthz tells it (R-SEC, R-OUT1).
	for _, role := range []string{vdibroker.RoleReader, vdibroker.RoleHelpdesk} {
		reader := e.browser()
		reader.signin(e.token(role))
		a = reader.get("/")
		wantContains(t, a, `id="outage"`, "Database unavailable")
		if strings.Contains(a.body, "10.0.0.7") {
			t.Errorf("the overview shows the outage's reason to a %s:\n%s", role, a.body)
		}
	}
	// Nor to a Contributor scoped to host pools, nor to one whose token
	// was revoked since it signed in: /healthz tells neither (R-SEC), and
	// the console asks the API who the session's token is now, not the
	// role it had at sign-in.
	ctx := context.Background()
	scoped, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: vdibroker.RoleContributor, Subject: "pool-a-ops", HostPools: []string{"pool-a"}})
	if err != nil {
		t.Fatal(err)
	}
	revoked, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: vdibroker.RoleContributor, Subject: "gone-ops"})
	if err != nil {
		t.Fatal(err)
	}
	sb, rb := e.browser(), e.browser()
	sb.signin(scoped.Secret)
	rb.signin(revoked.Secret)
	if err := e.admin.DeleteToken(ctx, revoked.ID); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		who string
		br  *browser
	}{{"scoped Contributor", sb}, {"revoked Contributor", rb}} {
		// The pages that call no API first: the overview's refused
		// call ends a revoked token's sign-in.
		for _, p := range []string{"/rules", "/no/such/page", "/"} {
			a = c.br.get(p)
			wantContains(t, a, `id="outage"`, "Database unavailable")
			if strings.Contains(a.body, "10.0.0.7") {
				t.Errorf("%s shows the outage's reason to a %s:\n%.2000s", p, c.who, a.body)
			}
		}
	}
	// An unscoped Contributor's token is told, as /healthz tells it.
	contributor := e.browser()
	contributor.signin(e.token(vdibroker.RoleContributor))
	wantContains(t, contributor.get("/"), "dial tcp 10.0.0.7:5432")
	down.Store(&console.Outage{Since: time.Now(), Reason: "x", Placement: true})
	wantContains(t, b.get("/"), "placed within this replica's reserved share")
}

// TestClockOffHeader: while this replica's clock is off the database
// server's, every page's header tells admins and Contributors, which way
// and how far; not a Reader, nor a visitor on the sign-in page; nothing
// once the clocks agree.
func TestClockOffHeader(t *testing.T) {
	var off atomic.Pointer[console.ClockOff]
	e := newEnvWith(t, func(c *console.Config) {
		c.ClockOff = func() *console.ClockOff { return off.Load() }
	})
	e.seed("alice")
	b := e.browser()
	b.signin(adminToken)
	pages := []string{"/", "/sessions", "/hostpools/pool-a", "/rules", "/audit"}
	for _, p := range pages {
		if a := b.get(p); strings.Contains(a.body, `id="clock"`) {
			t.Errorf("%s shows the clock header while the clocks agree", p)
		}
	}
	off.Store(&console.ClockOff{Offset: 2345 * time.Millisecond})
	for _, p := range pages {
		wantContains(t, b.get(p), `id="clock"`, "2.3s ahead of the database server", "NTP")
	}
	off.Store(&console.ClockOff{Offset: -90 * time.Second})
	wantContains(t, b.get("/"), "1m30s behind the database server")
	contributor := e.browser()
	contributor.signin(e.token(vdibroker.RoleContributor))
	wantContains(t, contributor.get("/"), `id="clock"`)
	reader := e.browser()
	reader.signin(e.token(vdibroker.RoleReader))
	if a := reader.get("/"); strings.Contains(a.body, `id="clock"`) {
		t.Error("the overview shows the clock header to a Reader")
	}
	if a := e.browser().get("/signin"); strings.Contains(a.body, `id="clock"`) {
		t.Error("the sign-in page shows the clock header to a visitor")
	}
}
