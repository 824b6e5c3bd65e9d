package console_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/console"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// The "Published to users" card's forms (console/publish.go): an
// administrator publishes a pool from its page. Each test drives the
// console over HTTP as a browser does and checks the result through the
// API, and with a real User token, what an end user may open.
// TestConsolePostgres runs them again on PostgreSQL.

// formETag is the etag a form of the card for group carries: the ETag of
// what the page showed (R-E13). form is "assign" or "delete".
func formETag(t *testing.T, a answer, pool, group, form string) string {
	t.Helper()
	action := "/pools/" + url.PathEscape(pool) + "/appgroups/" + url.PathEscape(group)
	if form == "delete" {
		action += "/delete"
	} else {
		action += "/assignments"
	}
	re := regexp.MustCompile(`<form method="post" action="` + regexp.QuoteMeta(action) + `"[^>]*>\s*<input type="hidden" name="csrf" value="[^"]*"><input type="hidden" name="etag" value="([^"]*)">`)
	m := re.FindStringSubmatch(a.body)
	if m == nil {
		t.Fatalf("no %s form of %s with an etag on the page:\n%s", form, group, a.body)
	}
	return html.UnescapeString(m[1])
}

// userClient is an end user's API client: a User token for subject with
// groups (R-E6).
func (e *env) userClient(subject string, groups ...string) *vhttp.Client {
	e.t.Helper()
	tok, err := e.admin.CreateToken(context.Background(), vhttp.TokenRequest{Role: "User", Subject: subject, Groups: groups})
	if err != nil {
		e.t.Fatal(err)
	}
	return vhttp.NewClient(e.url, tok.Secret)
}

// feedIDs are the resources of a user's feed (R-U5): what her portal lists.
func feedIDs(t *testing.T, c *vhttp.Client) []string {
	t.Helper()
	f, err := c.Feed(context.Background())
	if err != nil {
		t.Fatalf("feed: %v", err)
	}
	var ids []string
	for _, r := range f.Resources {
		ids = append(ids, r.ID)
	}
	slices.Sort(ids)
	return ids
}

