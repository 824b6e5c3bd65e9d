//go:build linux

package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestPortalLogoffDialogBrowser_RU3 (R-U3, R-U1, R-U6): in headless
// Chromium, uma's page whose browser blocks dialogs (window.confirm
// answers false at once, as Firefox's "prevent this page from creating
// additional dialogs" makes it) still asks before Log off, in the page's
// own dialog: the focus moves into it (on Cancel), Escape cancels and
// the focus returns to her Log off button, nothing reaching her host;
// its Log off logs the session off. Her page then shows the session as
// logging off and, once her host has done it (its agent no longer
// reports it), drops it from the list by itself, without a reload, and
// says so. In Arabic the dialog asks in Arabic. Without scripts Log off
// still asks, on the confirmation page, and logs off once she confirms.
func TestPortalLogoffDialogBrowser_RU3(t *testing.T) {
	ctx := newBrowser(t)
	w := newPortalWorld(t)
	base := w.m.URL()
	connect := func(id string) *vhttp.ConnectResult {
		t.Helper()
		c, err := w.admin.Connect(t.Context(), "desk", vhttp.ConnectRequest{User: "uma"})
		if err != nil {
			t.Fatal(err)
		}
		w.heartbeat(t, c.SessionHost, vdibroker.AgentSession{ID: id, User: "uma", State: vdibroker.StateActive})
		return c
	}
	first := connect("3")
	errs := watchConsole(t, ctx)
	step(t, ctx, "sign in", providerSignIn(base+"/portal/?lang=en", "uma", "pw-uma", "#resources")...)
	errs.take()
	row := `tr[data-session="` + first.SessionID + `"]`
	step(t, ctx, "her page, its browser blocking dialogs",
		chromedp.Navigate(base+"/portal/"),
		chromedp.WaitVisible(chromedp.CSS(row+" button.logoff")),
	)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.confirm = () => { window.confirmed = (window.confirmed || 0) + 1; return false; }; window.stayed = 1; 1`)); err != nil {
		t.Fatal(err)
	}
	step(t, ctx, "Log off asks in the page",
		chromedp.Click(chromedp.CSS(row+" button.logoff")),
		chromedp.WaitVisible(chromedp.CSS("#logoff-dialog[open]")),
	)
	if q := text(t, ctx, "#logoff-question"); q != "Log off \u2068Office desktop\u2069? Anything not saved in it will be lost." {
		t.Errorf("the dialog asks %q", q)
	}
	if f, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.activeElement.id + (document.getElementById('logoff-dialog').contains(document.activeElement) ? ' in the dialog' : '')`)); err != nil || f != "logoff-cancel in the dialog" {
		t.Errorf("with the dialog open the focus is on %q, %v; want its Cancel", f, err)
	}
	screenshot(t, ctx, "portal-logoff-dialog.png")
	step(t, ctx, "Escape cancels",
		chromedp.KeyEvent(kb.Escape),
		chromedp.WaitNotVisible(chromedp.CSS("#logoff-dialog")),
	)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err := chromedp.Run(pctx, chromedp.Poll[bool](`document.activeElement && document.activeElement.matches('`+row+` button.logoff')`, chromedp.WithPollingInterval(50*time.Millisecond)))
	cancel()
	if err != nil {
		f, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.activeElement.id`))
		t.Errorf("after Escape the focus is on %q, %v; want her Log off button", f, err)
	}
	if cmds := w.heartbeat(t, first.SessionHost, vdibroker.AgentSession{ID: "3", User: "uma", State: vdibroker.StateActive}); len(cmds) != 0 {
		t.Fatalf("a cancelled Log off reached her host: %+v", cmds)
	}
	step(t, ctx, "she logs off",
		chromedp.Click(chromedp.CSS(row+" button.logoff")),
		chromedp.WaitVisible(chromedp.CSS("#logoff-yes")),
		chromedp.Click(chromedp.CSS("#logoff-yes")),
		chromedp.WaitVisible(chromedp.CSS("#flash")),
		chromedp.WaitVisible(chromedp.CSS(row+"[data-logging-off]")),
	)
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.confirmed || 0`)); err != nil || n != 0 {
		t.Errorf("the page called window.confirm %d times (%v): a browser blocking dialogs answers it false", n, err)
	}
	if state := text(t, ctx, row+" td.state"); state != "Logging off" {
		t.Errorf("her session after her logoff reads %q, want Logging off", state)
	}
	screenshot(t, ctx, "portal-logging-off.png")
	if cmds := w.heartbeat(t, first.SessionHost, vdibroker.AgentSession{ID: "3", User: "uma", State: vdibroker.StateActive}); len(cmds) != 1 || cmds[0].Type != vdibroker.CommandLogoff {
		t.Fatalf("after her logoff her host got %+v, want her logoff", cmds)
	}
	// Her host logged it off: the list drops it by itself (the page's
	// refresh, bounded), the page not loaded again.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.stayed = 1; 1`)); err != nil {
		t.Fatal(err)
	}
	w.heartbeat(t, first.SessionHost)
	step(t, ctx, "the list drops the session by itself",
		chromedp.Poll[chromedp.Void](`!document.querySelector('`+row+`') && document.getElementById('sessions-status').textContent === 'The session has been logged off.'`,
			chromedp.WithPollingTimeout(25*time.Second)),
	)
	if got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(window.stayed === 1 ? '' : 'loaded again ') + location.search`)); err != nil || got != "" {
		t.Errorf("after the list dropped the session: %q, %v; want the same page, its address without ?off=", got, err)
	}
	screenshot(t, ctx, "portal-logged-off.png")
	errs.check(t, "her page")

	// In Arabic, the dialog asks in Arabic.
	second := connect("4")
	row = `tr[data-session="` + second.SessionID + `"]`
	step(t, ctx, "her page in Arabic",
		chromedp.Navigate(base+"/portal/?lang=ar"),
		chromedp.WaitVisible(chromedp.CSS(row+" button.logoff")),
		chromedp.Click(chromedp.CSS(row+" button.logoff")),
		chromedp.WaitVisible(chromedp.CSS("#logoff-dialog[open]")),
	)
	if q := text(t, ctx, "#logoff-question"); !strings.HasPrefix(q, "هل تريد تسجيل الخروج من") {
		t.Errorf("the Arabic dialog asks %q", q)
	}
	if b := text(t, ctx, "#logoff-cancel"); b != "إلغاء" {
		t.Errorf("the Arabic dialog's Cancel reads %q", b)
	}
	// The viewport: a full-page capture of a right-to-left page is taken
	// from the wrong edge.
	if shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot()); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(filepath.Join(artifactDir(t), "portal-logoff-dialog-ar.png"), shot, 0o644); err != nil {
		t.Fatal(err)
	}
	step(t, ctx, "Escape", chromedp.KeyEvent(kb.Escape), chromedp.WaitNotVisible(chromedp.CSS("#logoff-dialog")))

	// Without scripts: the confirmation page asks.
	if _, err := chromedp.Call(ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		t.Fatal(err)
	}
	step(t, ctx, "Log off without scripts",
		chromedp.Navigate(base+"/portal/?lang=en"),
		chromedp.WaitVisible(chromedp.CSS(row+" button.logoff")),
		chromedp.Click(chromedp.CSS(row+" button.logoff")),
		chromedp.WaitVisible(chromedp.CSS("#confirm-question")),
	)
	if q := text(t, ctx, "#confirm-question"); q != "Log off \u2068Office desktop\u2069? Anything not saved in it will be lost." {
		t.Errorf("the confirmation page asks %q", q)
	}
	screenshot(t, ctx, "portal-logoff-confirm-page.png")
	if cmds := w.heartbeat(t, second.SessionHost, vdibroker.AgentSession{ID: "4", User: "uma", State: vdibroker.StateActive}); len(cmds) != 0 {
		t.Fatalf("Log off without scripts logged off before she confirmed: %+v", cmds)
	}
	step(t, ctx, "she confirms",
		chromedp.Click(chromedp.CSS("#confirm-yes")),
		chromedp.WaitVisible(chromedp.CSS("#flash")),
	)
	if cmds := w.heartbeat(t, second.SessionHost, vdibroker.AgentSession{ID: "4", User: "uma", State: vdibroker.StateActive}); len(cmds) != 1 || cmds[0].Type != vdibroker.CommandLogoff {
		t.Errorf("after she confirmed her host got %+v, want her logoff", cmds)
	}
	if _, err := chromedp.Call(ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: false}); err != nil {
		t.Fatal(err)
	}
}

// TestPortalLogoffWhileRefreshingBrowser_RU3 (R-U3, R-U1): keyboard
// only, uma logs off one of her three sessions (Enter on Log off, the
// dialog's focus on Cancel, Tab to its Log off, Enter). While her page
// refreshes its list she logs off a second: the list replaced under the
// open dialog, her Log off still logs that session off (a form the
// refresh took out of the page would post nothing). Once her host has
// logged both off, the list drops them, and her focus, on the third
// session's Disconnect, stays on that button of that session (not on
// the button of the row that now has its number, nor lost).
func TestPortalLogoffWhileRefreshingBrowser_RU3(t *testing.T) {
	ctx := newBrowser(t)
	w := newPortalWorld(t)
	base := w.m.URL()
	// Her three sessions, one in each of three pools of one host each
	// (a Pooled pool holds one of hers), Active, oldest first.
	var hosts []string
	for i, pool := range []string{"desk", "lab1", "lab2"} {
		if pool != "desk" {
			if _, err := w.admin.PutHostPool(t.Context(), pool, map[string]any{}); err != nil {
				t.Fatal(err)
			}
			rt, err := w.admin.CreateRegistrationToken(t.Context(), pool, vhttp.RegistrationTokenRequest{ExpiresInSeconds: 3600})
			if err != nil {
				t.Fatal(err)
			}
			reg, err := w.admin.Register(t.Context(), &vdibroker.RegisterRequest{Token: rt.Token, HostName: pool + "-1", Address: "127.0.0.1:3389"})
			if err != nil {
				t.Fatal(err)
			}
			w.creds[pool+"-1"] = reg.Credential
			w.heartbeat(t, pool+"-1")
			if _, err := w.admin.PutApplicationGroup(t.Context(), pool+"-desktop", map[string]any{"hostPool": pool, "applicationGroupType": "Desktop",
				"friendlyName": "Lab " + pool, "assignments": map[string]any{"users": []string{"uma"}}}); err != nil {
				t.Fatal(err)
			}
		}
		c, err := w.admin.Connect(t.Context(), pool, vhttp.ConnectRequest{User: "uma"})
		if err != nil {
			t.Fatal(err)
		}
		w.heartbeat(t, c.SessionHost, vdibroker.AgentSession{ID: strconv.Itoa(i), User: "uma", State: vdibroker.StateActive})
		hosts = append(hosts, c.SessionHost)
	}
	errs := watchConsole(t, ctx)
	step(t, ctx, "sign in", providerSignIn(base+"/portal/?lang=en", "uma", "pw-uma", "#resources")...)
	errs.take()
	ids, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#sessions tr[data-session]'), r => r.dataset.session)`))
	if err != nil || len(ids) != 3 {
		t.Fatalf("her sessions listed %q (%v), want three", ids, err)
	}
	row := func(id string) string { return `tr[data-session="` + id + `"]` }
	focus := func(sel string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('`+sel+`').focus(); document.activeElement === document.querySelector('`+sel+`')`)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(what, js string) {
		t.Helper()
		pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		if _, err := chromedp.Run(pctx, chromedp.Poll[bool](js, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
			got, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.activeElement.outerHTML.slice(0, 200) + ' | ' + location.search`))
			t.Fatalf("%s: %v (focus and address: %s)", what, err, got)
		}
	}
	// Keyboard only: Enter on Log off, Tab to the dialog's Log off, Enter;
	// on a phone's width (375 px) the dialog fits, its buttons in view.
	step(t, ctx, "a phone's width", chromedp.EmulateViewport(375, 740))
	focus(row(ids[0]) + " button.logoff")
	step(t, ctx, "Enter on Log off", chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(chromedp.CSS("#logoff-dialog[open]")))
	waitFor("the dialog's focus on Cancel", `document.activeElement.id === 'logoff-cancel'`)
	if got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`['logoff-dialog', 'logoff-cancel', 'logoff-yes'].filter(id => {
		const r = document.getElementById(id).getBoundingClientRect();
		return r.left < 0 || r.right > window.innerWidth || r.top < 0 || r.bottom > window.innerHeight;
	}).join(' ') + (document.documentElement.scrollWidth > window.innerWidth ? ' page wider than the screen' : '')`)); err != nil || got != "" {
		t.Errorf("at 375 px, out of view: %q (%v)", got, err)
	}
	if name, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById(document.getElementById('logoff-dialog').getAttribute('aria-labelledby')).textContent`)); err != nil ||
		!strings.HasPrefix(name, "Log off \u2068Office desktop\u2069?") {
		t.Errorf("the dialog is named %q (%v), want its question", name, err)
	}
	screenshot(t, ctx, "portal-logoff-dialog-phone.png")
	step(t, ctx, "Tab", chromedp.KeyEvent(kb.Tab))
	waitFor("Tab to the dialog's Log off", `document.activeElement.id === 'logoff-yes'`)
	step(t, ctx, "Enter logs off", chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(chromedp.CSS(row(ids[0])+"[data-logging-off]")))

	// The second, the list replaced while the dialog asks.
	focus(row(ids[1]) + " button.logoff")
	step(t, ctx, "Enter on the second's Log off", chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(chromedp.CSS("#logoff-dialog[open]")))
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.getElementById('sessions').dataset.old = 1; window.stayed = 1; 1`)); err != nil {
		t.Fatal(err)
	}
	waitFor("the list refreshed under the dialog", `!document.querySelector('#sessions[data-old]')`)
	step(t, ctx, "Tab", chromedp.KeyEvent(kb.Tab))
	waitFor("Tab to the dialog's Log off", `document.activeElement.id === 'logoff-yes'`)
	step(t, ctx, "Enter", chromedp.KeyEvent(kb.Enter))
	// The page is loaded again (a poll would lose its context).
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	_, err = chromedp.Run(wctx, chromedp.WaitVisible(chromedp.CSS(row(ids[1])+"[data-logging-off]")))
	cancel()
	if err != nil {
		t.Fatalf("her Log off of the second, asked under a refreshed list, did not log it off: %v", err)
	}

	// Her host logs both off; her focus on the third's Disconnect.
	focus(row(ids[2]) + " button.disconnect")
	for _, h := range hosts[:2] {
		if cmds := w.heartbeat(t, h); len(cmds) != 1 || cmds[0].Type != vdibroker.CommandLogoff {
			t.Errorf("her host %s got %+v, want her logoff", h, cmds)
		}
	}
	waitFor("the list drops the two", `!document.querySelector('`+row(ids[1])+`') && document.getElementById('sessions-status').textContent === 'The session has been logged off.'`)
	waitFor("her focus stays on the third session's Disconnect", `document.activeElement.matches('`+row(ids[2])+` button.disconnect')`)
	errs.check(t, "her page")
}

