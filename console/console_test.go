package console_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/console"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/webguard/webguardtest"
	"github.com/vdibroker/vdibroker/placement"
)

func TestSignInRequired(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	a := b.get("/pools/pool-a")
	wantStatus(t, a, http.StatusSeeOther)
	if want := "/signin?next=%2Fpools%2Fpool-a"; a.location != want {
		t.Errorf("redirect to %q, want %q", a.location, want)
	}
	a = b.get("/signin")
	wantStatus(t, a, http.StatusOK)
	wantContains(t, a, `name="token"`, `type="password"`)
}

func TestSignIn(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name       string
		token      string
		csrf       bool
		wantStatus int
		wantText   string
	}{
		{"admin token", adminToken, true, http.StatusSeeOther, ""},
		{"wrong token R-SEC", "not-a-token", true, http.StatusUnauthorized, "not accepted"},
		{"empty token", "", true, http.StatusBadRequest, "Enter an API token"},
		{"no sign-in CSRF token", adminToken, false, http.StatusForbidden, "CSRF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := e.browser()
			form := url.Values{"token": {tt.token}}
			if tt.csrf {
				form.Set("csrf", b.csrf("/signin"))
			}
			a := b.post("/signin", form)
			wantStatus(t, a, tt.wantStatus)
			wantContains(t, a, tt.wantText)
			if tt.wantStatus != http.StatusSeeOther {
				// Still signed out.
				wantStatus(t, b.get("/"), http.StatusSeeOther)
			}
		})
	}
}

// TestSessionCookieFlags (R-SEC): the session cookie is HttpOnly, on the
// whole site, SameSite=Lax (it must come along on the identity
// provider's redirect back, a navigation that began on another site;
// changes are guarded by the CSRF token and the Origin check, "cross-site
// origin refusal" in TestDrain), holds no token, and is Secure behind a
// TLS-terminating proxy (SecureCookies) though the request came over
// plain HTTP.
func TestSessionCookieFlags(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	a := b.post("/signin", url.Values{"csrf": {b.csrf("/signin")}, "token": {adminToken}})
	wantStatus(t, a, http.StatusSeeOther)
	var ck string
	for _, c := range a.header.Values("Set-Cookie") {
		if strings.HasPrefix(c, "vdibroker_session=") {
			ck = c
		}
	}
	for _, want := range []string{"HttpOnly", "SameSite=Lax", "Path=/"} {
		if !strings.Contains(ck, want) {
			t.Errorf("session cookie %q lacks %s", ck, want)
		}
	}
	if strings.Contains(ck, "Secure") {
		t.Errorf("session cookie %q is Secure over plain HTTP without SecureCookies", ck)
	}
	if strings.Contains(ck, adminToken) {
		t.Error("session cookie carries the API token")
	}
	csp := b.get("/").header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("Content-Security-Policy = %q", csp)
	}

}

