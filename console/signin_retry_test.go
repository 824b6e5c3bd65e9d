package console_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/console"
	"github.com/vdibroker/vdibroker/internal/testserver"
	"github.com/vdibroker/vdibroker/store"
)

// TestSignInRefusalSaysItsWait_RSEC (R-SEC, R-OUT1): a console sign-in
// the API refuses for a while says the wait its Retry-After gave, once,
// and sends that Retry-After on, rounded up: the broker's words leave
// the wait out ("slow down"), so without it the page read as final.
//   - The address's failed authentications spent (AuthFailureBurst 60 on
//     a clock that stands still): the 61st bad token's whoami is 429, a
//     Retry-After of 1/5 s, said "(try again in 1 s)", Retry-After 1.
//   - One principal's sign-ins a minute (SigninsPerPrincipal 16): the
//     17th's POST /api/v1/signin is 429, 60/16 = 3.75 s: 4.
//   - The console's own bound of a principal's sessions (Web.Open): the
//     window ends in 58.3 s, said and sent as 59, never 58 (sooner than
//     the broker said).
func TestSignInRefusalSaysItsWait_RSEC(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC))
	st, err := store.Open(t.Context(), "", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv := testserver.New(testserver.Config{Store: st, AdminToken: adminToken, Now: clk.Now})
	t.Cleanup(func() { srv.Close() })
	c := console.New(console.Config{API: srv.Handler(), Store: st, Sessions: st, Refusals: &console.AuditRefusals{Audit: srv.Broker}, Now: clk.Now,
		SessionLimits: vdibroker.WebSessionLimits{PerPrincipal: 100, Window: time.Minute, PerArea: 100}})
	t.Cleanup(func() { c.Close() })
	srv.Mux().Handle("/", c)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	e := &env{t: t, url: ts.URL, store: st}

	saysOnce := func(t *testing.T, a answer, status int, words, retryAfter string) {
		t.Helper()
		wantStatus(t, a, status)
		wantContains(t, a, words)
		if got := a.header.Get("Retry-After"); got != retryAfter {
			t.Errorf("Retry-After %q, want %q", got, retryAfter)
		}
		if n := strings.Count(strings.ToLower(a.body), "try again"); n != 1 {
			t.Errorf("the page says to try again %d times, want once:\n%s", n, a.body)
		}
	}
	t.Run("failed authentications", func(t *testing.T) {
		e.t = t
		var a answer
		for i := range 61 {
			b := e.browser()
			a = b.post("/signin", url.Values{"csrf": {b.csrf("/signin")}, "token": {"not-a-token"}, "next": {"/"}})
			if i < 60 {
				wantStatus(t, a, http.StatusUnauthorized)
			}
		}
		saysOnce(t, a, http.StatusTooManyRequests,
			"That sign-in was not accepted: too many failed authentications from this address; slow down (try again in 1 s)", "1")
	})
	t.Run("sign-ins of one principal", func(t *testing.T) {
		e.t = t
		for range 16 {
			e.browser().signin(adminToken)
		}
		b := e.browser()
		a := b.post("/signin", url.Values{"csrf": {b.csrf("/signin")}, "token": {adminToken}, "next": {"/"}})
		saysOnce(t, a, http.StatusTooManyRequests,
			"That sign-in was not accepted: this principal signs in faster than the web sessions take (16 a minute); slow down (try again in 4 s)", "4")
		wantStatus(t, b.get("/"), http.StatusSeeOther) // not signed in
	})
	t.Run("the console's bound of a principal's sessions", func(t *testing.T) {
		e := newEnvWith(t, func(cfg *console.Config) {
			cfg.Now = clk.Now
			cfg.SessionLimits = vdibroker.WebSessionLimits{PerPrincipal: 1, Window: time.Minute, PerArea: 100}
		})
		reader := e.token(vdibroker.RoleReader)
		e.browser().signin(reader)
		clk.Step(1700 * time.Millisecond) // the window ends in 58.3 s
		b := e.browser()
		a := b.post("/signin", url.Values{"csrf": {b.csrf("/signin")}, "token": {reader}, "next": {"/"}})
		saysOnce(t, a, http.StatusTooManyRequests, "(try again in 59 s)", "59")
	})
}

// TestOtherPodsRefusalSaysItsWait_ROUT1 (R-U3, R-OUT1): one user's
// sessions page asks the API for her sessions in the other pods, which a
// principal does at most GlobalSessionListsPerPrincipal (60) times at
// once on a clock that stands still; the 61st is 429 with a Retry-After
// of 60/60 = 1 s, and the page, still served, says why with that wait
// once: the broker's words end at "slow down".
func TestOtherPodsRefusalSaysItsWait_ROUT1(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC))
	e := newPodEnvAt(t, "fra1", clk.Now)
	e.seed("alice")
	doc := &vdibroker.Federation{Generation: 1, Sites: []vdibroker.Site{{Name: "emea"}},
		Pods: []vdibroker.Pod{{Name: "fra1", Site: "emea", URL: e.url}, {Name: "nyc1", Site: "emea", URL: "http://127.0.0.1:1"}}}
	if _, err := e.admin.PutFederation(t.Context(), doc); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.signin(adminToken)
	const words = "this principal lists sessions in other pods faster than 60 a minute; slow down (try again in 1 s)"
	for i := range 60 {
		if a := b.get("/sessions?user=alice&exact=1"); a.status != http.StatusOK || strings.Contains(a.body, "faster than") {
			t.Fatalf("listing %d of 60: HTTP %d, refused:\n%s", i+1, a.status, a.body)
		}
	}
	a := b.get("/sessions?user=alice&exact=1")
	wantStatus(t, a, http.StatusOK)
	wantContains(t, a, words)
	if n := strings.Count(strings.ToLower(a.body), "try again"); n != 1 {
		t.Errorf("the page says to try again %d times, want once:\n%s", n, a.body)
	}
}
