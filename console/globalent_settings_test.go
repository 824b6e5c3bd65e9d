package console_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vdibroker/vdibroker"
)

// The Federation page's settings of a global entitlement and its home
// sites (R-G3, R-G4), over newFraAmsPods' two pods: a change made on
// fra1's console is stored by both pods and changes where the next
// connect is placed, as each pod decides it.

// placed is where a dry-run global connect of user through office,
// arriving at pod e, would place her: the pod, and where the decision
// says its start site came from (R-G3).
func placed(t *testing.T, e *env, user string) (pod, homeSite string) {
	t.Helper()
	a, err := e.admin.GlobalConnect(t.Context(), "office", vdibroker.GlobalConnectRequest{User: user, DryRun: true})
	if err != nil {
		t.Fatalf("%s's dry-run connect at %s: %v", user, e.url, err)
	}
	return a.Pod, a.Decision.HomeSite
}

// bothHold fails unless fra and ams hold generation gen and check holds
// for each one's document.
func bothHold(t *testing.T, what string, gen int64, check func(*vdibroker.Federation) bool, envs ...*env) {
	t.Helper()
	for _, x := range envs {
		if d := docOf(t, x); d.Generation != gen || !check(d) {
			t.Errorf("%s: %s holds generation %d (want %d): %+v", what, x.url, d.Generation, gen, d)
		}
	}
}

