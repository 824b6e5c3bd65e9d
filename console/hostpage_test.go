package console_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/docs"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestHostPage: the host page of a host drained by a Contributor names
// them; the checks cite their rules as links to the reference; a host of
// another pool or no host is 404.
func TestHostPage(t *testing.T) {
	e := newEnv(t)
	e.seed("alice")
	ctx := context.Background()
	ops, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: vdibroker.RoleContributor, Subject: "ops-carol"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vhttp.NewClient(e.url, ops.Secret).PatchSessionHost(ctx, "pool-a", "host-2", map[string]any{"allowNewSession": false}); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.signin(e.token(vdibroker.RoleReader))
	a := b.get("/pools/pool-a/hosts/host-2")
	wantStatus(t, a, http.StatusOK)
	page := textOf(a.body)
	for _, want := range []string{"Drained by ops-carol since", "Not a candidate now", "allowNewSession is false", "Under the limit"} {
		if !strings.Contains(page, want) {
			t.Errorf("host-2's page lacks %q", want)
		}
	}
	wantContains(t, a, `href="/rules#R-C2"`, `aria-label="Sessions, CPU and memory of host-2 over the last hour"`)
	// host-1 has alice (DepthFirst fills it first): the next session goes
	// there too, and her session is listed with its decision.
	a = b.get("/pools/pool-a/hosts/host-1")
	wantStatus(t, a, http.StatusOK)
	if page := textOf(a.body); !strings.Contains(page, "Next in line") || !strings.Contains(page, "alice") {
		t.Errorf("host-1's page: verdict or alice's session missing:\n%s", page)
	}
	wantContains(t, a, `/placement">why this host?</a>`)
	wantStatus(t, b.get("/pools/pool-a/hosts/nope"), http.StatusNotFound)
}

// TestSessionsPageAcrossPools: with every pool selected, pages go on from
// one pool into the next with the API's cursor, so every session shows
// exactly once; a user search finds one user in every pool.
func TestSessionsPageAcrossPools(t *testing.T) {
	e := newEnv(t)
	e.seed()
	ctx := context.Background()
	for _, p := range []string{"pool-b", "pool-c"} {
		if _, err := e.admin.PutHostPool(ctx, p, map[string]any{}); err != nil {
			t.Fatal(err)
		}
		rt, err := e.admin.CreateRegistrationToken(ctx, p, vhttp.RegistrationTokenRequest{})
		if err != nil {
			t.Fatal(err)
		}
		name := p + "-h"
		reg, err := e.admin.Register(ctx, &vdibroker.RegisterRequest{Token: rt.Token, HostName: name, Address: name + ":3389"})
		if err != nil {
			t.Fatal(err)
		}
		e.agents[name] = reg.Credential
		e.heartbeat(name, nil)
	}
	want := map[string]bool{}
	for i := range 12 { // 36 sessions: two pages of 25, the second starting inside pool-b
		for _, p := range []string{"pool-a", "pool-b", "pool-c"} {
			res, err := e.admin.Connect(ctx, p, vhttp.ConnectRequest{User: fmt.Sprintf("u%d", i)})
			if err != nil {
				if p == "pool-a" && vdibroker.ErrorCode(err) == vdibroker.ENoCapacity {
					continue
				}
				t.Fatal(err)
			}
			want[res.SessionID] = true
		}
	}
	b := e.browser()
	b.signin(adminToken)
	rowRe := regexp.MustCompile(`data-session="([^"]+)"`)
	nextRe := regexp.MustCompile(`id="next-page" href="([^"]+)"|href="([^"]+)" id="next-page"`)
	seen := map[string]bool{}
	path := "/sessions?limit=25"
	pages := 1
	for ; ; pages++ {
		a := b.get(path)
		wantStatus(t, a, http.StatusOK)
		for _, m := range rowRe.FindAllStringSubmatch(a.body, -1) {
			if seen[m[1]] {
				t.Fatalf("page %d shows %s again", pages, m[1])
			}
			seen[m[1]] = true
		}
		m := nextRe.FindStringSubmatch(a.body)
		if m == nil {
			break
		}
		path = strings.ReplaceAll(m[1]+m[2], "&amp;", "&")
		if pages > 10 {
			t.Fatal("no end of pages")
		}
	}
	if pages != 2 {
		t.Errorf("%d pages of 25 for 36 sessions, want 2", pages)
	}
	if len(seen) != len(want) || len(want) != 36 {
		t.Errorf("paged through %d sessions, want %d (36)", len(seen), len(want))
	}
	a := b.get("/sessions?user=u3")
	if got := len(rowRe.FindAllString(a.body, -1)); got != 3 {
		t.Errorf("search u3 shows %d sessions, want 3 (one per pool)", got)
	}
	a = b.get("/sessions?pool=pool-b&sort=-user&limit=25")
	users := regexp.MustCompile(`data-user="([^"]+)"`).FindAllStringSubmatch(a.body, -1)
	// Descending by name: u9, u8, ..., u2, u11, u10, u1, u0.
	if len(users) != 12 || users[0][1] != "u9" || users[11][1] != "u0" {
		t.Errorf("pool-b sorted by user descending: %v", users)
	}
}

