package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestEntitlementsPage (R-E10): a Reader asks what alice may use with her
// groups and sees each resource with the assignment or group that grants
// it; a Reader scoped to another pool sees none of them.
func TestEntitlementsPage(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.seed()
	for _, g := range []struct {
		name string
		body map[string]any
	}{
		{"pool-a-desktops", map[string]any{"hostPool": "pool-a", "applicationGroupType": "Desktop", "assignments": map[string]any{"users": []string{"Alice"}}}},
		{"pool-a-apps", map[string]any{"hostPool": "pool-a", "applicationGroupType": "RemoteApp", "assignments": map[string]any{"groups": []string{"Sales"}}}},
	} {
		if _, err := e.admin.PutApplicationGroup(ctx, g.name, g.body); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.admin.PutApplication(ctx, "pool-a-apps", "crm", map[string]any{"filePath": "crm.exe", "friendlyName": "Sales CRM"}); err != nil {
		t.Fatal(err)
	}

	b := e.browser()
	b.signin(e.token("Reader"))
	a := b.get("/entitlements?user=alice&groups=sales")
	wantStatus(t, a, http.StatusOK)
	wantContains(t, a, `href="/entitlements" class="active"`, `id="entitlements-form"`,
		`data-kind="Desktop" data-resource="pool-a" data-via="user"`, "assigned to the user (Alice)",
		`data-kind="RemoteApp" data-resource="pool-a/crm" data-via="group"`, "through the group Sales", "Sales CRM")
	a = b.get("/entitlements?user=bob")
	wantContains(t, a, `id="entitlements-none"`)
	if strings.Contains(a.body, `data-kind=`) {
		t.Errorf("bob, assigned nothing, has rows:\n%s", a.body)
	}

	// A Reader scoped to another pool sees none of pool-a's.
	if _, err := e.admin.PutHostPool(ctx, "pool-b", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	tok, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: "Reader", Subject: "b-desk", HostPools: []string{"pool-b"}})
	if err != nil {
		t.Fatal(err)
	}
	s := e.browser()
	s.signin(tok.Secret)
	a = s.get("/entitlements?user=alice&groups=sales")
	wantStatus(t, a, http.StatusOK)
	wantContains(t, a, `id="entitlements-none"`)
}

// TestEntitlementsPageKeepsTheForm (R-E10, R-P4): a name the broker
// refuses is answered 400 on the entitlements page itself, with what was
// typed still in the form, the field marked and the broker's words
// naming it, not on an error page without the form.
func TestEntitlementsPageKeepsTheForm(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	b.signin(e.token("Reader"))
	long := strings.Repeat("a", 300)
	for _, tc := range []struct {
		name, query, invalid, message string
	}{
		{"user too long", "user=" + long + "&groups=Sales", `id="user" name="user" value="` + long + `"`, "user: must be at most 256 characters, got 300"},
		{"group too long", "user=alice&groups=Sales,+" + long, `id="groups" name="groups" value="Sales, ` + long + `"`, "must be at most 256 characters, got 300"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := b.get("/entitlements?" + tc.query)
			wantStatus(t, a, http.StatusBadRequest)
			wantContains(t, a, `id="entitlements-form"`, tc.message)
			// The refused input keeps its value and is marked invalid.
			i := strings.Index(a.body, tc.invalid)
			if i < 0 {
				t.Fatalf("the form lost what was typed (%.60s...):\n%s", tc.invalid, a.body)
			}
			if tag := a.body[i:min(len(a.body), i+len(tc.invalid)+120)]; !strings.Contains(tag[:strings.Index(tag, ">")], `aria-invalid="true"`) {
				t.Errorf("the refused input is not marked invalid: %s", tag)
			}
		})
	}
}

