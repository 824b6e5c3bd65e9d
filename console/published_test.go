package console_test

import (
	"context"
	"html"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// pageText is a page's words: no tags, rule ids as text, entities read.
func pageText(a answer) string { return html.UnescapeString(textOf(stripRuleLinks(a.body))) }

// refresh is the live refresh console.js makes of the page every few
// seconds (X-Console-Refresh), which keeps only the page's live parts.
func (b *browser) refresh(path string) answer {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.base+path, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("X-Console-Refresh", "1")
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return answer{status: resp.StatusCode, body: sb.String()}
}

// TestPoolPagePublishedThroughGlobalEntitlement_RE9: on a pod, a pool
// that a global desktop entitlement names is opened by the users it
// entitles with no Desktop group of the pool (R-E9: the pods connect
// them on the entitlement's behalf), which the test first shows with a
// real User token: her connect to the pool is refused NotEntitled, her
// global connect is placed in it. So the card does not say end users
// cannot open the pool's desktops: it lists the entitlement and whom it
// entitles. Before the document names the pool, it warns.
func TestPoolPagePublishedThroughGlobalEntitlement_RE9(t *testing.T) {
	e := newPodEnv(t)
	ctx := context.Background()
	e.seed()
	b := e.browser()
	b.signin(e.token("Contributor"))

	a := b.get("/pools/pool-a")
	wantStatus(t, a, http.StatusOK)
	if page := pageText(a); !strings.Contains(page, "End users cannot open this pool's desktops: no Desktop application group publishes them, so they are in nobody's portal") {
		t.Errorf("a pod without a federation document does not warn that pool-a is published to nobody:\n%s", page)
	}

	doc := &vdibroker.Federation{Generation: 1, Sites: []vdibroker.Site{{Name: "emea"}},
		Pods: []vdibroker.Pod{{Name: "fra1", Site: "emea", URL: e.url}},
		GlobalEntitlements: []vdibroker.GlobalEntitlement{
			{Name: "office", Users: []string{"alice"}, Members: []vdibroker.Member{{Pod: "fra1", HostPool: "pool-a"}}},
			// Another pod's pool of the same name is not this one.
			{Name: "elsewhere", AllUsers: true, Members: []vdibroker.Member{{Pod: "nyc1", HostPool: "pool-a"}}},
		}}
	doc.Pods = append(doc.Pods, vdibroker.Pod{Name: "nyc1", Site: "emea", URL: "http://127.0.0.1:1"})
	if _, err := e.admin.PutFederation(ctx, doc); err != nil {
		t.Fatal(err)
	}
	ut, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: "User", Subject: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	alice := vhttp.NewClient(e.url, ut.Secret)
	if _, err := alice.Connect(ctx, "pool-a", connectReq("alice")); vdibroker.ErrorCode(err) != vdibroker.ENotEntitled {
		t.Fatalf("alice's connect to pool-a, which no group publishes: %v, want NotEntitled", err)
	}
	if res, err := alice.GlobalConnect(ctx, "office", vdibroker.GlobalConnectRequest{User: "alice"}); err != nil || res.Pod != "fra1" || res.HostPool != "pool-a" {
		t.Fatalf("alice's global connect through office: %+v, %v; want placed in fra1's pool-a", res, err)
	}

	a = b.get("/pools/pool-a")
	wantStatus(t, a, http.StatusOK)
	if strings.Contains(a.body, `id="published-warning"`) {
		t.Errorf("the card warns that end users cannot open pool-a, which global entitlement office opens to alice:\n%s", pageText(a))
	}
	wantContains(t, a, `data-global="office" data-kind="Desktop"`)
	if strings.Contains(a.body, `data-global="elsewhere"`) {
		t.Errorf("the card lists another pod's pool-a's global entitlement")
	}
	if page := pageText(a); !strings.Contains(page, "its desktops") || !strings.Contains(page, "1 user: alice") {
		t.Errorf("the card does not say what office opens and to whom:\n%s", page)
	}
}

// TestPoolPagePublishedScopedOnPod_RSEC: a Contributor scoped to pool-a
// may read its application groups, not the federation (a global view).
// Its pool page says what is true for what it can see, a desktop connect
// to the pool refused, a global entitlement possibly opening it, and its
// refused read of the document is asked once per sign-in: one refusal in
// the audit trail however often the page is opened, none for the page's
// live refreshes, which read neither.
func TestPoolPagePublishedScopedOnPod_RSEC(t *testing.T) {
	e := newPodEnv(t)
	ctx := context.Background()
	e.seed()
	doc := &vdibroker.Federation{Generation: 1, Sites: []vdibroker.Site{{Name: "emea"}},
		Pods:               []vdibroker.Pod{{Name: "fra1", Site: "emea", URL: e.url}},
		GlobalEntitlements: []vdibroker.GlobalEntitlement{{Name: "office", AllUsers: true, Members: []vdibroker.Member{{Pod: "fra1", HostPool: "pool-a"}}}}}
	if _, err := e.admin.PutFederation(ctx, doc); err != nil {
		t.Fatal(err)
	}
	tok, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: "Contributor", Subject: "scoped-1", HostPools: []string{"pool-a"}})
	if err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.signin(tok.Secret)
	refusals := func() int {
		t.Helper()
		es, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Principal: "scoped-1"})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, en := range es {
			if en.Outcome == vdibroker.AuditRefused {
				n++
			}
		}
		return n
	}
	if a := b.refresh("/pools/pool-a"); a.status != http.StatusOK || strings.Contains(a.body, `id="published"`) {
		t.Fatalf("a live refresh: HTTP %d, card read and rendered: %v", a.status, strings.Contains(a.body, `id="published"`))
	}
	if n := refusals(); n != 0 {
		t.Errorf("a live refresh of the pool page left %d refusals in the audit trail, want 0", n)
	}
	for range 3 {
		a := b.get("/pools/pool-a")
		wantStatus(t, a, http.StatusOK)
		page := pageText(a)
		for _, want := range []string{"End users cannot connect to this pool's desktops directly: no Desktop application group publishes them",
			"A global entitlement naming this pool would still open it to those it entitles (R-E9)"} {
			if !strings.Contains(page, want) {
				t.Errorf("the scoped Contributor's pool page lacks %q:\n%s", want, page)
			}
		}
		if strings.Contains(page, "in nobody's portal") {
			t.Errorf("the scoped Contributor's pool page says pool-a is in nobody's portal, which global entitlement office may belie")
		}
	}
	if n := refusals(); n != 1 {
		t.Errorf("three pool pages left %d refusals in the audit trail, want 1 (the federation read, once a sign-in)", n)
	}
}

