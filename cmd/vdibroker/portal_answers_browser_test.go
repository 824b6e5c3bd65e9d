//go:build linux

package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/power"
)

// portalLangs are the portal's languages, English last: a ?lang= is
// remembered, and the walk goes on in English.
var portalLangs = []string{"de", "pt", "ar", "en"}

// TestPortalAnswersBrowser_RU4_RU6_RA4: headless Chromium is alice, in
// front of the portal of a broker on loopback (a connect waits at most
// 1 s for a starting host), opening each of her desktops and apps in
// turn, and the page tells her, in each of the portal's languages, what
// happened and what she can do, never something false: a drained pool
// and a full one have no session host for her now (try again in a few
// minutes, else her helpdesk); a host of a pool that starts on connect
// is still starting (try again in 30 seconds, the broker's
// Retry-After); her Personal desktop, stopped, is started for her; its
// agent then says its machine shuts down: its computer is restarting or
// shutting down (not that no session host can take it), try again in 30
// seconds, the most a Retry-After says, until it is down, and tell her
// helpdesk only if it does not come back, also when its start will have
// timed out by then (it was started 9 minutes ago: a reboot is back by
// then); once it did not come back and its start timed out, no connect
// of hers starts it again: the page says to ask her helpdesk, and not
// to try again; started again by an administrator and running, its
// agent says its machine goes down (a restart or a shutdown from
// within): her page says so again. A pool deleted, and
// an app removed, since her page was drawn are no longer hers; her
// sign-in ended (her token revoked) mid-page, she is told to sign in
// again (past her write budget: portal/budget_test.go). Carol,
// entitled to nothing, is told to ask her helpdesk. Each case's English
// words are checked whole, and each other language's page is in that
// language (not the English words) and names what she opened.
func TestPortalAnswersBrowser_RU4_RU6_RA4(t *testing.T) {
	sim := &power.Simulated{}
	m := &Main{Listen: "127.0.0.1:0", DataDir: t.TempDir(), PowerDrivers: power.Set{"sim": sim}, MaxConnectWait: time.Second}
	if err := m.Open(t.Context()); err != nil {
		t.Fatalf("start broker: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	base, bg := m.URL(), t.Context()
	admin := vhttp.NewClient(base, m.AdminToken)
	creds := map[string]string{}
	for _, p := range []struct {
		name  string
		body  map[string]any
		group map[string]any
	}{
		{"drain", map[string]any{}, map[string]any{"friendlyName": "Drained desk"}},
		{"full", map[string]any{"maxSessionLimit": 1}, map[string]any{"friendlyName": "Full desk"}},
		{"cold", map[string]any{"powerDriver": "sim", "startVMOnConnect": true, "maxSessionLimit": 1}, map[string]any{"friendlyName": "Cold lab"}},
		{"mine", map[string]any{"hostPoolType": "Personal", "personalDesktopAssignmentType": "Automatic", "powerDriver": "sim", "startVMOnConnect": true,
			"heartbeatTimeoutSeconds": 90}, map[string]any{"friendlyName": "My desk"}},
		{"gone", map[string]any{}, map[string]any{"friendlyName": "Old desk"}},
		{"apps", map[string]any{}, nil},
	} {
		if _, err := admin.PutHostPool(bg, p.name, p.body); err != nil {
			t.Fatal(err)
		}
		rt, err := admin.CreateRegistrationToken(bg, p.name, vhttp.RegistrationTokenRequest{ExpiresInSeconds: 3600})
		if err != nil {
			t.Fatal(err)
		}
		host := p.name + "-1"
		reg, err := admin.Register(bg, &vdibroker.RegisterRequest{Token: rt.Token, HostName: host, Address: "127.0.0.1:3389"})
		if err != nil {
			t.Fatal(err)
		}
		creds[host] = reg.Credential
		if p.body["powerDriver"] == nil { // the others never heard from: a start is all they wait for
			if _, err := admin.Heartbeat(bg, reg.Credential, &vdibroker.HeartbeatRequest{}); err != nil {
				t.Fatal(err)
			}
		}
		if p.group != nil {
			p.group["hostPool"], p.group["applicationGroupType"], p.group["assignments"] = p.name, "Desktop", map[string]any{"users": []string{"alice"}}
			if _, err := admin.PutApplicationGroup(bg, p.name+"-desktop", p.group); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := admin.PutApplicationGroup(bg, "apps-ra", map[string]any{"hostPool": "apps", "applicationGroupType": "RemoteApp",
		"friendlyName": "Apps", "assignments": map[string]any{"users": []string{"alice"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.PutApplication(bg, "apps-ra", "notepad", map[string]any{"filePath": `C:\\np.exe`, "friendlyName": "Notepad++", "showInPortal": true}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.PatchSessionHost(bg, "drain", "drain-1", map[string]any{"allowNewSession": false}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Connect(bg, "full", vhttp.ConnectRequest{User: "bob"}); err != nil { // its one place taken
		t.Fatal(err)
	}
	if _, err := admin.PatchSessionHost(bg, "mine", "mine-1", map[string]any{"assignedUsers": []string{"alice"}}); err != nil {
		t.Fatal(err)
	}
	for _, pool := range []string{"cold", "mine"} {
		if _, err := admin.StopSessionHost(bg, pool, pool+"-1", false); err != nil {
			t.Fatal(err)
		}
	}

	signIn := func(ctx context.Context, subject string) *vdibroker.TokenResponse {
		t.Helper()
		tr, err := admin.CreateToken(bg, vhttp.TokenRequest{Role: vdibroker.RoleUser, Subject: subject})
		if err != nil {
			t.Fatal(err)
		}
		step(t, ctx, subject+" signs in",
			chromedp.Navigate(base+"/portal/signin?lang=en"),
			chromedp.WaitVisible(chromedp.CSS("#token")),
			chromedp.SendKeys(chromedp.CSS("#token"), tr.Secret),
			chromedp.Click(chromedp.CSS("#signin-token")),
			chromedp.WaitVisible(chromedp.CSS("#who")),
		)
		return tr
	}
	// inLangs reads sel's text on the page at u in each language: the
	// English one must be want, the others in their own language and
	// naming name (set apart, R-U6).
	var ctx context.Context
	inLangs := func(what, u, sel, name, want string) map[string]string {
		t.Helper()
		got := map[string]string{}
		for _, lang := range portalLangs {
			sep := "?"
			if strings.Contains(u, "?") {
				sep = "&"
			}
			step(t, ctx, what+" in "+lang, chromedp.Navigate(u+sep+"lang="+lang), chromedp.WaitVisible(chromedp.CSS(sel)))
			if l, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.lang`)); err != nil || l != lang {
				t.Errorf("%s: the page is in %q, %v; want %s", what, l, err, lang)
			}
			got[lang] = text(t, ctx, sel)
			if lang != "en" && (got[lang] == "" || strings.Contains(got[lang], strings.SplitN(want, ".", 2)[0])) {
				t.Errorf("%s in %s: %q, the English words or none", what, lang, got[lang])
			}
			if name != "" && !strings.Contains(got[lang], "\u2068"+name+"\u2069") {
				t.Errorf("%s in %s: %q does not name %q", what, lang, got[lang], name)
			}
		}
		if !strings.HasPrefix(got["en"], want) {
			t.Errorf("%s: the page says %q; want %q", what, got["en"], want)
		}
		screenshot(t, ctx, "portal-answer-"+strings.ReplaceAll(what, " ", "-")+".png")
		return got
	}
	// open clicks Open on the tile of resource id (its page in English,
	// drawn before change, if any, runs) and returns the address of the
	// page it lands on once that says how it ended.
	open := func(id string, change func()) string {
		t.Helper()
		step(t, ctx, "alice's page", chromedp.Navigate(base+"/portal/?lang=en"),
			chromedp.WaitVisible(chromedp.CSS(`li.resource[data-id="`+id+`"] button.open`)))
		if change != nil {
			change()
		}
		step(t, ctx, "open "+id,
			chromedp.Click(chromedp.CSS(`li.resource[data-id="`+id+`"] button.open`)),
			chromedp.WaitVisible(chromedp.CSS(`#launch, #error-page`)),
			chromedp.Poll[chromedp.Void](`document.querySelector('#launch[data-state="failed"], #launch[data-state="ready"], #error-page') !== null`,
				chromedp.WithPollingTimeout(20*time.Second)),
		)
		u, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`))
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	launchAnswer := func(what, id, name, want string, change func()) map[string]string {
		t.Helper()
		u := open(id, change)
		if state, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.querySelector('#launch') || {dataset: {}}).dataset.state || 'no launch'`)); err != nil || state != "failed" {
			t.Fatalf("%s: the launch is %q, %v; want failed", what, state, err)
		}
		return inLangs(what, u, "#launch-message", name, want)
	}
	tryAgain := map[string]string{"de": "Versuchen Sie es", "pt": "Tente novamente", "ar": "حاول مرة أخرى", "en": "Try again"}

	// Carol, in a browser of her own.
	ctx = newBrowser(t)
	signIn(ctx, "carol")
	inLangs("entitled to nothing", base+"/portal/", "#no-resources", "", "No desktop or app is assigned to you yet. Ask your helpdesk for the ones you need.")

	ctx = newBrowser(t)
	alice := signIn(ctx, "alice")
	launchAnswer("a drained pool", "desktop:drain", "Drained desk",
		"No session host can take \u2068Drained desk\u2069 right now. Try again in a few minutes; if it keeps happening, tell your helpdesk. Reference for your helpdesk: ", nil)
	launchAnswer("a full pool", "desktop:full", "Full desk",
		"No session host can take \u2068Full desk\u2069 right now. Try again in a few minutes; if it keeps happening, tell your helpdesk. Reference for your helpdesk: ", nil)
	launchAnswer("a host starting", "desktop:cold", "Cold lab",
		"A session host for \u2068Cold lab\u2069 is still starting. Try again in 30 seconds. Reference for your helpdesk: ", nil)
	if h, err := admin.GetSessionHost(bg, "cold", "cold-1"); err != nil || h.PowerState != vdibroker.PowerStarting {
		t.Errorf("cold-1 after her Open: %+v, %v; want Starting", h, err)
	}

	// Her own desktop, stopped: started for her.
	launchAnswer("her desktop stopped, then starting", "desktop:mine", "My desk",
		"A session host for \u2068My desk\u2069 is still starting. Try again in 30 seconds. Reference for your helpdesk: ", nil)
	if h, err := admin.GetSessionHost(bg, "mine", "mine-1"); err != nil || h.PowerState != vdibroker.PowerStarting {
		t.Fatalf("mine-1 after her Open: %+v, %v; want Starting", h, err)
	}
	// Its agent says its machine shuts down, early in the start: it is
	// down in 90 s, and then her connect lands if it came back up.
	if _, err := admin.Heartbeat(bg, creds["mine-1"], &vdibroker.HeartbeatRequest{ShuttingDown: true}); err != nil {
		t.Fatal(err)
	}
	goingDown := func(what string) {
		t.Helper()
		got := launchAnswer(what, "desktop:mine", "My desk",
			"The computer of \u2068My desk\u2069 is restarting or shutting down. Try again in 30 seconds. If it does not come back, tell your helpdesk. Reference for your helpdesk: ", nil)
		for lang, want := range map[string]string{
			"de": "Der Computer von \u2068My desk\u2069 wird neu gestartet oder heruntergefahren. Versuchen Sie es in 30 Sekunden erneut. Ist er nicht bald wieder verfügbar, wenden Sie sich an Ihren Helpdesk.",
			"pt": "O computador de \u2068My desk\u2069 está a reiniciar ou a encerrar. Tente novamente dentro de 30 segundos. Se não voltar a ficar disponível, contacte o seu helpdesk.",
			"ar": "جارٍ إعادة تشغيل جهاز الكمبيوتر الخاص بـ \u2068My desk\u2069 أو إيقاف تشغيله. حاول مرة أخرى بعد ٣٠ ثانية. إذا لم يصبح متاحًا من جديد، فأبلغ مكتب الدعم.",
		} {
			if !strings.HasPrefix(got[lang], want) {
				t.Errorf("%s, in %s: %q; want %q", what, lang, got[lang], want)
			}
		}
	}
	goingDown("her desktop shutting down")
	// Late in the start instead (started 9 minutes ago): by the time it
	// is down, its start timed out, and no connect of hers starts it
	// again (R-A4); but a reboot says the same and is back by then: she
	// is told to try again (until it is down), not yet to ask her helpdesk.
	if _, _, err := m.Store.SetPowerState(bg, "mine", "mine-1", vdibroker.PowerStarting, time.Now().Add(-vdibroker.HostStartTimeout+time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Heartbeat(bg, creds["mine-1"], &vdibroker.HeartbeatRequest{ShuttingDown: true}); err != nil {
		t.Fatal(err)
	}
	goingDown("her desktop shutting down late in its start")
	// Started 11 minutes ago, and its agent said 10.5 minutes ago, longer
	// than the heartbeat timeout, that its machine shuts down: it did not
	// come back, its start timed out, and no connect of hers starts it
	// again.
	if _, _, err := m.Store.SetPowerState(bg, "mine", "mine-1", vdibroker.PowerStarting, time.Now().Add(-vdibroker.HostStartTimeout-time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Store.ApplyHeartbeat(bg, "mine", "mine-1", &vdibroker.HeartbeatRequest{ShuttingDown: true}, time.Now().Add(-vdibroker.HostStartTimeout-30*time.Second).UTC()); err != nil {
		t.Fatal(err)
	}
	got := launchAnswer("her desktop shut down for good", "desktop:mine", "My desk",
		"The computer of \u2068My desk\u2069 did not start or has shut down, and opening it again will not start it. Ask your helpdesk to start it for you. Reference for your helpdesk: ", nil)
	for lang, want := range map[string]string{
		"de": "Der Computer von \u2068My desk\u2069 ist nicht gestartet oder wurde heruntergefahren, und erneutes Öffnen startet ihn nicht. Bitten Sie Ihren Helpdesk, ihn für Sie zu starten.",
		"pt": "O computador de \u2068My desk\u2069 não chegou a iniciar ou foi encerrado, e abri-lo novamente não o inicia. Peça ao seu helpdesk que o inicie por si.",
		"ar": "جهاز الكمبيوتر الخاص بـ \u2068My desk\u2069 لم يبدأ أو تم إيقاف تشغيله، ولن يشغّله فتحه مرة أخرى. اطلب من مكتب الدعم تشغيله لك.",
	} {
		if !strings.HasPrefix(got[lang], want) {
			t.Errorf("her desktop shut down for good, in %s: %q; want %q", lang, got[lang], want)
		}
	}
	for lang, words := range tryAgain {
		if strings.Contains(got[lang], words) {
			t.Errorf("her desktop shut down for good, in %s: %q tells her to try again", lang, got[lang])
		}
	}
	if n := sim.Calls("start", "mine", "mine-1"); n != 1 {
		t.Errorf("mine-1 was started %d times, want once (her first Open)", n)
	}
	// Her helpdesk starts it again; it runs, and its agent then says
	// its machine goes down: restarted or shut down from within it.
	if _, err := admin.StartSessionHost(bg, "mine", "mine-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Heartbeat(bg, creds["mine-1"], &vdibroker.HeartbeatRequest{}); err != nil {
		t.Fatal(err)
	}
	if h, err := admin.GetSessionHost(bg, "mine", "mine-1"); err != nil || h.PowerState != vdibroker.PowerRunning {
		t.Fatalf("mine-1 started by an administrator and heard from: %+v, %v; want Running", h, err)
	}
	if _, err := admin.Heartbeat(bg, creds["mine-1"], &vdibroker.HeartbeatRequest{ShuttingDown: true}); err != nil {
		t.Fatal(err)
	}
	goingDown("her desktop restarting")

	// Deleted, or removed, since her page was drawn; her sign-in ended
	// (past her write budget is portal/budget_test.go's, on an injected
	// clock: here one write comes back every 2 s of the real clock). Each is the answer to her form (not a
	// page to load again), so her page is drawn in each language and
	// the form posted from it, as her stale page would post it.
	// prepare runs before her page in lang is drawn, change after.
	formAnswers := func(what, id, want string, prepare, change func(lang string)) {
		t.Helper()
		got := map[string]string{}
		for _, lang := range portalLangs {
			if prepare != nil {
				prepare(lang)
			}
			step(t, ctx, what+": her page in "+lang, chromedp.Navigate(base+"/portal/?lang="+lang),
				chromedp.WaitVisible(chromedp.CSS(`form[action="/portal/launch"]`)))
			change(lang)
			// The form of a tile of her page, naming what she opened
			// when her page was drawn.
			if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
				const f = document.querySelector('form[action="/portal/launch"]');
				f.elements.resource.value = `+"`"+id+"`"+`;
				f.submit();
				return true;
			})()`)); err != nil {
				t.Fatal(err)
			}
			step(t, ctx, what+" in "+lang, chromedp.WaitVisible(chromedp.CSS("#error-page")))
			if l, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.lang`)); err != nil || l != lang {
				t.Errorf("%s: the page is in %q, %v; want %s", what, l, err, lang)
			}
			got[lang] = text(t, ctx, "#error")
			if lang != "en" && (got[lang] == "" || strings.Contains(got[lang], strings.SplitN(want, ".", 2)[0])) {
				t.Errorf("%s in %s: %q, the English words or none", what, lang, got[lang])
			}
			screenshot(t, ctx, "portal-answer-"+strings.ReplaceAll(what, " ", "-")+"-"+lang+".png")
		}
		if !strings.HasPrefix(got["en"], want) {
			t.Errorf("%s: the page says %q; want %q", what, got["en"], want)
		}
	}
	once := func(f func()) func(string) {
		done := false
		return func(string) {
			if !done {
				done = true
				f()
			}
		}
	}
	formAnswers("a pool deleted", "desktop:gone", "That is not, or no longer, one of your desktops or apps. Reference for your helpdesk: ", nil, once(func() {
		if _, err := admin.DeleteHostPool(bg, "gone", true); err != nil {
			t.Fatal(err)
		}
	}))
	formAnswers("an app removed", "app:apps-ra/notepad", "That is not, or no longer, one of your desktops or apps. Reference for your helpdesk: ", nil, once(func() {
		if err := admin.DeleteApplication(bg, "apps-ra", "notepad"); err != nil {
			t.Fatal(err)
		}
	}))

	// Her sign-in ended while her page was open (its token revoked): a
	// new sign-in for each language, ended after her page is drawn.
	signedIn := alice
	formAnswers("her sign-in ended", "desktop:full", "Your sign-in has expired. Sign in again.", func(lang string) {
		if lang != portalLangs[0] {
			signedIn = signIn(ctx, "alice")
		}
	}, func(string) {
		if err := admin.DeleteToken(bg, signedIn.ID); err != nil {
			t.Fatal(err)
		}
	})
	if link, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('back').getAttribute('href')`)); err != nil || !strings.HasPrefix(link, "/portal/signin") {
		t.Errorf("her sign-in ended: the page's link is %q, %v; want the sign-in page", link, err)
	}
}