// TestGlobalEntitlementSettingsFromConsole_RG3: ams1 holds alice's
// session, fra1 none, so a connect arriving at ams1 through office
// (AllSites, SessionCount) is placed on fra1, the least loaded pod of
// the site. An admin sets office's scope to WithinPod on fra1's console:
// both pods answer applied and store it, and the same connect at ams1
// now stays on ams1 (R-G3). Settings as they were already change
// nothing; the kind does not change (delete and recreate), and an
// application is only for an Application entitlement, whose application
// may change.
func TestGlobalEntitlementSettingsFromConsole_RG3(t *testing.T) {
	fra, ams := newFraAmsPods(t)
	if pod, _ := placed(t, ams, "zed"); pod != "fra1" {
		t.Fatalf("before: zed at ams1 is placed on %s, want fra1 (the least loaded)", pod)
	}
	b := fra.browser()
	b.signin(adminToken)
	page := b.get("/federation")
	wantContains(t, page, `action="/federation/globalentitlements/settings"`, `data-form="ge-settings" data-entitlement="office"`)
	settings := func(gen int64, kv ...string) answer {
		return b.post("/federation/globalentitlements/settings", geForm(b.csrf("/federation"), gen,
			append([]string{"entitlement", "office", "kind", "Desktop", "scope", "WithinPod", "sessionDistribution", "SessionCount"}, kv...)...))
	}
	a := settings(1)
	wantStatus(t, a, http.StatusOK)
	wantContains(t, a, `data-result-pod="fra1" data-result="applied"`, `data-result-pod="ams1" data-result="applied"`,
		"office&#39;s settings changed: scope WithinPod (was AllSites).", "Every pod of the federation holds generation 2")
	bothHold(t, "scope", 2, func(d *vdibroker.Federation) bool {
		g := entitlement(d, "office")
		return g.Scope == vdibroker.ScopeWithinPod && g.SessionDistribution == vdibroker.DistributionSessionCount && !g.UseHomeSite && g.AllUsers && len(g.Members) == 2
	}, fra, ams)
	if pod, _ := placed(t, ams, "zed"); pod != "ams1" {
		t.Errorf("WithinPod: zed at ams1 is placed on %s, want ams1", pod)
	}
	// The page shows the settings stored.
	wantContains(t, b.get("/federation"), `<option value="WithinPod" selected>`)

	// The same settings again: nothing written.
	a = settings(2)
	if a.status != http.StatusSeeOther {
		t.Fatalf("unchanged settings: HTTP %d\n%s", a.status, a.body)
	}
	wantContains(t, b.get("/federation"), "Nothing changed: office had these settings already.")
	// Another kind: refused beside the kind, nothing written.
	a = settings(2, "kind", "Application", "application", "crm")
	wantStatus(t, a, http.StatusBadRequest)
	wantContains(t, a, `id="s-0-kind-error"`, "its kind does not change", "Create a new Application entitlement and delete this one")
	// An application for a Desktop entitlement: refused.
	a = settings(2, "application", "crm")
	wantStatus(t, a, http.StatusBadRequest)
	wantContains(t, a, `id="s-0-application-error"`, "is only for an Application entitlement")
	bothHold(t, "refused settings", 2, func(d *vdibroker.Federation) bool { return entitlement(d, "office").Application == "" }, fra, ams)

	// An Application entitlement's application changes, and useHomeSite
	// with it; its kind stays.
	a = b.post("/federation/globalentitlements", geForm(b.csrf("/federation"), 2, "name", "apps", "kind", "Application", "application", "crm",
		"scope", "AllSites", "sessionDistribution", "None", "pod", "ams1", "hostPool", "pool-a", "entitle", "allUsers"))
	wantStatus(t, a, http.StatusOK)
	a = b.post("/federation/globalentitlements/settings", geForm(b.csrf("/federation"), 3, "entitlement", "apps", "kind", "Application",
		"application", "erp", "scope", "WithinSite", "sessionDistribution", "None", "useHomeSite", "on"))
	wantStatus(t, a, http.StatusOK)
	wantContains(t, a, "apps&#39;s settings changed: application erp (was crm)", "scope WithinSite (was AllSites)", "home sites used", `data-result-pod="ams1" data-result="applied"`)
	want := vdibroker.GlobalEntitlement{Name: "apps", Kind: vdibroker.KindApplication, Application: "erp", Scope: vdibroker.ScopeWithinSite,
		SessionDistribution: vdibroker.DistributionNone, UseHomeSite: true, AllUsers: true, Members: []vdibroker.Member{{Pod: "ams1", HostPool: "pool-a"}}}
	bothHold(t, "application", 4, func(d *vdibroker.Federation) bool { return cmp.Equal(want, *entitlement(d, "apps")) }, fra, ams)
	a = b.post("/federation/globalentitlements/settings", geForm(b.csrf("/federation"), 4, "entitlement", "apps", "kind", "Application",
		"application", "", "scope", "WithinSite", "sessionDistribution", "None"))
	wantStatus(t, a, http.StatusBadRequest)
	wantContains(t, a, `-application-error">application: must be 1..`)
	bothHold(t, "no application", 4, func(d *vdibroker.Federation) bool { return entitlement(d, "apps").Application == "erp" }, fra, ams)
}