// TestPublishDesktopFromCard_RE1_RE2_RE4: on a pool with no group (its
// card warns, R-E4), a Contributor creates a Desktop group from the card
// and assigns alice: the API holds the group and the assignment, each
// write audited as the Contributor's, the warning is gone, and alice's
// User token connects where it was refused NotEntitled; a second Desktop
// group is the API's 409 beside the type (R-E1), the form as typed.
// Unassigned, alice's next connect is refused again; all users on and
// off; the group deleted.
func TestPublishDesktopFromCard_RE1_RE2_RE4(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.seed()
	alice := e.userClient("alice")
	if _, err := alice.Connect(ctx, "pool-a", connectReq("alice")); vdibroker.ErrorCode(err) != vdibroker.ENotEntitled {
		t.Fatalf("alice's connect to a pool no group publishes: %v, want NotEntitled", err)
	}
	b := e.browser()
	b.signin(e.token("Contributor"))
	a := b.get("/pools/pool-a")
	wantContains(t, a, `id="published-warning"`, `id="new-group-form"`, `action="/pools/pool-a/appgroups"`,
		`id="published-fix">Or on this card: create a Desktop group under <em>New application group</em>, below.`)
	csrf := b.csrf("/pools/pool-a")

	a = b.post("/pools/pool-a/appgroups", url.Values{"csrf": {csrf}, "name": {"pool-a-desktop"}, "friendlyName": {"Office desktop"}, "applicationGroupType": {"Desktop"}})
	wantStatus(t, a, http.StatusSeeOther)
	if a.location != "/pools/pool-a#published" {
		t.Errorf("redirect to %q", a.location)
	}
	g, err := e.admin.GetApplicationGroup(ctx, "pool-a-desktop")
	if err != nil || g.HostPool != "pool-a" || g.ApplicationGroupType != vdibroker.AppGroupDesktop || g.FriendlyName != "Office desktop" ||
		g.Assignments.AllUsers || len(g.Assignments.Users)+len(g.Assignments.Groups) != 0 {
		t.Fatalf("the group the console created: %+v, %v", g, err)
	}
	e.wantAudited("applicationgroup.put", "applicationgroups/pool-a-desktop", "contributor-1")
	a = b.get("/pools/pool-a")
	wantContains(t, a, "Application group pool-a-desktop (Desktop) created", `data-group="pool-a-desktop" data-type="Desktop"`, `id="published-warning"`)
	wantContains(t, a, `id="published-fix">Or on this card: assign a user, a group or all users to <code>pool-a-desktop</code> under <em>Change</em>, below.`)
	if page := pageText(a); !strings.Contains(page, "its Desktop group pool-a-desktop is assigned to nobody") {
		t.Errorf("the card does not warn that the new group is assigned to nobody:\n%s", page)
	}

	// A second Desktop group of the pool: 409 beside the type, as typed.
	a = b.post("/pools/pool-a/appgroups", url.Values{"csrf": {csrf}, "name": {"pool-a-second"}, "friendlyName": {"Again"}, "applicationGroupType": {"Desktop"}})
	wantStatus(t, a, http.StatusConflict)
	wantContains(t, a, `<details class="publish" id="new-group" open>`, `id="g-applicationGroupType-error"`, "has a Desktop application group already", `value="pool-a-second"`, `value="Again"`)
	if _, err := e.admin.GetApplicationGroup(ctx, "pool-a-second"); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
		t.Errorf("a refused create made the group: %v", err)
	}

	// Assign alice with the ETag the page showed.
	a = b.get("/pools/pool-a")
	a = b.post("/pools/pool-a/appgroups/pool-a-desktop/assignments", url.Values{"csrf": {csrf}, "etag": {formETag(t, a, "pool-a", "pool-a-desktop", "assign")},
		"op": {"add"}, "kind": {"user"}, "principal": {"alice"}})
	wantStatus(t, a, http.StatusSeeOther)
	if g, err := e.admin.GetApplicationGroup(ctx, "pool-a-desktop"); err != nil || !slices.Equal(g.Assignments.Users, []string{"alice"}) {
		t.Fatalf("after the assignment: %+v, %v", g, err)
	}
	a = b.get("/pools/pool-a")
	wantContains(t, a, "The user alice is assigned to pool-a-desktop", `data-user="alice"`)
	if strings.Contains(a.body, `id="published-warning"`) {
		t.Errorf("the card still warns once alice is assigned:\n%s", pageText(a))
	}
	if _, err := alice.Connect(ctx, "pool-a", connectReq("alice")); err != nil {
		t.Fatalf("alice's connect once the console assigned her: %v", err)
	}
	if ids := feedIDs(t, alice); !slices.Equal(ids, []string{"desktop:pool-a"}) {
		t.Errorf("alice's feed: %v, want desktop:pool-a", ids)
	}
	// Assigning her again, in another case, changes nothing (R-E5).
	a = b.post("/pools/pool-a/appgroups/pool-a-desktop/assignments", url.Values{"csrf": {csrf}, "etag": {formETag(t, a, "pool-a", "pool-a-desktop", "assign")},
		"op": {"add"}, "kind": {"user"}, "principal": {"ALICE"}})
	wantStatus(t, a, http.StatusSeeOther)
	if g, _ := e.admin.GetApplicationGroup(ctx, "pool-a-desktop"); !slices.Equal(g.Assignments.Users, []string{"alice"}) {
		t.Errorf("assigning ALICE again: users %v", g.Assignments.Users)
	}

	// Group Sales, then alice out: a Sales member still connects, alice
	// is refused (R-E3).
	a = b.get("/pools/pool-a")
	wantStatus(t, b.post("/pools/pool-a/appgroups/pool-a-desktop/assignments", url.Values{"csrf": {csrf}, "etag": {formETag(t, a, "pool-a", "pool-a-desktop", "assign")},
		"op": {"add"}, "kind": {"group"}, "principal": {"Sales"}}), http.StatusSeeOther)
	a = b.get("/pools/pool-a")
	wantContains(t, a, `data-group-principal="Sales"`, `aria-label="Unassign user alice"`)
	wantStatus(t, b.post("/pools/pool-a/appgroups/pool-a-desktop/assignments", url.Values{"csrf": {csrf}, "etag": {formETag(t, a, "pool-a", "pool-a-desktop", "assign")},
		"op": {"remove"}, "kind": {"user"}, "principal": {"alice"}}), http.StatusSeeOther)
	g, _ = e.admin.GetApplicationGroup(ctx, "pool-a-desktop")
	if len(g.Assignments.Users) != 0 || !slices.Equal(g.Assignments.Groups, []string{"Sales"}) {
		t.Fatalf("after unassigning alice: %+v", g.Assignments)
	}
	if ids := feedIDs(t, alice); len(ids) != 0 {
		t.Errorf("alice's feed once unassigned: %v, want nothing", ids)
	}
	if ids := feedIDs(t, e.userClient("bob", "sales")); !slices.Equal(ids, []string{"desktop:pool-a"}) {
		t.Errorf("a Sales member's feed: %v, want desktop:pool-a (groups compare in any case, R-E5)", ids)
	}

	// All users on, then off.
	for _, on := range []string{"true", "false"} {
		a = b.get("/pools/pool-a")
		wantStatus(t, b.post("/pools/pool-a/appgroups/pool-a-desktop/assignments", url.Values{"csrf": {csrf}, "etag": {formETag(t, a, "pool-a", "pool-a-desktop", "assign")},
			"op": {"allUsers"}, "allUsers": {on}}), http.StatusSeeOther)
		g, _ = e.admin.GetApplicationGroup(ctx, "pool-a-desktop")
		if g.Assignments.AllUsers != (on == "true") {
			t.Errorf("allUsers %s: the group's is %v", on, g.Assignments.AllUsers)
		}
		if got := len(feedIDs(t, alice)); (got == 1) != (on == "true") {
			t.Errorf("allUsers %s: alice's feed has %d resources", on, got)
		}
	}

	// Deleted with the ETag the page showed: the card warns again.
	a = b.get("/pools/pool-a")
	wantContains(t, a, `data-action="delete-appgroup" data-group="pool-a-desktop"`)
	wantStatus(t, b.post("/pools/pool-a/appgroups/pool-a-desktop/delete", url.Values{"csrf": {csrf}, "etag": {formETag(t, a, "pool-a", "pool-a-desktop", "delete")}}), http.StatusSeeOther)
	if _, err := e.admin.GetApplicationGroup(ctx, "pool-a-desktop"); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
		t.Errorf("the deleted group: %v, want NotFound", err)
	}
	e.wantAudited("applicationgroup.delete", "applicationgroups/pool-a-desktop", "contributor-1")
	wantContains(t, b.get("/pools/pool-a"), "Application group pool-a-desktop deleted", `id="published-warning"`)
}

