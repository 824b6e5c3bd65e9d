package console_test

import (
	"context"
	"net/http"
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
