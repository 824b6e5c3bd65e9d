package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/identity"
	"github.com/vdibroker/vdibroker/internal/testop"
)

// TestOIDCHugeIDTokenRefused (R-SEC): a web sign-in keeps its raw ID
// token (sealed in its web_sessions row, and in a replica's copy for an
// outage), which the console sends as its credential and as the
// id_token_hint of its sign-out. An administrator in thousands of
// directory groups, which the role map takes whatever their number, made
// the real test provider mint an ID token of about 130 KB, and every
// sign-in of hers stored one. Above identity.MaxIDTokenBytes the sign-in
// is refused (403), she is told why and what her provider's
// administrator can change, no session is opened, and the refusal is in
// the audit trail; gina, in one group, signs in through the same
// provider.
func TestOIDCHugeIDTokenRefused(t *testing.T) {
	many := []string{"pin-ops"}
	for i := range 5000 {
		many = append(many, fmt.Sprintf("directory-group-%06d", i))
	}
	op := testop.Start(t, "vdibroker-console", "console-secret",
		testop.User{Subject: "hugo", Password: "pw-hugo", Name: "hugo@example.test", Groups: many},
		testop.User{Subject: "gina", Password: "pw-gina", Name: "gina@example.test", Groups: []string{"pin-ops"}})
	m := startOIDCBroker(t, op)
	site, _ := url.Parse(m.URL())
	hasSession := func(c *http.Client) bool {
		for _, ck := range c.Jar.Cookies(site) {
			if ck.Name == "vdibroker_session" {
				return true
			}
		}
		return false
	}

	c := jarClient()
	res, body := getBody(t, c, oidcLogin(t, m.URL(), c, "hugo", "pw-hugo"))
	want := fmt.Sprintf("at most %d", identity.MaxIDTokenBytes)
	if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "ID token of") || !strings.Contains(body, want) {
		t.Errorf("sign-in with a huge ID token: %d at %s, want 403 saying %q:\n%.2000s", res.StatusCode, res.Request.URL, want, body)
	}
	if hasSession(c) {
		t.Error("a sign-in with a huge ID token got a console session")
	}

	g := jarClient()
	if res, body := getBody(t, g, oidcLogin(t, m.URL(), g, "gina", "pw-gina")); res.StatusCode != 200 || !hasSession(g) {
		t.Errorf("gina's sign-in: %d at %s, session %v\n%.500s", res.StatusCode, res.Request.URL, hasSession(g), body)
	}

	list, err := vhttp.NewClient(m.URL(), m.AdminToken).ListAudit(context.Background(), vhttp.AuditQuery{Action: "signin"})
	if err != nil {
		t.Fatal(err)
	}
	var refused, ok int
	for _, e := range list {
		switch {
		case e.Outcome == "refused" && strings.Contains(e.Error, "ID token of"):
			refused++
		case e.Outcome == "ok" && e.Principal.ID == "hugo":
			t.Errorf("hugo signed in: %+v", e)
		case e.Outcome == "ok" && e.Principal.ID == "gina":
			ok++
		}
	}
	if refused != 1 || ok != 1 {
		t.Errorf("audit: %d refusals naming the ID token's size, %d sign-ins of gina; want 1 and 1: %+v", refused, ok, list)
	}
}