// TestHostPrefixBehindTLS (R-SEC, web sessions): behind a TLS-terminating
// proxy (SecureCookies; the browser speaks HTTPS to the proxy, which
// forwards plain HTTP) the sign-in form's cookie and the session cookie
// are __Host-vdibroker_signin and __Host-vdibroker_session: Secure,
// Path=/, no Domain, so a sibling subdomain can neither plant nor shadow
// them. The sign-in goes through with them; a session cookie of the
// plain name, as a sibling could plant (its own session, to sign the
// browser in as itself), is no sign-in; nor is a sign-in form's token
// planted under the plain name.
func TestHostPrefixBehindTLS(t *testing.T) {
	e := newEnvWith(t, func(c *console.Config) { c.SecureCookies = true })
	// Go's cookie jar sends Secure cookies to https only: the proxy's
	// browser is played by hand.
	send := func(method, path string, form url.Values, cks ...*http.Cookie) *http.Response {
		t.Helper()
		return webguardtest.Send(t, e.url, method, path, form, cks...)
	}
	cookie := func(res *http.Response, name string) *http.Cookie {
		t.Helper()
		return webguardtest.HostCookie(t, res, name)
	}
	signinForm := func() (*http.Cookie, url.Values) {
		t.Helper()
		form := send("GET", "/signin", nil)
		ck := cookie(form, "__Host-vdibroker_signin")
		if ck.SameSite != http.SameSiteStrictMode {
			t.Errorf("sign-in form cookie %+v: want SameSite=Strict", ck)
		}
		return ck, url.Values{"csrf": {ck.Value}, "token": {adminToken}, "next": {"/"}}
	}

	// The sign-in form's token planted under the plain name is refused.
	ck, form := signinForm()
	if res := send("POST", "/signin", form, &http.Cookie{Name: "vdibroker_signin", Value: ck.Value}); res.StatusCode != http.StatusForbidden {
		t.Errorf("a sign-in form token under the plain name: %d, want 403", res.StatusCode)
	}
	ck, form = signinForm()
	res := send("POST", "/signin", form, ck)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in behind the proxy: %d, want 303", res.StatusCode)
	}
	sess := cookie(res, "__Host-vdibroker_session")
	if sess.SameSite != http.SameSiteLaxMode {
		t.Errorf("session cookie %+v: want SameSite=Lax", sess)
	}
	if res := send("GET", "/", nil, sess); res.StatusCode != http.StatusOK {
		t.Errorf("the overview with the session cookie: %d, want 200", res.StatusCode)
	}
	planted := &http.Cookie{Name: "vdibroker_session", Value: sess.Value}
	if res := send("GET", "/", nil, planted); res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/signin") {
		t.Errorf("a session cookie under the plain name: %d %s, want the sign-in page", res.StatusCode, res.Header.Get("Location"))
	}
}

// TestSignOut (R-SEC): signing out needs the CSRF token, ends the
// sign-in, and is recorded in the audit trail as the principal's
// "signout" (a helpdesk tells it from an expiry).
func TestSignOut(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	reader := e.token(vdibroker.RoleReader)
	b.signin(reader)
	wantStatus(t, b.get("/"), http.StatusOK)
	// Without the CSRF token sign-out is refused too.
	wantStatus(t, b.post("/signout", url.Values{}), http.StatusForbidden)
	a := b.post("/signout", url.Values{"csrf": {b.csrf("/")}})
	wantStatus(t, a, http.StatusSeeOther)
	wantStatus(t, b.get("/"), http.StatusSeeOther)
	list, err := e.admin.ListAudit(context.Background(), vhttp.AuditQuery{Action: "signout"})
	if err != nil || len(list) != 1 || list[0].Principal.Kind != vdibroker.PrincipalToken {
		t.Errorf("the sign-out's audit entries: %+v, %v; want the Reader's one", list, err)
	}
}

// TestSignOutWhileTheStoreFails (R-SEC, web sessions): a sign-out the
// database does not record is answered 503 saying the user is still
// signed in, with the sign-out button to try again, and the cookie is
// kept; the session still works, and the next sign-out ends it.
// Answering "signed out" would leave the session good for hours to a
// copy of the cookie stolen before.
func TestSignOutWhileTheStoreFails(t *testing.T) {
	f := &webguardtest.FailingDeletes{}
	e := newEnvWith(t, func(c *console.Config) { f.WebSessionStore = c.Sessions; c.Sessions = f })
	b := e.browser()
	b.signin(adminToken)
	f.Down.Store(true)
	a := b.post("/signout", url.Values{"csrf": {b.csrf("/")}})
	wantStatus(t, a, http.StatusServiceUnavailable)
	wantContains(t, a, "You are still signed in", `action="/signout"`)
	if cs := a.header.Values("Set-Cookie"); len(cs) != 0 {
		t.Errorf("a sign-out the database did not record set %q", cs)
	}
	f.Down.Store(false)
	wantStatus(t, b.get("/"), http.StatusOK)
	wantStatus(t, b.post("/signout", url.Values{"csrf": {b.csrf("/")}}), http.StatusSeeOther)
	wantStatus(t, b.get("/"), http.StatusSeeOther)
}

