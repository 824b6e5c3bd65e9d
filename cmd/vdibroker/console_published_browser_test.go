//go:build linux

package main

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestConsolePublishedCardBrowser_RE4_RE9 (R-E4, R-E9): two pods of a
// federation whose global desktop entitlement Anywhere, alice's, has
// pool desk of each as a member. In headless Chromium, on pod A's
// console, desk's page (no application group: a pool created after the
// entitlements' migration) lists Anywhere as what publishes its
// desktops, to alice, and does not warn that end users cannot open
// them, which alice's global connect belies; pool lonely, named by no
// entitlement, warns, with the command that publishes it.
func TestConsolePublishedCardBrowser_RE4_RE9(t *testing.T) {
	ctx := newBrowser(t)
	a, _, api := startXPodPair(t, "")
	if _, err := a.admin.PutHostPool(api, "lonely", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	errs := watchConsole(t, ctx)
	step(t, ctx, "the admin signs in to pod A's console and opens desk",
		chromedp.Navigate(a.m.URL()+"/signin"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), a.m.AdminToken),
		chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-pool="desk"]`)),
		chromedp.Navigate(a.m.URL()+"/pools/desk"),
		chromedp.WaitVisible(chromedp.CSS(`#published-global tr[data-global="Anywhere"][data-kind="Desktop"]`)),
	)
	if row := text(t, ctx, `#published-global tr[data-global="Anywhere"]`); !strings.Contains(row, "its desktops") || !strings.Contains(row, "1 user: alice") {
		t.Errorf("Anywhere's row reads %q, want its desktops, to alice", row)
	}
	if n := count(t, ctx, `document.querySelectorAll("#published-warning").length`); n != 0 {
		t.Errorf("desk's page warns that end users cannot open it, which Anywhere opens to alice: %q", text(t, ctx, "#published-warning"))
	}
	screenshot(t, ctx, "console-pool-published-global.png")
	errs.check(t, "desk's pool page")

	step(t, ctx, "the admin opens lonely",
		chromedp.Navigate(a.m.URL()+"/pools/lonely"),
		chromedp.WaitVisible(chromedp.CSS("#published-warning")),
	)
	if w := text(t, ctx, "#published-warning"); !strings.Contains(w, "End users cannot open this pool's desktops: no Desktop application group publishes them") ||
		!strings.Contains(w, "vdibroker applicationgroup create --name lonely-desktop --host-pool lonely --application-group-type Desktop") {
		t.Errorf("lonely's warning reads %q", w)
	}
	if n := count(t, ctx, `document.querySelectorAll("#published-global").length`); n != 0 {
		t.Errorf("lonely's page lists global entitlements, though none names it")
	}
	screenshot(t, ctx, "console-pool-published-warning.png")
	errs.check(t, "lonely's pool page")
}
