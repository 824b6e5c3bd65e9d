package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/testop"
)

// oidcRoles maps pin-ops to Contributor on pin only, readers to Reader,
// pin-users to User on pin.
const oidcRoles = "groups:\n  pin-ops:\n    role: Contributor\n    hostPools: [pin]\n  readers:\n    role: Reader\n" +
	"  pin-users:\n    role: User\n    hostPools: [pin]\n"

// oidcBroker is a broker on 127.0.0.1 configured for single sign-on
// through a real provider served as opHost ("127.0.0.1", or "localhost":
// another site), with pools pin and pout; adjust changes the broker's
// settings before it starts. The provider knows carol (pin-ops), mallory
// (no mapped group) and uma (pin-users), and takes the broker's /signin
// as a post-logout redirect.
func oidcBroker(t *testing.T, opHost string, adjust func(*Main)) (*Main, *testop.OP) {
	t.Helper()
	op := testop.StartAt(t, opHost, "vdibroker-console", "console-secret",
		testop.User{Subject: "carol", Password: "pw-carol", Name: "carol@example.test", Groups: []string{"pin-ops"}},
		testop.User{Subject: "mallory", Password: "pw-mallory", Groups: []string{"strangers"}},
		testop.User{Subject: "uma", Password: "pw-uma", Name: "uma@example.test", Groups: []string{"pin-users"}})
	dir := t.TempDir()
	roles := filepath.Join(dir, "roles.yaml")
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(roles, []byte(oidcRoles), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secret, []byte("console-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := &Main{Listen: "127.0.0.1:0", DataDir: t.TempDir(),
		OIDC: OIDCFlags{Issuer: op.Issuer, ClientID: op.ClientID, ClientSecretFile: secret, RoleMapFile: roles, GroupsClaim: "groups"}}
	if adjust != nil {
		adjust(m)
	}
	if err := m.Open(t.Context()); err != nil {
		t.Fatalf("start broker: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	op.AllowPostLogoutRedirect(m.URL() + "/signin")
	api := vhttp.NewClient(m.URL(), m.AdminToken)
	for _, p := range []string{"pin", "pout"} {
		if _, err := api.PutHostPool(t.Context(), p, map[string]any{}); err != nil {
			t.Fatal(err)
		}
	}
	return m, op
}

var hiddenRE = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)

// noRedirects is c not following redirects.
func noRedirects(c *http.Client) *http.Client {
	nc := *c
	nc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &nc
}

// oidcLogin signs in to the console at base through the provider's form
// with a cookie jar client and returns the callback URL the provider sent
// it to, without following it.
func oidcLogin(t *testing.T, base string, c *http.Client, user, password string) string {
	t.Helper()
	res, err := c.Get(base + "/signin/oidc?next=/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(body), "test provider") {
		t.Fatalf("the provider's login page: %d %s", res.StatusCode, body)
	}
	form := url.Values{}
	for _, m := range hiddenRE.FindAllStringSubmatch(string(body), -1) {
		form.Set(m[1], htmlUnescape(m[2]))
	}
	if form.Get("code_challenge") == "" || form.Get("nonce") == "" || form.Get("state") == "" {
		t.Fatalf("the authorization request lacks PKCE, nonce or state: %v", form)
	}
	auth := *res.Request.URL
	auth.RawQuery = form.Encode()
	cb, err := testop.SignIn(c, auth.String(), user, password)
	if err != nil {
		t.Fatal(err)
	}
	return cb
}

func htmlUnescape(s string) string {
	return strings.NewReplacer("&amp;", "&", "&#43;", "+", "&#34;", `"`, "&#39;", "'", "&lt;", "<", "&gt;", ">").Replace(s)
}

func getBody(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	res, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res, string(body)
}

// portalCSRF finds a console or portal form's CSRF token in its page.
var portalCSRF = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// pageCSRF is the CSRF token of the form on the page at u, as c reads it.
func pageCSRF(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	_, page := getBody(t, c, u)
	m := portalCSRF.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("GET %s: no CSRF token in\n%s", u, page)
	}
	return m[1]
}

func jarClient() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar}
}

