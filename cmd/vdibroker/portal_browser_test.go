//go:build linux

package main

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/testop"
	"github.com/vdibroker/vdibroker/power"
)

// portalWorld is a broker on 127.0.0.1 with single sign-on through a
// provider on localhost (another site) and no role map: every identity
// the provider vouches for is an end user of the portal (R-U2). Pool
// desk (two hosts) has the desktop "Office desktop" of group sales; pool
// other bob's desktop; pool cold (power driver sim, start VM on connect)
// one host, stopped and never heard from, the desktop "Cold lab" of uma.
// The provider knows uma (group sales) and bob.
type portalWorld struct {
	m     *Main
	op    *testop.OP
	admin *vhttp.Client
	creds map[string]string
}

func newPortalWorld(t *testing.T) *portalWorld {
	t.Helper()
	op := testop.StartAt(t, "localhost", "vdibroker-portal", "portal-secret",
		testop.User{Subject: "uma", Password: "pw-uma", Name: "uma@example.test", Groups: []string{"sales"}},
		testop.User{Subject: "bob", Password: "pw-bob", Groups: []string{"ops"}})
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("portal-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := &Main{Listen: "127.0.0.1:0", DataDir: t.TempDir(), PowerDrivers: power.Set{"sim": &power.Simulated{}},
		OIDC: OIDCFlags{Issuer: op.Issuer, ClientID: op.ClientID, ClientSecretFile: secret, GroupsClaim: "groups"}}
	if err := m.Open(t.Context()); err != nil {
		t.Fatalf("start broker: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	op.AllowPostLogoutRedirect(m.URL() + "/portal/signin")
	w := &portalWorld{m: m, op: op, admin: vhttp.NewClient(m.URL(), m.AdminToken), creds: map[string]string{}}
	ctx := t.Context()
	for _, p := range []struct {
		name  string
		body  map[string]any
		hosts int
	}{
		{"desk", map[string]any{}, 2},
		{"other", map[string]any{}, 1},
		{"cold", map[string]any{"powerDriver": "sim", "startVMOnConnect": true, "maxSessionLimit": 1}, 1},
	} {
		if _, err := w.admin.PutHostPool(ctx, p.name, p.body); err != nil {
			t.Fatal(err)
		}
		rt, err := w.admin.CreateRegistrationToken(ctx, p.name, vhttp.RegistrationTokenRequest{ExpiresInSeconds: 3600})
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= p.hosts; i++ {
			host := p.name + "-" + string(rune('0'+i))
			reg, err := w.admin.Register(ctx, &vdibroker.RegisterRequest{Token: rt.Token, HostName: host, Address: "127.0.0.1:3389"})
			if err != nil {
				t.Fatal(err)
			}
			w.creds[host] = reg.Credential
			if p.name != "cold" {
				w.heartbeat(t, host)
			}
		}
	}
	if _, err := w.admin.StopSessionHost(ctx, "cold", "cold-1", false); err != nil {
		t.Fatal(err)
	}
	for name, g := range map[string]map[string]any{
		"desk-desktop":  {"hostPool": "desk", "applicationGroupType": "Desktop", "friendlyName": "Office desktop", "assignments": map[string]any{"groups": []string{"sales"}}},
		"other-desktop": {"hostPool": "other", "applicationGroupType": "Desktop", "friendlyName": "Bob's desktop", "assignments": map[string]any{"users": []string{"bob"}}},
		"cold-desktop":  {"hostPool": "cold", "applicationGroupType": "Desktop", "friendlyName": "Cold lab", "assignments": map[string]any{"users": []string{"uma"}}},
	} {
		if _, err := w.admin.PutApplicationGroup(ctx, name, g); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

func (w *portalWorld) heartbeat(t *testing.T, host string, sessions ...vdibroker.AgentSession) []vdibroker.Command {
	t.Helper()
	res, err := w.admin.Heartbeat(context.Background(), w.creds[host], &vdibroker.HeartbeatRequest{Sessions: sessions})
	if err != nil {
		t.Fatalf("heartbeat %s: %v", host, err)
	}
	return res.Commands
}

// awaitFile waits (bounded) for the browser's download of name into dir
// and returns its text.
func awaitFile(t *testing.T, dir, name string) string {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err == nil && len(b) > 0 {
			return string(b)
		}
	}
	entries, _ := os.ReadDir(dir)
	t.Fatalf("no download %q in %s (%v)", name, dir, entries)
	return ""
}

// TestPortalBrowser (R-U1..R-U7): headless Chromium signs uma in to the
// portal through the provider on another site (localhost against the
// broker's 127.0.0.1) with no role map; she sees exactly her two
// desktops, opens one and the browser downloads "Office desktop.rdp",
// which FreeRDP's parser reads; her session is in "my sessions", and
// once disconnected its Reconnect downloads a file to it again; bob,
// signed in with a User token, cannot log it off; she logs it off. Her
// cold desktop's host is stopped: opening it shows that the desktop is
// starting, the host is started, and once it heartbeats the file arrives
// without a click. The page in German and in Arabic (dir="rtl").
// Signing out ends the provider's session too. Screenshots of each page.
func TestPortalBrowser(t *testing.T) {
	ctx := newBrowser(t)
	w := newPortalWorld(t)
	base := w.m.URL()
	if !strings.HasPrefix(w.op.Issuer, "http://localhost:") || !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Fatalf("provider %s and broker %s must be on different sites", w.op.Issuer, base)
	}
	downloads := t.TempDir()
	if _, err := chromedp.CallBrowser(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior: browser.SetDownloadBehaviorBehaviorAllow, DownloadPath: downloads}); err != nil {
		t.Fatal(err)
	}
	errs := watchConsole(t, ctx)
	step(t, ctx, "sign in through the provider on another site", providerSignIn(base+"/portal/", "uma", "pw-uma", "#resources")...)
	// The provider's pages are not ours (its favicon is a 404): only the
	// portal's page, loaded again, is checked.
	errs.take()
	step(t, ctx, "the portal's page", chromedp.Navigate(base+"/portal/"), chromedp.WaitVisible(chromedp.CSS("#resources")))
	ids, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('li.resource')].map(e => e.dataset.id)`))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"desktop:cold", "desktop:desk"}) {
		t.Errorf("uma sees %v, want exactly desktop:cold and desktop:desk", ids)
	}
	// Signed in as she knows herself (the provider's preferred_username),
	// not as its subject, which may be an opaque id.
	if who := text(t, ctx, "#who"); who != "Signed in as \u2068uma@example.test\u2069" {
		t.Errorf("the page says %q", who)
	}
	screenshot(t, ctx, "portal-home.png")
	errs.check(t, "the portal's page")

	step(t, ctx, "open the office desktop",
		chromedp.Click(chromedp.CSS(`li.resource[data-id="desktop:desk"] button.open`)),
		chromedp.WaitVisible(chromedp.CSS("#launch")),
	)
	rdp := awaitFile(t, downloads, "Office desktop.rdp")
	got := freeRDPReader(t, t.TempDir())("office.rdp", rdp)
	if got["ServerHostname"] != "127.0.0.1" || got["Username"] != "uma" || got["RemoteApplicationMode"] != "0" {
		t.Errorf("FreeRDP read %v", got)
	}
	screenshot(t, ctx, "portal-launched.png")

	list, err := w.admin.ListUserSessions(t.Context(), "desk", vhttp.SessionQuery{User: "uma"})
	if err != nil || len(list) != 1 {
		t.Fatalf("uma's sessions: %v, %v", list, err)
	}
	us := list[0]
	w.heartbeat(t, us.SessionHost, vdibroker.AgentSession{ID: "3", User: "uma", State: vdibroker.StateActive})
	step(t, ctx, "my sessions",
		chromedp.Navigate(base+"/portal/"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-session="`+us.ID+`"]`)),
	)
	if host := text(t, ctx, `tr[data-session="`+us.ID+`"] td.host`); host != us.SessionHost {
		t.Errorf("the session's host shows %q, want %s", host, us.SessionHost)
	}
	screenshot(t, ctx, "portal-sessions.png")

	// At a small phone's width (320 px) nothing leaves the page sideways, in
	// either direction of writing: not a 62-character name without a
	// space, not the sessions' table; every name stays in its tile.
	if _, err := w.admin.PutApplicationGroup(t.Context(), "desk-apps", map[string]any{"hostPool": "desk", "applicationGroupType": "RemoteApp",
		"friendlyName": "Apps", "assignments": map[string]any{"groups": []string{"sales"}}}); err != nil {
		t.Fatal(err)
	}
	for name, friendly := range map[string]string{"long": "Datenbankverwaltungswerkzeugkonfigurationsassistent2026Version", "ar": "نظام إدارة الموارد البشرية والرواتب", "plus": "Notepad++"} {
		if _, err := w.admin.PutApplication(t.Context(), "desk-apps", name, map[string]any{"filePath": `C:\\app.exe`, "friendlyName": friendly, "showInPortal": true}); err != nil {
			t.Fatal(err)
		}
	}
	for _, lang := range []string{"ar", "en"} { // English last: the choice is remembered
		step(t, ctx, "the page at a phone's width in "+lang,
			chromedp.EmulateViewport(320, 800),
			chromedp.Navigate(base+"/portal/?lang="+lang),
			chromedp.WaitVisible(chromedp.CSS(`li.resource[data-id="app:desk-apps/long"]`)),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-session="`+us.ID+`"] button.disconnect`)),
		)
		out, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[
			document.documentElement.scrollWidth > document.documentElement.clientWidth ? 'the page is ' + document.documentElement.scrollWidth + ' px wide' : '',
			...[...document.querySelectorAll('li.resource')].filter(li => {
				const n = li.querySelector('.name').getBoundingClientRect(), r = li.getBoundingClientRect();
				return n.left < r.left || n.right > r.right;
			}).map(li => li.dataset.id + ' leaves its tile'),
			// Her sessions' buttons in full sight, none behind the
			// table's own sideways scroll.
			...[...document.querySelectorAll('#sessions button')].filter(b => {
				const r = b.getBoundingClientRect(), w = b.closest('.table-wrap').getBoundingClientRect();
				return r.left < w.left || r.right > w.right;
			}).map(b => b.id + ' is behind the sessions table\'s scroll'),
			// Since when, "2026-12-06 00:55 UTC", in its own order on the
			// Arabic page too (not "UTC 00:55 06-12-2026").
			...[...document.querySelectorAll('#sessions time')].filter(e => {
				const t = e.firstChild, r = document.createRange();
				r.setStart(t, 0); r.setEnd(t, 1); const first = r.getBoundingClientRect();
				r.setStart(t, t.length - 1); r.setEnd(t, t.length); const last = r.getBoundingClientRect();
				return last.left < first.left;
			}).map(e => 'the time ' + e.textContent + ' reads backwards'),
			// A Latin name on the Arabic page keeps its own order (R-U6):
			// the "++" of Notepad++ after its N, not carried to the
			// other end by the page's direction.
			(() => {
				const t = document.querySelector('li.resource[data-id="app:desk-apps/plus"] .name').firstChild, r = document.createRange();
				r.setStart(t, 0); r.setEnd(t, 1); const first = r.getBoundingClientRect();
				r.setStart(t, t.length - 1); r.setEnd(t, t.length); const last = r.getBoundingClientRect();
				return last.left > first.left ? '' : 'Notepad++ shows its last + at ' + last.left + ', left of its N at ' + first.left;
			})(),
		].filter(Boolean)`))
		if err != nil || len(out) > 0 {
			t.Errorf("at 320 px in %s: %q %v", lang, out, err)
		}
		screenshot(t, ctx, "portal-phone-"+lang+".png")
	}
	step(t, ctx, "back to a desktop's width", chromedp.EmulateViewport(1360, 1000))

	// Disconnected, the row offers Reconnect (R-U3, R-C1): it opens the
	// desktop again, and the file reaches her own session's host.
	w.heartbeat(t, us.SessionHost, vdibroker.AgentSession{ID: "3", User: "uma", State: vdibroker.StateDisconnected})
	// The first file is read: the second may take its name.
	if err := os.Remove(filepath.Join(downloads, "Office desktop.rdp")); err != nil {
		t.Fatal(err)
	}
	step(t, ctx, "reconnect to the disconnected session",
		chromedp.Navigate(base+"/portal/"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-session="`+us.ID+`"] button.reconnect`)),
		chromedp.Click(chromedp.CSS(`tr[data-session="`+us.ID+`"] button.reconnect`)),
		chromedp.WaitVisible(chromedp.CSS("#launch")),
	)
	again := awaitFile(t, downloads, "Office desktop.rdp")
	if got := freeRDPReader(t, t.TempDir())("again.rdp", again); got["ServerHostname"] != "127.0.0.1" || got["Username"] != "uma" {
		t.Errorf("FreeRDP read the reconnect's file as %v", got)
	}
	if list, err := w.admin.ListUserSessions(t.Context(), "desk", vhttp.SessionQuery{User: "uma"}); err != nil || len(list) != 1 || list[0].ID != us.ID {
		t.Errorf("uma's sessions after the reconnect: %v, %v; want %s alone", list, err, us.ID)
	}
	w.heartbeat(t, us.SessionHost, vdibroker.AgentSession{ID: "3", User: "uma", State: vdibroker.StateActive})

	// bob, signed in to the portal with a User token, cannot log off
	// uma's session.
	bob := jarClient()
	bob.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	tr, err := w.admin.CreateToken(t.Context(), vhttp.TokenRequest{Role: vdibroker.RoleUser, Subject: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	_, page := getBody(t, bob, base+"/portal/signin")
	postForm := func(path string, form url.Values) int {
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", base)
		res, err := bob.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if code := postForm("/portal/signin", url.Values{"csrf": {portalCSRF.FindStringSubmatch(page)[1]}, "token": {tr.Secret}}); code != http.StatusSeeOther {
		t.Fatalf("bob's sign-in: %d", code)
	}
	_, home := getBody(t, bob, base+"/portal/")
	if strings.Contains(home, us.ID) {
		t.Errorf("bob's page lists uma's session")
	}
	if code := postForm("/portal/sessions/desk/"+us.ID+"/logoff", url.Values{"csrf": {portalCSRF.FindStringSubmatch(home)[1]}, "confirm": {"yes"}}); code != http.StatusForbidden {
		t.Errorf("bob's logoff of uma's session: %d, want 403", code)
	}
	if cmds := w.heartbeat(t, us.SessionHost, vdibroker.AgentSession{ID: "3", User: "uma", State: vdibroker.StateActive}); len(cmds) != 0 {
		t.Fatalf("bob's logoff reached the host: %+v", cmds)
	}
	// Log off asks first (R-U3), in the page's dialog: anything not
	// saved in the session is lost. Her first answer is Cancel: nothing
	// is asked of the host.
	step(t, ctx, "uma clicks Log off, and cancels",
		chromedp.Navigate(base+"/portal/"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-session="`+us.ID+`"] button.logoff`)),
		chromedp.Click(chromedp.CSS(`tr[data-session="`+us.ID+`"] button.logoff`)),
		chromedp.WaitVisible(chromedp.CSS("#logoff-dialog[open] #logoff-cancel")),
	)
	if msg := text(t, ctx, "#logoff-question"); !strings.Contains(msg, "Anything not saved in it will be lost") {
		t.Errorf("Log off asked %q, want it to say unsaved work is lost", msg)
	}
	step(t, ctx, "uma cancels", chromedp.Click(chromedp.CSS("#logoff-cancel")), chromedp.WaitNotVisible(chromedp.CSS("#logoff-dialog")))
	if cmds := w.heartbeat(t, us.SessionHost, vdibroker.AgentSession{ID: "3", User: "uma", State: vdibroker.StateActive}); len(cmds) != 0 {
		t.Fatalf("a cancelled Log off reached the host: %+v", cmds)
	}
	step(t, ctx, "uma clicks Log off again",
		chromedp.Click(chromedp.CSS(`tr[data-session="`+us.ID+`"] button.logoff`)),
		chromedp.WaitVisible(chromedp.CSS("#logoff-dialog[open] #logoff-yes")),
	)
	step(t, ctx, "uma logs her session off",
		chromedp.Click(chromedp.CSS("#logoff-yes")),
		chromedp.WaitVisible(chromedp.CSS("#flash")),
	)
	// Her focus was on the button of a page that is gone: it is on what
	// became of her click (a screen reader reads it out), not lost at
	// the top of the new page.
	// portal.js moves it as the page loads, which may be just after
	// #flash is visible: polled (bounded), not read once.
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = chromedp.Run(pctx, chromedp.Poll[bool](`document.activeElement !== null && document.activeElement.id === "flash"`,
		chromedp.WithPollingInterval(50*time.Millisecond)))
	cancel()
	if err != nil {
		focused, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.activeElement.id`))
		t.Errorf("after her logoff the focus is on %q, %v; want the page's word of it (#flash)", focused, err)
	}
	if cmds := w.heartbeat(t, us.SessionHost, vdibroker.AgentSession{ID: "3", User: "uma", State: vdibroker.StateActive}); len(cmds) != 1 || cmds[0].Type != vdibroker.CommandLogoff {
		t.Errorf("after uma's logoff the host got %+v, want her logoff", cmds)
	}

	step(t, ctx, "open the cold desktop: its host starts",
		chromedp.Navigate(base+"/portal/"),
		chromedp.WaitVisible(chromedp.CSS(`li.resource[data-id="desktop:cold"] button.open`)),
		chromedp.Click(chromedp.CSS(`li.resource[data-id="desktop:cold"] button.open`)),
		chromedp.WaitVisible(chromedp.CSS(`#launch[data-state="waiting"]`)),
		chromedp.Poll[chromedp.Void](`document.getElementById('launch-title').textContent === 'Starting a computer for \u2068Cold lab\u2069'`, chromedp.WithPollingTimeout(20*time.Second)),
	)
	if msg := text(t, ctx, "#launch-message"); !strings.Contains(msg, "\u2068cold-1\u2069 is starting") {
		t.Errorf("the launch page says %q", msg)
	}
	screenshot(t, ctx, "portal-starting.png")
	if h, err := w.admin.GetSessionHost(t.Context(), "cold", "cold-1"); err != nil || h.PowerState != vdibroker.PowerStarting {
		t.Fatalf("cold-1: %+v, %v; want Starting", h, err)
	}
	// The broker out of reach (the page's status calls fail): the page
	// says so instead of counting on silently; once the broker answers
	// again the note goes.
	block := func(patterns ...string) {
		t.Helper()
		var ps []*network.BlockPattern
		for _, p := range patterns {
			ps = append(ps, &network.BlockPattern{URLPattern: p, Block: true})
		}
		if _, err := chromedp.Call(ctx, network.SetBlockedURLs, network.SetBlockedURLsParams{URLPatterns: ps}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	block(base + "/portal/launches/*")
	step(t, ctx, "the broker out of reach",
		chromedp.Poll[chromedp.Void](`document.getElementById('launch-note').textContent === 'Lost contact with the service. Trying again…'`, chromedp.WithPollingTimeout(20*time.Second)),
	)
	screenshot(t, ctx, "portal-lost.png")
	block()
	step(t, ctx, "the broker back",
		chromedp.Poll[chromedp.Void](`document.getElementById('launch-note').textContent === ''`, chromedp.WithPollingTimeout(20*time.Second)),
	)
	errs.take()              // the blocked calls
	w.heartbeat(t, "cold-1") // the started host's agent: its session is placed, the file arrives
	if rdp := awaitFile(t, downloads, "Cold lab.rdp"); !strings.Contains(rdp, "username:s:uma") {
		t.Errorf("the cold desktop's file:\n%s", rdp)
	}
	// The tab's title follows the page's state (it was "Starting a
	// computer for Cold lab" when the page loaded).
	if title, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.title`)); err != nil || title != "Your connection file for \u2068Cold lab\u2069 is ready. – Your desktops and apps" {
		t.Errorf("the ready launch's title %q, %v", title, err)
	}
	errs.check(t, "the launch page")

	for _, c := range []struct{ lang, dir, heading, shot string }{
		{"de", "ltr", "Desktops und Apps", "portal-de.png"},
		{"ar", "rtl", "أسطح المكتب والتطبيقات", "portal-ar.png"},
	} {
		step(t, ctx, "the page in "+c.lang,
			chromedp.Navigate(base+"/portal/?lang="+c.lang),
			chromedp.WaitVisible(chromedp.CSS("#resources")),
		)
		attrs, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[document.documentElement.lang, document.documentElement.dir, document.querySelector('#resources h1').textContent]`))
		if err != nil || !slices.Equal(attrs, []string{c.lang, c.dir, c.heading}) {
			t.Errorf("the %s page: %v, %v", c.lang, attrs, err)
		}
		// The viewport: a full-page capture of a right-to-left page is
		// taken from the wrong edge.
		shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(artifactDir(t), c.shot), shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	step(t, ctx, "sign out, at the provider too",
		chromedp.Navigate(base+"/portal/?lang=en"),
		chromedp.WaitVisible(chromedp.CSS("#signout")),
		chromedp.Click(chromedp.CSS("#signout")),
		chromedp.WaitVisible(chromedp.CSS("#signin-oidc")),
	)
	if n := w.op.Logouts(); n != 1 {
		t.Errorf("the provider ended %d sessions, want 1", n)
	}
	errs.check(t, "sign-out")

	// Back after sign-out (a shared computer): the browser keeps the page
	// it left in its back/forward cache, no-store or not; Back must show
	// the sign-in page, not bob's desktops.
	step(t, ctx, "bob signs in with his token and out",
		chromedp.Navigate(base+"/portal/signin"),
		chromedp.SendKeys(chromedp.CSS("#token"), tr.Secret),
		chromedp.Click(chromedp.CSS("#signin-token")),
		chromedp.WaitVisible(chromedp.CSS(`li.resource[data-id="desktop:other"]`)),
		chromedp.Click(chromedp.CSS("#signout")),
		chromedp.WaitVisible(chromedp.CSS("#token")),
	)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.signedOut = 1; history.back(); 1`)); err != nil {
		t.Fatal(err)
	}
	// Polled from here: a page's own poll ends with its document.
	var shown string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		shown, err = chromedp.Run(ctx, chromedp.Evaluate[string](`window.signedOut === undefined && document.readyState === 'complete' && !document.getElementById('who') ? '' : location.href + ': ' + document.body.innerText`))
		if err == nil && shown == "" {
			break
		}
	}
	if shown != "" {
		t.Errorf("Back after sign-out shows %q", shown)
	}
	screenshot(t, ctx, "portal-back-after-signout.png")
}

// TestPortalSigninAtPhoneWidthBrowser_RU2_RU6: at a phone's width (375
// px) the sign-in form's token field stays in its card, in either
// direction of writing: it was its card's width plus its own padding and
// border, and stuck out past the card's edge (the right one in English,
// the left one in Arabic).
func TestPortalSigninAtPhoneWidthBrowser_RU2_RU6(t *testing.T) {
	ctx := newBrowser(t)
	m := &Main{Listen: "127.0.0.1:0", DataDir: t.TempDir()}
	if err := m.Open(t.Context()); err != nil {
		t.Fatalf("start broker: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	for _, lang := range []string{"en", "ar"} {
		step(t, ctx, "the sign-in page at a phone's width in "+lang,
			chromedp.EmulateViewport(375, 800),
			chromedp.Navigate(m.URL()+"/portal/signin?lang="+lang),
			chromedp.WaitVisible(chromedp.CSS("#token")),
		)
		out, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => {
			const f = document.getElementById('token').getBoundingClientRect(), c = document.getElementById('signin').getBoundingClientRect();
			return f.left < c.left || f.right > c.right ? 'the token field spans ' + f.left + '..' + f.right + ', its card ' + c.left + '..' + c.right : '';
		})()`))
		if err != nil || out != "" {
			t.Errorf("at 375 px in %s: %s %v", lang, out, err)
		}
		screenshot(t, ctx, "portal-signin-phone-"+lang+".png")
	}
}
