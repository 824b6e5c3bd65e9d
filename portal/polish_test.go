package portal_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestLogoffAsksWithoutScript_RU3: a Log off form posted without the
// user's confirmation (no script ran: no dialog asked) is answered with
// the confirmation page, in her language, naming the session: its form
// posts the logoff again with confirm=yes and her CSRF token, Cancel
// leads back to her page; nothing is asked of her host until she
// confirms. A GET of the logoff's path logs nothing off.
func TestLogoffAsksWithoutScript_RU3(t *testing.T) {
	e := newEnv(t, nil)
	c := e.activeAtDesk("alice")
	alice := e.browser()
	csrf := alice.signIn(e.userToken("alice"))
	path := "/portal/sessions/desk/" + c.SessionID + "/logoff"
	active := vdibroker.AgentSession{ID: "1", User: "alice", State: vdibroker.StateActive}

	res, page := alice.post(path, url.Values{"csrf": {csrf}, "name": {"Office desktop"}})
	if res.StatusCode != http.StatusOK || !strings.Contains(page, `<p id="confirm-question">Log off `+"\u2068Office desktop\u2069"+`? Anything not saved in it will be lost.</p>`) ||
		!strings.Contains(page, `<form method="post" action="`+path+`">`) ||
		!strings.Contains(page, `<input type="hidden" name="csrf" value="`+csrf+`">`) ||
		!strings.Contains(page, `<input type="hidden" name="confirm" value="yes">`) ||
		!strings.Contains(page, `<a href="/portal/" id="cancel" class="button secondary">Cancel</a>`) ||
		!strings.Contains(page, "<title>Log off – Your desktops and apps</title>") {
		t.Errorf("a Log off posted without her confirmation: %d, want the confirmation page:\n%s", res.StatusCode, page)
	}
	if cmds := e.heartbeat(c.SessionHost, active); len(cmds) != 0 {
		t.Fatalf("a Log off she did not confirm reached her host: %+v", cmds)
	}
	// In Arabic, right to left, the question in Arabic.
	alice.get("/portal/?lang=ar")
	if _, page := alice.post(path, url.Values{"csrf": {csrf}, "name": {"Office desktop"}}); !strings.Contains(page, `<html lang="ar" dir="rtl">`) ||
		!strings.Contains(page, "هل تريد تسجيل الخروج من \u2068Office desktop\u2069؟") || !strings.Contains(page, ">إلغاء</a>") {
		t.Errorf("the confirmation page in Arabic:\n%s", page)
	}
	alice.get("/portal/?lang=en")
	for _, m := range []string{"GET", "HEAD"} {
		req, _ := http.NewRequest(m, e.url+path, nil)
		if res, _ := alice.do(req); res.StatusCode != http.StatusNotFound {
			t.Errorf("%s of the logoff's path: %d, want 404", m, res.StatusCode)
		}
	}
	if cmds := e.heartbeat(c.SessionHost, active); len(cmds) != 0 {
		t.Fatalf("a GET logged her session off: %+v", cmds)
	}
	// The confirmation page's form, as posted.
	form := url.Values{}
	for _, m := range regexp.MustCompile(`<input type="hidden" name="([a-z]+)" value="([^"]*)">`).FindAllStringSubmatch(page, -1) {
		form.Set(m[1], m[2])
	}
	if res, _ := alice.post(path, form); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("her confirmation: %d, want 303", res.StatusCode)
	}
	if cmds := e.heartbeat(c.SessionHost, active); len(cmds) != 1 || cmds[0].Type != vdibroker.CommandLogoff || cmds[0].SessionID != c.SessionID {
		t.Errorf("after her confirmation her host got %+v, want her logoff", cmds)
	}
}

// signOutButton is the header's Sign out form of the sign-in whose CSRF
// token is csrf.
func signOutButton(csrf string) string {
	return `<form class="signout" method="post" action="/portal/signout">
    <input type="hidden" name="csrf" value="` + csrf + `">
    <button type="submit" id="signout">Sign out</button>`
}