// TestPublishRemoteAppFromCard_RE7: a RemoteApp group and its
// application made on the card are in the portal feed of the user it is
// assigned to, shown there by default (the console's form ticks show in
// portal); an application the API refuses (Require without arguments)
// keeps the form as typed with the field named; a second application of
// the name replaces nothing (If-None-Match: *); removed, it is in nobody's
// feed.
func TestPublishRemoteAppFromCard_RE7(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.seed()
	carol := e.userClient("carol", "Finance")
	b := e.browser()
	b.signin(adminToken)
	csrf := b.csrf("/pools/pool-a")
	wantStatus(t, b.post("/pools/pool-a/appgroups", url.Values{"csrf": {csrf}, "name": {"pool-a-apps"}, "applicationGroupType": {"RemoteApp"}}), http.StatusSeeOther)
	a := b.get("/pools/pool-a")
	wantContains(t, a, "Application group pool-a-apps (RemoteApp) created", `data-form="app" data-group="pool-a-apps"`,
		// Show in portal is ticked in the blank form.
		`id="p-0-showInPortal" name="showInPortal" checked`)
	wantStatus(t, b.post("/pools/pool-a/appgroups/pool-a-apps/assignments", url.Values{"csrf": {csrf}, "etag": {formETag(t, a, "pool-a", "pool-a-apps", "assign")},
		"op": {"add"}, "kind": {"group"}, "principal": {"Finance"}}), http.StatusSeeOther)

	// Refused by the API: Require needs arguments; the form as typed.
	a = b.post("/pools/pool-a/appgroups/pool-a-apps/apps", url.Values{"csrf": {csrf}, "name": {"word"}, "friendlyName": {"Word"},
		"filePath": {`C:\Office\WINWORD.EXE`}, "commandLineSetting": {"Require"}, "showInPortal": {"on"}})
	wantStatus(t, a, http.StatusBadRequest)
	wantContains(t, a, `<details class="publish" id="manage-0" data-manage="pool-a-apps" open>`, `id="p-0-commandLineArguments-error"`,
		"commandLineArguments: is required when commandLineSetting is Require", `value="word"`, `value="C:\Office\WINWORD.EXE"`, `<option value="Require" selected>`)
	if apps, err := e.admin.ListApplications(ctx, "pool-a-apps"); err != nil || len(apps) != 0 {
		t.Fatalf("a refused application was stored: %v, %v", apps, err)
	}

	a = b.post("/pools/pool-a/appgroups/pool-a-apps/apps", url.Values{"csrf": {csrf}, "name": {"word"}, "friendlyName": {"Word"},
		"filePath": {`C:\Office\WINWORD.EXE`}, "commandLineSetting": {"Allow"}, "commandLineArguments": {"/safe"}, "showInPortal": {"on"}})
	wantStatus(t, a, http.StatusSeeOther)
	app, err := e.admin.GetApplication(ctx, "pool-a-apps", "word")
	if err != nil || app.FilePath != `C:\Office\WINWORD.EXE` || app.CommandLineSetting != "Allow" || app.CommandLineArguments != "/safe" || !app.ShowInPortal || app.FriendlyName != "Word" {
		t.Fatalf("the application the console added: %+v, %v", app, err)
	}
	e.wantAudited("application.put", "applicationgroups/pool-a-apps/applications/word", "admin")
	if ids := feedIDs(t, carol); !slices.Equal(ids, []string{"app:pool-a-apps/word"}) {
		t.Errorf("carol's feed: %v, want app:pool-a-apps/word", ids)
	}
	a = b.get("/pools/pool-a")
	wantContains(t, a, "Application word added to pool-a-apps: it is listed in the portal", `<bdi data-app="word">Word</bdi>`)
	// The RemoteApp group assigned, the desktops not: a note, no warning.
	if strings.Contains(a.body, `id="published-warning"`) || !strings.Contains(a.body, `id="published-note"`) {
		t.Errorf("a pool whose applications are published warns, or has no note:\n%s", pageText(a))
	}

	// The name again replaces nothing.
	a = b.post("/pools/pool-a/appgroups/pool-a-apps/apps", url.Values{"csrf": {csrf}, "name": {"word"}, "filePath": {`C:\other.exe`}})
	wantStatus(t, a, http.StatusPreconditionFailed)
	wantContains(t, a, `id="p-0-name-error"`, "has an application &#34;word&#34; already")
	if app, _ := e.admin.GetApplication(ctx, "pool-a-apps", "word"); app.FilePath != `C:\Office\WINWORD.EXE` {
		t.Errorf("a refused second add replaced the application: %+v", app)
	}

	// Unticked, it is stored not shown.
	wantStatus(t, b.post("/pools/pool-a/appgroups/pool-a-apps/apps", url.Values{"csrf": {csrf}, "name": {"calc"}, "filePath": {`C:\calc.exe`}}), http.StatusSeeOther)
	if app, err := e.admin.GetApplication(ctx, "pool-a-apps", "calc"); err != nil || app.ShowInPortal {
		t.Errorf("an application added unticked: %+v, %v; want stored, not shown", app, err)
	}

	a = b.get("/pools/pool-a")
	m := regexp.MustCompile(`action="/pools/pool-a/appgroups/pool-a-apps/apps/remove" class="inline">\s*<input type="hidden" name="csrf" value="[^"]*"><input type="hidden" name="etag" value="([^"]*)"><input type="hidden" name="app" value="word">`).FindStringSubmatch(a.body)
	if m == nil {
		t.Fatalf("no remove form of word:\n%s", a.body)
	}
	wantStatus(t, b.post("/pools/pool-a/appgroups/pool-a-apps/apps/remove", url.Values{"csrf": {csrf}, "etag": {html.UnescapeString(m[1])}, "app": {"word"}}), http.StatusSeeOther)
	if _, err := e.admin.GetApplication(ctx, "pool-a-apps", "word"); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
		t.Errorf("the removed application: %v, want NotFound", err)
	}
	if ids := feedIDs(t, carol); len(ids) != 0 {
		t.Errorf("carol's feed once word is removed: %v, want nothing (calc is not shown)", ids)
	}
}

