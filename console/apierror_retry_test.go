package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker/console"
	"github.com/vdibroker/vdibroker/internal/pgtest"
	"github.com/vdibroker/vdibroker/internal/testserver"
	"github.com/vdibroker/vdibroker/store"
)

// TestAPIErrorSaysTheRetryAfter_ROUT1: the broker's PostgreSQL server
// (the test's own) stops while an administrator is signed in to the
// console. Her sign-in holds (the replica's copy, R-OUT1), and a page
// whose API call the database answered no longer (the audit trail) is
// the API's 503 StoreUnavailable: its words, then the wait its
// Retry-After gave (5 s) once, in the CLI's form, and the page's answer
// sends that Retry-After on to her browser.
func TestAPIErrorSaysTheRetryAfter_ROUT1(t *testing.T) {
	pg := pgtest.Start(t)
	ctx := context.Background()
	st, err := store.Open(ctx, pg.DSN, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv := testserver.New(testserver.Config{Store: st, AdminToken: adminToken, StoreTimeout: 2 * time.Second})
	t.Cleanup(func() { srv.Close() })
	c := console.New(console.Config{API: srv.Handler(), Store: st, Sessions: st, Refusals: &console.AuditRefusals{Audit: srv.Broker}})
	t.Cleanup(func() { c.Close() })
	srv.Mux().Handle("/", c)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	e := &env{t: t, url: ts.URL, store: st}

	b := e.browser()
	b.signin(adminToken)
	a := b.get("/audit")
	wantStatus(t, a, http.StatusOK)
	if a.header.Get("Retry-After") != "" {
		t.Errorf("the audit page with the database up sends Retry-After %q", a.header.Get("Retry-After"))
	}

	pg.Stop()
	a = b.get("/audit")
	wantStatus(t, a, http.StatusServiceUnavailable)
	wantContains(t, a, "the broker cannot reach its database right now (try again in 5 s)")
	if got := a.header.Get("Retry-After"); got != "5" {
		t.Errorf("the audit page with the database away: Retry-After %q, want 5, the API's", got)
	}
	if n := strings.Count(strings.ToLower(a.body), "try again"); n != 1 {
		t.Errorf("the page says to try again %d times, want once:\n%s", n, a.body)
	}
}