// TestSignedInErrorPagesSignOut_RU1: every page a signed-in user is
// answered with after an error (a page not found, a refused launch, a
// session that ended, a stale form) has her header's Sign out, as her
// home page has; a browser that is not signed in gets none (and the
// expired sign-in's page leads to Sign in).
func TestSignedInErrorPagesSignOut_RU1(t *testing.T) {
	e := newEnv(t, nil)
	alice := e.browser()
	csrf := alice.signIn(e.userToken("alice"))
	for _, c := range []struct {
		name   string
		status int
		answer func() (*http.Response, string)
	}{
		{"a page not found", http.StatusNotFound, func() (*http.Response, string) { return alice.get("/portal/nosuchpage") }},
		{"a static file not found", http.StatusNotFound, func() (*http.Response, string) { return alice.get("/portal/static/nosuch.js") }},
		{"a malformed launch", http.StatusBadRequest, func() (*http.Response, string) {
			return alice.post("/portal/launch", url.Values{"csrf": {csrf}, "resource": {"nonsense"}})
		}},
		{"a launch of what her feed lacks", http.StatusNotFound, func() (*http.Response, string) {
			return alice.post("/portal/launch", url.Values{"csrf": {csrf}, "resource": {"desktop:other"}})
		}},
		{"a launch that is over", http.StatusNotFound, func() (*http.Response, string) { return alice.get("/portal/launches/" + strings.Repeat("a", 43)) }},
		{"a logoff of a session that ended", http.StatusNotFound, func() (*http.Response, string) {
			return alice.post("/portal/sessions/desk/01nosuchsession/logoff", url.Values{"csrf": {csrf}, "confirm": {"yes"}})
		}},
		{"a stale form", http.StatusForbidden, func() (*http.Response, string) {
			return alice.post("/portal/sessions/desk/01nosuchsession/disconnect", url.Values{"csrf": {"stale"}})
		}},
	} {
		res, page := c.answer()
		if res.StatusCode != c.status || !strings.Contains(page, `id="error-page"`) || !strings.Contains(page, signOutButton(csrf)) {
			t.Errorf("%s: %d, want %d with her Sign out:\n%s", c.name, res.StatusCode, c.status, page)
		}
	}
	anon := e.browser()
	if res, page := anon.get("/portal/nosuchpage"); res.StatusCode != http.StatusNotFound || strings.Contains(page, `id="signout"`) {
		t.Errorf("a page not found, not signed in: %d, want 404 without Sign out:\n%s", res.StatusCode, page)
	}
	e.advance(30 * 24 * time.Hour)
	if res, page := alice.post("/portal/launch", url.Values{"csrf": {csrf}, "resource": {"desktop:desk"}}); res.StatusCode != http.StatusUnauthorized ||
		strings.Contains(page, `id="signout"`) || !strings.Contains(page, `<a href="/portal/signin" id="back">Sign in</a>`) {
		t.Errorf("after her sign-in expired: %d, want 401 with Sign in, no Sign out:\n%s", res.StatusCode, page)
	}
}

