//go:build linux

package main

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker/internal/testop"
)

// TestPortalOIDCFlow (R-U2): without a browser, the portal's single
// sign-on with no role map: uma, in no group the broker maps, is an end
// user whose groups claim entitles her (sales: the office desktop);
// the same callback again (its code is single-use) signs nobody in; the
// console still refuses her (no role mapped), and her ID token alone at
// the API is refused too: the portal's verified principal is the
// portal's, not a way around the role map.
func TestPortalOIDCFlow(t *testing.T) {
	w := newPortalWorld(t)
	base := w.m.URL()
	c := jarClient()
	nr := noRedirects(c)
	// With single sign-on, the token form is the other way in.
	if _, page := getBody(t, c, base+"/portal/signin"); !strings.Contains(page, `id="signin-oidc"`) || !strings.Contains(page, "Or sign in with an access token") {
		t.Errorf("the sign-in page with single sign-on:\n%s", page)
	}
	res, err := c.Get(base + "/portal/signin/oidc?next=/portal/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 || !strings.HasPrefix(res.Request.URL.String(), w.op.Issuer+"/authorize") {
		t.Fatalf("to the provider: %d %s", res.StatusCode, res.Request.URL)
	}
	cb, err := testop.SignIn(c, res.Request.URL.String(), "uma", "pw-uma")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cb, base+"/portal/signin/oidc/callback?") {
		t.Fatalf("the provider sent the browser to %s", cb)
	}
	res, _ = getBody(t, nr, cb)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/portal/" {
		t.Fatalf("callback: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	res, home := getBody(t, nr, base+"/portal/")
	if res.StatusCode != 200 || !strings.Contains(home, `data-id="desktop:desk"`) || !strings.Contains(home, `data-id="desktop:cold"`) ||
		strings.Contains(home, "desktop:other") {
		t.Fatalf("uma's page: %d\n%s", res.StatusCode, home)
	}
	// The callback again, from another browser: the code was used.
	other := noRedirects(jarClient())
	// Its page says to sign in again (R-U6), and its one link is Sign in,
	// whatever the refusal's status (here 403: not this browser's
	// sign-in), not "Back to your desktops and apps", which only led
	// there (R-U2).
	if res, page := getBody(t, other, cb); res.StatusCode == http.StatusSeeOther {
		t.Errorf("a replayed callback signed in")
	} else if !strings.Contains(page, "Signing in with your organisation did not complete. Sign in again") ||
		!strings.Contains(page, `<a href="/portal/signin" id="back">Sign in</a>`) || strings.Contains(page, "Back to your desktops and apps") {
		t.Errorf("a replayed callback's page: %d, want it to lead to the sign-in page\n%s", res.StatusCode, page)
	}
	// The console's own sign-in maps roles: uma has none there.
	// (The provider remembers her browser: it answers at once.)
	if res, body := getBody(t, c, base+"/signin/oidc?next=/"); res.StatusCode != http.StatusForbidden || !strings.Contains(body, "no role is mapped") {
		t.Errorf("uma at the console: %d %s %s", res.StatusCode, res.Request.URL, body)
	}
	tok := w.op.Mint(map[string]any{"sub": "uma", "groups": []string{"sales"}})
	req, _ := http.NewRequest("GET", base+"/api/v1/feed", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("uma's ID token at the API with no role mapped: %d, want 403", res.StatusCode)
	}
}

// TestPortalOIDCRefusedReturnsToAsked (R-U2): a sign-in this browser
// started for a page she asked for does not complete, the provider
// refusing it (its error response to the callback, RFC 6749 4.1.2.1) or
// the code it sent back not being one its token endpoint takes: the page
// says so, and its Sign in leads back to the page she asked for, not her
// home page. A callback of a sign-in not started in this browser names
// no page.
func TestPortalOIDCRefusedReturnsToAsked(t *testing.T) {
	w := newPortalWorld(t)
	base := w.m.URL()
	asked := "/portal/?lang=de&off=01nosuchsession"
	var cb string
	for _, tc := range []struct {
		name string
		q    url.Values
	}{
		{"the provider's refusal", url.Values{"error": {"access_denied"}, "error_description": {"user cancelled"}}},
		{"a code the provider does not take", url.Values{"code": {"not-a-code-it-issued"}}},
	} {
		c := noRedirects(jarClient())
		res, _ := getBody(t, c, base+"/portal/signin/oidc?next="+url.QueryEscape(asked))
		auth, err := url.Parse(res.Header.Get("Location"))
		if res.StatusCode != http.StatusSeeOther || err != nil || auth.Query().Get("state") == "" {
			t.Fatalf("to the provider: %d %q %v", res.StatusCode, res.Header.Get("Location"), err)
		}
		tc.q.Set("state", auth.Query().Get("state"))
		cb = base + "/portal/signin/oidc/callback?" + tc.q.Encode()
		res, page := getBody(t, c, cb)
		link := regexp.MustCompile(`<a href="(/portal/signin[^"]*)" id="back">`).FindStringSubmatch(page)
		var next string
		if link != nil {
			if u, err := url.Parse(html.UnescapeString(link[1])); err == nil {
				next = u.Query().Get("next")
			}
		}
		if res.StatusCode == http.StatusSeeOther || !strings.Contains(page, "did not complete. Sign in again") || next != asked {
			t.Errorf("%s: %d, Sign in returning to %q, want a page saying it, returning to %q\n%s", tc.name, res.StatusCode, next, asked, page)
		}
	}
	// Another browser, which started no sign-in: Sign in to her home page.
	res, page := getBody(t, noRedirects(jarClient()), cb)
	if res.StatusCode != http.StatusForbidden || !strings.Contains(page, `<a href="/portal/signin" id="back">`) {
		t.Errorf("a callback not started in this browser: %d\n%s", res.StatusCode, page)
	}
}

// TestPortalOIDCLongNextReturns (R-U2): a single sign-on started for a
// page of the portal whose address is between 1 and 2 KiB (within the
// 2,048 bytes the portal keeps) returns her to that page, not her home
// page: the sign-in state the identity flow seals keeps as long a next
// as the portal does, a query's "&"s included.
func TestPortalOIDCLongNextReturns(t *testing.T) {
	w := newPortalWorld(t)
	base := w.m.URL()
	c := jarClient()
	nr := noRedirects(c)
	asked := "/portal/?lang=de&off=01nosuchsession&x=" + strings.Repeat("a&b=", 400)
	asked = asked[:1500]
	res, err := c.Get(base + "/portal/signin/oidc?next=" + url.QueryEscape(asked))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 || !strings.HasPrefix(res.Request.URL.String(), w.op.Issuer+"/authorize") {
		t.Fatalf("to the provider: %d %s", res.StatusCode, res.Request.URL)
	}
	cb, err := testop.SignIn(c, res.Request.URL.String(), "uma", "pw-uma")
	if err != nil {
		t.Fatal(err)
	}
	if res, _ := getBody(t, nr, cb); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != asked {
		t.Errorf("callback of a sign-in for a page of %d bytes: %d to %.60q, want %.60q...", len(asked), res.StatusCode, res.Header.Get("Location"), asked)
	}
}
