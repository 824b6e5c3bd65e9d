package portal_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/portal"
)

// TestWriteBudget_RSEC_RU7: the portal's launches, logoffs and
// disconnects are an end user's writes, within her write budget (R-SEC:
// 30 at once, then one every 2 s, shared with her token's API calls).
// Past it she is told in her language to wait (429, Retry-After), and
// nothing is written: no launch kept (which would count against her
// launches at once), no audit entry, no command.
func TestWriteBudget_RSEC_RU7(t *testing.T) {
	e := newEnv(t, func(c *portal.Config) { c.MaxLaunchesPerSession = 1 })
	e.freeze() // the budget refills with the broker's clock only
	ctx := context.Background()
	c, err := e.admin.Connect(ctx, "desk", vhttp.ConnectRequest{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	active := vdibroker.AgentSession{ID: "1", User: "alice", State: vdibroker.StateActive}
	e.heartbeat(c.SessionHost, active)
	tok := e.userToken("alice")
	alice := e.browser()
	csrf := alice.signIn(tok)
	api := vhttp.NewClient(e.url, tok)
	for i := range vhttp.UserWriteBurst {
		if _, err := api.Connect(ctx, "desk", vhttp.ConnectRequest{User: "alice", DryRun: true}); err != nil {
			t.Fatalf("dry run %d: %v", i+1, err)
		}
	}
	audit := func() int {
		list, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{})
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	}
	entries := audit()

	res, body := alice.post("/portal/launch", url.Values{"csrf": {csrf}, "resource": {"desktop:desk"}})
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") != "2" ||
		!strings.Contains(body, "You are doing that faster than the service takes. Wait a few seconds and try again.") {
		t.Errorf("a launch past her budget: %d Retry-After %q %s; want 429, Retry-After 2, in English", res.StatusCode, res.Header.Get("Retry-After"), body)
	}
	for _, act := range []string{"logoff", "disconnect"} {
		res, body := alice.post("/portal/sessions/desk/"+c.SessionID+"/"+act, url.Values{"csrf": {csrf}, "confirm": {"yes"}})
		if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") != "2" ||
			!strings.Contains(body, "You are doing that faster than the service takes.") {
			t.Errorf("a %s past her budget: %d Retry-After %q %s; want 429, Retry-After 2, in English", act, res.StatusCode, res.Header.Get("Retry-After"), body)
		}
	}
	alice.get("/portal/?lang=de")
	if res, body := alice.post("/portal/sessions/desk/"+c.SessionID+"/logoff", url.Values{"csrf": {csrf}, "confirm": {"yes"}}); res.StatusCode != http.StatusTooManyRequests ||
		!strings.Contains(body, "Sie tun das schneller, als der Dienst es annimmt.") {
		t.Errorf("a logoff past her budget, in German: %d %s", res.StatusCode, body)
	}
	if n := audit(); n != entries {
		t.Errorf("the refused writes added %d audit entries, want none", n-entries)
	}
	if cmds := e.heartbeat(c.SessionHost, active); len(cmds) != 0 {
		t.Errorf("commands for her host after the refused writes: %+v", cmds)
	}

	// Refilled, she launches: the refused launch kept nothing against her
	// one launch at once.
	e.advance(time.Minute)
	alice.launch(csrf, "desktop:desk")
}

// TestLaunchSpendsItsWriteWhenKept_RSEC_RU7: a launch spends her write
// budget's one as it is kept, not when its connect runs after the
// answer. Two launches at once with one write left both passed the
// check (which took nothing), both were kept and audited, the second's
// connect refused (429): and a failed launch holds none of her launches
// at once (R-U7), so launches at once past her budget were free, a kept
// row, a refusal and a log line each. Here her first launch's connect is
// held until her second is answered: the second is refused (429),
// nothing kept; the first, whose connect spends nothing more, opens.
func TestLaunchSpendsItsWriteWhenKept_RSEC_RU7(t *testing.T) {
	hold := make(chan struct{})
	var release sync.Once
	e := newEnv(t, func(c *portal.Config) {
		api := c.API
		c.API = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/connect") {
				<-hold
			}
			api.ServeHTTP(w, r)
		})
	})
	t.Cleanup(func() { release.Do(func() { close(hold) }) })
	e.freeze() // the budget refills with the broker's clock only
	ctx := context.Background()
	tok := e.userToken("alice")
	api := vhttp.NewClient(e.url, tok)
	for i := range vhttp.UserWriteBurst - 1 {
		if _, err := api.Connect(ctx, "desk", vhttp.ConnectRequest{User: "alice", DryRun: true}); err != nil {
			t.Fatalf("dry run %d: %v", i+1, err)
		}
	}
	alice := e.browser()
	csrf := alice.signIn(tok)
	first := alice.launch(csrf, "desktop:desk") // her last write; its connect held
	res, body := alice.post("/portal/launch", url.Values{"csrf": {csrf}, "resource": {"desktop:cold"}})
	if res.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "You are doing that faster than the service takes.") {
		t.Errorf("a second launch at once, her budget spent by the first: %d %s %s; want 429", res.StatusCode, res.Header.Get("Location"), body)
	}
	release.Do(func() { close(hold) })
	if s := alice.await(first, ended); s.State != "ready" {
		t.Errorf("her first launch, within her budget: %+v; want ready (its connect spends no second write)", s)
	}
	list, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Action: "portal.launch"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Outcome != vdibroker.AuditOK {
		t.Errorf("portal.launch entries: %+v; want her first launch's only", list)
	}
}