// TestHomeSitesFromConsole_RG3: the operator adds site amer with ams1 in
// it. A connect of dora arriving at fra1 through office (useHomeSite
// set on the console) starts at fra1's site emea and is placed there;
// once the console gives dora (as Dora) home site amer, both pods hold
// it and the same connect starts at amer, placed on ams1, the decision
// saying it was her home site. A second home site for DORA is refused
// beside the name (one a user, in any case); a group's is added; dora's
// removed, and she is placed at fra1 again.
func TestHomeSitesFromConsole_RG3(t *testing.T) {
	fra, ams := newFraAmsPods(t)
	doc := docOf(t, fra)
	doc.Generation = 2
	doc.Sites = append(doc.Sites, vdibroker.Site{Name: "amer"})
	doc.Pods[1].Site = "amer"
	for _, x := range []*env{fra, ams} {
		d := *doc
		if _, err := x.admin.PutFederation(t.Context(), &d); err != nil {
			t.Fatal(err)
		}
	}
	b := fra.browser()
	b.signin(adminToken)
	wantContains(t, b.get("/federation"), `id="home-sites"`, "No user or group has a home site", `id="home-site-form"`, `<option value="amer">amer</option>`)
	a := b.post("/federation/globalentitlements/settings", geForm(b.csrf("/federation"), 2, "entitlement", "office", "kind", "Desktop",
		"scope", "AllSites", "sessionDistribution", "SessionCount", "useHomeSite", "on"))
	wantStatus(t, a, http.StatusOK)
	wantContains(t, a, "office&#39;s settings changed: home sites used.")
	if pod, from := placed(t, fra, "dora"); pod != "fra1" || from != "" {
		t.Fatalf("before: dora at fra1 is placed on %s from %q, want fra1 from her connection's site", pod, from)
	}

	home := func(gen int64, kv ...string) answer {
		return b.post("/federation/homesites", geForm(b.csrf("/federation"), gen, kv...))
	}
	a = home(3, "op", "add", "kind", "user", "principal", "Dora", "site", "amer")
	wantStatus(t, a, http.StatusOK)
	wantContains(t, a, "The user Dora has home site amer: through office, which uses home sites", `data-result-pod="ams1" data-result="applied"`,
		`data-home-site="user:Dora" data-site="amer"`, "Every pod of the federation holds generation 4")
	bothHold(t, "add", 4, func(d *vdibroker.Federation) bool {
		return cmp.Equal(d.HomeSites, []vdibroker.HomeSite{{User: "Dora", Site: "amer"}})
	}, fra, ams)
	if pod, from := placed(t, fra, "dora"); pod != "ams1" || from != "user" {
		t.Errorf("home site amer: dora at fra1 is placed on %s from %q, want ams1 from her home site", pod, from)
	}

	a = home(4, "op", "add", "kind", "user", "principal", "DORA", "site", "emea")
	wantStatus(t, a, http.StatusBadRequest)
	wantContains(t, a, `id="hs-principal-error"`, "the user Dora has home site amer already", "change it where it is listed", `value="DORA"`)
	a = home(4, "op", "add", "kind", "group", "principal", "Sales", "site", "emea")
	wantStatus(t, a, http.StatusOK)
	wantContains(t, a, "The group Sales has home site emea")
	a = home(5, "op", "remove", "kind", "user", "principal", "dora")
	wantStatus(t, a, http.StatusOK)
	wantContains(t, a, "The user Dora no longer has home site amer", `data-result-pod="ams1" data-result="applied"`)
	if strings.Contains(a.body, `data-home-site="user:Dora"`) {
		t.Errorf("the page still lists dora's home site")
	}
	bothHold(t, "remove", 6, func(d *vdibroker.Federation) bool {
		return cmp.Equal(d.HomeSites, []vdibroker.HomeSite{{Group: "Sales", Site: "emea"}})
	}, fra, ams)
	if pod, from := placed(t, fra, "dora"); pod != "fra1" || from != "" {
		t.Errorf("home site removed: dora at fra1 is placed on %s from %q, want fra1", pod, from)
	}
	// Removing one that is not there writes nothing.
	if a = home(6, "op", "remove", "kind", "group", "principal", "Finance"); a.status != http.StatusSeeOther {
		t.Errorf("removing a home site nobody has: HTTP %d", a.status)
	}
	bothHold(t, "remove nothing", 6, func(*vdibroker.Federation) bool { return true }, fra, ams)
}