// TestOIDCConsoleFlow (R-SEC, OpenID Connect): the code flow end to end
// without a browser: the callback opens a session on the overview with
// the scoped role; the same callback again (the attacker has its URL and
// the state cookie) is refused, as the provider's code is single-use; so
// is a callback whose state is not the browser's and a user of no mapped
// group. A User is told the console is for administrators, with a link to
// the portal, and gets no session. The sign-in is in the audit trail; of
// the refusals from one address within a minute the first is a row of
// its own, the others are counted (the broker's RecordRefusal).
func TestOIDCConsoleFlow(t *testing.T) {
	m, _ := oidcBroker(t, "127.0.0.1", nil)
	c := jarClient()
	callback := oidcLogin(t, m.URL(), c, "carol", "pw-carol")
	if !strings.HasPrefix(callback, m.URL()+"/signin/oidc/callback?") {
		t.Fatalf("callback %q", callback)
	}
	base, _ := url.Parse(m.URL() + "/signin/oidc/")
	stateCookie := c.Jar.Cookies(base)
	res, body := getBody(t, c, callback)
	if res.StatusCode != 200 || res.Request.URL.Path != "/" || !strings.Contains(body, `data-pool="pin"`) || strings.Contains(body, `data-pool="pout"`) {
		t.Fatalf("after sign-in: %d at %s; want the overview with pin only:\n%s", res.StatusCode, res.Request.URL, body)
	}

	// The same callback again, with the state cookie.
	replay := jarClient()
	replay.Jar.SetCookies(base, stateCookie)
	if res, body := getBody(t, replay, callback); res.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "refused the code") {
		t.Errorf("replayed callback: %d %s", res.StatusCode, body)
	}
	// A callback not started in this browser.
	cb2 := oidcLogin(t, m.URL(), jarClient(), "carol", "pw-carol")
	if res, body := getBody(t, &http.Client{}, cb2); res.StatusCode != http.StatusForbidden || !strings.Contains(body, "state mismatch") {
		t.Errorf("callback without the browser's state cookie: %d", res.StatusCode)
	}
	// A user whose groups map to no role.
	c3 := jarClient()
	if res, body := getBody(t, c3, oidcLogin(t, m.URL(), c3, "mallory", "pw-mallory")); res.StatusCode != http.StatusForbidden || !strings.Contains(body, "no role is mapped") {
		t.Errorf("unmapped user: %d, want 403", res.StatusCode)
	}
	// A User: this console is not theirs.
	c4 := jarClient()
	res, body = getBody(t, c4, oidcLogin(t, m.URL(), c4, "uma", "pw-uma"))
	if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "This console is for administrators") ||
		!strings.Contains(body, `href="/portal/"`) || strings.Contains(body, "may not make this change") {
		t.Errorf("a User's sign-in: %d\n%s", res.StatusCode, body)
	}
	site, _ := url.Parse(m.URL())
	for _, ck := range c4.Jar.Cookies(site) {
		if ck.Name == "vdibroker_session" {
			t.Error("a User got a console session")
		}
	}

	list, err := vhttp.NewClient(m.URL(), m.AdminToken).ListAudit(context.Background(), vhttp.AuditQuery{Action: "signin"})
	if err != nil {
		t.Fatal(err)
	}
	// carol's sign-in, then the first refusal (the replay); the other
	// two are counted until the minute has passed.
	if len(list) != 2 || list[0].Principal.Kind != "oidc" || list[0].Principal.ID != "carol" || list[0].Principal.Role != "Contributor" ||
		len(list[0].Principal.HostPools) != 1 || list[0].Outcome != "ok" {
		t.Fatalf("sign-in entries %+v", list)
	}
	if e := list[1]; e.Outcome != "refused" || e.Target != "signin/oidc" || !strings.Contains(e.Error, "refused the code") || e.RemoteAddr != "127.0.0.1" {
		t.Errorf("refusal: %+v", e)
	}
}