// TestPoolPagePublishedToUsers_RE4: the pool page lists the pool's
// application groups and who each is assigned to (R-E1, R-E2), and says
// that end users cannot open the pool while no Desktop group publishes
// it (R-E4: a pool created after the migration has none) or while that
// group is assigned to nobody, with the command that fixes it; a pool
// created in the console says so at once.
func TestPoolPagePublishedToUsers_RE4(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.seed()
	b := e.browser()
	b.signin(e.token("Contributor"))

	a := b.get("/pools/pool-a")
	wantStatus(t, a, http.StatusOK)
	wantContains(t, a, `id="published-warning"`)
	if page := stripRuleLinks(a.body); !strings.Contains(page, "no Desktop application group publishes them") ||
		!strings.Contains(page, "vdibroker applicationgroup create --name pool-a-desktop --host-pool pool-a --application-group-type Desktop") {
		t.Errorf("pool-a, published by no group, does not say so and what to do:\n%s", textOf(a.body))
	}

	put := func(name string, body map[string]any) {
		t.Helper()
		if _, err := e.admin.PutApplicationGroup(ctx, name, body); err != nil {
			t.Fatal(err)
		}
	}
	put("pool-a-desktops", map[string]any{"hostPool": "pool-a", "applicationGroupType": "Desktop", "friendlyName": "A desktops"})
	a = b.get("/pools/pool-a")
	wantContains(t, a, `data-group="pool-a-desktops" data-type="Desktop"`, "A desktops")
	if page := stripRuleLinks(a.body); !strings.Contains(page, "its Desktop group pool-a-desktops is assigned to nobody") {
		t.Errorf("a Desktop group assigned to nobody is not called out:\n%s", textOf(a.body))
	}

	put("pool-a-desktops", map[string]any{"hostPool": "pool-a", "applicationGroupType": "Desktop",
		"assignments": map[string]any{"users": []string{"Alice"}, "groups": []string{"Sales", "HR"}}})
	put("pool-a-apps", map[string]any{"hostPool": "pool-a", "applicationGroupType": "RemoteApp", "assignments": map[string]any{"allUsers": true}})
	a = b.get("/pools/pool-a")
	if strings.Contains(a.body, `id="published-warning"`) {
		t.Errorf("a Desktop group assigned to Alice still warns:\n%s", textOf(a.body))
	}
	page := textOf(a.body)
	for _, want := range []string{"1 user: Alice; 2 groups: Sales, HR", "all users"} {
		if !strings.Contains(page, want) {
			t.Errorf("the pool page lacks %q:\n%s", want, page)
		}
	}
	wantContains(t, a, `data-group="pool-a-apps" data-type="RemoteApp"`)

	// A pool created here: the flash says it is in nobody's portal yet.
	a = b.post("/pools", url.Values{"csrf": {b.csrf("/")}, "name": {"pool-new"}, "hostPoolType": {"Pooled"}})
	wantStatus(t, a, http.StatusSeeOther)
	a = b.get(a.location)
	if page := stripRuleLinks(a.body); !strings.Contains(page, "End users cannot open it until an application group publishes it to them (R-E4)") {
		t.Errorf("the created pool's flash does not say end users cannot open it yet:\n%s", textOf(a.body))
	}
}

// TestCreatePoolFriendlyNameBound (R-P4, §2): the create form bounds a
// friendly name as the API does (512 characters), as the settings form
// does, not shorter: a 400-character name the API takes is created.
func TestCreatePoolFriendlyNameBound(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	b.signin(e.token("Contributor"))
	wantContains(t, b.get("/"), `id="c-friendlyName" name="friendlyName" value="" maxlength="512"`)
	name := strings.Repeat("f", 400)
	a := b.post("/pools", url.Values{"csrf": {b.csrf("/")}, "name": {"pool-long"}, "friendlyName": {name}})
	wantStatus(t, a, http.StatusSeeOther)
	p, err := e.admin.GetHostPool(context.Background(), "pool-long")
	if err != nil {
		t.Fatal(err)
	}
	if p.FriendlyName != name {
		t.Errorf("friendlyName %d characters, want 400", len(p.FriendlyName))
	}
}
