//go:build unix

package main

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/testop"
)

// TestSignInOverHTTPSBrowser (R-SEC "Web sessions", R-U2), as users run
// it: the broker serves HTTPS itself (--tls-cert; Chromium told to take
// the test's certificate), the provider is on another site (localhost
// against 127.0.0.1) as Entra ID or Okta are. Chromium signs uma in to
// the portal and carol in to the console through it; each lands signed
// in, so the browser took the __Host- cookies the broker set (it refuses
// one that is not Secure, not at Path=/, or has a Domain) and sent the
// session cookie on the navigation back from the provider's site. The
// browser holds only the __Host- names. Signing out of the portal clears
// its cookie in the browser (a clearing Set-Cookie without Secure and
// Path=/ would be refused, and the cookie would stay). The console's
// token form works with its __Host- CSRF cookie.
func TestSignInOverHTTPSBrowser(t *testing.T) {
	ctx := newBrowserWith(t, chromedp.Flag("ignore-certificate-errors", true))
	op := testop.StartAt(t, "localhost", "vdibroker-console", "console-secret",
		testop.User{Subject: "carol", Password: "pw-carol", Name: "carol@example.test", Groups: []string{"pin-ops"}},
		testop.User{Subject: "uma", Password: "pw-uma", Name: "uma@example.test", Groups: []string{"sales"}})
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	cert, key := ca.issue(t, dir, "broker", 2, false)
	roles, secret := filepath.Join(dir, "roles.yaml"), filepath.Join(dir, "secret")
	if err := os.WriteFile(roles, []byte(oidcRoles), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secret, []byte("console-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := &Main{Listen: "127.0.0.1:0", DataDir: t.TempDir(), TLSCert: cert, TLSKey: key,
		OIDC: OIDCFlags{Issuer: op.Issuer, ClientID: op.ClientID, ClientSecretFile: secret, RoleMapFile: roles, GroupsClaim: "groups"}}
	if err := m.Open(t.Context()); err != nil {
		t.Fatalf("start broker: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	base := m.URL()
	if !strings.HasPrefix(base, "https://127.0.0.1:") || !strings.HasPrefix(op.Issuer, "http://localhost:") {
		t.Fatalf("broker %s must serve HTTPS, the provider %s be on another site", base, op.Issuer)
	}
	op.AllowPostLogoutRedirect(base + "/portal/signin")
	op.AllowPostLogoutRedirect(base + "/signin")
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	api := vhttp.NewClient(base, m.AdminToken)
	api.HTTPClient = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if _, err := api.PutHostPool(t.Context(), "pin", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	// cookies are the browser's cookies of the broker, by name.
	cookies := func() map[string]*network.Cookie {
		t.Helper()
		res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{
			URLs: []string{base + "/", base + "/portal/", base + "/signin", base + "/portal/signin"}})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*network.Cookie{}
		for _, c := range res.Cookies {
			out[c.Name] = c
		}
		return out
	}
	wantHostCookie := func(name string) {
		t.Helper()
		got := cookies()
		c := got["__Host-"+name]
		if c == nil || !c.Secure || c.Path != "/" || !c.HTTPOnly || c.SameSite != network.CookieSameSiteLax {
			t.Errorf("the browser's __Host-%s: %+v; want Secure, HttpOnly, SameSite=Lax, Path=/", name, c)
		}
		if c := got[name]; c != nil {
			t.Errorf("the browser holds a cookie %s without the prefix: %+v", name, c)
		}
	}

	step(t, ctx, "uma signs in to the portal through the provider on another site", providerSignIn(base+"/portal/", "uma", "pw-uma", "#resources")...)
	wantHostCookie("vdibroker_portal")
	step(t, ctx, "uma signs out",
		chromedp.Click(chromedp.CSS(".signout button")),
		chromedp.WaitVisible(chromedp.CSS("#signin-oidc")),
	)
	if c := cookies()["__Host-vdibroker_portal"]; c != nil {
		t.Errorf("after sign-out the browser still holds the portal's session cookie %+v", c)
	}
	step(t, ctx, "the portal asks for a sign-in again", chromedp.Navigate(base+"/portal/"), chromedp.WaitVisible(chromedp.CSS("#signin-oidc")))

	step(t, ctx, "carol signs in to the console through the provider on another site", carolSignsIn(base)...)
	wantHostCookie("vdibroker_session")
	step(t, ctx, "a console page", chromedp.Navigate(base+"/pools/pin"), chromedp.WaitVisible(chromedp.CSS("#save-settings")))
	screenshot(t, ctx, "console-https-overview.png")

	// The token form: its CSRF cookie (__Host-, SameSite=Strict) comes
	// back with the form's post.
	step(t, ctx, "carol signs out of the console",
		chromedp.Click(chromedp.CSS(".signout button")),
		chromedp.WaitVisible(chromedp.CSS("#token")),
	)
	if c := cookies()["__Host-vdibroker_signin"]; c == nil || !c.Secure || c.Path != "/" || c.SameSite != network.CookieSameSiteStrict {
		t.Errorf("the sign-in form's cookie: %+v; want __Host-vdibroker_signin, Secure, Path=/, SameSite=Strict", c)
	}
	step(t, ctx, "sign in to the console with the admin token",
		chromedp.SendKeys(chromedp.CSS("#token"), m.AdminToken),
		chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-pool="pin"]`)),
	)
	wantHostCookie("vdibroker_session")
}
