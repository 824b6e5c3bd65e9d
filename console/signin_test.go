package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/console"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/testserver"
)

// signinRows counts the audit trail's successful sign-ins.
func (e *env) signinRows() int {
	e.t.Helper()
	list, err := e.admin.ListAudit(context.Background(), vhttp.AuditQuery{Action: "signin"})
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for _, a := range list {
		if a.Outcome == vdibroker.AuditOK {
			n++
		}
	}
	return n
}

// TestSignInLimits_RSEC: one token signs in three times (PerPrincipal 3):
// the fourth within a minute is refused 429 with Retry-After, writes no
// audit row and signs no one out; a minute later it is let in and the
// oldest of the three is signed out. Other tokens fill the console to its
// PerArea 5, then a sign-in is refused and everyone stays signed in. The
// audit trail holds one row per session opened, however many were tried.
func TestSignInLimits_RSEC(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
	e := newEnvWith(t, func(c *console.Config) {
		c.Now = clk.Now
		c.SessionLimits = vdibroker.WebSessionLimits{PerPrincipal: 3, Window: time.Minute, PerArea: 5}
	})
	reader := e.token(vdibroker.RoleReader)
	var bs []*browser
	for range 3 {
		b := e.browser()
		b.signin(reader)
		bs = append(bs, b)
		clk.Step(time.Second) // the first is the oldest
	}
	for range 5 {
		b := e.browser()
		a := b.post("/signin", url.Values{"csrf": {b.csrf("/signin")}, "token": {reader}, "next": {"/"}})
		wantStatus(t, a, http.StatusTooManyRequests)
		// The wait from the Retry-After, once, in the CLI's form.
		wantContains(t, a, "3 sign-ins of this user within 1m0s; wait, or sign out elsewhere (try again in 57 s)")
		// The oldest began 3 s ago: the window ends in 57 s.
		if a.header.Get("Retry-After") != "57" {
			t.Errorf("Retry-After %q, want 57", a.header.Get("Retry-After"))
		}
	}
	for _, b := range bs {
		wantStatus(t, b.get("/"), http.StatusOK) // all three still in
	}
	if n := e.signinRows(); n != 3 {
		t.Errorf("%d sign-in rows after 3 sign-ins and 5 refused, want 3", n)
	}
	clk.Step(time.Minute)
	late := e.browser()
	late.signin(reader)
	if a := bs[0].get("/"); a.status != http.StatusSeeOther {
		t.Errorf("the oldest session survived the fourth sign-in a minute later: %d", a.status)
	}
	wantStatus(t, bs[1].get("/"), http.StatusOK)
	wantStatus(t, late.get("/"), http.StatusOK)

	// 3 of the reader, then two more tokens fill the console's 5.
	for range 2 {
		e.browser().signin(e.token(vdibroker.RoleContributor))
	}
	full := e.browser()
	a := full.post("/signin", url.Values{"csrf": {full.csrf("/signin")}, "token": {adminToken}, "next": {"/"}})
	wantStatus(t, a, http.StatusTooManyRequests)
	wantContains(t, a, "has its 5 signed-in sessions")
	for _, b := range append(bs[1:], late) {
		wantStatus(t, b.get("/"), http.StatusOK)
	}
	if n := e.signinRows(); n != 6 {
		t.Errorf("%d sign-in rows, want the 6 sessions opened", n)
	}
}

// TestUserTokenIsForThePortal: a User token's sign-in is told the console
// is for administrators, with a link to the user portal, and opens no
// session.
func TestUserTokenIsForThePortal(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	a := b.post("/signin", url.Values{"csrf": {b.csrf("/signin")}, "token": {e.token(vdibroker.RoleUser)}, "next": {"/"}})
	wantStatus(t, a, http.StatusForbidden)
	wantContains(t, a, "This console is for administrators", `href="/portal/"`, "user-1")
	for _, c := range a.header.Values("Set-Cookie") {
		if strings.HasPrefix(c, "vdibroker_session=") {
			t.Errorf("a User got a session cookie: %s", c)
		}
	}
	wantStatus(t, b.get("/"), http.StatusSeeOther)
}

