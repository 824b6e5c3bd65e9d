//go:build linux

package main

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/testop"
)

// ssoSignIn signs a new browser in to the portal of w as user through
// the provider, and returns it (not following redirects) and its CSRF
// token.
func ssoSignIn(t *testing.T, w *portalWorld, user, password string) (*http.Client, string) {
	t.Helper()
	base := w.m.URL()
	c := jarClient()
	res, err := c.Get(base + "/portal/signin/oidc?next=/portal/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	cb, err := testop.SignIn(c, res.Request.URL.String(), user, password)
	if err != nil {
		t.Fatal(err)
	}
	nr := noRedirects(c)
	if res, _ := getBody(t, nr, cb); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("%s's callback: %d", user, res.StatusCode)
	}
	_, home := getBody(t, nr, base+"/portal/")
	m := portalCSRF.FindStringSubmatch(home)
	if m == nil {
		t.Fatalf("%s's page has no CSRF token:\n%s", user, home)
	}
	return nr, m[1]
}

// TestPortalVerifiedPrincipal (R-U2, R-U3, R-SEC): uma, signed in with
// single sign-on (the portal's verified principal), reaches no more
// than an end user: bob's session is refused 403 and the refusal is in
// the audit trail under her name; a pool or session id that is a dot
// segment ("%2E%2E") names no other API call and is not answered as
// done; her portal cookie is no credential at the API.
func TestPortalVerifiedPrincipal(t *testing.T) {
	w := newPortalWorld(t)
	base := w.m.URL()
	ctx := t.Context()
	c, err := w.admin.Connect(ctx, "other", vhttp.ConnectRequest{User: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	bobs := vdibroker.AgentSession{ID: "7", User: "bob", State: vdibroker.StateActive}
	w.heartbeat(t, c.SessionHost, bobs)
	uma, csrf := ssoSignIn(t, w, "uma", "pw-uma")
	post := func(path string) (*http.Response, string) {
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(url.Values{"csrf": {csrf}, "confirm": {"yes"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", base)
		res, err := uma.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res, res.Header.Get("Location")
	}
	for _, act := range []string{"logoff", "disconnect"} {
		if res, _ := post("/portal/sessions/other/" + c.SessionID + "/" + act); res.StatusCode != http.StatusForbidden {
			t.Errorf("uma's %s of bob's session: %d, want 403", act, res.StatusCode)
		}
	}
	if cmds := w.heartbeat(t, c.SessionHost, bobs); len(cmds) != 0 {
		t.Fatalf("uma's tries reached bob's host: %+v", cmds)
	}
	list, err := w.admin.ListAudit(ctx, vhttp.AuditQuery{Action: "usersession.logoff"})
	if err != nil || len(list) != 1 || list[0].Outcome != vdibroker.AuditRefused || list[0].Principal.Name != "uma" ||
		list[0].Principal.Kind != vdibroker.PrincipalOIDC || list[0].Principal.Role != vdibroker.RoleUser {
		t.Errorf("the refused logoff's audit: %+v, %v", list, err)
	}

	// Dot segments decoded into the path's values: the API call they
	// would make is no API call; the portal must not say it was done.
	for _, path := range []string{
		"/portal/sessions/%2E%2E/" + c.SessionID + "/logoff",
		"/portal/sessions/other/%2E%2E/disconnect",
		"/portal/sessions/%2e/" + c.SessionID + "/disconnect",
	} {
		res, loc := post(path)
		if res.StatusCode < 400 {
			t.Errorf("POST %s: %d %s, want a refusal", path, res.StatusCode, loc)
		}
	}
	if _, home := getBody(t, uma, base+"/portal/"); strings.Contains(home, "The session is being logged off.") || strings.Contains(home, "The session is being disconnected.") {
		t.Errorf("the portal told uma a session was ended")
	}

	// Her portal cookie (and anything a header could claim) is no
	// credential at the API.
	req, _ := http.NewRequest("GET", base+"/api/v1/feed", nil)
	u, _ := url.Parse(base + "/portal/")
	for _, ck := range uma.Jar.Cookies(u) {
		req.AddCookie(ck)
	}
	if res, err := uma.Do(req); err != nil || res.StatusCode != http.StatusUnauthorized {
		t.Errorf("the API with uma's portal cookie: %v %v, want 401", res, err)
	} else {
		res.Body.Close()
	}
}