// TestPoolPagePublishedByRole: the roles that sign in here may read a
// pool's application groups (ActionRead), so each sees the card and
// none of their pages leaves a refusal in the audit trail; a Contributor
// scoped to pool-a sees its groups, and another pool is not found.
func TestPoolPagePublishedByRole(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.seed()
	if _, err := e.admin.PutHostPool(ctx, "pool-b", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.PutApplicationGroup(ctx, "pool-a-desktops", map[string]any{"hostPool": "pool-a", "applicationGroupType": "Desktop",
		"assignments": map[string]any{"groups": []string{"Sales"}}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		req   vhttp.TokenRequest
		other int // the status of pool-b's page
	}{
		{"Reader", vhttp.TokenRequest{Role: "Reader", Subject: "reader-1"}, http.StatusOK},
		{"Helpdesk", vhttp.TokenRequest{Role: "Helpdesk", Subject: "helpdesk-1"}, http.StatusOK},
		{"Contributor scoped to pool-a", vhttp.TokenRequest{Role: "Contributor", Subject: "scoped-1", HostPools: []string{"pool-a"}}, http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := e.admin.CreateToken(ctx, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			b := e.browser()
			b.signin(tok.Secret)
			a := b.get("/pools/pool-a")
			wantStatus(t, a, http.StatusOK)
			wantContains(t, a, `data-group="pool-a-desktops" data-type="Desktop"`)
			if strings.Contains(a.body, `id="published-warning"`) {
				t.Errorf("pool-a's Desktop group is assigned to Sales, yet the card warns:\n%s", pageText(a))
			}
			if a := b.get("/pools/pool-b"); a.status != tc.other {
				t.Errorf("pool-b's page: HTTP %d, want %d", a.status, tc.other)
			}
			es, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Principal: tc.req.Subject})
			if err != nil {
				t.Fatal(err)
			}
			for _, en := range es {
				if en.Outcome == vdibroker.AuditRefused && !strings.Contains(en.Target, "pool-b") {
					t.Errorf("the pool page was refused a read: %s %s: %s", en.Action, en.Target, en.Error)
				}
			}
		})
	}
}