// TestSignInOnAnotherConsole (R-SEC): a sign-in made on one console is
// honoured by another on the same database (another replica, or this
// one after a restart), its message after a change too; signed out on
// the second, it is gone on the first. The session's row holds neither
// the cookie nor the token.
func TestSignInOnAnotherConsole(t *testing.T) {
	e := newEnv(t)
	e.seed()
	b := e.browser()
	b.signin(adminToken)
	srv := testserver.New(testserver.Config{Store: e.store, AdminToken: adminToken})
	t.Cleanup(func() { srv.Close() })
	other := console.New(console.Config{API: srv.Handler(), Sessions: e.store})
	t.Cleanup(func() { other.Close() })
	srv.Mux().Handle("/", other)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	// The same cookies, sent to the other server.
	u, _ := url.Parse(e.url)
	u2, _ := url.Parse(ts.URL)
	b.c.Jar.SetCookies(u2, b.c.Jar.Cookies(u))
	b2 := &browser{t: t, base: ts.URL, c: b.c}

	wantStatus(t, b2.get("/pools/pool-a"), http.StatusOK)
	a := b.post("/pools/pool-a/hosts/host-1/drain", url.Values{"csrf": {b.csrf("/pools/pool-a")}, "drain": {"true"}})
	wantStatus(t, a, http.StatusSeeOther)
	wantContains(t, b2.get(a.location), "host-1")
	if a := b2.get(a.location); strings.Contains(a.body, `class="flash ok"`) {
		t.Error("the change's message was shown twice")
	}
	var sid string
	for _, ck := range b.c.Jar.Cookies(u) {
		if ck.Name == "vdibroker_session" {
			sid = ck.Value
		}
	}
	row, err := e.store.WebSession(context.Background(), vdibroker.HashSecret(sid), time.Now())
	if err != nil || strings.Contains(string(row.Sealed), adminToken) || row.Principal != "admin" {
		t.Errorf("the session's row: %+v, %v", row, err)
	}
	wantStatus(t, b2.post("/signout", url.Values{"csrf": {b2.csrf("/")}}), http.StatusSeeOther)
	b.c.Jar.SetCookies(u, []*http.Cookie{{Name: "vdibroker_session", Value: sid, Path: "/"}})
	wantStatus(t, b.get("/"), http.StatusSeeOther)
}

// recordedRefusals is a RefusalRecorder that keeps what it is given.
type recordedRefusals struct{ got []*vdibroker.AuditEntry }

func (r *recordedRefusals) RecordRefusal(ctx context.Context, e *vdibroker.AuditEntry) (bool, error) {
	r.got = append(r.got, e)
	return true, nil
}

// TestAuditRefusals (R-SEC): a refused sign-in reaches the broker's
// bounded refusal audit as an anonymous refusal of its address, with the
// kind as its target and the cut detail as its error. (The bound itself:
// broker's refusal tests and TestAnonymousWritesAreBounded_RSEC.)
func TestAuditRefusals(t *testing.T) {
	rec := &recordedRefusals{}
	r := &console.AuditRefusals{Audit: rec}
	r.Refused(context.Background(), "signin/oidc", "10.0.0.7", "The identity provider did not sign you in")
	want := &vdibroker.AuditEntry{Principal: vdibroker.AuditPrincipal{Kind: vdibroker.PrincipalAnonymous}, RemoteAddr: "10.0.0.7",
		Action: "signin", Target: "signin/oidc", Outcome: vdibroker.AuditRefused, Error: "The identity provider did not sign you in"}
	if len(rec.got) != 1 || !reflect.DeepEqual(rec.got[0], want) {
		t.Errorf("recorded %+v, want %+v", rec.got, want)
	}
	// A signed-in form refused by its CSRF check is no sign-in.
	r.Refused(context.Background(), "portal/csrf", "10.0.0.7", "POST /portal/sessions/p/s/logoff: the form lacks this sign-in's CSRF token")
	if len(rec.got) != 2 || rec.got[1].Action != "form" || rec.got[1].Target != "portal/csrf" {
		t.Errorf("a refused form recorded as %+v, want action form, target portal/csrf", rec.got[len(rec.got)-1])
	}
}