// TestPublishStaleForm_RE13: another administrator assigns bob between
// the page and the Contributor's assignment of carol: the console's write
// carries the page's ETag, so the API refuses it with 412 and writes
// nothing; the card shows bob, the form keeps carol. A delete from the
// stale page is refused the same way.
func TestPublishStaleForm_RE13(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.seed()
	if _, err := e.admin.PutApplicationGroup(ctx, "pool-a-desktop", map[string]any{"hostPool": "pool-a", "applicationGroupType": "Desktop"}); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.signin(e.token("Contributor"))
	a := b.get("/pools/pool-a")
	csrf := b.csrf("/pools/pool-a")
	etag, delEtag := formETag(t, a, "pool-a", "pool-a-desktop", "assign"), formETag(t, a, "pool-a", "pool-a-desktop", "delete")
	if _, err := e.admin.PutApplicationGroup(ctx, "pool-a-desktop", map[string]any{"hostPool": "pool-a", "applicationGroupType": "Desktop",
		"assignments": map[string]any{"users": []string{"bob"}}}); err != nil {
		t.Fatal(err)
	}
	a = b.post("/pools/pool-a/appgroups/pool-a-desktop/assignments", url.Values{"csrf": {csrf}, "etag": {etag}, "op": {"add"}, "kind": {"user"}, "principal": {"carol"}})
	wantStatus(t, a, http.StatusPreconditionFailed)
	wantContains(t, a, "someone else changed it since this page was read", `data-user="bob"`, `value="carol"`, `data-manage="pool-a-desktop" open`)
	if g, _ := e.admin.GetApplicationGroup(ctx, "pool-a-desktop"); !slices.Equal(g.Assignments.Users, []string{"bob"}) {
		t.Errorf("the refused write changed the group: users %v, want [bob]", g.Assignments.Users)
	}
	a = b.post("/pools/pool-a/appgroups/pool-a-desktop/delete", url.Values{"csrf": {csrf}, "etag": {delEtag}})
	wantStatus(t, a, http.StatusPreconditionFailed)
	if _, err := e.admin.GetApplicationGroup(ctx, "pool-a-desktop"); err != nil {
		t.Errorf("a delete from a stale page deleted the group: %v", err)
	}
	// The page as it is now takes it.
	a = b.get("/pools/pool-a")
	wantStatus(t, b.post("/pools/pool-a/appgroups/pool-a-desktop/assignments", url.Values{"csrf": {csrf}, "etag": {formETag(t, a, "pool-a", "pool-a-desktop", "assign")},
		"op": {"add"}, "kind": {"user"}, "principal": {"carol"}}), http.StatusSeeOther)
	if g, _ := e.admin.GetApplicationGroup(ctx, "pool-a-desktop"); !slices.Equal(g.Assignments.Users, []string{"bob", "carol"}) {
		t.Errorf("users %v, want [bob carol]", g.Assignments.Users)
	}
}

