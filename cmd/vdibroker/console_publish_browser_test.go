//go:build linux

package main

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestConsolePublishBrowser_RE1_RE2_RE4_RE7: in headless Chromium, the
// admin opens pool office, created with no application group (R-E4: its
// card warns that end users cannot open it), creates its Desktop group on
// the card and assigns xavier, by keyboard alone; the warning is gone, and
// xavier, signed in to the portal with his User token, is offered the
// pool's desktop. A RemoteApp group made on the card, assigned to his
// group Finance, with an application added there (show in portal ticked
// by default), is in his portal too; the group deleted (asked first), it
// is not. At a phone's width nothing of the card leaves it sideways.
func TestConsolePublishBrowser_RE1_RE2_RE4_RE7(t *testing.T) {
	ctx := newBrowser(t)
	b := startCLIBroker(t)
	base := b.m.URL()
	api := vhttp.NewClient(base, b.m.AdminToken)
	bg := t.Context()
	if _, err := api.PutHostPool(bg, "office", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	rt, err := api.CreateRegistrationToken(bg, "office", vhttp.RegistrationTokenRequest{ExpiresInSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := api.Register(bg, &vdibroker.RegisterRequest{Token: rt.Token, HostName: "office-1", Address: "127.0.0.1:3389"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.Heartbeat(bg, reg.Credential, &vdibroker.HeartbeatRequest{}); err != nil {
		t.Fatal(err)
	}
	xt, err := api.CreateToken(bg, vhttp.TokenRequest{Role: vdibroker.RoleUser, Subject: "xavier", Groups: []string{"Finance"}})
	if err != nil {
		t.Fatal(err)
	}
	errs := watchConsole(t, ctx)

	step(t, ctx, "the admin signs in and opens office",
		chromedp.Navigate(base+"/signin"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), b.m.AdminToken),
		chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-pool="office"]`)),
		chromedp.Navigate(base+"/pools/office"),
		chromedp.WaitVisible(chromedp.CSS("#published-warning")),
	)
	if w := text(t, ctx, "#published-warning"); !strings.Contains(w, "no Desktop application group publishes them") {
		t.Errorf("office's warning reads %q", w)
	}

	// The Desktop group, by keyboard: the summary opens with Enter, each
	// field is typed into, Enter submits.
	step(t, ctx, "create the Desktop group by keyboard",
		chromedp.Focus(chromedp.CSS("#new-group > summary")),
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.CSS("#g-name")),
		chromedp.SendKeys(chromedp.CSS("#g-name"), "office-desktop"),
		chromedp.SendKeys(chromedp.CSS("#g-friendlyName"), "Office desktop"),
		chromedp.SetValue(chromedp.CSS("#g-applicationGroupType"), "Desktop"),
	)
	screenshot(t, ctx, "console-publish-new-group.png")
	step(t, ctx, "submit it with Enter",
		chromedp.Focus(chromedp.CSS("#g-friendlyName")),
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.CSS(`#published-table tr[data-group="office-desktop"]`)),
	)
	if got := text(t, ctx, ".flash.ok"); !strings.Contains(got, "Application group office-desktop (Desktop) created") {
		t.Errorf("flash after the create = %q", got)
	}
	if g, err := api.GetApplicationGroup(bg, "office-desktop"); err != nil || g.HostPool != "office" || g.ApplicationGroupType != vdibroker.AppGroupDesktop {
		t.Fatalf("the group the console created: %+v, %v", g, err)
	}
	const assign = `form[data-form="assign"][data-group="office-desktop"]`
	step(t, ctx, "assign xavier by keyboard",
		chromedp.Focus(chromedp.CSS(`details[data-manage="office-desktop"] > summary`)),
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.CSS(assign+` input[name="principal"]`)),
		chromedp.SendKeys(chromedp.CSS(assign+` input[name="principal"]`), "xavier"),
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitReady(chromedp.CSS(`li[data-user="xavier"]`)),
	)
	if got := text(t, ctx, ".flash.ok"); !strings.Contains(got, "The user xavier is assigned to office-desktop") {
		t.Errorf("flash after the assignment = %q", got)
	}
	if n := count(t, ctx, `document.querySelectorAll("#published-warning").length`); n != 0 {
		t.Errorf("the card still warns once xavier is assigned: %q", text(t, ctx, "#published-warning"))
	}
	if row := text(t, ctx, `#published-table tr[data-group="office-desktop"]`); !strings.Contains(row, "1 user: xavier") {
		t.Errorf("the group's row reads %q", row)
	}
	screenshot(t, ctx, "console-publish-assigned.png")
	errs.check(t, "the Desktop group")

	step(t, ctx, "xavier signs in to the portal with his token",
		chromedp.Navigate(base+"/portal/signin"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), xt.Secret),
		chromedp.Click(chromedp.CSS("#signin-token")),
		chromedp.WaitVisible(chromedp.CSS(`li.resource[data-id="desktop:office"]`)),
	)
	if name := text(t, ctx, `li.resource[data-id="desktop:office"] .name`); name != "Office desktop" {
		t.Errorf("xavier's portal names the desktop %q", name)
	}
	screenshot(t, ctx, "console-publish-portal-desktop.png")

	// A RemoteApp group for Finance with Word, on the card.
	step(t, ctx, "create the RemoteApp group",
		chromedp.Navigate(base+"/pools/office"),
		chromedp.WaitVisible(chromedp.CSS("#new-group > summary")),
		chromedp.Click(chromedp.CSS("#new-group > summary")),
		chromedp.WaitVisible(chromedp.CSS("#g-name")),
		chromedp.SendKeys(chromedp.CSS("#g-name"), "office-apps"),
		chromedp.SetValue(chromedp.CSS("#g-applicationGroupType"), "RemoteApp"),
		chromedp.Click(chromedp.CSS("#new-group-submit")),
		chromedp.WaitVisible(chromedp.CSS(`#published-table tr[data-group="office-apps"]`)),
	)
	const apps = `details[data-manage="office-apps"]`
	step(t, ctx, "assign Finance",
		chromedp.Click(chromedp.CSS(apps+" > summary")),
		chromedp.WaitVisible(chromedp.CSS(apps+` form[data-form="assign"] select[name="kind"]`)),
		chromedp.SetValue(chromedp.CSS(apps+` form[data-form="assign"] select[name="kind"]`), "group"),
		chromedp.SendKeys(chromedp.CSS(apps+` form[data-form="assign"] input[name="principal"]`), "Finance"),
		chromedp.Click(chromedp.CSS(apps+` button[data-action="assign"]`)),
		chromedp.WaitReady(chromedp.CSS(`li[data-group-principal="Finance"]`)),
	)
	if got := text(t, ctx, ".flash.ok"); !strings.Contains(got, "The group Finance is assigned to office-apps") {
		t.Errorf("flash after assigning Finance = %q", got)
	}
	step(t, ctx, "fill the application form",
		chromedp.Click(chromedp.CSS(apps+" > summary")),
		chromedp.WaitVisible(chromedp.CSS(apps+` form[data-form="app"] input[name="name"]`)),
		chromedp.SendKeys(chromedp.CSS(apps+` form[data-form="app"] input[name="name"]`), "word"),
		chromedp.SendKeys(chromedp.CSS(apps+` form[data-form="app"] input[name="friendlyName"]`), "Word"),
		chromedp.SendKeys(chromedp.CSS(apps+` form[data-form="app"] input[name="filePath"]`), `C:\Program Files\Microsoft Office\WINWORD.EXE`),
	)
	if n := count(t, ctx, `document.querySelectorAll('details[data-manage="office-apps"] form[data-form="app"] input[name="showInPortal"]:checked').length`); n != 1 {
		t.Errorf("show in portal is not ticked in the blank application form")
	}
	screenshot(t, ctx, "console-publish-app-form.png")
	step(t, ctx, "add the application",
		chromedp.Click(chromedp.CSS(apps+` button[data-action="add-app"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#published-table tr[data-group="office-apps"] [data-app="word"]`)),
	)
	if a, err := api.GetApplication(bg, "office-apps", "word"); err != nil || !a.ShowInPortal || a.FilePath != `C:\Program Files\Microsoft Office\WINWORD.EXE` {
		t.Fatalf("the application the console added: %+v, %v", a, err)
	}
	errs.check(t, "the RemoteApp group")
	step(t, ctx, "xavier's portal lists Word",
		chromedp.Navigate(base+"/portal/"),
		chromedp.WaitVisible(chromedp.CSS(`li.resource[data-id="app:office-apps/word"]`)),
	)
	if name := text(t, ctx, `li.resource[data-id="app:office-apps/word"] .name`); name != "Word" {
		t.Errorf("xavier's portal names the application %q", name)
	}
	screenshot(t, ctx, "console-publish-portal-app.png")

	// At a phone's width, every form of the card open: nothing of it
	// leaves the card sideways.
	step(t, ctx, "the card at a phone's width",
		chromedp.EmulateViewport(375, 800),
		chromedp.Navigate(base+"/pools/office"),
		chromedp.WaitVisible(chromedp.CSS("#published")),
		chromedp.Evaluate[chromedp.Void](`document.querySelectorAll("#published details").forEach(d => d.open = true)`),
	)
	out, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(() => {
		const card = document.getElementById("published").getBoundingClientRect();
		return [...document.querySelectorAll("#published input:not([type=hidden]), #published select, #published button, #published summary, #published label, #published li")]
			.filter(e => { const r = e.getBoundingClientRect(); return r.width > 0 && (r.left < card.left - 1 || r.right > card.right + 1); })
			.map(e => (e.id || e.name || e.textContent.trim().slice(0, 40)) + " leaves the card");
	})()`))
	if err != nil || len(out) > 0 {
		t.Errorf("at 375 px: %q %v", out, err)
	}
	screenshot(t, ctx, "console-publish-phone.png")
	step(t, ctx, "back to a desktop's width", chromedp.EmulateViewport(1360, 1000))

	// An application named ".." (a name the API takes, escaped): its
	// Remove removes it, where a form action ending "apps/../delete"
	// was resolved by Chromium to the group's delete.
	if _, err := api.PutApplication(bg, "office-apps", "..", map[string]any{"filePath": `C:\dots.exe`}); err != nil {
		t.Fatal(err)
	}
	step(t, ctx, "remove the application named ..",
		chromedp.Navigate(base+"/pools/office"),
		chromedp.WaitVisible(chromedp.CSS(apps+" > summary")),
		chromedp.Click(chromedp.CSS(apps+" > summary")),
		chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`),
		chromedp.Click(chromedp.CSS(`button[data-action="remove-app"][data-app=".."]`)),
		chromedp.WaitVisible(chromedp.CSS(".flash")),
	)
	if got := text(t, ctx, ".flash"); !strings.Contains(got, "Application .. removed from office-apps") {
		t.Errorf("flash after removing .. = %q", got)
	}
	if _, err := api.GetApplication(bg, "office-apps", ".."); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
		t.Errorf("the application .. after its Remove: %v, want NotFound", err)
	}
	if _, err := api.GetApplication(bg, "office-apps", "word"); err != nil {
		t.Fatalf("word after removing ..: %v", err)
	}

	// Deleted, asked first (declined, nothing goes): Word is in nobody's
	// portal.
	step(t, ctx, "decline to delete office-apps",
		chromedp.Navigate(base+"/pools/office"),
		chromedp.WaitVisible(chromedp.CSS(apps+" > summary")),
		chromedp.Click(chromedp.CSS(apps+" > summary")),
		chromedp.Evaluate[chromedp.Void](`window.confirm = (m) => { window.asked = m; return false; }`),
		chromedp.Click(chromedp.CSS(`button[data-action="delete-appgroup"][data-group="office-apps"]`)),
	)
	asked, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.asked || ""`))
	if err != nil || !strings.Contains(asked, "Delete application group office-apps?") {
		t.Errorf("the delete asked %q (%v)", asked, err)
	}
	if _, err := api.GetApplicationGroup(bg, "office-apps"); err != nil {
		t.Fatalf("a declined delete deleted office-apps: %v", err)
	}
	step(t, ctx, "delete office-apps",
		chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`),
		chromedp.Click(chromedp.CSS(`button[data-action="delete-appgroup"][data-group="office-apps"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`#published-table tr[data-group="office-apps"]`)),
		chromedp.WaitVisible(chromedp.CSS(".flash.ok")),
	)
	if got := text(t, ctx, ".flash.ok"); !strings.Contains(got, "Application group office-apps deleted, with its applications") {
		t.Errorf("flash after the delete = %q", got)
	}
	if _, err := api.GetApplicationGroup(bg, "office-apps"); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
		t.Errorf("office-apps after the delete: %v, want NotFound", err)
	}
	step(t, ctx, "xavier's portal again",
		chromedp.Navigate(base+"/portal/"),
		chromedp.WaitVisible(chromedp.CSS(`li.resource[data-id="desktop:office"]`)),
	)
	if n := count(t, ctx, `document.querySelectorAll('li.resource[data-id="app:office-apps/word"]').length`); n != 0 {
		t.Errorf("xavier's portal still lists Word once its group is deleted")
	}
}
