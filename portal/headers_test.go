package portal_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/vdibroker/vdibroker/internal/webguard"
)

// TestEveryAnswerCarriesTheGuards_RSEC: every kind of answer of the
// portal, to a browser signed in or not, carries the security headers
// (R-SEC): the CSP (no inline script, never framed), nosniff (the .rdp
// file and the status's JSON are not read as a page), X-Frame-Options
// DENY and Referrer-Policy same-origin (a launch's address, which names
// its secret, is no other site's to read); and every answer that holds a
// secret or a signed-in user's page (the CSRF token of her forms, the
// launch's address, the file) is never cached. Only the home page's CSP
// was asserted before.
func TestEveryAnswerCarriesTheGuards_RSEC(t *testing.T) {
	e := newEnv(t, nil)
	anon, alice := e.browser(), e.browser()
	csrf := alice.signIn(e.userToken("alice"))
	launch := alice.launch(csrf, "desktop:desk")
	if s := alice.await(launch, ended); s.State != "ready" {
		t.Fatalf("alice's launch: %+v", s)
	}
	type answer struct {
		name  string
		res   *http.Response
		store bool // never cached
	}
	var answers []answer
	get := func(b *browser, name, path string, store bool) {
		res, _ := b.get(path)
		answers = append(answers, answer{name, res, store})
	}
	get(anon, "the sign-in page", "/portal/signin", true)
	get(anon, "a page not found", "/portal/nowhere", true)
	get(anon, "a page that needs a sign-in", "/portal/", false)
	get(anon, "a static file", "/portal/static/portal.js", false)
	res, _ := anon.post("/portal/signin", url.Values{"csrf": {"forged"}, "token": {"x"}})
	answers = append(answers, answer{"a forged sign-in form", res, true})
	get(alice, "her page", "/portal/", true)
	get(alice, "her sessions", "/portal/sessions", true)
	get(alice, "the launch's page", launch, true)
	get(alice, "the launch's status", launch+"/status", true)
	get(alice, "the .rdp file", launch+"/file", true)
	get(alice, "the file again (gone)", launch+"/file", true)
	get(alice, "her page not found", "/portal/nowhere", true)
	res, _ = alice.post("/portal/launch", url.Values{"csrf": {"forged"}, "resource": {"desktop:desk"}})
	answers = append(answers, answer{"her forged form", res, true})
	if ct := answers[9].res.Header.Get("Content-Type"); ct != "application/x-rdp" {
		t.Fatalf("the file's answer: %d %q", answers[9].res.StatusCode, ct)
	}
	for _, a := range answers {
		h := a.res.Header
		for name, want := range map[string]string{"Content-Security-Policy": webguard.CSP, "X-Content-Type-Options": "nosniff",
			"X-Frame-Options": "DENY", "Referrer-Policy": "same-origin"} {
			if got := h.Get(name); got != want {
				t.Errorf("%s (%d): %s %q, want %q", a.name, a.res.StatusCode, name, got, want)
			}
		}
		if a.store && h.Get("Cache-Control") != "no-store" {
			t.Errorf("%s (%d): Cache-Control %q, want no-store", a.name, a.res.StatusCode, h.Get("Cache-Control"))
		}
	}
}