// TestNeverSignedInIsAskedToSignIn_RU2: a form posted by a browser that
// never signed in (no session cookie) is asked to sign in, not told its
// sign-in expired; one whose cookie names no live sign-in (ended,
// expired, or made up) is told it expired. Both lead to Sign in.
func TestNeverSignedInIsAskedToSignIn_RU2(t *testing.T) {
	e := newEnv(t, nil)
	for _, c := range []struct {
		name, cookie, want, not string
	}{
		{"never signed in", "", "Please sign in first.", "expired"},
		{"a cookie of no live sign-in", strings.Repeat("0", 64), "Your sign-in has expired. Sign in again.", "Please sign in first."},
		{"a malformed cookie", "x", "Your sign-in has expired. Sign in again.", "Please sign in first."},
	} {
		b := e.browser()
		if c.cookie != "" {
			b.c.Jar.SetCookies(mustURL(t, e.url+"/portal/"), []*http.Cookie{{Name: "vdibroker_portal", Value: c.cookie, Path: "/portal/"}})
		}
		res, page := b.post("/portal/launch", url.Values{"resource": {"desktop:desk"}})
		if res.StatusCode != http.StatusUnauthorized || !strings.Contains(page, c.want) || strings.Contains(page, c.not) ||
			!strings.Contains(page, `<a href="/portal/signin" id="back">Sign in</a>`) {
			t.Errorf("%s: %d, want 401 saying %q:\n%s", c.name, res.StatusCode, c.want, page)
		}
	}
	// In German too.
	b := e.browser()
	req, _ := http.NewRequest("POST", e.url+"/portal/launch", strings.NewReader("resource=desktop%3Adesk"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept-Language", "de")
	if res, page := b.do(req); res.StatusCode != http.StatusUnauthorized || !strings.Contains(page, "Bitte melden Sie sich zuerst an.") {
		t.Errorf("never signed in, in German: %d\n%s", res.StatusCode, page)
	}
}

// TestLoggingOffShownAndRefreshed_RU3: after her logoff her page (the
// logoff's redirect names the session, ?off=) shows the session, still
// listed, as logging off with no buttons, and carries what its script
// refreshes the list with: /portal/sessions?off=, the list alone, at
// most 10 tries within 2 minutes. Once her host has logged it off (its
// agent no longer reports it) the list has it no more and asks for no
// refresh. An ?off= that names none of her sessions marks nothing and
// asks for no refresh.
func TestLoggingOffShownAndRefreshed_RU3(t *testing.T) {
	e := newEnv(t, nil)
	c := e.activeAtDesk("alice")
	alice := e.browser()
	csrf := alice.signIn(e.userToken("alice"))
	res, _ := alice.post("/portal/sessions/desk/"+c.SessionID+"/logoff", url.Values{"csrf": {csrf}, "confirm": {"yes"}})
	to := res.Header.Get("Location")
	if res.StatusCode != http.StatusSeeOther || to != "/portal/?off="+c.SessionID {
		t.Fatalf("her logoff: %d to %q", res.StatusCode, to)
	}
	e.heartbeat(c.SessionHost, vdibroker.AgentSession{ID: "1", User: "alice", State: vdibroker.StateActive}) // the command, not done yet
	row := regexp.MustCompile(`(?s)<tr role="row" data-session="` + c.SessionID + `"[^>]*>.*?</tr>`)
	refresh := regexp.MustCompile(`<section class="card" id="sessions" data-refresh="([^"]+)" data-delays="([^"]+)">`)
	_, home := alice.get(to)
	r := row.FindString(home)
	if !strings.Contains(r, "data-logging-off") || !strings.Contains(r, ">Logging off<") || strings.Contains(r, "<button") {
		t.Errorf("her session after her logoff: want it logging off, with no buttons:\n%s", r)
	}
	m := refresh.FindStringSubmatch(home)
	if m == nil || m[1] != "/portal/sessions?off="+c.SessionID {
		t.Fatalf("her page after her logoff asks for no refresh of her sessions (%q):\n%s", m, home)
	}
	total, n := 0, 0
	for _, d := range strings.Split(m[2], ",") {
		s, err := strconv.Atoi(d)
		if err != nil || s <= 0 {
			t.Fatalf("the refresh's delays %q", m[2])
		}
		total, n = total+s, n+1
	}
	if n > 10 || total > 120 || total < 60 {
		t.Errorf("the refresh's delays %q: %d tries over %d s, want at most 10 over 1 to 2 minutes", m[2], n, total)
	}
	if !strings.Contains(home, `<p id="sessions-status" class="note" role="status" data-done="The session has been logged off."`) {
		t.Errorf("her page has no status to say the logoff is done:\n%s", home)
	}
	// The refresh: the list alone, the session still logging off.
	res, list := alice.get("/portal/sessions?off="+c.SessionID, "Portal-Fragment", "sessions")
	if res.StatusCode != http.StatusOK || strings.Contains(list, "<html") || strings.Contains(list, `id="resources"`) ||
		!strings.Contains(row.FindString(list), ">Logging off<") || res.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("the refreshed list: %d %q\n%s", res.StatusCode, res.Header.Get("Cache-Control"), list)
	}
	// Her host logged it off: gone from the list, which asks no more.
	e.heartbeat(c.SessionHost)
	_, list = alice.get("/portal/sessions?off="+c.SessionID, "Portal-Fragment", "sessions")
	if strings.Contains(list, c.SessionID) || strings.Contains(list, "data-refresh") || !strings.Contains(list, `id="no-sessions"`) {
		t.Errorf("the list once her host logged it off:\n%s", list)
	}
	// An ?off= of no session of hers marks nothing.
	d := e.activeAtDesk("alice")
	for _, off := range []string{"01nosuchsession", `"><script>`} {
		_, home = alice.get("/portal/?off=" + url.QueryEscape(off))
		if strings.Contains(home, "data-logging-off") || strings.Contains(home, "data-refresh") || !strings.Contains(home, `data-session="`+d.SessionID+`"`) {
			t.Errorf("?off=%s: want nothing marked:\n%s", off, home)
		}
	}
}

// TestConfirmationNameBounded_RU3_RSEC: the confirmation page shows the
// form's name (her page's own, as its CSRF token says) at most 200
// characters and an ellipsis, escaped, and set apart from the sentence:
// a name's own POP DIRECTIONAL ISOLATE and override do not reverse the
// question after it.
func TestConfirmationNameBounded_RU3_RSEC(t *testing.T) {
	e := newEnv(t, nil)
	c := e.activeAtDesk("alice")
	alice := e.browser()
	csrf := alice.signIn(e.userToken("alice"))
	path := "/portal/sessions/desk/" + c.SessionID + "/logoff"
	for _, tc := range []struct{ name, sent, want string }{
		// 300 of "é": 200 kept, then "…".
		{"a long name", strings.Repeat("é", 300), "Log off \u2068" + strings.Repeat("é", 200) + "…\u2069? Anything"},
		{"markup", `<b>x</b>`, "Log off \u2068&lt;b&gt;x&lt;/b&gt;\u2069? Anything"},
		// The stray PDI is dropped; the override ends at the closing PDI.
		{"a PDI and an override", "desk\u2069\u202e", "Log off \u2068desk\u202e\u2069? Anything"},
	} {
		_, page := alice.post(path, url.Values{"csrf": {csrf}, "name": {tc.sent}})
		if !strings.Contains(page, `<p id="confirm-question">`+tc.want) {
			t.Errorf("%s: the question, want %q:\n%s", tc.name, tc.want, page)
		}
	}
}

// rowForm is the form of the session's row in page whose action ends in
// suffix ("/logoff", "/disconnect"), as a click posts it: its action and
// its hidden fields (a field given twice, twice); "" when the row has
// none.
func rowForm(page, session, suffix string) (action string, form url.Values) {
	row := regexp.MustCompile(`(?s)<tr role="row" data-session="` + regexp.QuoteMeta(session) + `"[^>]*>.*?</tr>`).FindString(page)
	m := regexp.MustCompile(`(?s)<form method="post" action="([^"]*` + regexp.QuoteMeta(suffix) + `)"[^>]*>(.*?)</form>`).FindStringSubmatch(row)
	if m == nil {
		return "", nil
	}
	form = url.Values{}
	for _, f := range regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`).FindAllStringSubmatch(m[2], -1) {
		form.Add(f[1], html.UnescapeString(f[2]))
	}
	return html.UnescapeString(m[1]), form
}

// loggingOff reports whether the session's row in page reads Logging
// off, without buttons.
func loggingOff(page, session string) bool {
	row := regexp.MustCompile(`(?s)<tr role="row" data-session="` + regexp.QuoteMeta(session) + `"[^>]*>.*?</tr>`).FindString(page)
	return strings.Contains(row, "data-logging-off") && strings.Contains(row, ">Logging off<") && !strings.Contains(row, "<button")
}

// TestEveryLoggingOffShown_RU3: alice logs off a session, then a second
// before the first has left the list, then disconnects a third: each
// session she logged off reads Logging off, without buttons, until its
// host has done it, each on its own (the second logoff, and the
// disconnect, do not give the first its buttons back; the second gone,
// the first is still logging off), on her page and in the list its
// script refreshes (which asks for both). Without scripts alike: the
// confirmation page carries the sessions logging off. The sessions a
// form carries are bounded.
func TestEveryLoggingOffShown_RU3(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	for _, pool := range []string{"lab1", "lab2"} {
		e.pool(pool, map[string]any{}, 1)
		if _, err := e.admin.PutApplicationGroup(ctx, pool+"-desktop", map[string]any{"hostPool": pool, "applicationGroupType": "Desktop",
			"friendlyName": "Lab " + pool, "assignments": map[string]any{"users": []string{"alice"}}}); err != nil {
			t.Fatal(err)
		}
	}
	var cs []*vhttp.ConnectResult
	for _, pool := range []string{"desk", "lab1", "lab2"} {
		c, err := e.admin.Connect(ctx, pool, vhttp.ConnectRequest{User: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		e.heartbeat(c.SessionHost, vdibroker.AgentSession{ID: pool, User: "alice", State: vdibroker.StateActive})
		cs = append(cs, c)
	}
	a, b, c := cs[0], cs[1], cs[2]
	alice := e.browser()
	alice.signIn(e.userToken("alice"))
	_, home := alice.get("/portal/")
	// post posts the row's form as her page has it, confirmed, and
	// returns where it sends her.
	post := func(page string, s *vhttp.ConnectResult, suffix string) string {
		t.Helper()
		action, form := rowForm(page, s.SessionID, suffix)
		if form == nil {
			t.Fatalf("no %s form in %s's row:\n%s", suffix, s.SessionID, page)
		}
		form.Set("confirm", "yes")
		res, body := alice.post(action, form)
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("%s %s: %d %s", action, form, res.StatusCode, body)
		}
		return res.Header.Get("Location")
	}
	to := post(home, a, "/logoff")
	if to != "/portal/?off="+a.SessionID {
		t.Fatalf("her first logoff sends her to %q", to)
	}
	_, home = alice.get(to)
	to = post(home, b, "/logoff")
	_, home = alice.get(to)
	for _, s := range []*vhttp.ConnectResult{a, b} {
		if !loggingOff(home, s.SessionID) {
			t.Errorf("after her second logoff (sent to %s), %s (%s) does not read Logging off:\n%s", to, s.HostPool, s.SessionID, home)
		}
	}
	if loggingOff(home, c.SessionID) {
		t.Errorf("the session she did not log off reads Logging off")
	}
	// A disconnect meanwhile keeps both.
	to = post(home, c, "/disconnect")
	_, home = alice.get(to)
	for _, s := range []*vhttp.ConnectResult{a, b} {
		if !loggingOff(home, s.SessionID) {
			t.Errorf("after her disconnect (sent to %s), %s does not read Logging off:\n%s", to, s.HostPool, home)
		}
	}
	// The list the script refreshes asks for both; the second gone, the
	// first still logging off.
	m := regexp.MustCompile(`data-refresh="([^"]+)"`).FindStringSubmatch(home)
	if m == nil {
		t.Fatalf("her page asks for no refresh:\n%s", home)
	}
	refresh := html.UnescapeString(m[1])
	if q := mustURL(t, refresh).Query()["off"]; !slices.Contains(q, a.SessionID) || !slices.Contains(q, b.SessionID) || len(q) != 2 {
		t.Errorf("the refresh %s: want both sessions logging off", refresh)
	}
	e.heartbeat(b.SessionHost) // lab1's host logged hers off
	_, list := alice.get(refresh, "Portal-Fragment", "sessions")
	if strings.Contains(list, b.SessionID) || !loggingOff(list, a.SessionID) || !strings.Contains(list, "data-refresh") {
		t.Errorf("the list with the second gone: want the first still logging off, refreshed:\n%s", list)
	}
	e.heartbeat(a.SessionHost)
	if _, list = alice.get(refresh, "Portal-Fragment", "sessions"); strings.Contains(list, "data-logging-off") || strings.Contains(list, "data-refresh") {
		t.Errorf("the list with both gone: want nothing logging off, no refresh:\n%s", list)
	}

	// Without scripts: the confirmation page carries the one logging off.
	d := e.activeAtDesk("alice")
	_, home = alice.get("/portal/")
	to = post(home, c, "/logoff")
	_, home = alice.get(to)
	action, form := rowForm(home, d.SessionID, "/logoff")
	res, page := alice.post(action, form) // not confirmed: asked
	if res.StatusCode != http.StatusOK || !strings.Contains(page, `id="confirm-question"`) {
		t.Fatalf("a Log off without her confirmation: %d\n%s", res.StatusCode, page)
	}
	confirm := url.Values{}
	for _, f := range regexp.MustCompile(`<input type="hidden" name="([a-z]+)" value="([^"]*)">`).FindAllStringSubmatch(page, -1) {
		confirm.Add(f[1], html.UnescapeString(f[2]))
	}
	res, _ = alice.post(action, confirm)
	_, home = alice.get(res.Header.Get("Location"))
	if !loggingOff(home, c.SessionID) || !loggingOff(home, d.SessionID) {
		t.Errorf("logged off through the confirmation page (sent to %s): want both logging off:\n%s", res.Header.Get("Location"), home)
	}

	// Bounded: a form carrying many sessions sends her to a page naming
	// at most 20, the one she logged off among them.
	e2 := e.activeAtDesk("alice")
	_, home = alice.get("/portal/")
	action, form = rowForm(home, e2.SessionID, "/logoff")
	for i := range 50 {
		form.Add("off", "01nosuchsession"+strconv.Itoa(i))
	}
	form.Add("off", strings.Repeat("x", 65))
	form.Add("off", "bad\nid")
	form.Set("confirm", "yes")
	res, _ = alice.post(action, form)
	offs := mustURL(t, res.Header.Get("Location")).Query()["off"]
	if len(offs) > 20 || !slices.Contains(offs, e2.SessionID) || slices.ContainsFunc(offs, func(s string) bool { return len(s) > 64 || strings.ContainsAny(s, "\n") }) {
		t.Errorf("a logoff carrying 52 sessions sends her to %d of them %q: want at most 20, hers among them, none malformed", len(offs), offs)
	}
}