// TestPoolPagePublishedRemoteAppOnly_RE3: a pool whose RemoteApp group
// is assigned and whose desktops are published to nobody (AVD's RemoteApp
// host pool, its Desktop group unassigned) is no alarm: a note says end
// users open only its applications, and how to publish the desktops too.
// With the RemoteApp group assigned to nobody too, it warns.
func TestPoolPagePublishedRemoteAppOnly_RE3(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.seed()
	b := e.browser()
	b.signin(e.token("Contributor"))
	put := func(name string, body map[string]any) {
		t.Helper()
		if _, err := e.admin.PutApplicationGroup(ctx, name, body); err != nil {
			t.Fatal(err)
		}
	}
	put("pool-a-apps", map[string]any{"hostPool": "pool-a", "applicationGroupType": "RemoteApp", "assignments": map[string]any{"groups": []string{"Finance"}}})
	a := b.get("/pools/pool-a")
	if strings.Contains(a.body, `id="published-warning"`) {
		t.Errorf("a RemoteApp pool warns about its desktops:\n%s", pageText(a))
	}
	wantContains(t, a, `id="published-note"`)
	if page := pageText(a); !strings.Contains(page, "end users open only its applications") ||
		!strings.Contains(page, "vdibroker applicationgroup create --name pool-a-desktop --host-pool pool-a --application-group-type Desktop") {
		t.Errorf("the note does not say end users open only the applications, and how to publish the desktops:\n%s", page)
	}

	put("pool-a-DAG", map[string]any{"hostPool": "pool-a", "applicationGroupType": "Desktop"})
	a = b.get("/pools/pool-a")
	if strings.Contains(a.body, `id="published-warning"`) {
		t.Errorf("a RemoteApp pool whose Desktop group is unassigned warns:\n%s", pageText(a))
	}
	if page := pageText(a); !strings.Contains(page, "its Desktop group pool-a-DAG is assigned to nobody") ||
		!strings.Contains(page, "vdibroker applicationgroup update --name pool-a-DAG --add-users") {
		t.Errorf("the note does not name the unassigned Desktop group and its update:\n%s", page)
	}

	put("pool-a-apps", map[string]any{"hostPool": "pool-a", "applicationGroupType": "RemoteApp"})
	a = b.get("/pools/pool-a")
	wantContains(t, a, `id="published-warning"`)
	if strings.Contains(a.body, `id="published-note"`) {
		t.Errorf("a pool publishing nothing to anyone shows the RemoteApp note")
	}
}