// TestHomeSiteNamesBeyondASCII_RSEC: a name is bounded in characters,
// as the API bounds it (MaxUserLen, R-E5's names), not in bytes. A home
// site of 200 Cyrillic letters (400 bytes, within 256 characters) is
// stored whole and its Remove button removes it; one of 300 letters is
// refused beside the name (too long), never stored cut with "…" as a
// shorter name the administrator did not type.
func TestHomeSiteNamesBeyondASCII_RSEC(t *testing.T) {
	fra, ams := newFraAmsPods(t)
	b := fra.browser()
	b.signin(adminToken)
	home := func(gen int64, kv ...string) answer {
		return b.post("/federation/homesites", geForm(b.csrf("/federation"), gen, kv...))
	}
	long := strings.Repeat("Д", vdibroker.MaxUserLen+44)
	a := home(1, "op", "add", "kind", "user", "principal", long, "site", "emea")
	wantStatus(t, a, http.StatusBadRequest)
	wantContains(t, a, `id="hs-principal-error"`, "principal: must be at most 256 characters")
	bothHold(t, "a name too long", 1, func(d *vdibroker.Federation) bool { return len(d.HomeSites) == 0 }, fra, ams)

	name := strings.Repeat("Д", 200)
	a = home(1, "op", "add", "kind", "group", "principal", name, "site", "emea")
	wantStatus(t, a, http.StatusOK)
	wantContains(t, a, `data-home-site="group:`+name+`"`)
	bothHold(t, "200 letters", 2, func(d *vdibroker.Federation) bool {
		return cmp.Equal(d.HomeSites, []vdibroker.HomeSite{{Group: name, Site: "emea"}})
	}, fra, ams)
	// The Remove button posts the name as the page lists it.
	a = home(2, "op", "remove", "kind", "group", "principal", name)
	wantStatus(t, a, http.StatusOK)
	wantContains(t, a, "no longer has home site emea")
	bothHold(t, "removed", 3, func(d *vdibroker.Federation) bool { return len(d.HomeSites) == 0 }, fra, ams)
}

