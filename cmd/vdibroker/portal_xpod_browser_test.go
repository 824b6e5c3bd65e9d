//go:build linux

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// xpod is one pod of the browser test's federation: a broker on
// 127.0.0.1 with a pool desk of one host, desk-<pod>, heartbeating.
type xpod struct {
	m     *Main
	admin *vhttp.Client
	host  string
	cred  string
}

func startXPod(t *testing.T, name, secretFile string) *xpod {
	t.Helper()
	m := &Main{Listen: "127.0.0.1:0", DataDir: t.TempDir(),
		// The peers are on loopback, over http (not allowed by default).
		Federation: FederationFlags{PodName: name, SecretFile: secretFile, PodTimeout: 5 * time.Second, Allow: []string{"http://127.0.0.1"}}}
	if err := m.Open(t.Context()); err != nil {
		t.Fatalf("start pod %s: %v", name, err)
	}
	t.Cleanup(func() { m.Close() })
	p := &xpod{m: m, admin: vhttp.NewClient(m.URL(), m.AdminToken), host: "desk-" + name}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := p.admin.PutHostPool(ctx, "desk", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	rt, err := p.admin.CreateRegistrationToken(ctx, "desk", vhttp.RegistrationTokenRequest{ExpiresInSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := p.admin.Register(ctx, &vdibroker.RegisterRequest{Token: rt.Token, HostName: p.host, Address: "127.0.0.1:3389"})
	if err != nil {
		t.Fatal(err)
	}
	p.cred = reg.Credential
	p.heartbeat(t)
	return p
}

// heartbeat is the pod's host's agent reporting sessions; it returns the
// commands the broker answers with.
func (p *xpod) heartbeat(t *testing.T, sessions ...vdibroker.AgentSession) []vdibroker.Command {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := p.admin.Heartbeat(ctx, p.cred, &vdibroker.HeartbeatRequest{Sessions: sessions})
	if err != nil {
		t.Fatalf("heartbeat %s: %v", p.host, err)
	}
	return res.Commands
}

// TestPortalOtherPodLogoffBrowser_RU3 (R-U1, R-U3, R-G1): two pods of a
// federation, a global desktop entitlement of alice's with a member pool
// on each; her session is on pod B, Active by its host's heartbeat. In
// headless Chromium she signs in to pod A's portal with a User token made
// on A, sees the session (unmarked: pod B is of her pod's site) in My
// sessions and clicks its
// Log off: the page comes back saying the session is being logged off
// (as of one of pod A's; not "at the other site", which pod B is not),
// and pod B's host's next heartbeat is answered with
// the Logoff of that session.
func TestPortalOtherPodLogoffBrowser_RU3(t *testing.T) {
	ctx := newBrowser(t)
	a, b, api := startXPodPair(t, vdibroker.DistributionSessionCount)
	// Her session on pod B, Active by its host's heartbeat.
	mine, err := b.admin.Connect(api, "desk", vhttp.ConnectRequest{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	active := vdibroker.AgentSession{ID: "5", User: "alice", State: vdibroker.StateActive}
	if cmds := b.heartbeat(t, active); len(cmds) != 0 {
		t.Fatalf("pod B's host before the logoff got %+v", cmds)
	}
	tr, err := a.admin.CreateToken(api, vhttp.TokenRequest{Role: vdibroker.RoleUser, Subject: "alice"})
	if err != nil {
		t.Fatal(err)
	}

	errs := watchConsole(t, ctx)
	row := `tr[data-session="` + mine.SessionID + `"][data-pod="podb"]`
	step(t, ctx, "alice signs in to pod A's portal with her token",
		chromedp.Navigate(a.m.URL()+"/portal/signin?lang=en"),
		chromedp.SendKeys(chromedp.CSS("#token"), tr.Secret),
		chromedp.Click(chromedp.CSS("#signin-token")),
		chromedp.WaitVisible(chromedp.CSS(row+" button.logoff")),
	)
	if at := text(t, ctx, row+" td.name"); at != "Anywhere" {
		t.Errorf("her session on pod B reads %q, want Anywhere alone (pod B is of pod A's site: no \"At another site\")", at)
	}
	if host := text(t, ctx, row+" td.host"); host != b.host {
		t.Errorf("her session on pod B shows the host %q, want %s", host, b.host)
	}
	screenshot(t, ctx, "portal-other-pod-session.png")
	errs.check(t, "pod A's portal")

	// Log off asks first (R-U3), in the page's dialog; she is sure.
	step(t, ctx, "alice clicks Log off on her session on pod B",
		chromedp.Click(chromedp.CSS(row+" button.logoff")),
		chromedp.WaitVisible(chromedp.CSS("#logoff-dialog[open] #logoff-yes")),
	)
	if msg := text(t, ctx, "#logoff-question"); !strings.Contains(msg, "Log off \u2068Anywhere\u2069?") {
		t.Errorf("Log off asked %q, want it to name the session", msg)
	}
	step(t, ctx, "alice logs off her session on pod B",
		chromedp.Click(chromedp.CSS("#logoff-yes")),
		chromedp.WaitVisible(chromedp.CSS("#flash")),
	)
	if flash := text(t, ctx, "#flash"); flash != "The session is being logged off. It leaves this list once its host has done so." {
		t.Errorf("the page after the logoff says %q", flash)
	}
	screenshot(t, ctx, "portal-other-pod-logoff.png")
	errs.check(t, "the page after the logoff")
	var got []string
	for _, c := range b.heartbeat(t, active) {
		if c.SessionID == mine.SessionID {
			got = append(got, c.Type)
		}
	}
	if len(got) != 1 || got[0] != vdibroker.CommandLogoff {
		t.Errorf("pod B's host's next heartbeat for her session: %v, want %s", got, vdibroker.CommandLogoff)
	}
	if state := text(t, ctx, row+" td.state"); state != "Logging off" {
		t.Errorf("her session on pod B after her logoff reads %q, want Logging off", state)
	}
	// Pod B stops answering: her page's refresh cannot read its sessions,
	// and her session, which it no longer lists, is not said to be
	// logged off (it may well be there still); the page goes on asking.
	b.m.Close()
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	_, err = chromedp.Run(wctx, chromedp.Poll[bool](`!!document.getElementById('sessions-unread')`, chromedp.WithPollingInterval(50*time.Millisecond)))
	cancel()
	if err != nil {
		t.Fatalf("her page with pod B gone does not say some sessions could not be read: %v", err)
	}
	if got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('sessions-status').textContent + '|' + location.search`)); err != nil || got != "|?off="+mine.SessionID {
		t.Errorf("her page with pod B gone: status and address %q (%v), want no status and the refresh going on", got, err)
	}
}

// TestPortalOtherPodReconnectBrowser_RU3_RG1 (R-U3, R-G1, R-C1): alice
// has a Disconnected session in each member pool of her global desktop,
// on pod A and on pod B. Opening the desktop at pod A reconnects the
// first found (pod A's, R-G1); in headless Chromium she clicks Reconnect
// on pod B's row of My sessions at pod A's portal, and the launch
// reaches pod B's session: its id in pod A's audit entry of the launch,
// and no new session anywhere.
func TestPortalOtherPodReconnectBrowser_RU3_RG1(t *testing.T) {
	ctx := newBrowser(t)
	a, b, api := startXPodPair(t, vdibroker.DistributionNone)
	ids := map[*xpod]string{}
	for _, p := range []*xpod{a, b} {
		s, err := p.admin.Connect(api, "desk", vhttp.ConnectRequest{User: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		p.heartbeat(t, vdibroker.AgentSession{ID: "5", User: "alice", State: vdibroker.StateDisconnected})
		ids[p] = s.SessionID
	}
	tr, err := a.admin.CreateToken(api, vhttp.TokenRequest{Role: vdibroker.RoleUser, Subject: "alice"})
	if err != nil {
		t.Fatal(err)
	}

	errs := watchConsole(t, ctx)
	row := `tr[data-session="` + ids[b] + `"][data-pod="podb"]`
	step(t, ctx, "alice signs in to pod A's portal with her token",
		chromedp.Navigate(a.m.URL()+"/portal/signin?lang=en"),
		chromedp.SendKeys(chromedp.CSS("#token"), tr.Secret),
		chromedp.Click(chromedp.CSS("#signin-token")),
		chromedp.WaitVisible(chromedp.CSS(row+" button.reconnect")),
	)
	errs.check(t, "pod A's portal")
	step(t, ctx, "alice reconnects her session on pod B",
		chromedp.Click(chromedp.CSS(row+" button.reconnect")),
		chromedp.WaitVisible(chromedp.CSS(`#launch[data-state="ready"]`)),
	)
	screenshot(t, ctx, "portal-other-pod-reconnect.png")
	list, err := a.admin.ListAudit(api, vhttp.AuditQuery{Action: "portal.launch"})
	if err != nil || len(list) != 1 {
		t.Fatalf("pod A's audit of the launch: %v %v", list, err)
	}
	var after struct {
		SessionID string `json:"sessionId"`
	}
	json.Unmarshal(list[0].After, &after)
	if after.SessionID != ids[b] {
		t.Errorf("the Reconnect of pod B's row reached session %s, want pod B's %s (pod A's is %s)", after.SessionID, ids[b], ids[a])
	}
	for _, p := range []*xpod{a, b} {
		if got, err := p.admin.UserSessions(api, "alice"); err != nil || len(got) != 1 || got[0].ID != ids[p] {
			t.Errorf("alice's sessions on %s after the reconnect: %v %v; want %s alone", p.m.URL(), got, err, ids[p])
		}
	}
}

// startXPodPair starts pod A and pod B of one site (startXPod), each with
// its own admin token, and puts on both a federation document whose
// global desktop "Anywhere" grants alice the pool "desk" of each, its
// sessions distributed by distribution; api bounds the test's API calls.
func startXPodPair(t *testing.T, distribution string) (a, b *xpod, api context.Context) {
	t.Helper()
	return startXPodPairWith(t, func(doc *vdibroker.Federation) { doc.GlobalEntitlements[0].SessionDistribution = distribution })
}

// startXPodPairWith is startXPodPair with its document as edit leaves it
// (pod B on another site, another scope).
func startXPodPairWith(t *testing.T, edit func(doc *vdibroker.Federation)) (a, b *xpod, api context.Context) {
	t.Helper()
	t.Setenv("VDIBROKER_ADMIN_TOKEN", "") // each pod its own admin token
	secretFile := filepath.Join(t.TempDir(), "federation.secret")
	if err := os.WriteFile(secretFile, []byte("xpod-browser-federation-secret-0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, b = startXPod(t, "poda", secretFile), startXPod(t, "podb", secretFile)
	api, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	doc := &vdibroker.Federation{Generation: 1, Sites: []vdibroker.Site{{Name: "s0"}},
		Pods: []vdibroker.Pod{{Name: "poda", Site: "s0", URL: a.m.URL()}, {Name: "podb", Site: "s0", URL: b.m.URL()}},
		GlobalEntitlements: []vdibroker.GlobalEntitlement{{Name: "Anywhere", Scope: vdibroker.ScopeAllSites,
			Users:   []string{"alice"},
			Members: []vdibroker.Member{{Pod: "poda", HostPool: "desk"}, {Pod: "podb", HostPool: "desk"}}}}}
	edit(doc)
	for _, p := range []*xpod{a, b} {
		if _, err := p.admin.PutFederation(api, doc); err != nil {
			t.Fatalf("federation document on %s: %v", p.m.URL(), err)
		}
	}
	return a, b, api
}

// TestPortalSessionNotesBrowser_RU3 (R-U3, R-U1, R-U6, R-G1): pod A of
// site s0 and pod B of site s1; alice's global desktop "Anywhere",
// within the pod, has a member pool on each. Her Disconnected session
// on pod B is on pod A's page marked "At another site" and, as
// Anywhere opened at pod A looks in pod A alone, without Reconnect,
// saying it cannot be reconnected from here. In headless Chromium, in
// German, Tab goes from the top of the page to her row's Log off
// without stopping on either note (they are text, not controls: no
// extra stop on every such row), and Log off is announced with her
// session's name and described by both notes, so a keyboard user hears
// why Reconnect is missing and where the session is; a screen reader
// reading the page reads each note once, as text (not hidden). While
// her page refreshes its list (a session of hers on pod A marked as
// being logged off), her focus on that Log off stays on it.
func TestPortalSessionNotesBrowser_RU3(t *testing.T) {
	ctx := newBrowser(t)
	a, b, api := startXPodPairWith(t, func(doc *vdibroker.Federation) {
		doc.Sites = append(doc.Sites, vdibroker.Site{Name: "s1"})
		doc.Pods[1].Site = "s1"
		doc.GlobalEntitlements[0].Scope = vdibroker.ScopeWithinPod
		doc.GlobalEntitlements[0].SessionDistribution = vdibroker.DistributionNone
	})
	ids := map[*xpod]string{}
	for p, state := range map[*xpod]string{a: vdibroker.StateActive, b: vdibroker.StateDisconnected} {
		s, err := p.admin.Connect(api, "desk", vhttp.ConnectRequest{User: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		p.heartbeat(t, vdibroker.AgentSession{ID: "5", User: "alice", State: state})
		ids[p] = s.SessionID
	}
	tr, err := a.admin.CreateToken(api, vhttp.TokenRequest{Role: vdibroker.RoleUser, Subject: "alice"})
	if err != nil {
		t.Fatal(err)
	}

	errs := watchConsole(t, ctx)
	row := `tr[data-session="` + ids[b] + `"][data-pod="podb"]`
	step(t, ctx, "alice signs in to pod A's portal with her token",
		chromedp.Navigate(a.m.URL()+"/portal/signin?lang=de"),
		chromedp.SendKeys(chromedp.CSS("#token"), tr.Secret),
		chromedp.Click(chromedp.CSS("#signin-token")),
		chromedp.WaitVisible(chromedp.CSS(row+" button.logoff")),
	)
	const (
		noReconnect = "Kann von hier aus nicht wieder verbunden werden: Beim Öffnen hier würde eine neue Sitzung gestartet."
		elsewhere   = "An einem anderen Standort"
	)
	if got := text(t, ctx, row+" .noreconnect"); got != noReconnect {
		t.Errorf("her session on pod B says %q, want %q", got, noReconnect)
	}
	if got := text(t, ctx, row+" .elsewhere"); got != elsewhere {
		t.Errorf("her session on pod B is marked %q, want %q", got, elsewhere)
	}
	if n := count(t, ctx, `document.querySelectorAll('`+row+` button.reconnect').length`); n != 0 {
		t.Errorf("her session on pod B has %d Reconnect buttons, want none", n)
	}
	screenshot(t, ctx, "portal-session-notes.png")
	// From the top of the page, Tab reaches her row's Log off (as far
	// as 40 stops: every link and button before it), stopping on
	// neither note on the way.
	logoff := row + " button.logoff"
	step(t, ctx, "her page again, the focus at its top", chromedp.Navigate(a.m.URL()+"/portal/"), chromedp.WaitVisible(chromedp.CSS(row+" .noreconnect")))
	for _, st := range tabTo(t, ctx, logoff, "her session on pod B's Log off", 40) {
		if strings.HasPrefix(st, "noreconnect-") || strings.HasPrefix(st, "elsewhere-") {
			t.Errorf("Tab stopped on the note %s on its way to her row's Log off", st)
		}
	}
	checkFocused(t, ctx, "her session on pod B's Log off", "button", "Sitzung abmelden Anywhere", noReconnect+" "+elsewhere)
	checkReadOnce(t, ctx, row+" .noreconnect", "the note that her session on pod B cannot be reconnected", noReconnect)
	checkReadOnce(t, ctx, row+" .elsewhere", "the mark of her session at another site", elsewhere)
	errs.check(t, "pod A's portal")

	// Her page refreshing its list (her session on pod A marked as being
	// logged off), the focus on her row's Log off stays on it.
	step(t, ctx, "her page refreshing its list", chromedp.Navigate(a.m.URL()+"/portal/?off="+ids[a]),
		chromedp.WaitVisible(chromedp.CSS(`#sessions[data-refresh] tr[data-session="`+ids[a]+`"][data-logging-off]`)))
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById('sessions').dataset.old = 1; document.querySelector('`+logoff+`').focus(); true`)); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	_, err = chromedp.Run(wctx, chromedp.Poll[bool](`!document.querySelector('#sessions[data-old]')`, chromedp.WithPollingInterval(50*time.Millisecond)))
	cancel()
	if err != nil {
		t.Fatalf("her page did not refresh its list: %v", err)
	}
	if got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.activeElement.matches('`+logoff+`') ? '' : document.activeElement.outerHTML.slice(0, 200)`)); err != nil || got != "" {
		t.Errorf("after her list's refresh the focus is on %q (%v), want her session on pod B's Log off", got, err)
	}
	errs.check(t, "pod A's portal refreshing its list")
}