func TestOverviewPage(t *testing.T) {
	e := newEnv(t)
	e.seed("alice", "bob", "carol")
	b := e.browser()
	b.signin(adminToken)
	a := b.get("/")
	wantStatus(t, a, http.StatusOK)
	// 3 sessions on 3 available hosts with limit 4: used capacity
	// 3 / (4 × 3) = 25% (R-A1).
	wantContains(t, a, "pool-a", "DepthFirst", "Pooled", ">4<", "3 / 3", ">3<", "25%",
		`aria-label="Sessions over the last hour"`)
}

func TestPoolPage(t *testing.T) {
	e := newEnv(t)
	e.seed("alice", "bob")
	b := e.browser()
	b.signin(e.token(vdibroker.RoleReader))
	a := b.get("/pools/pool-a")
	wantStatus(t, a, http.StatusOK)
	wantContains(t, a,
		`data-host="host-1"`, `data-host="host-2"`, `data-host="host-3"`,
		"Available", "42%", "61%", // CPU and memory of the last sample
		`aria-label="Sessions per host against the limit"`,
		"maxSessionLimit 4", `name="maxSessionLimit" value="4"`,
		// Every host name links to its page.
		`href="/pools/pool-a/hosts/host-1"`)
	// pool-a is DepthFirst: no load index setting is shown (only LoadIndex
	// placement reads them).
	if strings.Contains(a.body, `name="loadBalancing.loadIndexThreshold"`) || strings.Contains(a.body, `name="loadBalancing.cpuThreshold"`) {
		t.Error("a DepthFirst pool's settings show load index fields")
	}
	// DepthFirst put both sessions on host-1 (R-DF2).
	wantContains(t, a, "<title>host-1: 2 sessions, 2 connecting</title>", ">2 / 4</text>", ">0 / 4</text>")
	wantStatus(t, b.get("/pools/no-such-pool"), http.StatusNotFound)
}

func TestDrain(t *testing.T) {
	e := newEnv(t)
	e.seed()
	ctx := context.Background()
	allow := func() bool {
		h, err := e.admin.GetSessionHost(ctx, "pool-a", "host-2")
		if err != nil {
			t.Fatal(err)
		}
		return h.AllowNewSession
	}

	b := e.browser()
	b.signin(adminToken)
	csrf := b.csrf("/pools/pool-a")

	t.Run("CSRF refusal", func(t *testing.T) {
		a := b.post("/pools/pool-a/hosts/host-2/drain", url.Values{"drain": {"true"}, "csrf": {"forged"}})
		wantStatus(t, a, http.StatusForbidden)
		if !allow() {
			t.Fatal("host drained by a request without the CSRF token")
		}
	})
	t.Run("cross-site origin refusal", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, e.url+"/pools/pool-a/hosts/host-2/drain",
			strings.NewReader(url.Values{"drain": {"true"}, "csrf": {csrf}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "https://evil.example")
		resp, err := b.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !allow() {
			t.Fatalf("cross-site post: HTTP %d, host allow=%v", resp.StatusCode, allow())
		}
	})
	t.Run("Reader refusal R-SEC", func(t *testing.T) {
		rb := e.browser()
		rb.signin(e.token(vdibroker.RoleReader))
		a := rb.post("/pools/pool-a/hosts/host-2/drain", url.Values{"drain": {"true"}, "csrf": {rb.csrf("/pools/pool-a")}})
		wantStatus(t, a, http.StatusForbidden)
		wantContains(t, a, "Refused by the broker", `data-host="host-2"`)
		if !allow() {
			t.Fatal("Reader drained a host")
		}
	})
	t.Run("drain and resume", func(t *testing.T) {
		a := b.post("/pools/pool-a/hosts/host-2/drain", url.Values{"drain": {"true"}, "csrf": {csrf}})
		wantStatus(t, a, http.StatusSeeOther)
		if allow() {
			t.Fatal("host not drained")
		}
		page := b.get(a.location)
		wantContains(t, page, "host-2 is drained", `data-action="undrain" data-host="host-2"`)
		// The flash shows once.
		if strings.Contains(b.get(a.location).body, "host-2 is drained") {
			t.Error("flash message shown twice")
		}
		wantStatus(t, b.post("/pools/pool-a/hosts/host-2/drain", url.Values{"drain": {"false"}, "csrf": {csrf}}), http.StatusSeeOther)
		if !allow() {
			t.Fatal("host not resumed")
		}
	})
}

