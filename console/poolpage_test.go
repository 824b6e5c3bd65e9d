package console_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestPoolPageIsPaged: the pool page of a large pool lists one
// page of hosts with a link to the next, while its summary counts every
// host. Before, a 10,000-host pool's page listed every host: 15 MB of HTML
// and most of a full pod's broker CPU.
func TestPoolPageIsPaged(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.admin.PutHostPool(ctx, "big-pool", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	rt, err := e.admin.CreateRegistrationToken(ctx, "big-pool", vhttp.RegistrationTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 130
	for i := range n {
		name := fmt.Sprintf("bh-%03d", i)
		if _, err := e.admin.Register(ctx, &vdibroker.RegisterRequest{Token: rt.Token, HostName: name, Address: name + ":3389"}); err != nil {
			t.Fatal(err)
		}
	}
	b := e.browser()
	b.signin(adminToken)
	first := b.get("/pools/big-pool")
	wantStatus(t, first, 200)
	text := textOf(first.body)
	if got := strings.Count(first.body, `data-host-link`); got != 100 {
		t.Errorf("the first page lists %d hosts, want 100", got)
	}
	if !strings.Contains(text, fmt.Sprintf("0 of %d hosts take new sessions", n)) {
		t.Errorf("the summary does not count all %d hosts: %.300s", n, text)
	}
	if !strings.Contains(first.body, `?after=bh-099`) || strings.Contains(first.body, "bh-100</strong>") {
		t.Fatalf("the first page has no link to the hosts after bh-099, or lists bh-100")
	}
	second := b.get("/pools/big-pool?after=bh-099")
	wantStatus(t, second, 200)
	if got := strings.Count(second.body, `data-host-link`); got != n-100 {
		t.Errorf("the second page lists %d hosts, want %d", got, n-100)
	}
	if !strings.Contains(second.body, "bh-100</strong>") || strings.Contains(second.body, `data-page="next"`) {
		t.Errorf("the second page should start at bh-100 and be the last")
	}
}

// TestSessionsPageMarksAdopted (R-S2): a session the host reported but
// the broker did not place is marked adopted on the sessions page.
func TestSessionsPageMarksAdopted(t *testing.T) {
	e := newEnv(t)
	e.seed("alice")
	e.heartbeat("host-2", []vdibroker.AgentSession{{ID: "9", User: "walkin", State: vdibroker.StateActive}})
	b := e.browser()
	b.signin(adminToken)
	page := b.get("/sessions?pool=pool-a")
	wantStatus(t, page, 200)
	if got := strings.Count(page.body, "data-adopted"); got != 1 {
		t.Errorf("%d sessions marked adopted, want 1 (walkin; alice was placed)", got)
	}
}

// TestAdoptedSessionHasNoDecisionLink (R-S2, R-C7): a session the host
// reported was never placed, so it has no decision record: the sessions
// page and the host page offer no "why this host?" for it (the link led
// to a 404), and the host page's recent placements leave it out.
func TestAdoptedSessionHasNoDecisionLink(t *testing.T) {
	e := newEnv(t)
	e.seed("alice")
	e.heartbeat("host-2", []vdibroker.AgentSession{{ID: "9", User: "walkin", State: vdibroker.StateActive}})
	open, err := e.admin.ListUserSessions(context.Background(), "pool-a", vhttp.SessionQuery{User: "walkin"})
	if err != nil || len(open) != 1 || !open[0].Adopted {
		t.Fatalf("walkin's session: %+v %v", open, err)
	}
	link := "/pools/pool-a/sessions/" + open[0].ID + "/placement"
	b := e.browser()
	b.signin(adminToken)
	for _, path := range []string{"/sessions?pool=pool-a", "/pools/pool-a/hosts/host-2"} {
		page := b.get(path)
		wantStatus(t, page, http.StatusOK)
		if strings.Contains(page.body, link) {
			t.Errorf("%s links the adopted session to a decision record it does not have", path)
		}
	}
	if page := b.get("/sessions?pool=pool-a"); strings.Count(page.body, `/placement">why this host?</a>`) != 1 {
		t.Errorf("the sessions page should link alice's decision, and only hers")
	}
	if page := textOf(b.get("/pools/pool-a/hosts/host-2").body); !strings.Contains(page, "No open session was placed here") {
		t.Errorf("host-2's recent placements list a session the broker did not place:\n%s", page)
	}
}

// TestNavWithoutFederation: a broker that is no pod offers no federation
// page in its nav.
func TestNavWithoutFederation(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	b.signin(adminToken)
	if strings.Contains(b.get("/").body, `href="/federation"`) {
		t.Errorf("the nav of a broker that is no pod links to /federation")
	}
}
