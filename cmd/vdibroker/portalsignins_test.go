package main

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/portal"
)

// TestPortalMaxSignins (R-SEC, "Web sessions"; R-U2): serve's
// --portal-max-signins bounds the portal's sign-ins, the console's bound
// untouched: with 1, a second user is refused in her words.
func TestPortalMaxSignins(t *testing.T) {
	m := &Main{Listen: "127.0.0.1:0", DataDir: t.TempDir(), PortalMaxSignins: 1}
	if err := m.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	admin := vhttp.NewClient(m.URL(), m.AdminToken)
	csrfRE := regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	signIn := func(user string) (int, string) {
		t.Helper()
		tr, err := admin.CreateToken(t.Context(), vhttp.TokenRequest{Role: vdibroker.RoleUser, Subject: user})
		if err != nil {
			t.Fatal(err)
		}
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		res, err := c.Get(m.URL() + portal.SigninPath)
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(res.Body)
		res.Body.Close()
		csrf := csrfRE.FindSubmatch(page)
		if csrf == nil {
			t.Fatalf("no CSRF token on the sign-in page: %s", page)
		}
		req, _ := http.NewRequest(http.MethodPost, m.URL()+portal.SigninPath,
			strings.NewReader(url.Values{"csrf": {string(csrf[1])}, "token": {tr.Secret}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", m.URL())
		if res, err = c.Do(req); err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return res.StatusCode, string(body)
	}
	if code, body := signIn("alice"); code != http.StatusSeeOther {
		t.Fatalf("alice's sign-in: %d %s", code, body)
	}
	if code, body := signIn("bob"); code != http.StatusTooManyRequests || !strings.Contains(body, "as many people signed in as it is set to take") {
		t.Errorf("bob's sign-in beyond --portal-max-signins 1: %d %s", code, body)
	}
}

// TestPortalMaxSigninsFlag: the default holds a pod's sessions
// (portal.DefaultSessionLimits), and a value out of 1..10,000,000 is a
// usage error naming the flag and the range.
func TestPortalMaxSigninsFlag(t *testing.T) {
	if def := newServeCmd().Flags().Lookup("portal-max-signins").DefValue; def != strconv.Itoa(portal.DefaultSessionLimits.PerArea) {
		t.Errorf("--portal-max-signins defaults to %s, want %d", def, portal.DefaultSessionLimits.PerArea)
	}
	for _, v := range []string{"0", "-1", "10000001"} {
		r := runCLI(t, "serve", "--portal-max-signins", v, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0")
		if r.code != 2 || !strings.Contains(r.stderr, "--portal-max-signins: must be 1..10000000, got "+v) {
			t.Errorf("serve --portal-max-signins %s: exit %d, %q; want 2 naming the flag and 1..10000000", v, r.code, r.stderr)
		}
	}
}