// TestHomeSiteChangedInPlace_RG3: dora is in groups Sales and Finance,
// whose home sites are emea and emea, Sales's listed first. Changing
// Sales's home site to amer on the console keeps its place (a remove and
// an add put it last, behind Finance's, so she would have started at
// emea still): she now starts at amer, on ams1, on both pods. Moving it
// down puts Finance's first, and she starts at emea again; moving the
// last one down, or changing one to the site it has, writes nothing. A
// site the document does not list, a group without a home site, and an
// unknown op are refused, nothing written.
func TestHomeSiteChangedInPlace_RG3(t *testing.T) {
	fra, ams := newFraAmsPods(t)
	doc := docOf(t, fra)
	doc.Generation = 2
	doc.Sites = append(doc.Sites, vdibroker.Site{Name: "amer"})
	doc.Pods[1].Site = "amer"
	doc.GlobalEntitlements[0].UseHomeSite = true
	doc.HomeSites = []vdibroker.HomeSite{{Group: "Sales", Site: "emea"}, {Group: "Finance", Site: "emea"}}
	for _, x := range []*env{fra, ams} {
		d := *doc
		if _, err := x.admin.PutFederation(t.Context(), &d); err != nil {
			t.Fatal(err)
		}
	}
	dora := func() string {
		t.Helper()
		a, err := fra.admin.GlobalConnect(t.Context(), "office", vdibroker.GlobalConnectRequest{User: "dora", Groups: []string{"Finance", "Sales"}, DryRun: true})
		if err != nil {
			t.Fatalf("dora's dry-run connect: %v", err)
		}
		return a.Pod
	}
	if pod := dora(); pod != "fra1" {
		t.Fatalf("before: dora is placed on %s, want fra1 (Sales's home site emea)", pod)
	}
	b := fra.browser()
	b.signin(adminToken)
	wantContains(t, b.get("/federation"), `data-home-site="group:Sales" data-site="emea" data-place="1"`, `data-action="change-home-site" data-principal="Sales"`,
		`data-action="home-site-down" data-principal="Sales"`, `data-action="home-site-up" data-principal="Finance"`)
	home := func(gen int64, kv ...string) answer {
		return b.post("/federation/homesites", geForm(b.csrf("/federation"), gen, kv...))
	}

	a := home(2, "op", "change", "kind", "group", "principal", "SALES", "site", "amer")
	wantStatus(t, a, http.StatusOK)
	wantContains(t, a, "The group Sales has home site amer (was emea), in the same place in the list", `data-result-pod="ams1" data-result="applied"`,
		`data-home-site="group:Sales" data-site="amer" data-place="1"`, `data-home-site="group:Finance" data-site="emea" data-place="2"`)
	bothHold(t, "change", 3, func(d *vdibroker.Federation) bool {
		return cmp.Equal(d.HomeSites, []vdibroker.HomeSite{{Group: "Sales", Site: "amer"}, {Group: "Finance", Site: "emea"}})
	}, fra, ams)
	if pod := dora(); pod != "ams1" {
		t.Errorf("Sales's home site changed to amer: dora is placed on %s, want ams1", pod)
	}

	a = home(3, "op", "down", "kind", "group", "principal", "Sales")
	wantStatus(t, a, http.StatusOK)
	wantContains(t, a, "The home site of the group Sales moved down, to place 2 of 2",
		`data-home-site="group:Finance" data-site="emea" data-place="1"`, `data-home-site="group:Sales" data-site="amer" data-place="2"`)
	bothHold(t, "down", 4, func(d *vdibroker.Federation) bool {
		return cmp.Equal(d.HomeSites, []vdibroker.HomeSite{{Group: "Finance", Site: "emea"}, {Group: "Sales", Site: "amer"}})
	}, fra, ams)
	if pod := dora(); pod != "fra1" {
		t.Errorf("Finance's home site first: dora is placed on %s, want fra1", pod)
	}

	// Nothing to do: no write.
	for _, form := range [][]string{
		{"op", "down", "kind", "group", "principal", "Sales"},
		{"op", "up", "kind", "group", "principal", "finance"},
		{"op", "change", "kind", "group", "principal", "Sales", "site", "amer"},
	} {
		if a = home(4, form...); a.status != http.StatusSeeOther {
			t.Errorf("%v: HTTP %d, want 303 and nothing written", form, a.status)
		}
	}
	for _, tc := range []struct {
		form   []string
		status int
		words  string
	}{
		{[]string{"op", "change", "kind", "group", "principal", "Sales", "site", "mars"}, http.StatusBadRequest, "is not a site of the federation document"},
		{[]string{"op", "change", "kind", "group", "principal", "Ops", "site", "amer"}, http.StatusNotFound, "the group Ops has no home site: add one"},
		{[]string{"op", "up", "kind", "robot", "principal", "Ops"}, http.StatusBadRequest, "must be user or group"},
		{[]string{"op", "sideways", "kind", "group", "principal", "Sales"}, http.StatusBadRequest, "op must be add, change, up, down or remove"},
	} {
		a = home(4, tc.form...)
		wantStatus(t, a, tc.status)
		wantContains(t, a, tc.words)
	}
	// A Reader is refused by the API (the page shows her no form), and
	// a post without the sign-in's CSRF token before anything is read.
	reader := fra.browser()
	reader.signin(fra.token("Reader"))
	if page := reader.get("/federation"); strings.Contains(page.body, `data-action="change-home-site"`) || strings.Contains(page.body, `data-action="home-site-up"`) {
		t.Errorf("a Reader is shown the home site forms")
	}
	for _, op := range []string{"change", "up"} {
		f := geForm(reader.csrf("/federation"), 4, "op", op, "kind", "group", "principal", "Sales", "site", "emea")
		if a := reader.post("/federation/homesites", f); a.status != http.StatusForbidden || !strings.Contains(a.body, "Refused by the broker") {
			t.Errorf("a Reader's %s: HTTP %d", op, a.status)
		}
		f.Del("csrf")
		if a := b.post("/federation/homesites", f); a.status != http.StatusForbidden || !strings.Contains(a.body, "CSRF") {
			t.Errorf("the admin's %s without CSRF: HTTP %d", op, a.status)
		}
	}
	bothHold(t, "refused", 4, func(d *vdibroker.Federation) bool {
		return cmp.Equal(d.HomeSites, []vdibroker.HomeSite{{Group: "Finance", Site: "emea"}, {Group: "Sales", Site: "amer"}})
	}, fra, ams)
}