// TestPublishDeleteUnseenApp_RE13: another administrator adds excel to
// a RemoteApp group after the Contributor's page showed it with word
// alone. The group's ETag covers its set of applications, so the page's
// delete, which carries the ETag it showed, is refused by the API with
// 412 and nothing is deleted; the card shows the group as it is now,
// with excel, and its delete takes both.
func TestPublishDeleteUnseenApp_RE13(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.seed()
	if _, err := e.admin.PutApplicationGroup(ctx, "pool-a-apps", map[string]any{"hostPool": "pool-a", "applicationGroupType": "RemoteApp"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.PutApplication(ctx, "pool-a-apps", "word", map[string]any{"filePath": `C:\word.exe`}); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.signin(e.token("Contributor"))
	a := b.get("/pools/pool-a")
	csrf := b.csrf("/pools/pool-a")
	wantContains(t, a, `data-app="word"`)
	form := url.Values{"csrf": {csrf}, "etag": {formETag(t, a, "pool-a", "pool-a-apps", "delete")}}
	if _, err := e.admin.PutApplication(ctx, "pool-a-apps", "excel", map[string]any{"filePath": `C:\excel.exe`}); err != nil {
		t.Fatal(err)
	}
	a = b.post("/pools/pool-a/appgroups/pool-a-apps/delete", form)
	wantStatus(t, a, http.StatusPreconditionFailed)
	wantContains(t, a, "Nothing was deleted: someone else changed it since this page was read", `data-manage="pool-a-apps" open`, `data-app="excel"`, `data-app="word"`)
	if apps, err := e.admin.ListApplications(ctx, "pool-a-apps"); err != nil || len(apps) != 2 {
		t.Fatalf("a delete from a page that did not show excel: applications %v, %v; want excel and word", apps, err)
	}
	form.Set("etag", formETag(t, a, "pool-a", "pool-a-apps", "delete"))
	wantStatus(t, b.post("/pools/pool-a/appgroups/pool-a-apps/delete", form), http.StatusSeeOther)
	if _, err := e.admin.GetApplicationGroup(ctx, "pool-a-apps"); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
		t.Errorf("the group after its delete: %v, want NotFound", err)
	}
}

// TestPublishDeleteAppAddedInWindow_RE13: another administrator adds
// excel after the console has read the group for the delete and before
// its DELETE reaches the API (the console's own look at the group would
// not see it). The DELETE carries the ETag the page showed, which the
// add moved: 412, nothing deleted, excel shown.
func TestPublishDeleteAppAddedInWindow_RE13(t *testing.T) {
	var addExcel atomic.Bool
	e := newEnvWith(t, func(cfg *console.Config) {
		inner := cfg.API
		cfg.API = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodDelete && r.URL.Path == "/api/v1/applicationgroups/pool-a-apps" && addExcel.CompareAndSwap(true, false) {
				put := httptest.NewRequest(http.MethodPut, "/api/v1/applicationgroups/pool-a-apps/applications/excel", strings.NewReader(`{"filePath": "C:\\excel.exe"}`))
				put.Header.Set("Authorization", "Bearer "+adminToken)
				rec := httptest.NewRecorder()
				inner.ServeHTTP(rec, put)
				if rec.Code != http.StatusCreated {
					t.Errorf("another administrator's excel: %d %s", rec.Code, rec.Body)
				}
			}
			inner.ServeHTTP(w, r)
		})
	})
	ctx := context.Background()
	e.seed()
	if _, err := e.admin.PutApplicationGroup(ctx, "pool-a-apps", map[string]any{"hostPool": "pool-a", "applicationGroupType": "RemoteApp"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.PutApplication(ctx, "pool-a-apps", "word", map[string]any{"filePath": `C:\word.exe`}); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.signin(e.token("Contributor"))
	a := b.get("/pools/pool-a")
	csrf := b.csrf("/pools/pool-a")
	addExcel.Store(true)
	a = b.post("/pools/pool-a/appgroups/pool-a-apps/delete", url.Values{"csrf": {csrf}, "etag": {formETag(t, a, "pool-a", "pool-a-apps", "delete")}})
	if addExcel.Load() {
		t.Fatal("the console sent no DELETE of the group")
	}
	wantStatus(t, a, http.StatusPreconditionFailed)
	wantContains(t, a, "Nothing was deleted: someone else changed it since this page was read", `data-app="excel"`)
	if apps, err := e.admin.ListApplications(ctx, "pool-a-apps"); err != nil || len(apps) != 2 {
		t.Errorf("excel added while the delete ran: applications %v, %v; want excel and word", apps, err)
	}
}

// submitForm is what a browser posts when the form of page (at path)
// that follows marker is submitted: its hidden inputs to its action,
// resolved against the page as a browser resolves it (dot segments
// removed).
func submitForm(t *testing.T, b *browser, page answer, path, marker string) answer {
	t.Helper()
	i := strings.Index(page.body, marker)
	if i < 0 {
		t.Fatalf("no %s on the page:\n%s", marker, page.body)
	}
	rest := page.body[i:]
	form := rest[strings.Index(rest, "<form"):]
	form = form[:strings.Index(form, "</form>")]
	action := regexp.MustCompile(`action="([^"]*)"`).FindStringSubmatch(form)
	values := url.Values{}
	for _, m := range regexp.MustCompile(`<input type="hidden" name="([^"]*)" value="([^"]*)">`).FindAllStringSubmatch(form, -1) {
		values.Add(m[1], html.UnescapeString(m[2]))
	}
	base, _ := url.Parse(path)
	ref, err := url.Parse(html.UnescapeString(action[1]))
	if err != nil {
		t.Fatal(err)
	}
	return b.post(base.ResolveReference(ref).RequestURI(), values)
}

// TestPublishDotNamedApp_RE7: an application may be named "." or ".."
// (1..64 characters of A-Za-z0-9@._- and space); the API takes such a
// name escaped (%2E) in its path. The card adds one, and its Remove,
// posted as a browser resolves the form's action, removes that
// application and nothing else: not the group, whose delete a path
// ending "apps/../delete" would name.
func TestPublishDotNamedApp_RE7(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.seed()
	if _, err := e.admin.PutApplicationGroup(ctx, "pool-a-apps", map[string]any{"hostPool": "pool-a", "applicationGroupType": "RemoteApp"}); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.signin(adminToken)
	csrf := b.csrf("/pools/pool-a")
	for _, name := range []string{"..", "."} {
		a := b.post("/pools/pool-a/appgroups/pool-a-apps/apps", url.Values{"csrf": {csrf}, "name": {name}, "filePath": {`C:\dots.exe`}})
		wantStatus(t, a, http.StatusSeeOther)
		if _, err := e.admin.GetApplication(ctx, "pool-a-apps", name); err != nil {
			t.Fatalf("application %q added on the card: %v", name, err)
		}
	}
	for _, name := range []string{"..", "."} {
		a := b.get("/pools/pool-a")
		a = submitForm(t, b, a, "/pools/pool-a", `<li data-app="`+name+`">`)
		wantStatus(t, a, http.StatusSeeOther)
		if _, err := e.admin.GetApplication(ctx, "pool-a-apps", name); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
			t.Errorf("application %q after its Remove: %v, want NotFound", name, err)
		}
		if _, err := e.admin.GetApplicationGroup(ctx, "pool-a-apps"); err != nil {
			t.Fatalf("the group after application %q's Remove: %v", name, err)
		}
	}
}

