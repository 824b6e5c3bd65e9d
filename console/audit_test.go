package console_test

import (
	"context"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker"
)

// TestAuditPage (issue 15): the console's audit page lists the trail's
// entries with who did what to which target, filters by target, and is
// refused to a Reader by the API; the nav offers it to those who may read
// it only.
func TestAuditPage(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.seed()
	if _, err := e.admin.PatchSessionHost(ctx, "pool-a", "host-2", map[string]any{"allowNewSession": false}); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.signin(adminToken)
	page := b.get("/audit")
	wantStatus(t, page, 200)
	wantContains(t, page, "sessionhost.update", "hostpools/pool-a/sessionhosts/host-2", "hostpool.put")
	only := b.get("/audit?target=" + "hostpools/pool-a/sessionhosts/host-2")
	wantStatus(t, only, 200)
	if strings.Contains(only.body, "hostpool.put") || !strings.Contains(only.body, "sessionhost.update") {
		t.Errorf("the target filter kept other targets or lost the drain")
	}
	if !strings.Contains(b.get("/").body, `href="/audit"`) {
		t.Errorf("the admin's nav has no audit link")
	}

	reader := e.token(vdibroker.RoleReader)
	rb := e.browser()
	rb.signin(reader)
	if strings.Contains(rb.get("/").body, `href="/audit"`) {
		t.Errorf("a Reader's nav offers the audit page")
	}
	if a := rb.get("/audit"); a.status != 403 {
		t.Errorf("a Reader's /audit = %d, want 403", a.status)
	}
}
