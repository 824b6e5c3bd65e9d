package console_test

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker"
)

// The console's labels that misled an administrator, one test each: each
// page must say what is true of the pool and host it shows.

// TestLabelDepthFirstHasNoLoadIndex (R-IDX): a DepthFirst pool places by
// session count, so its pages show no load index (no "100 Blocked", no
// load index chart) and say why; a LoadIndex pool shows both.
func TestLabelDepthFirstHasNoLoadIndex(t *testing.T) {
	e := newEnv(t)
	e.seed("alice")
	ctx := context.Background()
	if _, err := e.admin.PutHostPool(ctx, "pool-li", map[string]any{"loadBalancerType": "LoadIndex"}); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.signin(adminToken)
	a := b.get("/pools/pool-a")
	wantStatus(t, a, http.StatusOK)
	if strings.Contains(a.body, `aria-label="Load index per host"`) || strings.Contains(a.body, `class="pref blocked">Blocked`) || strings.Contains(a.body, "<th>Load index</th>") {
		t.Error("the DepthFirst pool's page shows load indexes")
	}
	wantContains(t, a, `id="no-load-index"`, "Not used: this pool is DepthFirst")
	if page := textOf(b.get("/pools/pool-a/hosts/host-1").body); !strings.Contains(page, "no load index (DepthFirst)") || strings.Contains(page, "load index 0") {
		t.Errorf("the DepthFirst host's summary shows a load index:\n%.600s", page)
	}
	a = b.get("/pools/pool-li")
	wantContains(t, a, `aria-label="Load index per host"`)
	if strings.Contains(a.body, `id="no-load-index"`) {
		t.Error("the LoadIndex pool's page says the load index is not used")
	}
}

// TestLabelPowerStateWithoutDriver (R-A4): a pool without a power driver
// shows its heartbeating host's power state as Running, and its check
// says the same and where it comes from, never "Not reported" beside it.
func TestLabelPowerStateWithoutDriver(t *testing.T) {
	e := newEnv(t)
	e.seed()
	b := e.browser()
	b.signin(adminToken)
	a := b.get("/pools/pool-a/hosts/host-1")
	wantStatus(t, a, http.StatusOK)
	page := textOf(a.body)
	if strings.Contains(page, "Not reported") {
		t.Error("the host page still says the power state is not reported")
	}
	wantContains(t, a, `id="host-power">Running<`, `data-check="Power state"`)
	if !strings.Contains(page, "Power state Running, as far as the broker knows: its agent heartbeats") || !strings.Contains(page, "no power driver") {
		t.Errorf("the power check does not say where Running comes from:\n%.2000s", page)
	}
}