// TestPoolSettingsPersistentSharedHosts_RP1: the settings form changes a
// Personal pool from MultiplePersistent to Persistent (R-P1) and the flash
// after it carries the API's warning that a host keeps two users.
func TestPoolSettingsPersistentSharedHosts_RP1(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.admin.PutHostPool(ctx, "desks", map[string]any{"hostPoolType": "Personal", "loadBalancerType": "MultiplePersistent",
		"personalDesktopAssignmentType": "Direct"}); err != nil {
		t.Fatal(err)
	}
	rt, err := e.admin.CreateRegistrationToken(ctx, "desks", vhttp.RegistrationTokenRequest{ExpiresInSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.Register(ctx, &vdibroker.RegisterRequest{Token: rt.Token, HostName: "desk-1", Address: "desk-1.example:3389"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.PatchSessionHost(ctx, "desks", "desk-1", map[string]any{"assignedUsers": []string{"alice", "bob"}}); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.signin(adminToken)
	a := b.post("/pools/desks/settings", url.Values{"csrf": {b.csrf("/pools/desks")}, "loadBalancerType": {"Persistent"}})
	wantStatus(t, a, http.StatusSeeOther)
	if p, err := e.admin.GetHostPool(ctx, "desks"); err != nil || p.LoadBalancerType != "Persistent" {
		t.Fatalf("pool after the save: %v %+v", err, p)
	}
	wantContains(t, b.get(a.location), "Settings saved",
		"Warning: loadBalancerType Persistent gives each host one user, but 1 session host keeps more than one assigned user (desk-1): ")
}

func TestPoolSettings(t *testing.T) {
	e := newEnv(t)
	e.seed()
	ctx := context.Background()
	b := e.browser()
	b.signin(adminToken)

	// form returns the pool page's settings as posted values.
	form := func(b *browser, set map[string]string) url.Values {
		v := url.Values{"csrf": {b.csrf("/pools/pool-a")}, "loadBalancerType": {"DepthFirst"}, "loadBalancing.includeSessionCount": {"on"}}
		for _, f := range []string{"maxSessionLimit", "loadBalancing.loadIndexThreshold", "loadBalancing.connectingSessionThreshold",
			"loadBalancing.minServersInQueue", "loadBalancing.hostLoadIndexThreshold", "loadBalancing.hostConnectingSessionThreshold",
			"loadBalancing.sampleIntervalSeconds", "loadBalancing.cpuThreshold", "loadBalancing.memoryThreshold",
			"loadBalancing.diskQueueLengthThreshold", "loadBalancing.diskReadLatencyThreshold", "loadBalancing.diskWriteLatencyThreshold"} {
			v.Set(f, "0")
		}
		v.Set("maxSessionLimit", "4")
		v.Set("loadBalancing.loadIndexThreshold", "20")
		v.Set("loadBalancing.connectingSessionThreshold", "20")
		v.Set("loadBalancing.minServersInQueue", "4")
		v.Set("loadBalancing.sampleIntervalSeconds", "30")
		for k, x := range set {
			v.Set(k, x)
		}
		return v
	}
	limit := func() int {
		p, err := e.admin.GetHostPool(ctx, "pool-a")
		if err != nil {
			t.Fatal(err)
		}
		return p.MaxSessionLimit
	}

	t.Run("save R-P1", func(t *testing.T) {
		// The DepthFirst form has no load index field: a cpuThreshold
		// posted with it is not sent. Once the pool is LoadIndex, its form
		// has the field and saves it.
		a := b.post("/pools/pool-a/settings", form(b, map[string]string{"maxSessionLimit": "7", "loadBalancerType": "LoadIndex", "loadBalancing.cpuThreshold": "80"}))
		wantStatus(t, a, http.StatusSeeOther)
		if p, err := e.admin.GetHostPool(ctx, "pool-a"); err != nil || p.LoadBalancerType != "LoadIndex" || p.LoadBalancing.CPUThreshold != 0 {
			t.Fatalf("pool after the DepthFirst form's save: %v, type %s cpu %v", err, p.LoadBalancerType, p.LoadBalancing.CPUThreshold)
		}
		a = b.post("/pools/pool-a/settings", form(b, map[string]string{"maxSessionLimit": "7", "loadBalancerType": "LoadIndex", "loadBalancing.cpuThreshold": "80"}))
		wantStatus(t, a, http.StatusSeeOther)
		p, err := e.admin.GetHostPool(ctx, "pool-a")
		if err != nil {
			t.Fatal(err)
		}
		if p.MaxSessionLimit != 7 || p.LoadBalancerType != "LoadIndex" || p.LoadBalancing.CPUThreshold != 80 {
			t.Fatalf("pool after save: limit %d type %s cpu %v", p.MaxSessionLimit, p.LoadBalancerType, p.LoadBalancing.CPUThreshold)
		}
		wantContains(t, b.get(a.location), "Settings saved")
	})
	t.Run("server validation beside the field R-P4", func(t *testing.T) {
		a := b.post("/pools/pool-a/settings", form(b, map[string]string{"maxSessionLimit": "0"}))
		wantStatus(t, a, http.StatusBadRequest)
		wantContains(t, a, `class="field invalid"`, `id="e-maxSessionLimit"`, "maxSessionLimit", `value="0"`)
		if got := limit(); got != 7 {
			t.Fatalf("limit = %d after a refused save, want 7 (nothing changed)", got)
		}
		a = b.post("/pools/pool-a/settings", form(b, map[string]string{"loadBalancing.cpuThreshold": "150"}))
		wantStatus(t, a, http.StatusBadRequest)
		wantContains(t, a, `id="e-loadBalancing.cpuThreshold"`)
	})
	t.Run("not a number", func(t *testing.T) {
		a := b.post("/pools/pool-a/settings", form(b, map[string]string{"maxSessionLimit": "ten"}))
		wantStatus(t, a, http.StatusBadRequest)
		wantContains(t, a, "must be a whole number", `value="ten"`)
	})
	t.Run("CSRF refusal", func(t *testing.T) {
		f := form(b, map[string]string{"maxSessionLimit": "9"})
		f.Del("csrf")
		wantStatus(t, b.post("/pools/pool-a/settings", f), http.StatusForbidden)
		if got := limit(); got != 7 {
			t.Fatalf("limit = %d, want 7", got)
		}
	})
	t.Run("Reader refusal R-SEC", func(t *testing.T) {
		rb := e.browser()
		rb.signin(e.token(vdibroker.RoleReader))
		a := rb.post("/pools/pool-a/settings", form(rb, map[string]string{"maxSessionLimit": "9"}))
		wantStatus(t, a, http.StatusForbidden)
		wantContains(t, a, "Refused by the broker")
		if got := limit(); got != 7 {
			t.Fatalf("limit = %d, want 7", got)
		}
	})
}

func TestSessionsPage(t *testing.T) {
	e := newEnv(t)
	e.seed("alice", "bob")
	ctx := context.Background()
	// The agent reports alice: Pending -> Active (R-S2); bob stays Pending.
	e.heartbeat("host-1", []vdibroker.AgentSession{{ID: "7", User: "alice", State: vdibroker.StateActive}})
	ss, err := e.store.ListUserSessions(ctx, vdibroker.SessionFilter{HostPool: "pool-a", User: "alice"})
	if err != nil || len(ss) != 1 {
		t.Fatalf("alice's session: %v %v", ss, err)
	}
	alice := ss[0]

	b := e.browser()
	b.signin(adminToken)
	a := b.get("/sessions")
	wantStatus(t, a, http.StatusOK)
	wantContains(t, a, "alice", "bob", "host-1", `class="state active"`, `class="state pending"`,
		"/pools/pool-a/sessions/"+alice.ID+"/placement")
	wantContains(t, b.get("/sessions?pool=pool-a"), "alice")

	path := "/pools/pool-a/sessions/" + alice.ID
	t.Run("CSRF refusal", func(t *testing.T) {
		wantStatus(t, b.post(path+"/logoff", url.Values{"csrf": {"nope"}}), http.StatusForbidden)
	})
	t.Run("Reader refusal R-SEC", func(t *testing.T) {
		rb := e.browser()
		rb.signin(e.token(vdibroker.RoleReader))
		a := rb.post(path+"/disconnect", url.Values{"csrf": {rb.csrf("/sessions")}})
		wantStatus(t, a, http.StatusForbidden)
		wantContains(t, a, "Refused by the broker")
	})
	t.Run("refused action shows the form's page R-S4", func(t *testing.T) {
		// Disconnecting bob's Pending session is refused (409): the page
		// shown is the one the form was on, whose forms go back there,
		// not to the POST's address (a page that does not exist).
		bs, err := e.store.ListUserSessions(ctx, vdibroker.SessionFilter{HostPool: "pool-a", User: "bob"})
		if err != nil || len(bs) != 1 {
			t.Fatalf("bob's session: %v %v", bs, err)
		}
		bobPath := "/pools/pool-a/sessions/" + bs[0].ID
		a := b.post(bobPath+"/disconnect", url.Values{"csrf": {b.csrf("/sessions?pool=pool-a")}, "user": {"bob"}, "back": {"/sessions?pool=pool-a"}})
		wantStatus(t, a, http.StatusConflict)
		wantContains(t, a, `name="back" value="/sessions?pool=pool-a"`, "alice")
		if strings.Contains(a.body, `value="`+bobPath+`/disconnect"`) {
			t.Errorf("the refusal's page sends its forms back to the POST's address:\n%s", a.body)
		}
	})
	// Neither refusal queued a command: the next heartbeat brings none.
	if cmds := e.heartbeat("host-1", []vdibroker.AgentSession{{ID: "7", User: "alice", State: vdibroker.StateActive}}); len(cmds) != 0 {
		t.Fatalf("refused requests queued commands: %+v", cmds)
	}
	t.Run("disconnect and log off R-S4", func(t *testing.T) {
		csrf := b.csrf("/sessions")
		a := b.post(path+"/disconnect", url.Values{"csrf": {csrf}, "user": {"alice"}, "back": {"/sessions"}})
		wantStatus(t, a, http.StatusSeeOther)
		wantContains(t, b.get(a.location), "disconnect of alice")
		wantStatus(t, b.post(path+"/logoff", url.Values{"csrf": {csrf}}), http.StatusSeeOther)
		cmds := e.heartbeat("host-1", []vdibroker.AgentSession{{ID: "7", User: "alice", State: vdibroker.StateActive}})
		var types []string
		for _, c := range cmds {
			if c.SessionID == alice.ID {
				types = append(types, c.Type)
			}
		}
		if strings.Join(types, ",") != "Disconnect,Logoff" {
			t.Fatalf("commands for alice's session: %v, want Disconnect,Logoff", types)
		}
	})
}

func TestPlacementPage(t *testing.T) {
	e := newEnv(t)
	e.seed("alice")
	ctx := context.Background()
	// Drain host-1 so the record has an exclusion, then place bob.
	if _, err := e.admin.PatchSessionHost(ctx, "pool-a", "host-1", map[string]any{"allowNewSession": false}); err != nil {
		t.Fatal(err)
	}
	res, err := e.admin.Connect(ctx, "pool-a", connectReq("bob"))
	if err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.signin(e.token(vdibroker.RoleReader))
	a := b.get("/pools/pool-a/sessions/" + res.SessionID + "/placement")
	wantStatus(t, a, http.StatusOK)
	// R-C7: excluded host with its reason, the algorithm's rule, the winner.
	wantContains(t, a, ">"+res.SessionHost+"</a></h1>", "Depth-first (", `href="/rules#R-DF2"`, "host-1", "Drained",
		`href="/pools/pool-a/hosts/host-1"`, `<span class="tag chosen">chosen</span>`)
	// The words are placement's, the ones `vdibroker placement show`
	// prints: every sentence of the decision and every exclusion.
	rec, err := e.admin.Placement(ctx, "pool-a", res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	page := html.UnescapeString(a.body)
	if !strings.Contains(textOf(page), "Why bob landed on "+res.SessionHost) {
		t.Errorf("page lacks the title")
	}
	for _, want := range placement.Describe(rec) {
		if !strings.Contains(stripRuleLinks(page), "<li>"+want+"</li>") {
			t.Errorf("page lacks the decision sentence %q", want)
		}
	}
	for _, x := range rec.Excluded {
		if want := placement.ExclusionText(x); !strings.Contains(stripRuleLinks(page), want) {
			t.Errorf("page lacks the exclusion %q", want)
		}
	}
	wantStatus(t, b.get("/pools/pool-a/sessions/nope/placement"), http.StatusNotFound)
}

func TestUnknownPage(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	b.signin(adminToken)
	wantStatus(t, b.get("/no/such/page"), http.StatusNotFound)
	// The API keeps its JSON 404 under /api/v1.
	a := b.get("/api/v1/nothing")
	wantStatus(t, a, http.StatusNotFound)
	wantContains(t, a, `"error"`)
}

// TestStaticFiles: the console's files are served, a listing of their
// folder never (R-SEC).
func TestStaticFiles(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	for _, p := range []string{"/static/console.css", "/static/console.js", "/static/favicon.svg"} {
		wantStatus(t, b.get(p), http.StatusOK)
	}
	for _, p := range []string{"/static/", "/static/console.css/", "/static/nothing.css"} {
		a := b.get(p)
		wantStatus(t, a, http.StatusNotFound)
		if strings.Contains(a.body, `href="console.css"`) {
			t.Errorf("%s lists the folder:\n%s", p, a.body)
		}
	}
}

// TestPoolNameWithSpace: pool names may contain spaces (SPEC §2); links and
// form actions escape them and the drain still reaches the right host.
func TestPoolNameWithSpace(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.admin.PutHostPool(ctx, "Finance Pool", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.PutSessionHost(ctx, "Finance Pool", "fin-1", vhttp.SessionHostRequest{Address: vhttp.Ptr("fin-1:3389")}); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.signin(adminToken)
	wantContains(t, b.get("/"), `href="/pools/Finance%20Pool"`)
	a := b.get("/pools/Finance%20Pool")
	wantStatus(t, a, http.StatusOK)
	// Registered by PUT, never heard from: Unavailable (R-H1).
	wantContains(t, a, `action="/pools/Finance%20Pool/hosts/fin-1/drain"`, "Unavailable", "never")
	wantStatus(t, b.post("/pools/Finance%20Pool/hosts/fin-1/drain", url.Values{"drain": {"true"}, "csrf": {b.csrf("/")}}), http.StatusSeeOther)
	h, err := e.admin.GetSessionHost(ctx, "Finance Pool", "fin-1")
	if err != nil || h.AllowNewSession {
		t.Fatalf("fin-1 after drain: %+v, %v", h, err)
	}
}

func TestSessionExpires(t *testing.T) {
	now := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	e := newEnvWith(t, func(c *console.Config) { c.Now = clock; c.SessionTTL = time.Hour })
	b := e.browser()
	b.signin(adminToken)
	wantStatus(t, b.get("/"), http.StatusOK)
	mu.Lock()
	now = now.Add(time.Hour) // the TTL has passed
	mu.Unlock()
	a := b.get("/")
	wantStatus(t, a, http.StatusSeeOther)
	if !strings.HasPrefix(a.location, "/signin") {
		t.Errorf("expired session sent to %q, want the sign-in page", a.location)
	}
}

// TestControlsFollowTheRole_RSEC: a Reader's pages show no drain, settings
// or log-off controls (the API would refuse them, R-SEC) and say they are
// read-only; a Contributor's show them all; a Helpdesk's show the
// sessions' controls (log off, disconnect, message) and the audit trail,
// and nothing that changes a pool or host. Drained hosts still show as
// drained to the Reader.
func TestControlsFollowTheRole_RSEC(t *testing.T) {
	e := newEnv(t)
	e.seed("alice")
	drain := false
	if _, err := e.admin.PatchSessionHost(context.Background(), "pool-a", "host-3", vhttp.SessionHostRequest{AllowNewSession: &drain}); err != nil {
		t.Fatal(err)
	}
	e.heartbeat("host-1", []vdibroker.AgentSession{{ID: "7", User: "alice", State: vdibroker.StateActive}})
	controls := []string{`data-action="drain"`, `data-action="undrain"`, `id="save-settings"`}
	sessionControls := []string{`data-action="logoff"`, `data-action="disconnect"`, `data-action="message"`, `href="/audit"`}
	for _, c := range []struct {
		role                      string
		controls, sessionControls bool
	}{{vdibroker.RoleReader, false, false}, {vdibroker.RoleContributor, true, true}, {vdibroker.RoleHelpdesk, false, true}} {
		b := e.browser()
		b.signin(e.token(c.role))
		pages := b.get("/pools/pool-a").body + b.get("/sessions").body
		for _, ctl := range controls {
			if strings.Contains(pages, ctl) != c.controls {
				t.Errorf("%s: shows %s = %v, want %v", c.role, ctl, !c.controls, c.controls)
			}
		}
		for _, ctl := range sessionControls {
			if strings.Contains(pages, ctl) != c.sessionControls {
				t.Errorf("%s: shows %s = %v, want %v", c.role, ctl, !c.sessionControls, c.sessionControls)
			}
		}
		readOnly := strings.Contains(pages, `id="read-only"`) && strings.Contains(pages, `<fieldset class="plain" disabled>`)
		if readOnly == c.controls {
			t.Errorf("%s: settings read-only = %v, want %v", c.role, readOnly, !c.controls)
		}
		// A Helpdesk is not told it changes nothing beside its Log off.
		if c.sessionControls && strings.Contains(pages, "change nothing") {
			t.Errorf("%s: a page says the role changes nothing, and offers log off", c.role)
		}
		if !strings.Contains(pages, `<span class="tag drained">drained</span>`) {
			t.Errorf("%s: host-3 not shown as drained", c.role)
		}
	}
}

// TestOneSessionSingular: a pool and the overview with one session say
// "1 session", as the chart's bar does, not "1 sessions".
func TestOneSessionSingular(t *testing.T) {
	e := newEnv(t)
	e.seed("alice")
	b := e.browser()
	b.signin(adminToken)
	for _, path := range []string{"/", "/pools/pool-a"} {
		page := b.get(path)
		wantStatus(t, page, http.StatusOK)
		if text := textOf(page.body); !strings.Contains(text, "· 1 session") || strings.Contains(text, "1 sessions") {
			t.Errorf("%s with one session: %.400s", path, text)
		}
	}
	wantContains(t, b.get("/pools/pool-a"), "<title>host-1: 1 session, 1 connecting</title>")
}
