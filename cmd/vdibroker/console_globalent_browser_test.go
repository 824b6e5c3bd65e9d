//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestConsoleGlobalEntitlementBrowser_RE9_RG1: two pods of one site,
// poda and podb, each serve with its pool desk, started with the same
// admin token (as federation apply needs) and holding generation 1 of a
// document with entitlement Anywhere. In headless Chromium the admin,
// signed in to poda's console, opens the Federation page and, by
// keyboard alone, creates global entitlement Sales with member podb/desk
// and user bob: both pods answer applied, and the page lists them. podb
// stores generation 2 with it (sent over serve's pod-to-pod HTTP client,
// which --federation-allow lets call 127.0.0.1), and bob, with a User
// token of podb, connects through Sales and is placed in podb's desk.
// Its scope is set to WithinSite by keyboard, and reaches podb; at a
// phone's width no form leaves its card. Deleting Sales asks first; declined, nothing goes; accepted, both pods
// drop it.
func TestConsoleGlobalEntitlementBrowser_RE9_RG1(t *testing.T) {
	ctx := newBrowser(t)
	t.Setenv("VDIBROKER_ADMIN_TOKEN", "console-globalent-browser-admin-token-0123456789")
	secretFile := filepath.Join(t.TempDir(), "federation.secret")
	if err := os.WriteFile(secretFile, []byte("globalent-browser-federation-secret-0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, b := startXPod(t, "poda", secretFile), startXPod(t, "podb", secretFile)
	api := t.Context()
	doc := &vdibroker.Federation{Generation: 1, Sites: []vdibroker.Site{{Name: "s0"}},
		Pods: []vdibroker.Pod{{Name: "poda", Site: "s0", URL: a.m.URL()}, {Name: "podb", Site: "s0", URL: b.m.URL()}},
		GlobalEntitlements: []vdibroker.GlobalEntitlement{{Name: "Anywhere", Users: []string{"alice"},
			Members: []vdibroker.Member{{Pod: "poda", HostPool: "desk"}, {Pod: "podb", HostPool: "desk"}}}},
		// Listed with their Change site, Up, Down and Remove forms, which
		// stay in their card at a phone's width (below).
		HomeSites: []vdibroker.HomeSite{{Group: "Sales", Site: "s0"}, {Group: "Finance", Site: "s0"}, {User: "alice", Site: "s0"}}}
	for _, p := range []*xpod{a, b} {
		d := *doc
		if _, err := p.admin.PutFederation(api, &d); err != nil {
			t.Fatalf("federation document on %s: %v", p.m.URL(), err)
		}
	}
	base := a.m.URL()
	errs := watchConsole(t, ctx)
	step(t, ctx, "the admin signs in to poda's console and opens the Federation page",
		chromedp.Navigate(base+"/signin"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), a.m.AdminToken),
		chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-pool="desk"]`)),
		chromedp.Navigate(base+"/federation"),
		chromedp.WaitVisible(chromedp.CSS("#ge-new > summary")),
	)
	// By keyboard: the summary opens with Enter; each field is typed
	// into, a select is moved with its arrow keys; Enter submits.
	step(t, ctx, "fill in the new global entitlement by keyboard",
		chromedp.Focus(chromedp.CSS("#ge-new > summary")),
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.CSS("#ge-name")),
		chromedp.SendKeys(chromedp.CSS("#ge-name"), "Sales"),
		chromedp.Focus(chromedp.CSS("#ge-sessionDistribution")),
		chromedp.KeyEvent(kb.ArrowDown), // None -> LoadIndex
		chromedp.Focus(chromedp.CSS("#ge-pod")),
		chromedp.KeyEvent(kb.ArrowDown), // poda -> podb
		chromedp.SendKeys(chromedp.CSS("#ge-hostPool"), "desk"),
		chromedp.SendKeys(chromedp.CSS("#ge-principal"), "bob"),
	)
	screenshot(t, ctx, "console-globalent-new.png")
	step(t, ctx, "submit it with Enter",
		chromedp.Focus(chromedp.CSS("#ge-principal")),
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.CSS(`#federation-results tr[data-result-pod="podb"]`)),
	)
	screenshot(t, ctx, "console-globalent-applied.png")
	if got := text(t, ctx, ".flash.ok"); !strings.Contains(got, "Global entitlement Sales created with member podb/desk: user bob may open") ||
		!strings.Contains(got, "Every pod of the federation holds generation 2") {
		t.Errorf("flash after the create = %q", got)
	}
	for _, pod := range []string{"poda", "podb"} {
		if r := text(t, ctx, `#federation-results tr[data-result-pod="`+pod+`"]`); !strings.Contains(r, "applied") {
			t.Errorf("%s's result reads %q", pod, r)
		}
	}
	errs.check(t, "the create")
	st, err := b.admin.GetFederation(api)
	if err != nil {
		t.Fatal(err)
	}
	var sales *vdibroker.GlobalEntitlement
	for i := range st.Document.GlobalEntitlements {
		if st.Document.GlobalEntitlements[i].Name == "Sales" {
			sales = &st.Document.GlobalEntitlements[i]
		}
	}
	if st.Document.Generation != 2 || sales == nil || sales.SessionDistribution != vdibroker.DistributionLoadIndex ||
		len(sales.Members) != 1 || sales.Members[0] != (vdibroker.Member{Pod: "podb", HostPool: "desk"}) || len(sales.Users) != 1 || sales.Users[0] != "bob" {
		t.Fatalf("podb holds generation %d, Sales %+v", st.Document.Generation, sales)
	}
	bt, err := b.admin.CreateToken(api, vhttp.TokenRequest{Role: vdibroker.RoleUser, Subject: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := vhttp.NewClient(b.m.URL(), bt.Secret).GlobalConnect(api, "Sales", vdibroker.GlobalConnectRequest{User: "bob"})
	if err != nil || got.Pod != "podb" || got.HostPool != "desk" {
		t.Fatalf("bob's connect through Sales at podb: %+v, %v", got, err)
	}

	const manage = `details[data-manage-ge="Sales"]`
	// Its settings, by keyboard: the summary opens with Enter, the scope
	// select moves with its arrow key, Enter on Save settings submits.
	step(t, ctx, "set Sales' scope to WithinSite by keyboard",
		chromedp.Navigate(base+"/federation"),
		chromedp.WaitVisible(chromedp.CSS(manage+" > summary")),
		chromedp.Focus(chromedp.CSS(manage+" > summary")),
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.CSS(manage+` select[name="scope"]`)),
		chromedp.Focus(chromedp.CSS(manage+` select[name="scope"]`)),
		chromedp.KeyEvent(kb.ArrowDown), // AllSites -> WithinSite
		chromedp.Focus(chromedp.CSS(`button[data-action="ge-settings"][data-entitlement="Sales"]`)),
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.CSS(`#federation-results tr[data-result-pod="podb"]`)),
	)
	if got := text(t, ctx, ".flash.ok"); !strings.Contains(got, "Sales's settings changed: scope WithinSite (was AllSites)") ||
		!strings.Contains(got, "Every pod of the federation holds generation 3") {
		t.Errorf("flash after the settings = %q", got)
	}
	if st, err := b.admin.GetFederation(api); err != nil || st.Document.Generation != 3 || st.Document.GlobalEntitlements[1].Scope != vdibroker.ScopeWithinSite {
		t.Fatalf("podb after the settings: %+v, %v", st, err)
	}
	errs.check(t, "the settings")
	// At a phone's width, every form open: nothing leaves its card.
	step(t, ctx, "the forms at a phone's width",
		chromedp.EmulateViewport(375, 800),
		chromedp.Navigate(base+"/federation"),
		chromedp.WaitVisible(chromedp.CSS("#home-site-form")),
		chromedp.Evaluate[chromedp.Void](`document.querySelectorAll("#ge-manage details").forEach(d => d.open = true)`),
	)
	out, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(() => {
		const out = [];
		for (const id of ["ge-manage", "home-sites"]) {
			const card = document.getElementById(id).getBoundingClientRect();
			for (const e of document.querySelectorAll("#" + id + " input:not([type=hidden]), #" + id + " select, #" + id + " button, #" + id + " summary, #" + id + " label, #" + id + " li")) {
				const r = e.getBoundingClientRect();
				if (r.width > 0 && (r.left < card.left - 1 || r.right > card.right + 1)) out.push((e.id || e.name || e.textContent.trim().slice(0, 40)) + " leaves " + id);
			}
		}
		return out;
	})()`))
	if err != nil || len(out) > 0 {
		t.Errorf("at 375 px: %q %v", out, err)
	}
	screenshot(t, ctx, "console-globalent-phone.png")
	step(t, ctx, "back to a desktop's width", chromedp.EmulateViewport(1360, 1000))

	step(t, ctx, "decline to delete Sales",
		chromedp.Navigate(base+"/federation"),
		chromedp.WaitVisible(chromedp.CSS(manage+" > summary")),
		chromedp.Click(chromedp.CSS(manage+" > summary")),
		chromedp.Evaluate[chromedp.Void](`window.confirm = (m) => { window.asked = m; return false; }`),
		chromedp.Click(chromedp.CSS(`button[data-action="delete-globalentitlement"][data-entitlement="Sales"]`)),
	)
	asked, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.asked || ""`))
	if err != nil || !strings.Contains(asked, "Delete global entitlement Sales") {
		t.Errorf("the delete asked %q (%v)", asked, err)
	}
	if st, err := b.admin.GetFederation(api); err != nil || st.Document.Generation != 3 {
		t.Fatalf("a declined delete changed podb's document: %+v, %v", st, err)
	}
	step(t, ctx, "delete Sales",
		chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`),
		chromedp.Click(chromedp.CSS(`button[data-action="delete-globalentitlement"][data-entitlement="Sales"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#federation-results tr[data-result-pod="podb"]`)),
	)
	if got := text(t, ctx, ".flash.ok"); !strings.Contains(got, "Global entitlement Sales deleted") {
		t.Errorf("flash after the delete = %q", got)
	}
	for _, p := range []*xpod{a, b} {
		st, err := p.admin.GetFederation(api)
		if err != nil || st.Document.Generation != 4 || len(st.Document.GlobalEntitlements) != 1 {
			t.Errorf("%s after the delete: %+v, %v", p.m.URL(), st, err)
		}
	}
	errs.check(t, "the delete")
}