// TestSessionsListNavigatedToIsThePage_RU3: /portal/sessions, the list
// alone that her page's script fetches (it says so: Portal-Fragment),
// opened as a page (a bookmark, a typed address, the address to return
// to after sign-in) is her whole page: a redirect to it, its query
// kept. The script's fetch still gets the list alone.
func TestSessionsListNavigatedToIsThePage_RU3(t *testing.T) {
	e := newEnv(t, nil)
	c := e.activeAtDesk("alice")
	alice := e.browser()
	alice.signIn(e.userToken("alice"))
	for _, h := range [][]string{
		nil,
		{"Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document", "Accept", "text/html"},
	} {
		res, body := alice.get("/portal/sessions?off="+c.SessionID, h...)
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/portal/?off="+c.SessionID {
			t.Errorf("/portal/sessions opened as a page (%q): %d to %q, want her page:\n%s", h, res.StatusCode, res.Header.Get("Location"), body)
		}
	}
	res, list := alice.get("/portal/sessions", "Portal-Fragment", "sessions", "Sec-Fetch-Mode", "cors", "Sec-Fetch-Dest", "empty")
	if res.StatusCode != http.StatusOK || strings.Contains(list, "<html") || !strings.Contains(list, `id="sessions"`) {
		t.Errorf("the script's fetch: %d, want the list alone:\n%s", res.StatusCode, list)
	}
	// The address to return to after sign-in.
	anon := e.browser()
	res, _ = anon.get("/portal/sessions")
	to := res.Header.Get("Location")
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(to, "/portal/signin?next=") {
		t.Fatalf("/portal/sessions signed out: %d to %q", res.StatusCode, to)
	}
	_, page := anon.get(to)
	m := csrfRE.FindStringSubmatch(page)
	next := regexp.MustCompile(`name="next" value="([^"]*)"`).FindStringSubmatch(page)
	if m == nil || next == nil {
		t.Fatalf("the sign-in page:\n%s", page)
	}
	res, _ = anon.post("/portal/signin", url.Values{"csrf": {m[1]}, "token": {e.userToken("alice")}, "next": {html.UnescapeString(next[1])}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in: %d", res.StatusCode)
	}
	res, body := anon.get(res.Header.Get("Location"))
	if res.StatusCode == http.StatusSeeOther {
		res, body = anon.get(res.Header.Get("Location"))
	}
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "<html") || !strings.Contains(body, `id="resources"`) {
		t.Errorf("signed in on the way to /portal/sessions: %d, want her whole page:\n%s", res.StatusCode, body)
	}
}