// TestLabelNoCapacityAllDrained (R-C5): with every host drained the host
// page's verdict gives the API's reason and its advice, which is to
// resume a host, not to raise maxSessionLimit (which helps none).
func TestLabelNoCapacityAllDrained(t *testing.T) {
	e := newEnv(t)
	e.seed()
	ctx := context.Background()
	for _, h := range []string{"host-1", "host-2", "host-3"} {
		if _, err := e.admin.PatchSessionHost(ctx, "pool-a", h, map[string]any{"allowNewSession": false}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := e.admin.Connect(ctx, "pool-a", connectReq("zoe"))
	apiMsg := vdibroker.ErrorMessage(err)
	if vdibroker.ErrorCode(err) != vdibroker.ENoCapacity || !strings.Contains(apiMsg, "all 3 session hosts are drained") ||
		!strings.Contains(apiMsg, "resume a drained host") || strings.Contains(apiMsg, "maxSessionLimit") {
		t.Errorf("the API's refusal: %v", err)
	}
	b := e.browser()
	b.signin(adminToken)
	page := html.UnescapeString(stripRuleLinks(textOf(b.get("/pools/pool-a/hosts/host-1").body)))
	if !strings.Contains(page, "all 3 session hosts are drained (allowNewSession false); resume a drained host (allowNewSession true) or add session hosts") {
		t.Errorf("the verdict does not give the cause and its advice:\n%.3000s", page)
	}
	if strings.Contains(page, "increase maxSessionLimit") {
		t.Error("the verdict advises raising maxSessionLimit for drained hosts")
	}
}

// TestLabelHostsTakingSessions: with one of three hosts drained the pool
// page and the overview say 2 of 3 take new sessions and 1 is drained,
// not "3 of 3 hosts available"; used capacity counts only those 2 (R-A1).
func TestLabelHostsTakingSessions(t *testing.T) {
	e := newEnv(t)
	e.seed("alice", "bob")
	if _, err := e.admin.PatchSessionHost(context.Background(), "pool-a", "host-3", map[string]any{"allowNewSession": false}); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.signin(adminToken)
	a := b.get("/pools/pool-a")
	if page := textOf(a.body); !strings.Contains(page, "2 of 3 hosts take new sessions (1 drained)") || strings.Contains(page, "3 of 3") {
		t.Errorf("pool summary:\n%.800s", page)
	}
	// 2 sessions / (limit 4 × 2 hosts taking sessions) = 25%.
	wantContains(t, a, "25% of capacity used")
	o := b.get("/")
	if page := textOf(o.body); !strings.Contains(page, "2 of 3 hosts take new sessions (1 drained)") || !strings.Contains(page, "2 / 3 (1 drained)") {
		t.Errorf("overview:\n%.1500s", page)
	}
	req, _ := http.NewRequest(http.MethodGet, e.url+"/api/v1/hostpools/pool-a?summary=true", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p struct{ Summary vdibroker.PoolSummary }
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil || p.Summary.TakingSessions != 2 || p.Summary.Available != 3 || p.Summary.Drained != 1 {
		t.Errorf("the API's summary: %+v, %v", p.Summary, err)
	}
}

// TestLabelAdminLogoffEndReason (R-S4): a session logged off from the
// console ends LoggedOffByAdmin once the agent carried the logoff out,
// through the API and on the sessions page, not NotReported.
func TestLabelAdminLogoffEndReason(t *testing.T) {
	e := newEnv(t)
	e.seed("alice")
	ctx := context.Background()
	id := e.activeSession("alice")
	b := e.browser()
	b.signin(adminToken)
	a := b.post("/pools/pool-a/sessions/"+id+"/logoff", url.Values{"csrf": {b.csrf("/sessions")}, "user": {"alice"}})
	wantStatus(t, a, http.StatusSeeOther)
	cmds := e.heartbeat("host-1", []vdibroker.AgentSession{{ID: "7", User: "alice", State: vdibroker.StateActive}})
	if len(cmds) != 1 || cmds[0].Type != vdibroker.CommandLogoff {
		t.Fatalf("the agent got %+v, want the logoff", cmds)
	}
	e.heartbeat("host-1", nil) // the agent logged alice off
	s, err := e.admin.GetUserSession(ctx, "pool-a", id)
	if err != nil || s.EndReason != vdibroker.EndLoggedOffByAdmin {
		t.Fatalf("after the admin's logoff: %+v, %v", s, err)
	}
	wantContains(t, b.get("/sessions?state=LoggedOff"), `data-end-reason>LoggedOffByAdmin<`)
}

// TestLabelNeedsAssistanceNotJustNextInLine (R-H1): the host DepthFirst
// would fill next, whose agent reports a failing check (it cannot see its
// sessions), is not simply "Next in line": the verdict warns that users
// placed there may stay Pending and advises draining it.
func TestLabelNeedsAssistanceNotJustNextInLine(t *testing.T) {
	e := newEnv(t)
	e.seed("alice")
	if _, err := e.admin.Heartbeat(context.Background(), e.agents["host-1"], &vdibroker.HeartbeatRequest{
		Metrics:     &vdibroker.Metrics{CPUPercent: 10},
		Sessions:    []vdibroker.AgentSession{{ID: "7", User: "alice", State: vdibroker.StateActive}},
		HealthError: "session provider: cannot list sessions",
	}); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.signin(adminToken)
	a := b.get("/pools/pool-a/hosts/host-1")
	wantContains(t, a, `class="verdict warn"`, "Next in line, but it needs assistance.")
	page := html.UnescapeString(stripRuleLinks(textOf(a.body)))
	for _, want := range []string{`"session provider: cannot list sessions"`, "stay Pending until pendingTimeoutSeconds", "Drain it"} {
		if !strings.Contains(page, want) {
			t.Errorf("the verdict lacks %q:\n%.1500s", want, page)
		}
	}
	// A healthy next-in-line host is still simply that.
	e.heartbeat("host-1", []vdibroker.AgentSession{{ID: "7", User: "alice", State: vdibroker.StateActive}})
	wantContains(t, b.get("/pools/pool-a/hosts/host-1"), `class="verdict ok"`, "Next in line.")
}

// TestSessionsUserSearch: the sessions page's user field finds every user
// whose name starts with what was typed, in any case, A to Z (the API's
// ?userPrefix=, one index range); a user's own link is exact.
func TestSessionsUserSearch(t *testing.T) {
	e := newEnv(t)
	e.seed("Alice", "alice2", "albert", "bob", "xal")
	b := e.browser()
	b.signin(adminToken)
	users := func(path string) []string {
		t.Helper()
		a := b.get(path)
		wantStatus(t, a, http.StatusOK)
		var out []string
		for _, m := range regexp.MustCompile(`data-user="([^"]+)"`).FindAllStringSubmatch(a.body, -1) {
			out = append(out, m[1])
		}
		return out
	}
	if got := users("/sessions?user=AL"); strings.Join(got, ",") != "albert,Alice,alice2" {
		t.Errorf("search AL: %v, want albert, Alice, alice2", got)
	}
	if got := users("/sessions?user=alice2&exact=1"); strings.Join(got, ",") != "alice2" {
		t.Errorf("alice2's link: %v", got)
	}
	a := b.get("/sessions?user=ali")
	wantContains(t, a, "for users whose name starts with “<bdi>ali</bdi>” (any case)", `href="/sessions?user=Alice&amp;exact=1"`)
	// A name in a sentence is isolated: a right-to-left one, with a
	// number after it, cannot swap places with the words around it.
	wantContains(t, b.get("/sessions?user=%D8%B3%D8%A7%D8%B1%D8%A9+2&exact=1"), "for user <bdi>سارة 2</bdi>.")
}