// TestPortalLogoffTwoBrowser_RU3 (R-U3, R-U1): uma logs off one session
// and, before her host has done it, a second: both read Logging off,
// without buttons, each until its own host has done it (the second
// logoff does not give the first its buttons back, and the second gone
// from the list, the first still reads Logging off); once both are gone
// her page says so, without being loaded again.
func TestPortalLogoffTwoBrowser_RU3(t *testing.T) {
	ctx := newBrowser(t)
	w := newPortalWorld(t)
	base := w.m.URL()
	if _, err := w.admin.PutHostPool(t.Context(), "lab", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	rt, err := w.admin.CreateRegistrationToken(t.Context(), "lab", vhttp.RegistrationTokenRequest{ExpiresInSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := w.admin.Register(t.Context(), &vdibroker.RegisterRequest{Token: rt.Token, HostName: "lab-1", Address: "127.0.0.1:3389"})
	if err != nil {
		t.Fatal(err)
	}
	w.creds["lab-1"] = reg.Credential
	w.heartbeat(t, "lab-1")
	if _, err := w.admin.PutApplicationGroup(t.Context(), "lab-desktop", map[string]any{"hostPool": "lab", "applicationGroupType": "Desktop",
		"friendlyName": "Lab", "assignments": map[string]any{"users": []string{"uma"}}}); err != nil {
		t.Fatal(err)
	}
	var ids, hosts []string
	for i, pool := range []string{"desk", "lab"} {
		c, err := w.admin.Connect(t.Context(), pool, vhttp.ConnectRequest{User: "uma"})
		if err != nil {
			t.Fatal(err)
		}
		w.heartbeat(t, c.SessionHost, vdibroker.AgentSession{ID: strconv.Itoa(i), User: "uma", State: vdibroker.StateActive})
		ids, hosts = append(ids, c.SessionID), append(hosts, c.SessionHost)
	}
	errs := watchConsole(t, ctx)
	step(t, ctx, "sign in", providerSignIn(base+"/portal/?lang=en", "uma", "pw-uma", "#resources")...)
	errs.take()
	row := func(i int) string { return `tr[data-session="` + ids[i] + `"]` }
	waitFor := func(what, js string, d time.Duration) {
		t.Helper()
		pctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		if _, err := chromedp.Run(pctx, chromedp.Poll[bool](js, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
			got, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('sessions').outerHTML.slice(0, 3000) + ' | ' + location.search`))
			t.Fatalf("%s: %v (list and address: %s)", what, err, got)
		}
	}
	// loggingOff is the script that says session i's row reads Logging
	// off, without buttons.
	loggingOff := func(i int) string {
		return `(r => !!r && r.hasAttribute('data-logging-off') && r.querySelector('td.state').textContent === 'Logging off' && !r.querySelector('button'))(document.querySelector('` + row(i) + `'))`
	}
	logoff := func(i int) {
		t.Helper()
		step(t, ctx, "Log off "+ids[i],
			// After the first logoff the page refreshes its list.
			clickLive(row(i)+" button.logoff"),
			chromedp.WaitVisible(chromedp.CSS("#logoff-dialog[open]")),
			chromedp.Click(chromedp.CSS("#logoff-yes")),
			chromedp.WaitVisible(chromedp.CSS(row(i)+"[data-logging-off]")),
		)
	}
	logoff(0)
	logoff(1)
	waitFor("both read Logging off", loggingOff(0)+" && "+loggingOff(1), 10*time.Second)
	screenshot(t, ctx, "portal-logging-off-two.png")
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.stayed = 1; 1`)); err != nil {
		t.Fatal(err)
	}
	// The second's host has done it: gone, the first still logging off.
	if cmds := w.heartbeat(t, hosts[1]); len(cmds) != 1 || cmds[0].Type != vdibroker.CommandLogoff {
		t.Errorf("the second's host got %+v, want her logoff", cmds)
	}
	waitFor("the second leaves the list", `!document.querySelector('`+row(1)+`')`, 25*time.Second)
	waitFor("the first still reads Logging off", loggingOff(0), time.Second)
	if s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('sessions-status').textContent`)); err != nil || s != "" {
		t.Errorf("with the first still logging off the page says %q (%v)", s, err)
	}
	// The first's host has done it: gone, and said.
	if cmds := w.heartbeat(t, hosts[0]); len(cmds) != 1 || cmds[0].Type != vdibroker.CommandLogoff {
		t.Errorf("the first's host got %+v, want her logoff", cmds)
	}
	waitFor("the first leaves the list, and the page says so", `!document.querySelector('`+row(0)+`') && document.getElementById('sessions-status').textContent === 'The session has been logged off.' && window.stayed === 1`, 40*time.Second)
	if got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.search`)); err != nil || got != "" {
		t.Errorf("both logged off, the address's query %q (%v), want none", got, err)
	}
	errs.check(t, "her page")
}

// TestPortalRefreshWithoutFragmentHeaderBrowser_RU3 (R-U3): uma's page
// reached through a proxy that drops the request header by which the
// page's script asks for her sessions list alone (GET /portal/sessions
// then redirects to her whole page) still drops the session she logged
// off once her host has done it: the script takes the list from the
// page it was sent to, where it had stopped refreshing, silently.
func TestPortalRefreshWithoutFragmentHeaderBrowser_RU3(t *testing.T) {
	ctx := newBrowser(t)
	w := newPortalWorld(t)
	base := w.m.URL()
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	var stripped atomic.Int32
	rp := httputil.NewSingleHostReverseProxy(target)
	director := rp.Director
	rp.Director = func(r *http.Request) {
		director(r)
		if r.Header.Get("Portal-Fragment") != "" {
			stripped.Add(1)
			r.Header.Del("Portal-Fragment")
		}
	}
	proxy := httptest.NewServer(rp)
	t.Cleanup(proxy.Close)

	c, err := w.admin.Connect(t.Context(), "desk", vhttp.ConnectRequest{User: "uma"})
	if err != nil {
		t.Fatal(err)
	}
	w.heartbeat(t, c.SessionHost, vdibroker.AgentSession{ID: "3", User: "uma", State: vdibroker.StateActive})
	step(t, ctx, "sign in", providerSignIn(base+"/portal/?lang=en", "uma", "pw-uma", "#resources")...)
	// Her page through the proxy (the cookie is the host's, whatever the
	// port), showing the session as logging off, as after her Log off.
	row := `tr[data-session="` + c.SessionID + `"]`
	step(t, ctx, "her page through the proxy",
		chromedp.Navigate(proxy.URL+"/portal/?lang=en&off="+url.QueryEscape(c.SessionID)),
		chromedp.WaitVisible(chromedp.CSS(row+"[data-logging-off]")),
	)
	w.heartbeat(t, c.SessionHost)
	step(t, ctx, "the list drops the session by itself",
		chromedp.Poll[chromedp.Void](`!document.querySelector('`+row+`') && document.getElementById('sessions-status').textContent === 'The session has been logged off.'`,
			chromedp.WithPollingTimeout(25*time.Second)),
	)
	if stripped.Load() == 0 {
		t.Error("the page's refresh never went through the proxy")
	}
}