// TestOIDCCallbackFlood (R-SEC): 300 anonymous callbacks carrying an
// error "of the provider" with an 8 KB description, of no sign-in of
// this browser, are answered 403 (not started in this browser) while the
// address has failed authentications left, then 429; neither the page
// nor the audit trail shows the text (anyone can write such a URL, to
// have this site show its words as the provider's); the audit trail
// grows by one row.
func TestOIDCCallbackFlood(t *testing.T) {
	m, _ := oidcBroker(t, "127.0.0.1", nil)
	long := url.QueryEscape(strings.Repeat("<script>", 1024))
	statuses := map[int]int{}
	for range 300 {
		res, body := getBody(t, &http.Client{}, m.URL()+"/signin/oidc/callback?error=access_denied&error_description="+long)
		statuses[res.StatusCode]++
		if len(body) > 4096 || strings.Contains(body, "script") {
			t.Fatalf("a refused callback answered %d bytes, showing the forged text: %.300s", len(body), body)
		}
	}
	if statuses[403] < 1 || statuses[403] > 100 || statuses[429] < 200 || statuses[403]+statuses[429] != 300 {
		t.Errorf("answers %v: want 403 until the address's failed authentications are used up, then 429", statuses)
	}
	list, err := vhttp.NewClient(m.URL(), m.AdminToken).ListAudit(context.Background(), vhttp.AuditQuery{Target: "signin/oidc"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || len(list[0].Error) > 300 || !strings.Contains(list[0].Error, "state mismatch") || strings.Contains(list[0].Error, "script") {
		t.Errorf("%d audit rows of 300 refused callbacks (want 1, cut): %+v", len(list), list)
	}
}

// TestOIDCRedirectFromExternalURL (R-SEC): behind a TLS-terminating proxy
// (--external-url https://...) the sign-in's redirect_uri is the external
// URL's, whatever Host the request names, and the state and session
// cookies are Secure though the broker is reached over plain HTTP, named
// with the __Host- prefix at "/" (a sibling subdomain can neither plant
// nor shadow them); a broker that does not listen on loopback needs
// --external-url.
func TestOIDCRedirectFromExternalURL(t *testing.T) {
	const external = "https://broker.example.test"
	m, op := oidcBroker(t, "127.0.0.1", func(m *Main) { m.Federation.ExternalURL = external })
	req, _ := http.NewRequest("GET", m.URL()+"/signin/oidc?next=/pools/pin", nil)
	req.Host = "evil.example"
	c := noRedirects(&http.Client{})
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	loc, _ := url.Parse(res.Header.Get("Location"))
	if got := loc.Query().Get("redirect_uri"); got != external+"/signin/oidc/callback" {
		t.Errorf("redirect_uri %q, want %s/signin/oidc/callback", got, external)
	}
	var state *http.Cookie
	for _, ck := range res.Cookies() {
		if ck.Name == "__Host-vdibroker_oidc" {
			state = ck
		}
	}
	if state == nil || !state.Secure || state.Path != "/" || state.Domain != "" {
		t.Fatalf("state cookie %+v: want __Host-vdibroker_oidc, Secure, Path=/, no Domain", state)
	}
	// The provider sends the browser to the external URL; the proxy
	// passes it to the broker.
	if _, err := testop.SignIn(c, loc.String(), "carol", "pw-carol"); err != nil {
		t.Fatal(err)
	}
	cb, _ := url.Parse(op.LastRedirect())
	req, _ = http.NewRequest("GET", m.URL()+cb.RequestURI(), nil)
	req.AddCookie(state)
	res, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	var session *http.Cookie
	for _, ck := range res.Cookies() {
		if ck.Name == "__Host-vdibroker_session" {
			session = ck
		}
	}
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/pools/pin" || session == nil || !session.Secure ||
		session.SameSite != http.SameSiteLaxMode || session.Path != "/" || session.Domain != "" {
		t.Errorf("callback: %d to %q, session cookie %+v; want 303 to /pools/pin with a __Host-vdibroker_session cookie, Secure, SameSite=Lax, Path=/",
			res.StatusCode, res.Header.Get("Location"), session)
	}

	far := &Main{listener: fakeListener{&net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 8080}}}
	if _, err := far.siteURL(); err == nil || !strings.Contains(err.Error(), "--external-url") {
		t.Errorf("single sign-on on 10.1.2.3 without --external-url: %v", err)
	}
}

// carolSignsIn are the browser's steps of carol's single sign-on to the
// console at base, through a provider's login form (#username,
// #password, #login), to the overview listing pin.
func carolSignsIn(base string) []chromedp.Action[chromedp.Void] {
	return providerSignIn(base+"/", "carol", "pw-carol", `tr[data-pool="pin"]`)
}

// providerSignIn are the browser's steps of a single sign-on from page
// start (its #signin-oidc button) through a provider's login form
// (#username, #password, #login) back to a page showing landed.
func providerSignIn(start, user, password, landed string) []chromedp.Action[chromedp.Void] {
	return []chromedp.Action[chromedp.Void]{
		chromedp.Navigate(start),
		chromedp.WaitVisible(chromedp.CSS("#signin-oidc")),
		chromedp.Click(chromedp.CSS("#signin-oidc")),
		chromedp.WaitVisible(chromedp.CSS("#username")),
		chromedp.SendKeys(chromedp.CSS("#username"), user),
		chromedp.SendKeys(chromedp.CSS("#password"), password),
		chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS(landed)),
	}
}

