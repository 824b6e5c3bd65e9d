//go:build linux

package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/cdp"
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
// reader user hears it too, once: the note's text is not its content
// too, read again after its name. No console error. A screenshot of
// the page.
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
	// stops, every link and button of the page before it), announced
	// as Paint's name, the note (role) and its text (the description),
	// which is the note's content too, once: a screen reader reading the
	// page line by line reads it there.
	note := app + " .unavailable"
	const why = "Kann gerade nicht geöffnet werden. Wenden Sie sich an Ihren Helpdesk."
	step(t, ctx, "her page again, the focus at its top", chromedp.Navigate(base+"/portal/"), chromedp.WaitVisible(chromedp.CSS(note)))
	tabTo(t, ctx, note, "Paint's note", 40)
	checkFocused(t, ctx, "Paint's note", "note", "Paint", why)
	checkReadOnce(t, ctx, note, "Paint's note", why)
	errs.check(t, "home with an unavailable app")
	screenshot(t, ctx, "portal-unavailable-app.png")
}

// tabTo presses Tab, from where the focus is, until the focus is on the
// element sel names (what, in a failure), at most limit times; it fails
// the test with the stops it went through if it never is, and returns
// them (each the id of an element, or its tag name) if it is.
func tabTo(t *testing.T, ctx context.Context, sel, what string, limit int) []string {
	t.Helper()
	q, _ := json.Marshal(sel)
	var stops []string
	for range limit {
		step(t, ctx, "Tab", chromedp.KeyEvent(kb.Tab))
		at, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(e => e === document.querySelector(`+string(q)+`) ? "" : e.id || e.tagName)(document.activeElement)`))
		if err != nil {
			t.Fatal(err)
		}
		if at == "" {
			return stops
		}
		stops = append(stops, at)
	}
	t.Fatalf("Tab never reached %s; it went through %v", what, stops)
	return nil
}

// axNode is the accessibility node of the element expr (a script)
// evaluates to, what in a failure.
func axNode(t *testing.T, ctx context.Context, expr, what string) *accessibility.Node {
	t.Helper()
	// The tree's node ids stay the same from one call to the next.
	if _, err := chromedp.Call(ctx, accessibility.Enable, cdp.Empty{}); err != nil {
		t.Fatalf("enable the accessibility tree: %v", err)
	}
	obj, err := chromedp.Call(ctx, runtime.Evaluate, runtime.EvaluateParams{Expression: expr})
	if err != nil || obj.Result == nil || obj.Result.ObjectID == "" {
		t.Fatalf("%s (%s): %+v, %v", what, expr, obj, err)
	}
	no := false
	ax, err := chromedp.Call(ctx, accessibility.GetPartialAXTree, accessibility.GetPartialAXTreeParams{ObjectID: obj.Result.ObjectID, FetchRelatives: &no})
	if err != nil || len(ax.Nodes) == 0 {
		t.Fatalf("the accessibility node of %s: %+v, %v", what, ax, err)
	}
	return ax.Nodes[0]
}

// checkFocused checks, in the browser's accessibility tree, that the
// focused element (what, in a failure) is of role, named name and
// described by description: what a screen reader says as the focus
// reaches it.
func checkFocused(t *testing.T, ctx context.Context, what, role, name, description string) {
	t.Helper()
	n := axNode(t, ctx, "document.activeElement", what)
	if got := axString(n.Role); n.Ignored || got != role {
		t.Errorf("%s is a %q in the accessibility tree (ignored: %v), want a %s", what, got, n.Ignored, role)
	}
	if got := axString(n.Name); got != name {
		t.Errorf("%s is announced as %q, want %q", what, got, name)
	}
	if got := axString(n.Description); got != description {
		t.Errorf("%s is described as %q, want %q", what, got, description)
	}
}

// checkReadOnce checks, in the browser's accessibility tree, that the
// element sel names (what, in a failure) has text as its content, once,
// and not in its name: a screen reader reading the page line by line
// (NVDA's and JAWS's browse mode, which read content, not names) reads
// it there, once. Content hidden (aria-hidden) is not in the tree.
func checkReadOnce(t *testing.T, ctx context.Context, sel, what, text string) {
	t.Helper()
	q, _ := json.Marshal(sel)
	n := axNode(t, ctx, "document.querySelector("+string(q)+")", what)
	if n.Ignored {
		t.Errorf("%s is not in the accessibility tree", what)
	}
	var content []string
	var walk func(id accessibility.NodeID)
	walk = func(id accessibility.NodeID) {
		kids, err := chromedp.Call(ctx, accessibility.GetChildAXNodes, accessibility.GetChildAXNodesParams{ID: id})
		if err != nil {
			t.Fatalf("the accessibility nodes in %s: %v", what, err)
		}
		for _, k := range kids.Nodes {
			if !k.Ignored && axString(k.Role) == "StaticText" {
				content = append(content, axString(k.Name))
			}
			walk(k.NodeID)
		}
	}
	walk(n.NodeID)
	if got := strings.Count(strings.Join(content, " "), text); got != 1 {
		t.Errorf("%s has %q as its content (%q), %d times, want once", what, text, content, got)
	}
	if strings.Contains(axString(n.Name), text) {
		t.Errorf("%s is named %q, its text again", what, axString(n.Name))
	}
}

// axString is the string value of an accessibility node's property
// (its role, its name), "" for none.
func axString(v *accessibility.Value) string {
	var s string
	if v != nil {
		_ = json.Unmarshal(v.Value, &s)
	}
	return s
}
