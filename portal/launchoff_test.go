package portal_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// launchForms are the launch forms of page (Open's and Reconnect's), each
// its fields.
func launchForms(page string) []url.Values {
	var out []url.Values
	for _, m := range regexp.MustCompile(`(?s)<form method="post" action="/portal/launch">(.*?)</form>`).FindAllStringSubmatch(page, -1) {
		form := url.Values{}
		for _, f := range regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`).FindAllStringSubmatch(m[1], -1) {
			form.Add(f[1], html.UnescapeString(f[2]))
		}
		out = append(out, form)
	}
	return out
}

// TestLaunchKeepsLoggingOff_RU3: a session she logged off reads Logging
// off until its host has done it, also after she opened something
// meanwhile: Open and Reconnect carry it, the launch page's Back leads
// to her page naming it, and a form posted after her sign-in ended
// leads Sign in back to that page.
func TestLaunchKeepsLoggingOff_RU3(t *testing.T) {
	e := newEnv(t, nil)
	c := e.activeAtDesk("alice")
	// A disconnected session of hers in another pool: its row has
	// Reconnect, a launch form too.
	e.pool("lab", map[string]any{}, 1)
	if _, err := e.admin.PutApplicationGroup(t.Context(), "lab-desktop", map[string]any{"hostPool": "lab", "applicationGroupType": "Desktop",
		"friendlyName": "Lab", "assignments": map[string]any{"users": []string{"alice"}}}); err != nil {
		t.Fatal(err)
	}
	d, err := e.admin.Connect(t.Context(), "lab", vhttp.ConnectRequest{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	e.heartbeat(d.SessionHost, vdibroker.AgentSession{ID: "1", User: "alice", State: vdibroker.StateDisconnected})
	alice := e.browser()
	csrf := alice.signIn(e.userToken("alice"))
	res, _ := alice.post("/portal/sessions/desk/"+c.SessionID+"/logoff", url.Values{"csrf": {csrf}, "confirm": {"yes"}})
	to := res.Header.Get("Location")
	e.heartbeat(c.SessionHost, vdibroker.AgentSession{ID: "1", User: "alice", State: vdibroker.StateActive})
	_, home := alice.get(to)
	forms := launchForms(home)
	if !slices.ContainsFunc(forms, func(f url.Values) bool { return f.Get("session") == d.SessionID }) ||
		!slices.ContainsFunc(forms, func(f url.Values) bool { return f.Get("session") == "" }) {
		t.Fatalf("her page has not both Open and Reconnect (%v):\n%s", forms, home)
	}
	for _, f := range forms {
		if f["off"] == nil || len(f["off"]) != 1 || f.Get("off") != c.SessionID {
			t.Errorf("a launch form of her page (%v) carries off %q, want her session logging off", f.Get("resource"), f["off"])
		}
	}
	open := forms[0]
	res, _ = alice.post("/portal/launch", open)
	loc, err := url.Parse(res.Header.Get("Location"))
	if res.StatusCode != http.StatusSeeOther || err != nil || !strings.HasPrefix(loc.Path, "/portal/launches/") || loc.Query().Get("off") != c.SessionID {
		t.Fatalf("Open: %d to %q, want the launch page naming %s", res.StatusCode, res.Header.Get("Location"), c.SessionID)
	}
	_, page := alice.get(loc.String())
	back := regexp.MustCompile(`<a href="([^"]*)" id="back">`).FindStringSubmatch(page)
	if back == nil || html.UnescapeString(back[1]) != "/portal/?off="+c.SessionID {
		t.Fatalf("the launch page's Back %q, want her page naming %s:\n%s", back, c.SessionID, page)
	}
	_, home = alice.get(html.UnescapeString(back[1]))
	if !loggingOff(home, c.SessionID) {
		t.Errorf("her page through Back: her session does not read Logging off:\n%s", home)
	}
	// Her sign-in gone: a form she posts leads Sign in to her page
	// naming it.
	gone := e.browser()
	res, page = gone.post("/portal/launch", open)
	m := signinLinkRE.FindStringSubmatch(page)
	if res.StatusCode != http.StatusUnauthorized || m == nil || mustURL(t, html.UnescapeString(m[1])).Query().Get("next") != "/portal/?off="+c.SessionID {
		t.Errorf("a form posted signed out: %d, Sign in link %q, want it back to her page naming %s", res.StatusCode, m, c.SessionID)
	}
}

// TestLaunchGoneKeepsLoggingOff_RU3: the page of an Open or Reconnect
// names the sessions logging off (?off=); once the launch is forgotten
// (launchTTL after it ended), that address answers "gone", whose Back
// still leads to her page naming them.
func TestLaunchGoneKeepsLoggingOff_RU3(t *testing.T) {
	e := newEnv(t, nil)
	c := e.activeAtDesk("alice")
	alice := e.browser()
	alice.signIn(e.userToken("alice"))
	res, page := alice.get("/portal/launches/" + strings.Repeat("ab", 32) + "?off=" + url.QueryEscape(c.SessionID))
	back := regexp.MustCompile(`<a href="([^"]*)" id="back">`).FindStringSubmatch(page)
	if res.StatusCode != http.StatusNotFound || back == nil || html.UnescapeString(back[1]) != "/portal/?off="+c.SessionID {
		t.Errorf("a launch gone: %d, Back %q, want 404 and her page naming %s:\n%s", res.StatusCode, back, c.SessionID, page)
	}
}