// TestRulesPage: /rules has an anchor for every rule behaviour.md defines,
// so every link the console makes to a rule lands on it.
func TestRulesPage(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	a := b.get("/rules") // no sign-in needed: it is the documentation
	wantStatus(t, a, http.StatusOK)
	defs := regexp.MustCompile(`\*\*(R-[A-Z]+[0-9]*)\*\*`).FindAllStringSubmatch(docs.Behaviour, -1)
	if len(defs) < 30 {
		t.Fatalf("only %d rules found in behaviour.md", len(defs))
	}
	for _, d := range defs {
		if !strings.Contains(a.body, `id="`+d[1]+`"`) {
			t.Errorf("/rules has no anchor %s", d[1])
		}
	}
}

// TestHostPagePersonal: a personal host's verdict is whose desktop it is,
// not a question of load: unassigned, then its user's after their first
// connect (R-PE1, R-PE4).
func TestHostPagePersonal(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.admin.PutHostPool(ctx, "pool-p", map[string]any{"hostPoolType": "Personal"}); err != nil {
		t.Fatal(err)
	}
	rt, err := e.admin.CreateRegistrationToken(ctx, "pool-p", vhttp.RegistrationTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := e.admin.Register(ctx, &vdibroker.RegisterRequest{Token: rt.Token, HostName: "pc-01", Address: "pc-01:3389"})
	if err != nil {
		t.Fatal(err)
	}
	e.agents["pc-01"] = reg.Credential
	e.heartbeat("pc-01", nil)
	b := e.browser()
	b.signin(adminToken)
	if page := textOf(b.get("/pools/pool-p/hosts/pc-01").body); !strings.Contains(page, "Unassigned.") || !strings.Contains(page, "first connect") {
		t.Errorf("unassigned personal host's page:\n%s", page)
	}
	if _, err := e.admin.Connect(ctx, "pool-p", vhttp.ConnectRequest{User: "dana"}); err != nil {
		t.Fatal(err)
	}
	if page := textOf(b.get("/pools/pool-p/hosts/pc-01").body); !strings.Contains(page, "Assigned to dana: their connects land here") {
		t.Errorf("assigned personal host's page:\n%s", page)
	}
}

// TestHostPageCountsInWords: one session is "1 session", in the host's
// header and in the limit check of a pool whose limit is 1 (R-C4).
func TestHostPageCountsInWords(t *testing.T) {
	e := newEnv(t)
	e.seed("alice")
	if _, err := e.admin.PatchHostPool(context.Background(), "pool-a", map[string]any{"maxSessionLimit": 1}); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.signin(adminToken)
	a := b.get("/pools/pool-a/hosts/host-1")
	wantStatus(t, a, http.StatusOK)
	page := textOf(a.body)
	if strings.Contains(page, "1 sessions") {
		t.Errorf("host-1's page says \"1 sessions\":\n%s", page)
	}
	for _, want := range []string{"1 session (1 connecting)", "1 session, maxSessionLimit 1"} {
		if !strings.Contains(page, want) {
			t.Errorf("host-1's page lacks %q:\n%s", want, page)
		}
	}
}