// fakeListener is a listener that only has an address.
type fakeListener struct{ addr net.Addr }

func (l fakeListener) Accept() (net.Conn, error) { return nil, net.ErrClosed }
func (l fakeListener) Close() error              { return nil }
func (l fakeListener) Addr() net.Addr            { return l.addr }

// TestOIDCConsoleBrowser (R-SEC): headless Chromium signs in to the
// console through the provider's login page, the provider on another
// site (localhost) than the broker (127.0.0.1), as Entra ID or Okta are:
// the navigation back began on the provider's site, so a SameSite=Strict
// session cookie would be withheld and the browser sent to /signin. It
// lands on the overview as a Contributor scoped to pin. Signing out ends
// the provider's session too: the next "Sign in with single sign-on"
// shows the provider's form instead of signing in silently.
func TestOIDCConsoleBrowser(t *testing.T) {
	ctx := newBrowser(t)
	m, op := oidcBroker(t, "localhost", nil)
	if !strings.HasPrefix(op.Issuer, "http://localhost:") || !strings.HasPrefix(m.URL(), "http://127.0.0.1:") {
		t.Fatalf("provider %s and broker %s must be on different sites", op.Issuer, m.URL())
	}
	step(t, ctx, "sign in through the provider", carolSignsIn(m.URL())...)
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('tr[data-pool="pout"]').length`))
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("the overview lists pout, outside the role's scope")
	}
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil || !strings.HasSuffix(loc, "/") {
		t.Errorf("landed on %q, %v; want the overview", loc, err)
	}
	screenshot(t, ctx, "console-oidc-overview.png")
	step(t, ctx, "open pin", chromedp.Navigate(m.URL()+"/pools/pin"), chromedp.WaitVisible(chromedp.CSS("#save-settings")))
	step(t, ctx, "pout is not found", chromedp.Navigate(m.URL()+"/pools/pout"), chromedp.WaitVisible(chromedp.CSS("#error")))

	step(t, ctx, "sign out, at the provider too",
		chromedp.Navigate(m.URL()+"/"),
		chromedp.WaitVisible(chromedp.CSS(".signout button")),
		chromedp.Click(chromedp.CSS(".signout button")),
		chromedp.WaitVisible(chromedp.CSS("#signin-oidc")),
	)
	if n := op.Logouts(); n != 1 {
		t.Errorf("the provider ended %d sessions, want 1", n)
	}
	step(t, ctx, "the next sign-in asks again",
		chromedp.Click(chromedp.CSS("#signin-oidc")),
		chromedp.WaitVisible(chromedp.CSS("#username")),
	)
}

// TestOIDCUserRoleBrowser: a User who signs in with single sign-on sees
// one page saying the console is for administrators, with a link to the
// user portal, not console pages that each answer 403.
func TestOIDCUserRoleBrowser(t *testing.T) {
	ctx := newBrowser(t)
	m, _ := oidcBroker(t, "localhost", nil)
	step(t, ctx, "sign in as a User",
		chromedp.Navigate(m.URL()+"/signin/oidc"),
		chromedp.WaitVisible(chromedp.CSS("#username")),
		chromedp.SendKeys(chromedp.CSS("#username"), "uma"),
		chromedp.SendKeys(chromedp.CSS("#password"), "pw-uma"),
		chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("#for-users")),
	)
	if got := text(t, ctx, "#for-users h1"); got != "This console is for administrators" {
		t.Errorf("heading %q", got)
	}
	href, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#to-portal').getAttribute('href')`))
	if err != nil || href != "/portal/" {
		t.Errorf("portal link %q, %v", href, err)
	}
	screenshot(t, ctx, "console-oidc-user.png")
}
