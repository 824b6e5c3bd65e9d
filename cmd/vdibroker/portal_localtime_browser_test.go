//go:build linux

package main

import (
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestPortalSinceInLocalTimeBrowser_RU3 (R-U3, R-U6): in headless
// Chromium whose time zone is Asia/Kolkata (UTC+5:30, so the minutes
// differ too), uma's session's "since" reads in her time, laid out as
// the UTC time is (on her German page too, and left to right on her
// Arabic one), not in UTC, which the page says without scripts and the
// element's title keeps; so does the list her page fetches again after
// a logoff. No console error.
func TestPortalSinceInLocalTimeBrowser_RU3(t *testing.T) {
	ctx := newBrowser(t)
	w := newPortalWorld(t)
	base := w.m.URL()
	c, err := w.admin.Connect(t.Context(), "desk", vhttp.ConnectRequest{User: "uma"})
	if err != nil {
		t.Fatal(err)
	}
	w.heartbeat(t, c.SessionHost, vdibroker.AgentSession{ID: "1", User: "uma", State: vdibroker.StateActive})
	if _, err := chromedp.Call(ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Asia/Kolkata"}); err != nil {
		t.Fatal(err)
	}
	kolkata, err := time.LoadLocation("Asia/Kolkata")
	if err != nil {
		t.Skipf("no time zone data: %v", err)
	}
	errs := watchConsole(t, ctx)
	step(t, ctx, "sign in", providerSignIn(base+"/portal/?lang=de", "uma", "pw-uma", "#resources")...)
	errs.take()
	since := `tr[data-session="` + c.SessionID + `"] td.since time`
	check := func(what string) {
		t.Helper()
		at, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('`+since+`').getAttribute('datetime')`))
		if err != nil {
			t.Fatal(err)
		}
		when, err := time.Parse(time.RFC3339, at)
		if err != nil {
			t.Fatalf("%s: datetime %q: %v", what, at, err)
		}
		shown := text(t, ctx, since)
		title, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('`+since+`').title`))
		// 02:28 UTC is 07:58 in Kolkata: "2026-12-07 07:58".
		if want := when.In(kolkata).Format("2006-01-02 15:04"); shown != want {
			t.Errorf("%s: since %q, want %q (her time)", what, shown, want)
		}
		if want := when.UTC().Format("2006-01-02 15:04 UTC"); title != want {
			t.Errorf("%s: its title %q, want the UTC time %q", what, title, want)
		}
	}
	step(t, ctx, "her page", chromedp.Navigate(base+"/portal/"), chromedp.WaitVisible(chromedp.CSS(since)))
	check("her page")
	// A second session, logged off: the list refreshed by the page's
	// script, the first session's time in her time zone still.
	second, err := w.admin.Connect(t.Context(), "other", vhttp.ConnectRequest{User: "uma"})
	if err != nil {
		t.Fatal(err)
	}
	w.heartbeat(t, second.SessionHost, vdibroker.AgentSession{ID: "2", User: "uma", State: vdibroker.StateActive})
	step(t, ctx, "her page with the second", chromedp.Navigate(base+"/portal/?off="+second.SessionID),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-session="`+second.SessionID+`"][data-logging-off]`)))
	w.heartbeat(t, second.SessionHost)
	step(t, ctx, "the list refreshed", chromedp.WaitNotPresent(chromedp.CSS(`tr[data-session="`+second.SessionID+`"]`)))
	check("the refreshed list")
	// Her Arabic page (right to left): the same digits, in the same
	// order, left to right within the right-to-left cell.
	step(t, ctx, "her Arabic page", chromedp.Navigate(base+"/portal/?lang=ar"), chromedp.WaitVisible(chromedp.CSS(since)))
	check("her Arabic page")
	dirs, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.dir + " " + getComputedStyle(document.querySelector('`+since+`')).direction`))
	if err != nil {
		t.Fatal(err)
	}
	if dirs != "rtl ltr" {
		t.Errorf("her Arabic page's direction and her since's: %q, want \"rtl ltr\"", dirs)
	}
	errs.check(t, "her page in her time zone")
}
