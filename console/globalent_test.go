package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// The Federation page's global entitlement forms (R-E9, R-G1..R-G4):
// newFraAmsPods is the two-pod setup, fra1 and ams1 of site emea, both
// holding generation 1 with entitlement office (all users, pool-a of
// each); each pod has its own store and API on loopback, and both take
// the same admin token, as federation apply needs.

// geForm is the hidden fields every form of the page carries.
func geForm(csrf string, gen int64, kv ...string) url.Values {
	v := url.Values{"csrf": {csrf}, "generation": {strconv.FormatInt(gen, 10)}}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

// docOf is the federation document pod e holds.
func docOf(t *testing.T, e *env) *vdibroker.Federation {
	t.Helper()
	st, err := e.admin.GetFederation(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.Document
}

// entitlement is doc's entitlement name, or nil.
func entitlement(doc *vdibroker.Federation, name string) *vdibroker.GlobalEntitlement {
	for i := range doc.GlobalEntitlements {
		if doc.GlobalEntitlements[i].Name == name {
			return &doc.GlobalEntitlements[i]
		}
	}
	return nil
}

// userToken is a User token of user made on pod e.
func userToken(t *testing.T, e *env, user string) string {
	t.Helper()
	tok, err := e.admin.CreateToken(context.Background(), vhttp.TokenRequest{Role: vdibroker.RoleUser, Subject: user})
	if err != nil {
		t.Fatal(err)
	}
	return tok.Secret
}

// TestGlobalEntitlementFromConsoleReachesPeer_RE9_RG1: an admin signed
// in to fra1's console creates global entitlement sales (member ams1's
// pool-a, user bob) on the Federation page: both pods answer applied,
// ams1 stores generation 2 with it, and bob, with a User token of ams1,
// connects through it there (placed on ams1's pool-a), while carol is
// refused NotEntitled (R-E9). Then a member added, a group entitled and
// bob unassigned, and the entitlement deleted: each a generation more on
// both pods, and each pod's audit trail records the write.
func TestGlobalEntitlementFromConsoleReachesPeer_RE9_RG1(t *testing.T) {
	fra, ams := newFraAmsPods(t)
	ctx := t.Context()
	b := fra.browser()
	b.signin(adminToken)
	page := b.get("/federation")
	wantStatus(t, page, http.StatusOK)
	wantContains(t, page, `id="ge-new-form"`, `data-manage-ge="office"`, `name="generation" value="1"`)
	csrf := b.csrf("/federation")

	a := b.post("/federation/globalentitlements", geForm(csrf, 1, "name", "sales", "kind", "Desktop", "scope", "AllSites",
		"sessionDistribution", "SessionCount", "useHomeSite", "on", "pod", "ams1", "hostPool", "pool-a", "entitle", "user", "principal", "bob"))
	wantStatus(t, a, http.StatusOK)
	wantContains(t, a, `data-result-pod="fra1" data-result="applied"`, `data-result-pod="ams1" data-result="applied"`,
		"Global entitlement sales created", "Every pod of the federation holds generation 2")
	want := vdibroker.GlobalEntitlement{Name: "sales", Scope: "AllSites", SessionDistribution: "SessionCount", UseHomeSite: true,
		Members: []vdibroker.Member{{Pod: "ams1", HostPool: "pool-a"}}, Users: []string{"bob"}}
	for _, x := range []*env{fra, ams} {
		doc := docOf(t, x)
		if doc.Generation != 2 {
			t.Errorf("%s holds generation %d, want 2", x.url, doc.Generation)
		}
		if got := entitlement(doc, "sales"); got == nil {
			t.Errorf("%s has no sales", x.url)
		} else if d := cmp.Diff(want, *got); d != "" {
			t.Errorf("sales on %s (-want +got):\n%s", x.url, d)
		}
		if office := entitlement(doc, "office"); office == nil || !office.AllUsers || len(office.Members) != 2 {
			t.Errorf("office on %s changed: %+v", x.url, office)
		}
	}
	// bob connects through it at ams1, with his own token there (R-E9).
	bob := vhttp.NewClient(ams.url, userToken(t, ams, "bob"))
	got, err := bob.GlobalConnect(ctx, "sales", vdibroker.GlobalConnectRequest{User: "bob"})
	if err != nil || got.Pod != "ams1" || got.HostPool != "pool-a" {
		t.Fatalf("bob's connect through sales: %+v, %v", got, err)
	}
	carol := vhttp.NewClient(ams.url, userToken(t, ams, "carol"))
	if _, err := carol.GlobalConnect(ctx, "sales", vdibroker.GlobalConnectRequest{User: "carol"}); vdibroker.ErrorCode(err) != vdibroker.ENotEntitled {
		t.Errorf("carol's connect through sales: %v, want NotEntitled", err)
	}

	// The next changes, each from the page as it now is.
	steps := []struct {
		name, path string
		form       []string
		flash      string
		check      func(*vdibroker.GlobalEntitlement) bool
	}{
		{"add member fra1/pool-a", "/federation/globalentitlements/members", []string{"entitlement", "sales", "op", "add", "pod", "fra1", "hostPool", "pool-a"},
			"fra1/pool-a is a member of sales", func(g *vdibroker.GlobalEntitlement) bool { return len(g.Members) == 2 && g.Members[1].Pod == "fra1" }},
		{"entitle group Sales", "/federation/globalentitlements/assignments", []string{"entitlement", "sales", "op", "add", "kind", "group", "principal", "Sales"},
			"The group Sales is entitled to sales", func(g *vdibroker.GlobalEntitlement) bool { return len(g.Groups) == 1 && g.Groups[0] == "Sales" }},
		{"unassign bob", "/federation/globalentitlements/assignments", []string{"entitlement", "sales", "op", "remove", "kind", "user", "principal", "BOB"},
			"The user BOB is no longer entitled to sales", func(g *vdibroker.GlobalEntitlement) bool { return len(g.Users) == 0 }},
		{"remove member ams1/pool-a", "/federation/globalentitlements/members", []string{"entitlement", "sales", "op", "remove", "pod", "ams1", "hostPool", "pool-a"},
			"ams1/pool-a is no longer a member of sales", func(g *vdibroker.GlobalEntitlement) bool { return len(g.Members) == 1 && g.Members[0].Pod == "fra1" }},
	}
	gen := int64(2)
	for _, s := range steps {
		a := b.post(s.path, geForm(b.csrf("/federation"), gen, s.form...))
		gen++
		if a.status != http.StatusOK || !strings.Contains(a.body, s.flash) || !strings.Contains(a.body, `data-result-pod="ams1" data-result="applied"`) {
			t.Fatalf("%s: HTTP %d\n%s", s.name, a.status, a.body)
		}
		for _, x := range []*env{fra, ams} {
			doc := docOf(t, x)
			if g := entitlement(doc, "sales"); doc.Generation != gen || g == nil || !s.check(g) {
				t.Errorf("%s: %s holds generation %d, sales %+v", s.name, x.url, doc.Generation, g)
			}
		}
	}
	a = b.post("/federation/globalentitlements/delete", geForm(b.csrf("/federation"), gen, "entitlement", "sales"))
	wantStatus(t, a, http.StatusOK)
	wantContains(t, a, "Global entitlement sales deleted", "Every pod of the federation holds generation 7")
	for _, x := range []*env{fra, ams} {
		if doc := docOf(t, x); doc.Generation != 7 || entitlement(doc, "sales") != nil || entitlement(doc, "office") == nil {
			t.Errorf("after the delete %s holds %+v", x.url, doc)
		}
		entries, err := x.admin.ListAudit(ctx, vhttp.AuditQuery{Principal: "admin"})
		n := 0
		for _, e := range entries {
			if strings.HasPrefix(e.Action, "federation.") && e.Outcome == vdibroker.AuditOK {
				n++
			}
		}
		// newFraAmsPods' write, then the console's six.
		if err != nil || n != 7 {
			t.Errorf("%s's audit trail has %d federation writes, want 7 (%v)", x.url, n, err)
		}
	}
}

// TestGlobalEntitlementStalePage_RE13: a page read at generation 1,
// after another administrator's change made generation 2, is refused
// with 412 and nothing is written to either pod; the page is shown as it
// now is (generation 2, with the other change). So is a page of
// generation 2 once a federation apply that reached this pod alone made
// it 3: nothing is sent to the peer.
func TestGlobalEntitlementStalePage_RE13(t *testing.T) {
	fra, ams := newFraAmsPods(t)
	one, two := fra.browser(), fra.browser()
	one.signin(adminToken)
	two.signin(adminToken)
	csrfOne := one.csrf("/federation")
	a := two.post("/federation/globalentitlements/assignments", geForm(two.csrf("/federation"), 1, "entitlement", "office", "op", "add", "kind", "user", "principal", "dora"))
	wantStatus(t, a, http.StatusOK)

	a = one.post("/federation/globalentitlements/assignments", geForm(csrfOne, 1, "entitlement", "office", "op", "allUsers", "allUsers", "false"))
	wantStatus(t, a, http.StatusPreconditionFailed)
	wantContains(t, a, "changed since this page was read (generation 1 then, 2 now)", `name="generation" value="2"`, `data-user="dora"`)
	if strings.Contains(a.body, "data-result-pod") {
		t.Errorf("a refused change lists pods' answers")
	}
	for _, x := range []*env{fra, ams} {
		doc := docOf(t, x)
		if office := entitlement(doc, "office"); doc.Generation != 2 || office == nil || !office.AllUsers {
			t.Errorf("%s after the stale form: generation %d, office %+v", x.url, doc.Generation, office)
		}
	}

	// The settings and home site forms of the page read at 1 too.
	for _, p := range []struct {
		path string
		form []string
	}{
		{"/federation/globalentitlements/settings", []string{"entitlement", "office", "kind", "Desktop", "scope", "WithinPod", "sessionDistribution", "None"}},
		{"/federation/homesites", []string{"op", "add", "kind", "user", "principal", "dora", "site", "emea"}},
	} {
		a = one.post(p.path, geForm(csrfOne, 1, p.form...))
		wantStatus(t, a, http.StatusPreconditionFailed)
		wantContains(t, a, "(generation 1 then, 2 now)")
	}
	for _, x := range []*env{fra, ams} {
		if d := docOf(t, x); d.Generation != 2 || len(d.HomeSites) != 0 || entitlement(d, "office").Scope != vdibroker.ScopeAllSites {
			t.Errorf("%s after the stale settings and home site: %+v", x.url, d)
		}
	}
	// fra1 alone is sent a generation 3 of other content (as by a
	// federation apply that reached it alone): a page of generation 2
	// is refused, nothing sent to ams1.
	doc := docOf(t, fra)
	doc.Generation = 3
	doc.GlobalEntitlements[0].Users = []string{"erin"}
	if _, err := fra.admin.PutFederation(t.Context(), doc); err != nil {
		t.Fatal(err)
	}
	a = one.post("/federation/globalentitlements", geForm(one.csrf("/federation")+"", 2, "name", "late", "kind", "Desktop", "scope", "AllSites",
		"sessionDistribution", "None", "pod", "fra1", "hostPool", "pool-a", "entitle", "allUsers"))
	wantStatus(t, a, http.StatusPreconditionFailed)
	if d := docOf(t, ams); d.Generation != 2 || entitlement(d, "late") != nil {
		t.Errorf("ams1 after a stale create: %+v", d)
	}
}

// TestGlobalEntitlementPeerRefuses_RG5: the change goes through on this
// pod and a peer refuses it (ams1 behind a gate answering 503): the page
// says so per pod, that the documents now differ and what to do; once
// the gate lets calls through, the admin's "send again" brings ams1 to
// the same generation. A Contributor's change reaches ams1 too, through
// the pod-to-pod channel, though ams1 does not know the Contributor's
// token (fra1's API decided; R-SEC). A peer that does not answer is
// listed unreachable. A peer known to hold a newer generation than this
// pod stops the change before anything is written (409).
func TestGlobalEntitlementPeerRefuses_RG5(t *testing.T) {
	fra, ams := newFraAmsPods(t)
	var open atomic.Bool
	amsURL, err := url.Parse(ams.url)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(amsURL)
	gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !open.Load() {
			http.Error(w, "maintenance", http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(gate.Close)
	// Generation 2 names ams1 at the gate, on both pods.
	doc := docOf(t, fra)
	doc.Generation = 2
	doc.Pods[1].URL = gate.URL
	for _, x := range []*env{fra, ams} {
		d := *doc
		if _, err := x.admin.PutFederation(t.Context(), &d); err != nil {
			t.Fatal(err)
		}
	}

	contributor := fra.browser()
	contributor.signin(fra.token("Contributor"))
	a := contributor.post("/federation/globalentitlements/assignments", geForm(contributor.csrf("/federation"), 2, "entitlement", "office", "op", "add", "kind", "group", "principal", "Finance"))
	wantStatus(t, a, http.StatusOK)
	wantContains(t, a, `data-result-pod="fra1" data-result="applied"`, `data-result-pod="ams1" data-result="refused"`, "HTTP 503, not a vdibroker answer",
		"This pod holds generation 3, but ams1 did not take it", "the pods&#39; federation documents now differ", `action="/federation/resend"`)
	if d := docOf(t, fra); d.Generation != 3 {
		t.Errorf("fra1 holds generation %d, want 3", d.Generation)
	}
	if d := docOf(t, ams); d.Generation != 2 {
		t.Errorf("ams1 holds generation %d, want 2 (it refused)", d.Generation)
	}

	open.Store(true)
	admin := fra.browser()
	admin.signin(adminToken)
	a = admin.post("/federation/resend", geForm(admin.csrf("/federation"), 3))
	wantStatus(t, a, http.StatusOK)
	wantContains(t, a, `data-result-pod="ams1" data-result="applied"`, "Every pod of the federation holds generation 3")
	if d := docOf(t, ams); d.Generation != 3 || len(entitlement(d, "office").Groups) != 1 {
		t.Errorf("ams1 after the resend: %+v", d)
	}
	// A Contributor's change reaches ams1, which knows no token of his.
	a = contributor.post("/federation/globalentitlements/assignments", geForm(contributor.csrf("/federation"), 3, "entitlement", "office", "op", "add", "kind", "user", "principal", "erin"))
	wantContains(t, a, `data-result-pod="ams1" data-result="applied"`, "Every pod of the federation holds generation 4")

	// ams1 down: unreachable, fra1 holds the change.
	gate.Close()
	a = admin.post("/federation/globalentitlements/assignments", geForm(admin.csrf("/federation"), 4, "entitlement", "office", "op", "remove", "kind", "group", "principal", "Finance"))
	wantStatus(t, a, http.StatusOK)
	wantContains(t, a, `data-result-pod="ams1" data-result="unreachable"`, "ams1 did not take it")
	if d := docOf(t, fra); d.Generation != 5 {
		t.Errorf("fra1 holds generation %d, want 5", d.Generation)
	}
}

// TestGlobalEntitlementNewerPeer_RG5: ams1 holds generation 5, fra1 the
// 1 it had (a federation apply that did not reach fra1); fra1's page,
// having heard ams1, refuses any change (409), nothing written: what it
// would send is older than ams1's.
func TestGlobalEntitlementNewerPeer_RG5(t *testing.T) {
	fra, ams := newFraAmsPods(t)
	doc := docOf(t, ams)
	doc.Generation = 5
	if _, err := ams.admin.PutFederation(t.Context(), doc); err != nil {
		t.Fatal(err)
	}
	b := fra.browser()
	b.signin(adminToken)
	page := b.get("/federation") // asks ams1: generation 5
	wantContains(t, page, "other generation")
	a := b.post("/federation/globalentitlements/delete", geForm(b.csrf("/federation"), 1, "entitlement", "office"))
	wantStatus(t, a, http.StatusConflict)
	wantContains(t, a, "pod ams1 holds generation 5 of the federation document, newer than this pod&#39;s 1")
	if d := docOf(t, fra); d.Generation != 1 || entitlement(d, "office") == nil {
		t.Errorf("fra1 after the refused delete: %+v", d)
	}
}

// TestGlobalEntitlementRefusedByRole_RSEC: a Reader and Helpdesk see no
// form on the Federation page, and their forged posts (with their own
// CSRF token) get the API's 403, as do a Contributor's scoped to a host
// pool; a post without the CSRF token is refused (403) before anything
// is read. None writes anything.
func TestGlobalEntitlementRefusedByRole_RSEC(t *testing.T) {
	fra, ams := newFraAmsPods(t)
	posts := []struct {
		path string
		form []string
	}{
		{"/federation/globalentitlements", []string{"name", "sales", "kind", "Desktop", "scope", "AllSites", "sessionDistribution", "None", "pod", "fra1", "hostPool", "pool-a", "entitle", "allUsers"}},
		{"/federation/globalentitlements/members", []string{"entitlement", "office", "op", "add", "pod", "ams1", "hostPool", "pool-b"}},
		{"/federation/globalentitlements/assignments", []string{"entitlement", "office", "op", "add", "kind", "user", "principal", "mallory"}},
		{"/federation/globalentitlements/delete", []string{"entitlement", "office"}},
		{"/federation/resend", nil},
		{"/federation/globalentitlements/settings", []string{"entitlement", "office", "kind", "Desktop", "scope", "WithinPod", "sessionDistribution", "None"}},
		{"/federation/homesites", []string{"op", "add", "kind", "user", "principal", "mallory", "site", "emea"}},
	}
	for _, role := range []string{"Reader", "Helpdesk"} {
		b := fra.browser()
		b.signin(fra.token(role))
		page := b.get("/federation")
		wantStatus(t, page, http.StatusOK)
		if strings.Contains(page.body, `id="ge-manage"`) || strings.Contains(page.body, "/federation/globalentitlements") || strings.Contains(page.body, "/federation/homesites") {
			t.Errorf("%s is shown the entitlement forms", role)
		}
		csrf := b.csrf("/federation")
		// The resend too: this pod's API decides who may send its
		// document to the other pods, which take it from this pod's
		// signature (R-SEC).
		for _, p := range posts {
			if a := b.post(p.path, geForm(csrf, 1, p.form...)); a.status != http.StatusForbidden || !strings.Contains(a.body, "Refused by the broker") {
				t.Errorf("%s's post to %s: HTTP %d\n%s", role, p.path, a.status, a.body)
			}
		}
	}
	// A Contributor scoped to pool-a may not read the document, nor
	// write it: the API refuses a scoped principal the federation (R-SEC).
	scoped, err := fra.admin.CreateToken(t.Context(), vhttp.TokenRequest{Role: vdibroker.RoleContributor, Subject: "pool-a-ops", HostPools: []string{"pool-a"}})
	if err != nil {
		t.Fatal(err)
	}
	b := fra.browser()
	b.signin(scoped.Secret)
	csrf := b.csrf("/")
	for _, p := range posts {
		if a := b.post(p.path, geForm(csrf, 1, p.form...)); a.status != http.StatusForbidden {
			t.Errorf("scoped Contributor's post to %s: HTTP %d\n%s", p.path, a.status, a.body)
		}
	}
	admin := fra.browser()
	admin.signin(adminToken)
	for _, p := range posts {
		f := geForm("", 1, p.form...)
		f.Del("csrf")
		if a := admin.post(p.path, f); a.status != http.StatusForbidden || !strings.Contains(a.body, "CSRF") {
			t.Errorf("post to %s without CSRF: HTTP %d", p.path, a.status)
		}
	}
	for _, x := range []*env{fra, ams} {
		if d := docOf(t, x); d.Generation != 1 {
			t.Errorf("%s holds generation %d after refused posts, want 1", x.url, d.Generation)
		}
	}
}

// TestGlobalEntitlementBadInput: names are checked as the API checks
// them, beside their field, the form kept as typed, nothing written;
// a 100 kB name is refused and never kept: not in the page whole, not in
// the sign-in's one-shot message (R-SEC).
func TestGlobalEntitlementBadInput(t *testing.T) {
	fra, ams := newFraAmsPods(t)
	b := fra.browser()
	b.signin(adminToken)
	huge := strings.Repeat("x", 100_000)
	create := func(kv ...string) []string {
		base := map[string]string{"name": "sales", "kind": "Desktop", "scope": "AllSites", "sessionDistribution": "None", "pod": "fra1", "hostPool": "pool-a", "entitle": "user", "principal": "bob"}
		for i := 0; i+1 < len(kv); i += 2 {
			base[kv[i]] = kv[i+1]
		}
		var out []string
		for k, v := range base {
			out = append(out, k, v)
		}
		return out
	}
	for _, tc := range []struct {
		name, path string
		form       []string
		status     int
		field      string // the input the error is beside ("" for the banner)
		says       string
	}{
		{"name with a slash", "/federation/globalentitlements", create("name", "sa/les"), 400, "name", "must be 1..64 characters of A-Za-z0-9@._- and space"},
		{"huge name", "/federation/globalentitlements", create("name", huge), 400, "name", "must be 1..64 characters"},
		{"unknown kind", "/federation/globalentitlements", create("kind", "Kiosk"), 400, "kind", "must be Desktop or Application"},
		{"application without its name", "/federation/globalentitlements", create("kind", "Application"), 400, "application", "application: must be 1..64"},
		{"unknown scope", "/federation/globalentitlements", create("scope", "Everywhere"), 400, "scope", "must be one of AllSites, WithinSite, WithinPod"},
		{"unknown pod", "/federation/globalentitlements", create("pod", "par1"), 400, "pod", "pods are fra1, ams1"},
		{"bad host pool", "/federation/globalentitlements", create("hostPool", "p"), 400, "hostPool", "hostPool: must be 3..64"},
		{"nobody entitled", "/federation/globalentitlements", create("entitle", ""), 400, "entitle", "would entitle everyone"},
		{"bad user", "/federation/globalentitlements", create("principal", "bob\x00"), 400, "principal", "principal:"},
		{"name taken", "/federation/globalentitlements", create("name", "office"), 400, "name", `a global entitlement &#34;office&#34; exists already`},
		{"huge entitlement", "/federation/globalentitlements/assignments", []string{"entitlement", huge, "op", "add", "kind", "user", "principal", "bob"}, 400, "", "entitlement: must be 1..64 characters"},
		{"huge principal", "/federation/globalentitlements/assignments", []string{"entitlement", "office", "op", "remove", "kind", "user", "principal", huge}, 400, "", "Nothing was changed: principal: must be"},
		{"unknown entitlement", "/federation/globalentitlements/delete", []string{"entitlement", "nothere"}, 404, "", "has no global entitlement &#34;nothere&#34;"},
		{"member of an unknown entitlement", "/federation/globalentitlements/members", []string{"entitlement", "solo", "op", "remove", "pod", "fra1", "hostPool", "pool-a"}, 404, "", "no global entitlement"},
		{"bad generation", "/federation/globalentitlements/delete", []string{"entitlement", "office", "generation", "one"}, 400, "", "generation must be"},
		{"unknown scope setting", "/federation/globalentitlements/settings", []string{"entitlement", "office", "scope", "Anywhere", "sessionDistribution", "None"}, 400, "scope", "must be one of AllSites, WithinSite, WithinPod"},
		{"huge distribution setting", "/federation/globalentitlements/settings", []string{"entitlement", "office", "scope", "AllSites", "sessionDistribution", huge}, 400, "sessionDistribution", "must be one of None, LoadIndex, SessionCount"},
		{"unknown kind setting", "/federation/globalentitlements/settings", []string{"entitlement", "office", "kind", "Kiosk", "scope", "AllSites", "sessionDistribution", "None"}, 400, "kind", "must be Desktop or Application"},
		{"settings of an unknown entitlement", "/federation/globalentitlements/settings", []string{"entitlement", "nothere", "scope", "AllSites", "sessionDistribution", "None"}, 404, "", "no global entitlement"},
		{"home site of neither", "/federation/homesites", []string{"op", "add", "kind", "", "principal", "dora", "site", "emea"}, 400, "kind", "must be user or group"},
		{"home site of a huge name", "/federation/homesites", []string{"op", "add", "kind", "user", "principal", huge, "site", "emea"}, 400, "principal", "principal: must be"},
		{"home site of a bad name", "/federation/homesites", []string{"op", "add", "kind", "group", "principal", "Sales\x00", "site", "emea"}, 400, "principal", "principal:"},
		{"unknown home site", "/federation/homesites", []string{"op", "add", "kind", "user", "principal", "dora", "site", "apac"}, 400, "site", "is not a site of the federation document; its sites are emea"},
		{"huge home site", "/federation/homesites", []string{"op", "add", "kind", "user", "principal", "dora", "site", huge}, 400, "site", "site: must be 1..64"},
		{"home site op", "/federation/homesites", []string{"op", "replace", "kind", "user", "principal", "dora", "site", "emea"}, 400, "", "op must be add, change, up, down or remove"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := geForm(b.csrf("/federation"), 1, tc.form...)
			a := b.post(tc.path, f)
			wantStatus(t, a, tc.status)
			wantContains(t, a, tc.says)
			if tc.field != "" && !strings.Contains(a.body, `-`+tc.field+`-error">`) {
				t.Errorf("no error beside %s:\n%s", tc.field, a.body)
			}
			if strings.Contains(a.body, huge[:1000]) {
				t.Errorf("the page holds the huge value")
			}
			if f.Get("name") == "sa/les" && !strings.Contains(a.body, `value="sa/les"`) {
				t.Errorf("the form is not kept as typed")
			}
			if p := b.get("/federation"); strings.Contains(p.body, huge[:1000]) || strings.Contains(p.body, `class="flash ok"`) {
				t.Errorf("the next page shows a kept message or the huge value")
			}
		})
	}
	for _, x := range []*env{fra, ams} {
		if d := docOf(t, x); d.Generation != 1 {
			t.Errorf("%s holds generation %d after refused forms, want 1", x.url, d.Generation)
		}
	}
	// The only member is not removed: the page says what to do.
	a := b.post("/federation/globalentitlements/members", geForm(b.csrf("/federation"), 1, "entitlement", "office", "op", "remove", "pod", "fra1", "hostPool", "pool-a"))
	wantStatus(t, a, http.StatusOK)
	a = b.post("/federation/globalentitlements/members", geForm(b.csrf("/federation"), 2, "entitlement", "office", "op", "remove", "pod", "ams1", "hostPool", "pool-a"))
	wantStatus(t, a, http.StatusBadRequest)
	wantContains(t, a, "is office&#39;s only member", "delete the entitlement")
	// Nor the last name of one that names no all users.
	a = b.post("/federation/globalentitlements/assignments", geForm(b.csrf("/federation"), 2, "entitlement", "office", "op", "allUsers", "allUsers", "false"))
	wantStatus(t, a, http.StatusBadRequest)
	wantContains(t, a, "which entitles everyone")
	if d := docOf(t, ams); d.Generation != 2 || !entitlement(d, "office").AllUsers {
		t.Errorf("ams1 after the refusals: %+v", d)
	}
}

// TestGlobalEntitlementSendsNoToken_RSEC: a Contributor, who may write
// the federation document through the API, names a pod of his own (evil,
// at a URL he listens on) in fra1's document. The next change an admin
// makes on fra1's Federation page reaches evil as a call signed for evil
// alone, carrying neither the admin's token nor the Contributor's: the
// pods are sent the document through the pod-to-pod channel, not with
// the signed-in user's token, which would otherwise go to any URL a
// Contributor writes (R-SEC). ams1 takes the change, its audit trail
// naming fra1 acting for the admin; evil's answer, HTML, is shown cut and
// escaped as a refusal.
func TestGlobalEntitlementSendsNoToken_RSEC(t *testing.T) {
	fra, ams := newFraAmsPods(t)
	type seen struct {
		header http.Header
		body   string
	}
	contributorTok := fra.token("Contributor")
	var mu sync.Mutex
	var got []seen // evil's document calls
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		for k, vs := range r.Header {
			// No call of any kind carries a token (the page's status
			// asks evil's loads too).
			if k == "Authorization" || slices.ContainsFunc(vs, func(v string) bool { return strings.Contains(v, contributorTok) || strings.Contains(v, adminToken) }) {
				t.Errorf("evil was sent %s: %s on %s %s", k, vs, r.Method, r.URL.Path)
			}
		}
		if r.URL.Path == federation.DocumentPath {
			mu.Lock()
			got = append(got, seen{r.Header.Clone(), string(body)})
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusTeapot)
		io.WriteString(w, "<script>alert(1)</script>"+strings.Repeat("x", 10_000))
	}))
	t.Cleanup(evil.Close)
	doc := docOf(t, fra)
	doc.Generation = 2
	doc.Pods = append(doc.Pods, vdibroker.Pod{Name: "evil", Site: "emea", URL: evil.URL})
	if _, err := vhttp.NewClient(fra.url, contributorTok).PutFederation(t.Context(), doc); err != nil {
		t.Fatal(err)
	}
	b := fra.browser()
	b.signin(adminToken)
	a := b.post("/federation/globalentitlements/assignments", geForm(b.csrf("/federation"), 2, "entitlement", "office", "op", "add", "kind", "user", "principal", "dora"))
	wantStatus(t, a, http.StatusOK)
	wantContains(t, a, `data-result-pod="fra1" data-result="applied"`, `data-result-pod="ams1" data-result="applied"`, `data-result-pod="evil" data-result="refused"`)
	if strings.Contains(a.body, "<script>alert") || strings.Contains(a.body, strings.Repeat("x", 1000)) {
		t.Errorf("the peer's answer is on the page as it sent it")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 {
		t.Fatalf("evil was sent the document %d times, want 1", len(got))
	}
	if strings.Contains(got[0].body, adminToken) || strings.Contains(got[0].body, contributorTok) {
		t.Errorf("evil was sent a token in the body")
	}
	if to := got[0].header.Get(federation.HeaderTo); to != "evil" {
		t.Errorf("the call to evil is signed for %q, want evil alone", to)
	}
	if d := docOf(t, ams); d.Generation != 3 || !vdibroker.ContainsUser(entitlement(d, "office").Users, "dora") {
		t.Errorf("ams1 after the change: %+v", d)
	}
	entries, err := ams.admin.ListAudit(t.Context(), vhttp.AuditQuery{Action: "federation.put", Target: "federation", Newest: true})
	if err != nil || len(entries) == 0 || entries[0].Principal.Kind != vdibroker.PrincipalPod || entries[0].Principal.ID != "fra1" || entries[0].Principal.Name != "admin" {
		t.Errorf("ams1's newest federation.put: %+v, %v", entries, err)
	}
}
