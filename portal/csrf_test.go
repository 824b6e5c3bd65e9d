package portal_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/webguard/webguardtest"
	"github.com/vdibroker/vdibroker/portal"
)

// TestStateChangesNeedThisSite_RU7: alice's logoff of her own session,
// over a real server with real cookies, is refused (403, nothing queued
// for the host) unless the form carries her sign-in's CSRF token and
// comes from this site: no token, another sign-in's token, an Origin of
// another site or of no site ("null": a sandboxed frame, a redirect
// across sites), or a browser saying cross-site are each refused; then
// the form as the page sends it is done. Her session cookie is HttpOnly,
// SameSite=Lax, scoped to /portal/; a cookie planted before sign-in is
// not adopted (session fixation): signing in sets a new one, and the
// planted one stays no sign-in.
func TestStateChangesNeedThisSite_RU7(t *testing.T) {
	rec := &refusals{}
	e := newEnv(t, func(c *portal.Config) { c.Refusals = rec })
	ctx := context.Background()
	c, err := e.admin.Connect(ctx, "desk", vhttp.ConnectRequest{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	active := vdibroker.AgentSession{ID: "1", User: "alice", State: vdibroker.StateActive}
	e.heartbeat(c.SessionHost, active)

	alice := e.browser()
	u, _ := url.Parse(e.url + "/portal/")
	planted := strings.Repeat("ab", 32)
	alice.c.Jar.SetCookies(u, []*http.Cookie{{Name: "vdibroker_portal", Value: planted, Path: "/portal/"}})
	_, page := alice.get("/portal/signin")
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no CSRF token on the sign-in page")
	}
	res, _ := alice.post("/portal/signin", url.Values{"csrf": {m[1]}, "token": {e.userToken("alice")}})
	var set *http.Cookie
	for _, ck := range res.Cookies() {
		if ck.Name == "vdibroker_portal" {
			set = ck
		}
	}
	if set == nil || set.Value == planted || len(set.Value) != 64 || !set.HttpOnly || set.SameSite != http.SameSiteLaxMode || set.Path != "/portal/" {
		t.Fatalf("the session cookie: %+v", set)
	}
	// The planted cookie is no sign-in.
	fixed := e.browser()
	fixed.c.Jar.SetCookies(u, []*http.Cookie{{Name: "vdibroker_portal", Value: planted, Path: "/portal/"}})
	if res, _ := fixed.get("/portal/"); res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/portal/signin") {
		t.Errorf("the planted cookie: %d %s, want the sign-in page", res.StatusCode, res.Header.Get("Location"))
	}
	_, home := alice.get("/portal/")
	csrf := csrfRE.FindStringSubmatch(home)[1]
	otherCSRF := e.browser().signIn(e.userToken("alice"))

	path := "/portal/sessions/desk/" + c.SessionID + "/logoff"
	var requestID string // the last form's X-Request-Id
	send := func(form url.Values, h ...string) int {
		t.Helper()
		req, _ := http.NewRequest("POST", e.url+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for i := 0; i+1 < len(h); i += 2 {
			req.Header.Set(h[i], h[i+1])
		}
		res, _ := alice.do(req)
		requestID = res.Header.Get("X-Request-Id")
		return res.StatusCode
	}
	for _, c := range []struct {
		name string
		form url.Values
		h    []string
	}{
		// Each with her confirmation (confirm=yes, R-U3): it is no
		// credential; a forged form may carry it as well.
		{"no CSRF token", url.Values{"confirm": {"yes"}}, []string{"Origin", e.url}},
		{"another sign-in's token", url.Values{"csrf": {otherCSRF}, "confirm": {"yes"}}, []string{"Origin", e.url}},
		{"another site's Origin", url.Values{"csrf": {csrf}, "confirm": {"yes"}}, []string{"Origin", "http://evil.example"}},
		{"Origin null", url.Values{"csrf": {csrf}, "confirm": {"yes"}}, []string{"Origin", "null"}},
		{"Sec-Fetch-Site cross-site", url.Values{"csrf": {csrf}, "confirm": {"yes"}}, []string{"Sec-Fetch-Site", "cross-site"}},
		// Nor is another site's form shown her confirmation page.
		{"another site's form without confirm", url.Values{"csrf": {csrf}, "name": {"Nothing is lost"}}, []string{"Origin", "http://evil.example"}},
	} {
		if code := send(c.form, c.h...); code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", c.name, code)
		}
	}
	if cmds := e.heartbeat(c.SessionHost, active); len(cmds) != 0 {
		t.Fatalf("a refused form reached the host: %+v", cmds)
	}
	// Each refused form is recorded with the caller's address and the
	// form it posted.
	if got := rec.list(); len(got) != 6 || !strings.HasPrefix(got[0], "portal/csrf 127.0.0.1 POST "+path+": ") {
		t.Errorf("refused forms recorded: %q; want six, kind portal/csrf, naming the form", got)
	}
	if code := send(url.Values{"csrf": {csrf}, "confirm": {"yes"}}, "Origin", e.url, "Sec-Fetch-Site", "same-origin"); code != http.StatusSeeOther {
		t.Fatalf("the form as the page sends it: %d, want 303", code)
	}
	if cmds := e.heartbeat(c.SessionHost, active); len(cmds) != 1 || cmds[0].Type != vdibroker.CommandLogoff {
		t.Errorf("after her logoff the host got %+v", cmds)
	}
	// Its audit entry names the portal's request (R-SEC: an entry is
	// found from the request a user or a log line names).
	list, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Action: "usersession.logoff"})
	if err != nil || len(list) != 1 || requestID == "" || list[0].RequestID != requestID {
		t.Errorf("the logoff's audit entries %+v (%v); want one with the portal request's id %q", list, err, requestID)
	}
}

