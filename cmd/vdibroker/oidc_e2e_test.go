package main

import (
	"context"
	"io"
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

// oidcBroker is a broker configured for single sign-on through a real
// provider on loopback, with pools pin and pout; group pin-ops maps to
// Contributor on pin only.
func oidcBroker(t *testing.T) (*Main, *testop.OP) {
	t.Helper()
	op := testop.Start(t, "vdibroker-console", "console-secret",
		testop.User{Subject: "carol", Password: "pw-carol", Name: "carol@example.test", Groups: []string{"pin-ops"}},
		testop.User{Subject: "mallory", Password: "pw-mallory", Groups: []string{"strangers"}})
	dir := t.TempDir()
	roles := filepath.Join(dir, "roles.yaml")
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(roles, []byte("groups:\n  pin-ops:\n    role: Contributor\n    hostPools: [pin]\n  readers:\n    role: Reader\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secret, []byte("console-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := &Main{Listen: "127.0.0.1:0", DataDir: t.TempDir(),
		OIDC: OIDCFlags{Issuer: op.Issuer, ClientID: op.ClientID, ClientSecretFile: secret, RoleMapFile: roles, GroupsClaim: "groups"}}
	if err := m.Open(t.Context()); err != nil {
		t.Fatalf("start broker: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	api := vhttp.NewClient(m.URL(), m.AdminToken)
	for _, p := range []string{"pin", "pout"} {
		if _, err := api.PutHostPool(t.Context(), p, map[string]any{}); err != nil {
			t.Fatal(err)
		}
	}
	return m, op
}

var hiddenRE = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)

// oidcLogin signs in through the provider's form with a cookie jar
// client and returns the callback URL the provider sent it to, without
// following it.
func oidcLogin(t *testing.T, m *Main, c *http.Client, user, password string) string {
	t.Helper()
	res, err := c.Get(m.URL() + "/signin/oidc?next=/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(body), "test provider") {
		t.Fatalf("the provider's login page: %d %s", res.StatusCode, body)
	}
	form := url.Values{"username": {user}, "password": {password}}
	for _, m := range hiddenRE.FindAllStringSubmatch(string(body), -1) {
		form.Set(m[1], htmlUnescape(m[2]))
	}
	if form.Get("code_challenge") == "" || form.Get("nonce") == "" || form.Get("state") == "" {
		t.Fatalf("the authorization request lacks PKCE, nonce or state: %v", form)
	}
	nc := *c
	nc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res, err = nc.PostForm(res.Request.URL.String(), form)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusFound {
		t.Fatalf("provider login: %d", res.StatusCode)
	}
	return res.Header.Get("Location")
}

func htmlUnescape(s string) string {
	return strings.NewReplacer("&amp;", "&", "&#43;", "+", "&#34;", `"`, "&#39;", "'", "&lt;", "<", "&gt;", ">").Replace(s)
}

// TestOIDCConsoleFlow: the code flow end to end without a browser: the
// callback opens a session on the overview with the scoped role; a
// replayed callback (same state, same cookie) is refused, and so is a
// callback whose state is not the browser's and a user of no mapped group.
func TestOIDCConsoleFlow(t *testing.T) {
	m, _ := oidcBroker(t)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	callback := oidcLogin(t, m, c, "carol", "pw-carol")
	if !strings.HasPrefix(callback, m.URL()+"/signin/oidc/callback?") {
		t.Fatalf("callback %q", callback)
	}
	base, _ := url.Parse(m.URL() + "/signin/oidc/")
	stateCookie := jar.Cookies(base)
	res, err := c.Get(callback)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || res.Request.URL.Path != "/" || !strings.Contains(string(body), `data-pool="pin"`) || strings.Contains(string(body), `data-pool="pout"`) {
		t.Fatalf("after sign-in: %d at %s; want the overview with pin only:\n%s", res.StatusCode, res.Request.URL, body)
	}

	// Replay: the attacker has the callback URL and the state cookie.
	rjar, _ := cookiejar.New(nil)
	rjar.SetCookies(base, stateCookie)
	res, err = (&http.Client{Jar: rjar}).Get(callback)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "used already") {
		t.Errorf("replayed callback: %d %s", res.StatusCode, body)
	}

	// A callback not started in this browser.
	jar2, _ := cookiejar.New(nil)
	c2 := &http.Client{Jar: jar2}
	cb2 := oidcLogin(t, m, c2, "carol", "pw-carol")
	res, err = (&http.Client{}).Get(cb2) // no state cookie
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("callback without the browser's state cookie: %d", res.StatusCode)
	}

	// A user whose groups map to no role.
	jar3, _ := cookiejar.New(nil)
	c3 := &http.Client{Jar: jar3}
	cb3 := oidcLogin(t, m, c3, "mallory", "pw-mallory")
	res, err = c3.Get(cb3)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("unmapped user: %d, want 403", res.StatusCode)
	}

	// The sign-in is in the audit trail, by the OIDC subject.
	list, err := vhttp.NewClient(m.URL(), m.AdminToken).ListAudit(context.Background(), vhttp.AuditQuery{Action: "signin"})
	if err != nil {
		t.Fatal(err)
	}
	// First carol's sign-in, then the three refusals above.
	if len(list) != 4 || list[0].Principal.Kind != "oidc" || list[0].Principal.ID != "carol" || list[0].Principal.Role != "Contributor" ||
		len(list[0].Principal.HostPools) != 1 || list[0].Outcome != "ok" {
		t.Fatalf("sign-in entries %+v", list)
	}
	for i, want := range []string{"used already", "state mismatch", "no role is mapped"} {
		if e := list[i+1]; e.Outcome != "refused" || e.Target != "signin/oidc" || !strings.Contains(e.Error, want) || e.RemoteAddr != "127.0.0.1" {
			t.Errorf("refusal %d: %+v, want one for %q", i, e, want)
		}
	}
}

// TestOIDCConsoleBrowser: headless Chromium signs in to the console
// through the provider's login page and lands on the overview as a
// Contributor scoped to pin: pin is listed, pout is not, and pin's page
// offers changes.
func TestOIDCConsoleBrowser(t *testing.T) {
	ctx := newBrowser(t)
	m, _ := oidcBroker(t)
	step(t, ctx, "sign in through the provider",
		chromedp.Navigate(m.URL()+"/"),
		chromedp.WaitVisible(chromedp.CSS("#signin-oidc")),
		chromedp.Click(chromedp.CSS("#signin-oidc")),
		chromedp.WaitVisible(chromedp.CSS("#username")),
		chromedp.SendKeys(chromedp.CSS("#username"), "carol"),
		chromedp.SendKeys(chromedp.CSS("#password"), "pw-carol"),
		chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-pool="pin"]`)),
	)
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
}