// TestConfirmationKeepsLoggingOff_RU3: without scripts, alice logged off
// one session and asks to log off a second: the confirmation page's
// Cancel, and its language links, lead back to her page with the first
// still logging off (?off=), not to a page that gives it its buttons
// back; so does the Back link of the error page a refused logoff answers
// with.
func TestConfirmationKeepsLoggingOff_RU3(t *testing.T) {
	e := newEnv(t, nil)
	e.pool("lab", map[string]any{}, 1)
	if _, err := e.admin.PutApplicationGroup(context.Background(), "lab-desktop", map[string]any{"hostPool": "lab", "applicationGroupType": "Desktop",
		"friendlyName": "Lab", "assignments": map[string]any{"users": []string{"alice"}}}); err != nil {
		t.Fatal(err)
	}
	a := e.activeAtDesk("alice")
	b, err := e.admin.Connect(context.Background(), "lab", vhttp.ConnectRequest{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	e.heartbeat(b.SessionHost, vdibroker.AgentSession{ID: "lab", User: "alice", State: vdibroker.StateActive})
	alice := e.browser()
	alice.signIn(e.userToken("alice"))
	_, home := alice.get("/portal/")
	action, form := rowForm(home, a.SessionID, "/logoff")
	form.Set("confirm", "yes")
	res, _ := alice.post(action, form)
	_, home = alice.get(res.Header.Get("Location"))
	if !loggingOff(home, a.SessionID) {
		t.Fatalf("after her logoff (sent to %s) the first does not read Logging off:\n%s", res.Header.Get("Location"), home)
	}
	want := "/portal/?off=" + a.SessionID
	// The second's Log off, not confirmed: the confirmation page.
	action, form = rowForm(home, b.SessionID, "/logoff")
	res, page := alice.post(action, form)
	if res.StatusCode != http.StatusOK || !strings.Contains(page, `id="confirm-question"`) {
		t.Fatalf("a Log off without her confirmation: %d\n%s", res.StatusCode, page)
	}
	m := regexp.MustCompile(`<a href="([^"]*)" id="cancel"`).FindStringSubmatch(page)
	if m == nil || html.UnescapeString(m[1]) != want {
		t.Errorf("the confirmation page's Cancel leads to %q, want %q", m, want)
	} else if _, back := alice.get(html.UnescapeString(m[1])); !loggingOff(back, a.SessionID) {
		t.Errorf("back through Cancel, the first does not read Logging off:\n%s", back)
	}
	if m := regexp.MustCompile(`<a lang="de" href="([^"]*)"`).FindStringSubmatch(page); m == nil || html.UnescapeString(m[1]) != want+"&lang=de" {
		t.Errorf("the confirmation page's Deutsch link %q, want %q", m, want+"&lang=de")
	}
	// A logoff refused (no such session): Back keeps the first logging off.
	form.Set("confirm", "yes")
	res, page = alice.post("/portal/sessions/desk/01nosuchsession/logoff", form)
	m = regexp.MustCompile(`<a href="([^"]*)" id="back"`).FindStringSubmatch(page)
	if res.StatusCode < 400 || m == nil || html.UnescapeString(m[1]) != want {
		t.Errorf("a refused logoff: %d, Back %q, want %q:\n%s", res.StatusCode, m, want, page)
	}
}

// TestLogoffOfPendingSessionSaysDone_RU3: a Pending session no agent
// saw ends at once when she logs it off (she opened a desktop and her
// client never arrived): the page her logoff leads to no longer lists
// it, so it says the session has been logged off, in her language, not
// that it "leaves this list once its host has done so" over a list
// without it, which no refresh would ever correct. A session still
// listed keeps the flash that it is being logged off.
func TestLogoffOfPendingSessionSaysDone_RU3(t *testing.T) {
	e := newEnv(t, nil)
	c, err := e.admin.Connect(t.Context(), "desk", vhttp.ConnectRequest{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	alice := e.browser()
	csrf := alice.signIn(e.userToken("alice"))
	alice.get("/portal/?lang=de")
	res, _ := alice.post("/portal/sessions/desk/"+c.SessionID+"/logoff", url.Values{"csrf": {csrf}, "confirm": {"yes"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("her logoff: %d, want 303", res.StatusCode)
	}
	_, home := alice.get(res.Header.Get("Location"))
	if strings.Contains(home, `data-session="`+c.SessionID+`"`) {
		t.Fatalf("the Pending session is still listed after her logoff:\n%s", home)
	}
	if !strings.Contains(home, `<p class="flash" id="flash" tabindex="-1">Die Sitzung wurde abgemeldet.</p>`) || strings.Contains(home, "Die Sitzung wird abgemeldet") {
		t.Errorf("the page after the logoff of a session that ended at once: want it said done:\n%s", home)
	}
}
