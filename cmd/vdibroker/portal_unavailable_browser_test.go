//go:build linux

package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestPortalUnavailableAppBrowser (R-E12, R-U5, R-U6): in headless
// Chromium, bob's app published in a pool whose only host cannot run
// RemoteApps shows its tile with the note that it cannot be opened now,
// in his language, and no Open button; his desktop of that pool keeps
// its button. The note is reached with the Tab key from the top of the
// page, as the other tiles' Open buttons are, and is announced as the
// app's name and the note (its accessible name), so a keyboard or screen
// reader user hears it too. No console error. A screenshot of the page.
func TestPortalUnavailableAppBrowser(t *testing.T) {
	ctx := newBrowser(t)
	w := newPortalWorld(t)
	base := w.m.URL()
	no := false
	if _, err := w.admin.Heartbeat(t.Context(), w.creds["other-1"], &vdibroker.HeartbeatRequest{RemoteApps: &no}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.admin.PutApplicationGroup(t.Context(), "other-apps", map[string]any{"hostPool": "other", "applicationGroupType": "RemoteApp",
		"assignments": map[string]any{"users": []string{"bob"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.admin.PutApplication(t.Context(), "other-apps", "paint", map[string]any{"friendlyName": "Paint", "filePath": `C:\Windows\mspaint.exe`,
		"showInPortal": true}); err != nil {
		t.Fatal(err)
	}
	tr, err := w.admin.CreateToken(t.Context(), vhttp.TokenRequest{Role: vdibroker.RoleUser, Subject: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	errs := watchConsole(t, ctx)
	app := `li.resource[data-id="app:other-apps/paint"]`
	step(t, ctx, "bob signs in with his token",
		chromedp.Navigate(base+"/portal/signin?lang=de"),
		chromedp.SendKeys(chromedp.CSS("#token"), tr.Secret),
		chromedp.Click(chromedp.CSS("#signin-token")),
		chromedp.WaitVisible(chromedp.CSS(app+" .unavailable")),
	)
	if got, want := text(t, ctx, app+" .unavailable"), "Kann gerade nicht geöffnet werden. Wenden Sie sich an Ihren Helpdesk."; got != want {
		t.Errorf("Paint's note %q, want %q", got, want)
	}
	if n := count(t, ctx, `document.querySelectorAll('`+app+` button, `+app+` form').length`); n != 0 {
		t.Errorf("Paint's tile has %d buttons or forms, want none", n)
	}
	if got := text(t, ctx, `li.resource[data-id="desktop:other"] button.open`); got != "Öffnen" {
		t.Errorf("bob's desktop's button says %q, want Öffnen", got)
	}
	// From the top of the page, Tab reaches the note (as far as 40
	// stops, every link and button of the page before it).
	note := app + " .unavailable"
	step(t, ctx, "her page again, the focus at its top", chromedp.Navigate(base+"/portal/"), chromedp.WaitVisible(chromedp.CSS(note)))
	var stops []string
	reached := false
	for range 40 {
		step(t, ctx, "Tab", chromedp.KeyEvent(kb.Tab))
		at, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(e => e.id || e.tagName)(document.activeElement)`))
		if err != nil {
			t.Fatal(err)
		}
		if reached = count(t, ctx, `document.activeElement === document.querySelector('`+note+`') ? 1 : 0`) == 1; reached {
			break
		}
		stops = append(stops, at)
	}
	if !reached {
		t.Fatalf("Tab never reached Paint's note; it went through %v", stops)
	}
	obj, err := chromedp.Call(ctx, runtime.Evaluate, runtime.EvaluateParams{Expression: "document.activeElement"})
	if err != nil || obj.Result == nil || obj.Result.ObjectID == "" {
		t.Fatalf("the focused element: %+v, %v", obj, err)
	}
	no = false
	ax, err := chromedp.Call(ctx, accessibility.GetPartialAXTree, accessibility.GetPartialAXTreeParams{ObjectID: obj.Result.ObjectID, FetchRelatives: &no})
	if err != nil || len(ax.Nodes) == 0 {
		t.Fatalf("the focused note's accessibility node: %+v, %v", ax, err)
	}
	var name string
	if n := ax.Nodes[0]; n.Name != nil {
		_ = json.Unmarshal(n.Name.Value, &name)
	}
	if ax.Nodes[0].Ignored || !strings.Contains(name, "Paint") || !strings.Contains(name, "Kann gerade nicht geöffnet werden. Wenden Sie sich an Ihren Helpdesk.") {
		t.Errorf("the focused note is announced as %q (ignored: %v), want Paint's name and the note", name, ax.Nodes[0].Ignored)
	}
	errs.check(t, "home with an unavailable app")
	screenshot(t, ctx, "portal-unavailable-app.png")
}