// TestHostPrefixBehindTLS (R-U2, R-SEC): behind a TLS-terminating proxy
// (SecureCookies) the portal's sign-in form cookie and session cookie
// are __Host-vdibroker_portal_signin and __Host-vdibroker_portal:
// Secure, Path=/ (not /portal/: the prefix demands it), no Domain, so a
// sibling subdomain can neither plant nor shadow them. The sign-in goes
// through with them; a session cookie of the plain name, as a sibling
// could plant (its own session, to have the user launch into its
// desktops), is no sign-in; nor is a form token planted under the plain
// name.
func TestHostPrefixBehindTLS(t *testing.T) {
	e := newEnv(t, func(c *portal.Config) { c.SecureCookies = true })
	// Go's cookie jar sends Secure cookies to https only: the proxy's
	// browser is played by hand.
	send := func(method, path string, form url.Values, cks ...*http.Cookie) *http.Response {
		t.Helper()
		return webguardtest.Send(t, e.url, method, path, form, cks...)
	}
	cookie := func(res *http.Response, name string) *http.Cookie {
		t.Helper()
		return webguardtest.HostCookie(t, res, name)
	}
	token := e.userToken("alice")
	signinForm := func() (*http.Cookie, url.Values) {
		t.Helper()
		ck := cookie(send("GET", "/portal/signin", nil), "__Host-vdibroker_portal_signin")
		return ck, url.Values{"csrf": {ck.Value}, "token": {token}}
	}
	ck, form := signinForm()
	if res := send("POST", "/portal/signin", form, &http.Cookie{Name: "vdibroker_portal_signin", Value: ck.Value}); res.StatusCode != http.StatusForbidden {
		t.Errorf("a sign-in form token under the plain name: %d, want 403", res.StatusCode)
	}
	ck, form = signinForm()
	res := send("POST", "/portal/signin", form, ck)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in behind the proxy: %d, want 303", res.StatusCode)
	}
	sess := cookie(res, "__Host-vdibroker_portal")
	if sess.SameSite != http.SameSiteLaxMode {
		t.Errorf("session cookie %+v: want SameSite=Lax", sess)
	}
	if res := send("GET", "/portal/", nil, sess); res.StatusCode != http.StatusOK {
		t.Errorf("the portal with the session cookie: %d, want 200", res.StatusCode)
	}
	planted := &http.Cookie{Name: "vdibroker_portal", Value: sess.Value}
	if res := send("GET", "/portal/", nil, planted); res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), portal.SigninPath) {
		t.Errorf("a session cookie under the plain name: %d %s, want the sign-in page", res.StatusCode, res.Header.Get("Location"))
	}
}

// TestSignOutWhileTheStoreFails (R-U2): a sign-out the database does not
// record is answered 503 saying the user is still signed in, with the
// sign-out button to try again, and the cookie is kept; the sign-in
// still works, and the next sign-out ends it. Answering "signed out"
// would leave the sign-in good for hours to a copy of the cookie stolen
// before.
func TestSignOutWhileTheStoreFails(t *testing.T) {
	f := &webguardtest.FailingDeletes{}
	e := newEnv(t, func(c *portal.Config) { f.WebSessionStore = c.Sessions; c.Sessions = f })
	alice := e.browser()
	csrf := alice.signIn(e.userToken("alice"))
	f.Down.Store(true)
	res, page := alice.post("/portal/signout", url.Values{"csrf": {csrf}})
	if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(page, "You are still signed in") || !strings.Contains(page, `action="/portal/signout"`) {
		t.Errorf("sign-out while the database fails: %d\n%s", res.StatusCode, page)
	}
	if cs := res.Header.Values("Set-Cookie"); len(cs) != 0 {
		t.Errorf("a sign-out the database did not record set %q", cs)
	}
	f.Down.Store(false)
	if res, _ := alice.get("/portal/"); res.StatusCode != http.StatusOK {
		t.Fatalf("still signed in: %d, want 200", res.StatusCode)
	}
	if res, _ := alice.post("/portal/signout", url.Values{"csrf": {csrf}}); res.StatusCode != http.StatusSeeOther {
		t.Errorf("sign-out: %d, want 303", res.StatusCode)
	}
	if res, _ := alice.get("/portal/"); res.StatusCode != http.StatusSeeOther {
		t.Errorf("signed out: %d, want 303 to the sign-in page", res.StatusCode)
	}
}