// TestPoolPagePublishedPersonal_RE3_RPE2: a personal pool's host
// assigned to alice does not entitle her (R-E3): her connect is refused
// NotEntitled until a Desktop group names her. The card's warning says
// so of the assigned users too, and its command quotes a pool name with
// a space as one word.
func TestPoolPagePublishedPersonal_RE3_RPE2(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const pool = "pers desks"
	if _, err := e.admin.PutHostPool(ctx, pool, map[string]any{"hostPoolType": "Personal", "personalDesktopAssignmentType": "Direct"}); err != nil {
		t.Fatal(err)
	}
	rt, err := e.admin.CreateRegistrationToken(ctx, pool, vhttp.RegistrationTokenRequest{ExpiresInSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := e.admin.Register(ctx, &vdibroker.RegisterRequest{Token: rt.Token, HostName: "pers-1", Address: "pers-1.example:3389"})
	if err != nil {
		t.Fatal(err)
	}
	e.agents["pers-1"] = reg.Credential
	e.heartbeat("pers-1", nil)
	if _, err := e.admin.PatchSessionHost(ctx, pool, "pers-1", map[string]any{"assignedUsers": []string{"alice"}}); err != nil {
		t.Fatal(err)
	}
	ut, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: "User", Subject: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	alice := vhttp.NewClient(e.url, ut.Secret)
	if _, err := alice.Connect(ctx, pool, connectReq("alice")); vdibroker.ErrorCode(err) != vdibroker.ENotEntitled {
		t.Fatalf("alice's connect to her assigned host's pool, published by no group: %v, want NotEntitled", err)
	}

	b := e.browser()
	b.signin(e.token("Contributor"))
	a := b.get("/pools/pers%20desks")
	wantStatus(t, a, http.StatusOK)
	page := pageText(a)
	for _, want := range []string{"Nor can the users its hosts are assigned to",
		"vdibroker applicationgroup create --name 'pers desks-desktop' --host-pool 'pers desks' --application-group-type Desktop"} {
		if !strings.Contains(page, want) {
			t.Errorf("the personal pool's card lacks %q:\n%s", want, page)
		}
	}

	// The command's group name is one the API takes, and the group
	// entitles her.
	if _, err := e.admin.PutApplicationGroup(ctx, "pers desks-desktop", map[string]any{"hostPool": pool, "applicationGroupType": "Desktop",
		"assignments": map[string]any{"users": []string{"alice"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Connect(ctx, pool, connectReq("alice")); err != nil {
		t.Fatalf("alice's connect once the Desktop group names her: %v", err)
	}
	if a := b.get("/pools/pers%20desks"); strings.Contains(a.body, `id="published-warning"`) {
		t.Errorf("the card still warns once alice is assigned:\n%s", pageText(a))
	}
}

// TestPoolPagePublishedAsksNoPeer_RG5: the card reads the federation
// document alone. GET /api/v1/federation first asks every peer whose
// health is not cached (the Federation page shows it), each within the
// pod timeout: a peer that does not answer held a pod's pool page for
// the pod timeout (2 s by default) at every expiry of its cache (3 s),
// for a page that never shows a peer's health. The page now asks with
// askPeers=false, and the peer here, which counts its calls and answers
// none, is never called for it; the API's default still asks it (which
// shows the peer can be reached), and askPeers takes true or false only.
func TestPoolPagePublishedAsksNoPeer_RG5(t *testing.T) {
	e := newPodEnv(t)
	ctx := context.Background()
	e.seed()
	var loads atomic.Int64
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == federation.LoadsPath {
			loads.Add(1)
		}
		http.Error(w, "not now", http.StatusServiceUnavailable)
	}))
	t.Cleanup(peer.Close)
	doc := &vdibroker.Federation{Generation: 1, Sites: []vdibroker.Site{{Name: "emea"}},
		Pods: []vdibroker.Pod{{Name: "fra1", Site: "emea", URL: e.url}, {Name: "nyc1", Site: "emea", URL: peer.URL}},
		GlobalEntitlements: []vdibroker.GlobalEntitlement{
			{Name: "office", Users: []string{"alice"}, Members: []vdibroker.Member{{Pod: "fra1", HostPool: "pool-a"}, {Pod: "nyc1", HostPool: "pool-b"}}}}}
	if _, err := e.admin.PutFederation(ctx, doc); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.signin(e.token("Reader"))
	a := b.get("/pools/pool-a")
	wantStatus(t, a, http.StatusOK)
	wantContains(t, a, `data-global="office" data-kind="Desktop"`)
	if n := loads.Load(); n != 0 {
		t.Errorf("the pool page asked peer nyc1 for its loads %d times, want 0: the card reads the document alone", n)
	}

	get := func(query string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, e.url+"/api/v1/federation"+query, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusBadRequest {
			var body strings.Builder
			buf := make([]byte, 4096)
			n, _ := resp.Body.Read(buf)
			body.Write(buf[:n])
			if !strings.Contains(body.String(), `"field":"askPeers"`) {
				t.Errorf("GET /api/v1/federation%s: 400 %s, want the field askPeers named", query, body.String())
			}
		}
		return resp.StatusCode
	}
	if got := get("?askPeers=false"); got != http.StatusOK || loads.Load() != 0 {
		t.Errorf("GET /api/v1/federation?askPeers=false: HTTP %d, peer asked %d times; want 200 and 0", got, loads.Load())
	}
	if got := get(""); got != http.StatusOK || loads.Load() == 0 {
		t.Errorf("GET /api/v1/federation: HTTP %d, peer asked %d times; want 200 and the peer asked", got, loads.Load())
	}
	if got := get("?askPeers=yes"); got != http.StatusBadRequest {
		t.Errorf("GET /api/v1/federation?askPeers=yes: HTTP %d, want 400", got)
	}
}

// TestPoolPagePublishedSeveralRemoteAppGroups_RE1: a pool with two
// RemoteApp groups, finance-apps (excel, sap, for Finance) and sales-apps
// (crm, excel, for Sales). An application belongs to one group (R-E1, as
// in AVD): each group's row on the card lists its own applications
// beside whom it is assigned to, so excel is listed twice because it is
// published twice, as two applications (each its own path, command line
// and remove button), to two audiences; no group lists the other's.
func TestPoolPagePublishedSeveralRemoteAppGroups_RE1(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.seed()
	for _, g := range []struct {
		name, to string
		apps     []string
	}{{"finance-apps", "Finance", []string{"excel", "sap"}}, {"sales-apps", "Sales", []string{"crm", "excel"}}} {
		if _, err := e.admin.PutApplicationGroup(ctx, g.name, &vdibroker.ApplicationGroup{HostPool: "pool-a", ApplicationGroupType: vdibroker.AppGroupRemoteApp,
			Assignments: vdibroker.Assignments{Groups: []string{g.to}}}); err != nil {
			t.Fatal(err)
		}
		for _, a := range g.apps {
			if _, err := e.admin.PutApplication(ctx, g.name, a, &vdibroker.Application{FilePath: `C:\` + g.name + `\` + a + `.exe`}); err != nil {
				t.Fatal(err)
			}
		}
	}
	b := e.browser()
	b.signin(adminToken)
	a := b.get("/pools/pool-a")
	wantStatus(t, a, http.StatusOK)
	row := func(group string) string {
		t.Helper()
		_, after, ok := strings.Cut(a.body, `<tr data-group="`+group+`"`)
		if !ok {
			t.Fatalf("no row of %s on the card:\n%s", group, pageText(a))
		}
		r, _, _ := strings.Cut(after, "</tr>")
		return r
	}
	for _, tc := range []struct {
		group, to string
		want      []string
		not       string
	}{
		{"finance-apps", "1 group: Finance", []string{"excel", "sap"}, "crm"},
		{"sales-apps", "1 group: Sales", []string{"crm", "excel"}, "sap"},
	} {
		r := row(tc.group)
		var got []string
		for _, part := range strings.Split(r, `data-app="`)[1:] {
			name, _, _ := strings.Cut(part, `"`)
			got = append(got, name)
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") || !strings.Contains(r, tc.to) || strings.Contains(r, tc.not) {
			t.Errorf("%s's row lists %v (want %v), assigned %q:\n%s", tc.group, got, tc.want, tc.to, r)
		}
	}
	if n := strings.Count(a.body, `apps/remove" class="inline">`); n != 4 {
		t.Errorf("%d remove buttons of applications, want 4 (one per group's application)", n)
	}
}
