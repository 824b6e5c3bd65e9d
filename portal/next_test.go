package portal_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/portal"
)

// signinLinkRE is the Sign in link of a page that leads to sign-in.
var signinLinkRE = regexp.MustCompile(`<a href="(/portal/signin[^"]*)" id="back">`)

// TestSigninLinkReturns_RU2: the 401 page of a sign-in that no longer
// holds (here: her access token deleted while her portal sign-in
// lives) leads to Sign in and, once signed in again, back to the page
// she asked for, its query kept. A form posted has no page of its own:
// her home page is where its Sign in leads (no next).
func TestSigninLinkReturns_RU2(t *testing.T) {
	e := newEnv(t, nil)
	tok, err := e.admin.CreateToken(t.Context(), vhttp.TokenRequest{Role: vdibroker.RoleUser, Subject: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	alice := e.browser()
	alice.signIn(tok.Secret)
	if err := e.admin.DeleteToken(t.Context(), tok.ID); err != nil {
		t.Fatal(err)
	}
	asked := "/portal/?off=01nosuchsession&lang=de"
	res, page := alice.get(asked)
	m := signinLinkRE.FindStringSubmatch(page)
	if res.StatusCode != http.StatusUnauthorized || m == nil {
		t.Fatalf("%s with her token deleted: %d, want 401 leading to Sign in:\n%s", asked, res.StatusCode, page)
	}
	link := html.UnescapeString(m[1])
	if got := mustURL(t, link).Query().Get("next"); got != asked {
		t.Errorf("the Sign in link %q returns to %q, want %q", link, got, asked)
	}
	// Following it: the sign-in page, then the page she asked for.
	_, page = alice.get(link)
	c := csrfRE.FindStringSubmatch(page)
	next := regexp.MustCompile(`name="next" value="([^"]*)"`).FindStringSubmatch(page)
	if c == nil || next == nil || html.UnescapeString(next[1]) != asked {
		t.Fatalf("the sign-in page of %s: next %q, want %q:\n%s", link, next, asked, page)
	}
	res, _ = alice.post("/portal/signin", url.Values{"csrf": {c[1]}, "token": {e.userToken("alice")}, "next": {html.UnescapeString(next[1])}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != asked {
		t.Errorf("signed in again: %d to %q, want %q", res.StatusCode, res.Header.Get("Location"), asked)
	}
	// A form: Sign in leads to her page.
	gone := e.browser()
	res, page = gone.post("/portal/launch", url.Values{"resource": {"desktop:desk"}})
	if m := signinLinkRE.FindStringSubmatch(page); res.StatusCode != http.StatusUnauthorized || m == nil || m[1] != "/portal/signin" {
		t.Errorf("a form posted signed out: %d, Sign in link %q, want /portal/signin", res.StatusCode, m)
	}
}

// TestSigninNextStaysInPortal_RU2_RSEC: where a sign-in returns to (the
// sign-in page's and form's next, the 401 page's link) is a relative
// path under /portal/ of this site, of at most 2048 bytes: an absolute
// URL, a scheme, //host, a backslash, a control character (raw or
// percent-encoded), a dot segment that leaves /portal/ (raw or
// percent-encoded, or with a ;parameter that a proxy in front may strip),
// a bidi or other format character (which shows the address in another
// order than it is), or a longer one is the portal's home instead.
func TestSigninNextStaysInPortal_RU2_RSEC(t *testing.T) {
	// Every case is two anonymous requests: past the default burst.
	e := newEnv(t, func(c *portal.Config) { c.AnonymousBurst = 1000 })
	nextRE := regexp.MustCompile(`name="next" value="([^"]*)"`)
	long := "/portal/?x=" + strings.Repeat("a", 2048)
	for _, bad := range []string{
		"https://evil.example/portal/",
		"//evil.example/portal/",
		"///evil.example/portal/",
		"/\\evil.example/portal/",
		"\\\\evil.example\\portal\\",
		"/portal/\\..\\console/",
		"javascript:alert(1)//portal/",
		"http:/portal/",
		"/portal/\x00",
		"/portal/\r\nSet-Cookie: a=b",
		"/portal/%0d%0aSet-Cookie:%20a=b",
		"/portal/\t",
		"/portal/\u2028",
		"/portal/../console/",
		"/portal/%2e%2e/console/",
		"/portal/.%2E/.%2e/console/",
		"/portal/%2E%2E%2Fconsole/",
		"/portal/./../console/",
		"/portal/..;/console/",
		"/portal/%2e%2e;x=1/console/",
		"/portal/\u202e/",
		"/portal/%E2%80%AE/",
		"/console/",
		"/portal",
		long,
	} {
		b := e.browser()
		_, page := b.get("/portal/signin?next=" + url.QueryEscape(bad))
		if m := nextRE.FindStringSubmatch(page); m == nil || html.UnescapeString(m[1]) != "/portal/" {
			t.Errorf("the sign-in page with next %q: its form's next %q, want /portal/", bad, m)
		}
		csrf := csrfRE.FindStringSubmatch(page)
		res, _ := b.post("/portal/signin", url.Values{"csrf": {csrf[1]}, "token": {e.userToken("alice")}, "next": {bad}})
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/portal/" {
			t.Errorf("signed in with next %q: %d to %q, want /portal/", bad, res.StatusCode, res.Header.Get("Location"))
		}
	}
	// What stays: a page of the portal with its query.
	for _, good := range []string{"/portal/?lang=ar", "/portal/launches/abc", "/portal/?off=01x&off=01y"} {
		b := e.browser()
		_, page := b.get("/portal/signin?next=" + url.QueryEscape(good))
		if m := nextRE.FindStringSubmatch(page); m == nil || html.UnescapeString(m[1]) != good {
			t.Errorf("the sign-in page with next %q: its form's next %q", good, m)
		}
	}
	// The 401 page of a page asked for with a longer address leads to
	// Sign in, returning to her home page.
	tok, err := e.admin.CreateToken(t.Context(), vhttp.TokenRequest{Role: vdibroker.RoleUser, Subject: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	alice := e.browser()
	alice.signIn(tok.Secret)
	if err := e.admin.DeleteToken(t.Context(), tok.ID); err != nil {
		t.Fatal(err)
	}
	res, page := alice.get(long)
	if m := signinLinkRE.FindStringSubmatch(page); res.StatusCode != http.StatusUnauthorized || m == nil || m[1] != "/portal/signin" {
		t.Errorf("a page of a 2 KiB address, her token deleted: %d, Sign in link %q, want /portal/signin", res.StatusCode, m)
	}
}