// TestPublishBadInput: a group name the API refuses, and a user name it
// refuses, are shown beside their field with what was typed; nothing is
// written. A group of another pool is not this page's to change.
func TestPublishBadInput(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.seed()
	if _, err := e.admin.PutHostPool(ctx, "pool-b", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.PutApplicationGroup(ctx, "pool-b-desktop", map[string]any{"hostPool": "pool-b", "applicationGroupType": "Desktop"}); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.signin(adminToken)
	csrf := b.csrf("/pools/pool-a")
	for _, tc := range []struct{ name, want string }{
		{"a/b", "name: must be 3..80 characters of A-Za-z0-9@._- and space; &#39;/&#39; is not allowed"},
		{"ab", "name: must be 3..80 characters"},
		{"", "name: is required"},
	} {
		a := b.post("/pools/pool-a/appgroups", url.Values{"csrf": {csrf}, "name": {tc.name}, "friendlyName": {"Typed"}, "applicationGroupType": {"RemoteApp"}})
		wantStatus(t, a, http.StatusBadRequest)
		wantContains(t, a, `id="new-group" open`, `id="g-name-error"`, tc.want, `aria-invalid="true" aria-describedby="g-name-error"`, `value="Typed"`, `<option value="RemoteApp" selected>`)
	}
	a := b.post("/pools/pool-a/appgroups", url.Values{"csrf": {csrf}, "name": {"typo-type"}, "applicationGroupType": {"Desktops"}})
	wantStatus(t, a, http.StatusBadRequest)
	wantContains(t, a, `id="g-applicationGroupType-error"`, "applicationGroupType")
	if gs, err := e.admin.ListApplicationGroups(ctx, "pool-a"); err != nil || len(gs) != 0 {
		t.Errorf("refused creates stored %v, %v", gs, err)
	}

	if _, err := e.admin.PutApplicationGroup(ctx, "pool-a-desktop", map[string]any{"hostPool": "pool-a", "applicationGroupType": "Desktop"}); err != nil {
		t.Fatal(err)
	}
	a = b.get("/pools/pool-a")
	long := strings.Repeat("x", vdibroker.MaxUserLen+1)
	a = b.post("/pools/pool-a/appgroups/pool-a-desktop/assignments", url.Values{"csrf": {csrf}, "etag": {formETag(t, a, "pool-a", "pool-a-desktop", "assign")},
		"op": {"add"}, "kind": {"user"}, "principal": {long}})
	wantStatus(t, a, http.StatusBadRequest)
	// In the form's own words, as the API checks an assignment's name.
	wantContains(t, a, `id="a-0-principal-error"`, fmt.Sprintf("principal: must be at most %d characters, got %d", vdibroker.MaxUserLen, vdibroker.MaxUserLen+1), `value="`+long+`"`)
	// A name no group can hold is not "not assigned": refused before the
	// group is read, and not kept as the next page's message (the body's
	// whole megabyte would be the session's).
	a = b.post("/pools/pool-a/appgroups/pool-a-desktop/assignments", url.Values{"csrf": {csrf}, "op": {"remove"}, "kind": {"user"}, "principal": {long}})
	wantStatus(t, a, http.StatusBadRequest)
	wantContains(t, a, "Nothing was removed: principal: must be at most")
	if a = b.get("/pools/pool-a"); strings.Contains(a.body, long) {
		t.Errorf("a refused name is the next page's message:\n%s", pageText(a))
	}
	a = b.post("/pools/pool-a/appgroups/pool-a-desktop/assignments", url.Values{"csrf": {csrf}, "op": {"add"}, "kind": {"user"}, "principal": {" "}})
	wantStatus(t, a, http.StatusBadRequest)
	wantContains(t, a, `id="a-0-principal-error"`, "principal: is required")
	if g, _ := e.admin.GetApplicationGroup(ctx, "pool-a-desktop"); len(g.Assignments.Users) != 0 {
		t.Errorf("refused assignments stored %v", g.Assignments.Users)
	}

	// pool-b's group through pool-a's page: not found, nothing written.
	a = b.post("/pools/pool-a/appgroups/pool-b-desktop/assignments", url.Values{"csrf": {csrf}, "op": {"allUsers"}, "allUsers": {"true"}})
	wantStatus(t, a, http.StatusNotFound)
	wantStatus(t, b.post("/pools/pool-a/appgroups/pool-b-desktop/delete", url.Values{"csrf": {csrf}}), http.StatusNotFound)
	if g, err := e.admin.GetApplicationGroup(ctx, "pool-b-desktop"); err != nil || g.Assignments.AllUsers {
		t.Errorf("pool-b's group after posts through pool-a's page: %+v, %v", g, err)
	}
}

// TestPublishRefusedByRole_RSEC: a Reader and Helpdesk see the card and
// no form of it; a form forged with their sign-in's own CSRF token is
// refused by the API with 403, writes nothing and is audited as refused.
// A Contributor scoped to another pool is refused too. Without the CSRF
// token a Contributor's post is refused before the API is asked.
func TestPublishRefusedByRole_RSEC(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.seed()
	if _, err := e.admin.PutHostPool(ctx, "pool-b", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.PutApplicationGroup(ctx, "pool-a-apps", map[string]any{"hostPool": "pool-a", "applicationGroupType": "RemoteApp"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.PutApplication(ctx, "pool-a-apps", "word", map[string]any{"filePath": `C:\word.exe`}); err != nil {
		t.Fatal(err)
	}
	posts := []struct {
		path string
		form url.Values
	}{
		{"/pools/pool-a/appgroups", url.Values{"name": {"pool-a-desktop"}, "applicationGroupType": {"Desktop"}}},
		{"/pools/pool-a/appgroups/pool-a-apps/assignments", url.Values{"op": {"allUsers"}, "allUsers": {"true"}}},
		{"/pools/pool-a/appgroups/pool-a-apps/apps", url.Values{"name": {"calc"}, "filePath": {`C:\calc.exe`}}},
		{"/pools/pool-a/appgroups/pool-a-apps/apps/remove", url.Values{"app": {"word"}}},
		{"/pools/pool-a/appgroups/pool-a-apps/delete", url.Values{}},
	}
	unchanged := func(t *testing.T) {
		t.Helper()
		gs, err := e.admin.ListApplicationGroups(ctx, "pool-a")
		if err != nil || len(gs) != 1 || gs[0].Name != "pool-a-apps" || gs[0].Assignments.AllUsers {
			t.Errorf("pool-a's groups: %+v, %v; want pool-a-apps as it was", gs, err)
		}
		apps, err := e.admin.ListApplications(ctx, "pool-a-apps")
		if err != nil || len(apps) != 1 || apps[0].Name != "word" {
			t.Errorf("pool-a-apps' applications: %+v, %v; want word", apps, err)
		}
	}
	for _, tc := range []struct {
		name   string
		req    vhttp.TokenRequest
		status int
	}{
		{"Reader", vhttp.TokenRequest{Role: "Reader", Subject: "reader-1"}, http.StatusForbidden},
		{"Helpdesk", vhttp.TokenRequest{Role: "Helpdesk", Subject: "helpdesk-1"}, http.StatusForbidden},
		// pool-a is not its to see: the API answers as for no group.
		{"Contributor scoped to pool-b", vhttp.TokenRequest{Role: "Contributor", Subject: "scoped-b", HostPools: []string{"pool-b"}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := e.admin.CreateToken(ctx, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			b := e.browser()
			b.signin(tok.Secret)
			if tc.status != 0 {
				a := b.get("/pools/pool-a")
				wantContains(t, a, `id="published"`, `data-group="pool-a-apps"`, `<bdi data-app="word">word</bdi>`)
				for _, form := range []string{`id="published-fix"`, `id="new-group-form"`, `data-form="assign"`, `data-form="app"`, `data-action="delete-appgroup"`, `data-action="remove-app"`, `action="/pools/pool-a/appgroups`} {
					if strings.Contains(a.body, form) {
						t.Errorf("a %s's page has %s", tc.name, form)
					}
				}
			}
			csrf := b.csrf("/")
			for _, p := range posts {
				form := url.Values{"csrf": {csrf}}
				for k, v := range p.form {
					form[k] = v
				}
				a := b.post(p.path, form)
				if tc.status != 0 && a.status != tc.status || tc.status == 0 && a.status != http.StatusForbidden && a.status != http.StatusNotFound {
					t.Errorf("%s by a %s: HTTP %d, want %d\n%s", p.path, tc.name, a.status, tc.status, pageText(a))
				}
				if tc.status == http.StatusForbidden && !strings.Contains(a.body, "Refused by the broker: your token may not make this change") {
					t.Errorf("%s by a %s: the page does not say the broker refused it\n%s", p.path, tc.name, pageText(a))
				}
			}
			unchanged(t)
			es, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Principal: tc.req.Subject})
			if err != nil {
				t.Fatal(err)
			}
			refused := 0
			for _, en := range es {
				if en.Outcome == vdibroker.AuditRefused {
					refused++
				}
			}
			if refused == 0 {
				t.Errorf("no refusal of the %s's forged forms in the audit trail", tc.name)
			}
		})
	}

	b := e.browser()
	b.signin(e.token("Contributor"))
	for _, p := range posts {
		wantStatus(t, b.post(p.path, p.form), http.StatusForbidden)
	}
	unchanged(t)
}
