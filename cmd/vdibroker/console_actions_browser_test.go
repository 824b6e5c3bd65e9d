package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestConsoleActionsBrowser drives the console's actions in headless
// Chromium against a real broker and checks each result through the API:
// create a pool, issue a registration key and copy it (the clipboard
// holds it, and agents register with it), drain two ticked hosts (the
// ticks survive the page's live refresh), resume one from its host page,
// send a session's user a message (the agent receives it), remove a host
// (its agent is refused), delete the pool (refused, naming what would go,
// then forced), and read the audit page, whose rows stay short.
func TestConsoleActionsBrowser(t *testing.T) {
	ctx := newBrowser(t)
	b := startCLIBroker(t)
	base := b.m.URL()
	api := vhttp.NewClient(base, b.m.AdminToken)
	agents := vhttp.NewClient(base, "")
	bg := context.Background()
	errs := watchConsole(t, ctx)
	host := func(name string) *vdibroker.SessionHost {
		t.Helper()
		h, err := api.GetSessionHost(bg, "office", name)
		if err != nil {
			t.Fatalf("get %s: %v", name, err)
		}
		return h
	}

	step(t, ctx, "sign in as admin",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), b.m.AdminToken),
		chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS("#create-pool summary")),
	)

	// Create a pool.
	step(t, ctx, "fill the new pool form",
		chromedp.Click(chromedp.CSS("#create-pool summary")),
		chromedp.WaitVisible(chromedp.CSS("#c-name")),
		chromedp.SendKeys(chromedp.CSS("#c-name"), "office"),
		chromedp.SetValue(chromedp.CSS("#c-loadBalancerType"), "DepthFirst"),
		chromedp.SendKeys(chromedp.CSS("#c-maxSessionLimit"), "4"),
		chromedp.SendKeys(chromedp.CSS("#c-friendlyName"), "Head office"),
	)
	screenshot(t, ctx, "console-action-create-pool-form.png")
	step(t, ctx, "create the pool", chromedp.Click(chromedp.CSS("#create-pool-submit")), chromedp.WaitVisible(chromedp.CSS("#key-form")))
	if p, err := api.GetHostPool(bg, "office"); err != nil || p.LoadBalancerType != vdibroker.DepthFirst || p.MaxSessionLimit != 4 || p.FriendlyName != "Head office" {
		t.Fatalf("the pool the console created: %+v, %v", p, err)
	}
	if got := text(t, ctx, ".flash.ok"); !strings.Contains(got, "Host pool office created") {
		t.Errorf("flash after create = %q", got)
	}
	errs.check(t, "create pool")

	// Issue a registration key for 7 days and 3 hosts, and copy it.
	if _, err := chromedp.CallBrowser(ctx, browser.SetPermission, browser.SetPermissionParams{
		Permission: &browser.PermissionDescriptor{Name: "clipboard-read"}, Setting: browser.PermissionSettingGranted, Origin: base}); err != nil {
		t.Fatalf("grant clipboard-read: %v", err)
	}
	step(t, ctx, "issue a key",
		chromedp.SetValue(chromedp.CSS("#k-expires"), "168"),
		chromedp.SendKeys(chromedp.CSS("#k-max"), "3"),
		chromedp.Click(chromedp.CSS("#issue-key")),
		chromedp.WaitVisible(chromedp.CSS("#key")),
	)
	key, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS("#key")))
	if err != nil || !strings.HasPrefix(key, "vdbr_") {
		t.Fatalf("the key on the page: %q, %v", key, err)
	}
	step(t, ctx, "copy the key", chromedp.Click(chromedp.CSS("#copy-key")))
	poll(t, ctx, "the copy button's answer", `document.getElementById("copy-key").dataset.copied === "1"`)
	if got := text(t, ctx, "#copy-key"); got != "Copied" {
		t.Errorf("the copy button says %q", got)
	}
	clip, err := chromedp.Run(ctx, chromedp.Evaluate[string](`navigator.clipboard.readText()`, chromedp.EvalAwaitPromise))
	if err != nil || clip != key {
		t.Errorf("the clipboard holds %q (%v), want the key", clip, err)
	}
	keys, err := api.ListRegistrationTokens(bg, "office")
	if err != nil || len(keys) != 1 || keys[0].MaxHosts != 3 || keys[0].ExpireTime.Sub(keys[0].CreateTime) != 7*24*time.Hour {
		t.Fatalf("the API's keys: %+v, %v; want one for 3 hosts, 7 days", keys, err)
	}
	if got := text(t, ctx, "#key-expiry"); !strings.Contains(got, keys[0].ExpireTime.UTC().Format("2006-01-02 15:04 UTC")) || !strings.Contains(got, "for 3 new hosts") {
		t.Errorf("the key's expiry on the page: %q", got)
	}
	screenshot(t, ctx, "console-action-registration-key.png")
	errs.check(t, "registration key")
	creds := map[string]string{}
	for _, name := range []string{"br-01", "br-02", "br-03"} {
		reg, err := agents.Register(bg, &vdibroker.RegisterRequest{Token: key, HostName: name, Address: name + ":3389", Protocols: []string{"RDP"}})
		if err != nil {
			t.Fatalf("register %s with the copied key: %v", name, err)
		}
		creds[name] = reg.Credential
		if _, err := agents.Heartbeat(bg, reg.Credential, &vdibroker.HeartbeatRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	carol, err := api.Connect(bg, "office", vhttp.ConnectRequest{User: "carol"})
	if err != nil || carol.SessionHost != "br-01" {
		t.Fatalf("carol's connect: %+v, %v (DepthFirst, ties by name: br-01)", carol, err)
	}
	beat := func(name string, sessions ...vdibroker.AgentSession) []vdibroker.Command {
		t.Helper()
		res, err := agents.Heartbeat(bg, creds[name], &vdibroker.HeartbeatRequest{Sessions: sessions})
		if err != nil {
			t.Fatalf("heartbeat %s: %v", name, err)
		}
		return res.Commands
	}
	carolOn := vdibroker.AgentSession{ID: "3", User: "carol", State: vdibroker.StateActive}
	beat("br-01", carolOn)

	// Drain two ticked hosts at once; the ticks survive a live refresh.
	step(t, ctx, "tick br-02 and br-03",
		chromedp.Navigate(base+"/pools/office"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-host="br-03"]`)),
		// The boxes are in the live hosts table.
		clickLive(`input[name="host"][value="br-02"]`),
		clickLive(`input[name="host"][value="br-03"]`),
		chromedp.Click(chromedp.CSS("h1")), // focus off the table, so the refresh runs
	)
	step(t, ctx, "forget the last refresh", chromedp.Evaluate[chromedp.Void](`document.getElementById("live").title = ""`))
	poll(t, ctx, "a live refresh", `document.getElementById("live").title.startsWith("Updated")`)
	if n := count(t, ctx, `document.querySelectorAll('input[name="host"]:checked').length`); n != 2 {
		t.Fatalf("%d hosts ticked after the live refresh, want 2", n)
	}
	screenshot(t, ctx, "console-action-bulk-drain-ticked.png")
	step(t, ctx, "drain the ticked hosts", chromedp.Click(chromedp.CSS("#bulk-drain")), chromedp.WaitVisible(chromedp.CSS(".flash.ok")))
	if got := text(t, ctx, ".flash.ok"); !strings.Contains(got, "Drained 2 hosts: br-02, br-03") {
		t.Errorf("flash after the bulk drain = %q", got)
	}
	if !host("br-01").AllowNewSession || host("br-02").AllowNewSession || host("br-03").AllowNewSession {
		t.Fatalf("after the bulk drain: br-01 %v br-02 %v br-03 %v, want true false false",
			host("br-01").AllowNewSession, host("br-02").AllowNewSession, host("br-03").AllowNewSession)
	}
	screenshot(t, ctx, "console-action-bulk-drain.png")
	errs.check(t, "bulk drain")

	// Resume br-02 from its host page, which says who drained it.
	step(t, ctx, "host page of the drained br-02",
		chromedp.Navigate(base+"/pools/office/hosts/br-02"),
		chromedp.WaitVisible(chromedp.CSS(`#host-actions button[data-action="undrain"]`)),
	)
	if got := text(t, ctx, `li[data-check="Drained"]`); !strings.Contains(got, "Drained by admin") {
		t.Errorf("br-02's drain check = %q", got)
	}
	screenshot(t, ctx, "console-action-resume-before.png")
	step(t, ctx, "resume br-02", chromedp.Click(chromedp.CSS(`#host-actions button[data-action="undrain"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#host-actions button[data-action="drain"]`)))
	if !host("br-02").AllowNewSession {
		t.Fatal("the console resumed br-02 but the API shows it drained")
	}
	if got := text(t, ctx, ".flash.ok"); !strings.Contains(got, "br-02 takes new sessions again") {
		t.Errorf("flash after resume = %q", got)
	}
	screenshot(t, ctx, "console-action-resume.png")
	errs.check(t, "resume")

	// Send carol a message.
	const message = "The office closes at 18:00.\nSave your work."
	step(t, ctx, "message form",
		chromedp.Navigate(base+"/sessions?pool=office"),
		clickLive(`tr[data-user="carol"] a[data-action="message"]`), // the live sessions list
		chromedp.WaitVisible(chromedp.CSS("#message")),
		chromedp.SendKeys(chromedp.CSS("#message"), message),
	)
	screenshot(t, ctx, "console-action-message-form.png")
	step(t, ctx, "send the message", chromedp.Click(chromedp.CSS("#send-message")), chromedp.WaitVisible(chromedp.CSS("#sessions-table")))
	if got := text(t, ctx, ".flash.ok"); !strings.Contains(got, "The message to carol is queued") {
		t.Errorf("flash after the message = %q", got)
	}
	cmds := beat("br-01", carolOn)
	if len(cmds) != 1 || cmds[0].Type != vdibroker.CommandSendMessage || cmds[0].Message != message || cmds[0].SessionID != carol.SessionID {
		t.Errorf("br-01's agent got %+v, want carol's message", cmds)
	}
	screenshot(t, ctx, "console-action-message.png")
	errs.check(t, "send message")

	// Remove br-03 (asked first); its agent is refused from then on.
	step(t, ctx, "remove br-03",
		chromedp.Navigate(base+"/pools/office/hosts/br-03"),
		chromedp.WaitVisible(chromedp.CSS(`button[data-action="remove-host"]`)),
		chromedp.Evaluate[chromedp.Void](`window.confirm = (m) => { window.asked = m; return true; }`),
		chromedp.Click(chromedp.CSS(`button[data-action="remove-host"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#delete-pool-form`)),
	)
	if got := text(t, ctx, ".flash.ok"); !strings.Contains(got, "br-03 removed") {
		t.Errorf("flash after remove = %q", got)
	}
	if _, err := api.GetSessionHost(bg, "office", "br-03"); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
		t.Errorf("br-03 after its removal: %v", err)
	}
	if _, err := agents.Heartbeat(bg, creds["br-03"], &vdibroker.HeartbeatRequest{}); vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated {
		t.Errorf("the removed host's agent heartbeats: %v", err)
	}
	screenshot(t, ctx, "console-action-remove-host.png")
	errs.check(t, "remove host")

	// Delete the pool: refused, naming what would go; then forced.
	step(t, ctx, "delete the pool without force",
		chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`),
		chromedp.Click(chromedp.CSS(`button[data-action="delete-pool"]`)),
		chromedp.WaitVisible(chromedp.CSS("#error")),
	)
	if got := text(t, ctx, "#error"); !strings.Contains(got, `has 2 session hosts (br-01, br-02) and 1 open session`) || !strings.Contains(got, "force") {
		t.Errorf("the refusal = %q", got)
	}
	if _, err := api.GetHostPool(bg, "office"); err != nil {
		t.Fatalf("a refused delete deleted the pool: %v", err)
	}
	screenshot(t, ctx, "console-action-delete-pool-refused.png")
	// The browser logs the refusal's status; nothing else.
	for _, m := range errs.take() {
		if !strings.Contains(m, "status of 409 (Conflict)") {
			t.Errorf("delete pool refused: browser console error: %s", m)
		}
	}
	step(t, ctx, "delete the pool with its hosts",
		chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`),
		chromedp.Click(chromedp.CSS("#delete-force")),
		chromedp.Click(chromedp.CSS(`button[data-action="delete-pool"]`)),
		chromedp.WaitVisible(chromedp.CSS("#create-pool")),
	)
	if got := text(t, ctx, ".flash.ok"); !strings.Contains(got, "Host pool office deleted: 2 session hosts (br-01, br-02) deleted") {
		t.Errorf("flash after the delete = %q", got)
	}
	if _, err := api.GetHostPool(bg, "office"); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
		t.Errorf("the pool after its delete: %v", err)
	}
	screenshot(t, ctx, "console-action-delete-pool.png")
	errs.check(t, "delete pool")

	// The audit page: newest first, every action above, rows kept short.
	step(t, ctx, "audit page", chromedp.Navigate(base+"/audit"), chromedp.WaitVisible(chromedp.CSS("#audit-table")))
	first, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#audit-table tbody tr").dataset.action`))
	if err != nil || first != "hostpool.delete" {
		t.Errorf("the audit page's first row is %q (%v), want the newest, hostpool.delete", first, err)
	}
	for _, action := range []string{"hostpool.put", "registrationtoken.create", "sessionhost.update", "usersession.sendmessage", "sessionhost.delete", "hostpool.delete"} {
		if n := count(t, ctx, `document.querySelectorAll('#audit-table tr[data-action="`+action+`"]').length`); n == 0 {
			t.Errorf("the audit page shows no %s", action)
		}
	}
	// A change is its fields, creates and deletes folded: no change
	// column grows the page (one-line JSON made it 5,745 px tall).
	if tallest := count(t, ctx, `Math.ceil(Math.max(...[...document.querySelectorAll("#audit-table td.change")].map(
		td => [...td.children].reduce((h, c) => h + c.getBoundingClientRect().height, 0))))`); tallest > 120 {
		t.Errorf("the tallest change in the audit table is %d px: a change is shown as a document, not its fields", tallest)
	}
	if n := count(t, ctx, `[...document.querySelectorAll("#audit-table td.change")].filter(td => td.textContent.includes('{"')).length`); n != 0 {
		t.Errorf("%d changes in the audit table show raw JSON", n)
	}
	screenshot(t, ctx, "console-audit.png")
	errs.check(t, "audit")
}

// poll waits, bounded, until the script js is true on the page.
func poll(t *testing.T, ctx context.Context, what, js string) {
	t.Helper()
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := chromedp.Run(pctx, chromedp.Poll[bool](js, chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
