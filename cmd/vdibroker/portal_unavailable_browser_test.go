//go:build linux

package main

import (
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestPortalUnavailableAppBrowser (R-E12, R-U5, R-U6): in headless
// Chromium, bob's app published in a pool whose only host cannot run
// RemoteApps shows its tile with the note that it cannot be opened now,
// in his language, and no Open button; his desktop of that pool keeps
// its button. No console error. A screenshot of the page.
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
	errs.check(t, "home with an unavailable app")
	screenshot(t, ctx, "portal-unavailable-app.png")
}
