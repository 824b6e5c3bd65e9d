package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker"
)

// TestRemoteAppsOnHostAndPoolPages_RE12: the host page says what the
// host's agent reports of RemoteApps; the pool page warns when the pool
// publishes applications and none of its hosts can run them, and not
// once one host can.
func TestRemoteAppsOnHostAndPoolPages_RE12(t *testing.T) {
	e := newEnv(t)
	e.seed()
	ctx := context.Background()
	say := func(host string, can bool) {
		t.Helper()
		if _, err := e.admin.Heartbeat(ctx, e.agents[host], &vdibroker.HeartbeatRequest{RemoteApps: &can}); err != nil {
			t.Fatal(err)
		}
	}
	b := e.browser()
	b.signin(e.token(vdibroker.RoleReader))
	// Before any report: Unknown. Today's agent with a sessions provider
	// that cannot tell (logind, utmp, file) says nothing too: the page
	// must not blame an older agent, and says how to tell it.
	if page := textOf(b.get("/pools/pool-a/hosts/host-1").body); !strings.Contains(page, "RemoteApps not reported") ||
		strings.Contains(page, "(an older agent)") || !strings.Contains(page, "--remote-apps yes") {
		t.Errorf("host-1's page, RemoteApps Unknown, does not say why or what to do:\n%s", page)
	}
	for _, h := range []string{"host-1", "host-2", "host-3"} {
		say(h, false)
	}

	a := b.get("/pools/pool-a/hosts/host-1")
	wantStatus(t, a, http.StatusOK)
	wantContains(t, a, `remoteApps <span id="host-remoteapps">No</span>`, `href="/rules#R-E12"`)
	if page := textOf(a.body); !strings.Contains(page, "Cannot run RemoteApps") || !strings.Contains(page, "application connects skip it") {
		t.Errorf("host-1's page does not say it cannot run RemoteApps:\n%s", page)
	}

	// No RemoteApp group yet: nothing to warn about.
	a = b.get("/pools/pool-a")
	wantStatus(t, a, http.StatusOK)
	if strings.Contains(a.body, `id="remoteapps-warning"`) {
		t.Errorf("pool page warns without a RemoteApp group")
	}
	if _, err := e.admin.PutApplicationGroup(ctx, "pool-a-apps", map[string]any{"hostPool": "pool-a", "applicationGroupType": "RemoteApp"}); err != nil {
		t.Fatal(err)
	}
	a = b.get("/pools/pool-a")
	wantContains(t, a, `id="remoteapps-warning"`)
	if page := textOf(a.body); !strings.Contains(page, "RemoteApp groups pool-a-apps: none of the 3 session hosts of host pool") {
		t.Errorf("pool page lacks the warning:\n%s", page)
	}
	// One host that can: no warning; its page says so.
	say("host-2", true)
	if a = b.get("/pools/pool-a"); strings.Contains(a.body, `id="remoteapps-warning"`) {
		t.Errorf("pool page warns though host-2 can run RemoteApps")
	}
	if page := textOf(b.get("/pools/pool-a/hosts/host-2").body); !strings.Contains(page, "Runs RemoteApps") {
		t.Errorf("host-2's page does not say it runs RemoteApps")
	}
}
