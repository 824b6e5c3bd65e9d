package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

const chromiumPath = "/usr/bin/chromium"

// newBrowser starts Debian's headless Chromium with a fresh profile, or
// skips the test with the reason.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	return newBrowserWith(t)
}

// newBrowserWith is newBrowser with more options (flags).
func newBrowserWith(t *testing.T, more ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	if os.Getenv("VDIBROKER_TEST_BROWSER") != "1" {
		t.Skip("browser test: set VDIBROKER_TEST_BROWSER=1 (and apt-get install -y chromium) to run it")
	}
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("browser test: %s not found (apt-get install -y chromium)", chromiumPath)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1360, 1000),
	}
	opts = append(opts, more...)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	// The first Run starts the browser; it must not carry a timeout.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// step runs browser actions with a bound so a missing element fails the
// test instead of hanging it.
func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// clickLive clicks sel, once it is visible, in one evaluation in the
// page (a DOM click: a link is followed, a submit button submits its
// form, a box is ticked). An element in a part of the page that the
// page's script replaces by itself needs it: console.js swaps a live
// part's elements (data-live) every few seconds (the sessions list's
// "since" column changes at each), and portal.js the sessions list
// while a logoff is pending; a node chromedp's Click looked up before a
// swap is gone when it is clicked ("Could not find node with given id").
func clickLive(sel string) chromedp.Action[chromedp.Void] {
	q, _ := json.Marshal(sel)
	wait := chromedp.WaitVisible(chromedp.CSS(sel))
	click := chromedp.Evaluate[chromedp.Void](`document.querySelector(` + string(q) + `).click()`)
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		if _, err := wait(ctx, t); err != nil {
			return chromedp.Void{}, err
		}
		return click(ctx, t)
	}
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// The element's text is read in one evaluation in the page, not by
	// node id: the console's live refresh (console.js) swaps a live part's
	// elements every few seconds, and a node looked up before a swap is
	// gone when its text is read ("No node with given id found").
	q, _ := json.Marshal(sel)
	if _, err := chromedp.Run(sctx, chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	s, err := chromedp.Run(sctx, chromedp.Evaluate[*string](`(e => e && (e.offsetWidth || e.offsetHeight || e.getClientRects().length) ? e.innerText : null)(document.querySelector(`+string(q)+`))`))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	if s == nil {
		t.Fatalf("text of %s: no visible element", sel)
	}
	return *s
}

// artifactDir is where the screenshot goes: VDIBROKER_TEST_ARTIFACTS when
// set, else the test's artifact directory (kept with go test -artifacts).
func artifactDir(t *testing.T) string {
	if dir := os.Getenv("VDIBROKER_TEST_ARTIFACTS"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	return t.ArtifactDir()
}

// screenshot saves the whole page as name in the artifact directory.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(artifactDir(t), name)
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// consoleErrors collects what the pages write to the browser's console as
// errors: uncaught exceptions, console.error calls and error entries of the
// browser log (a Content-Security-Policy violation, a failed load).
type consoleErrors struct {
	mu   sync.Mutex
	msgs []string
}

// watchConsole starts collecting the tab's console errors until the test ends.
func watchConsole(t *testing.T, ctx context.Context) *consoleErrors {
	t.Helper()
	w := &consoleErrors{}
	wctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	msgs := chromedp.Console(wctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				w.mu.Lock()
				w.msgs = append(w.msgs, m.String())
				w.mu.Unlock()
			}
		}
	}()
	return w
}

// check fails the test with the errors written since the last check, naming
// the page they came from.
func (w *consoleErrors) check(t *testing.T, page string) {
	t.Helper()
	time.Sleep(150 * time.Millisecond) // let the last events of the page arrive
	w.mu.Lock()
	msgs := w.msgs
	w.msgs = nil
	w.mu.Unlock()
	for _, m := range msgs {
		t.Errorf("%s: browser console error: %s", page, m)
	}
}

// take returns and clears the errors collected so far.
func (w *consoleErrors) take() []string {
	time.Sleep(150 * time.Millisecond)
	w.mu.Lock()
	defer w.mu.Unlock()
	msgs := w.msgs
	w.msgs = nil
	return msgs
}

func count(t *testing.T, ctx context.Context, js string) int {
	t.Helper()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](js))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return n
}

// TestConsoleBrowser drives the console of a running demo in headless
// Chromium: an admin signs in, opens a pool, sees its hosts and drains one
// (confirmed through the API); a Reader's drain is refused by the server
// (R-SEC) and changes nothing.
func TestConsoleBrowser(t *testing.T) {
	ctx := newBrowser(t)
	d := startDemo(t)
	api := vhttp.NewClient(d.Main.URL(), d.Main.AdminToken)
	base := d.Main.URL()
	allow := func(host string) bool {
		h, err := api.GetSessionHost(context.Background(), "dev-depth", host)
		if err != nil {
			t.Fatal(err)
		}
		return h.AllowNewSession
	}

	errs := watchConsole(t, ctx)
	// The watcher itself must see an error, or a page's errors would pass
	// unseen.
	step(t, ctx, "watcher self-test", chromedp.Navigate(base+"/signin"), chromedp.WaitVisible(chromedp.CSS("#token")))
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`console.error("watcher self-test"), true`)); err != nil {
		t.Fatal(err)
	}
	if got := errs.take(); len(got) != 1 || !strings.Contains(got[0], "watcher self-test") {
		t.Fatalf("the console watcher saw %q, want the self-test error", got)
	}

	// Admin: sign in, open the pool from the overview, drain dev-02.
	step(t, ctx, "sign in as admin",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), d.Main.AdminToken),
		chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-pool="dev-depth"]`)),
		clickLive(`tr[data-pool="dev-depth"] a`), // the overview's pools: live
		chromedp.WaitVisible(chromedp.CSS(`tr[data-host="dev-01"]`)),
	)
	for _, h := range []string{"dev-01", "dev-02", "dev-06"} {
		if got := text(t, ctx, `tr[data-host="`+h+`"] .status`); got == "" {
			t.Errorf("host %s shows no status", h)
		}
	}
	if !allow("dev-02") {
		t.Fatal("dev-02 drained before the test drained it")
	}
	// The hosts table is live. The page's answer is waited for by its
	// flash, outside the live parts: the page before, refreshed once
	// the drain is done, would show dev-02's Resume too.
	step(t, ctx, "drain dev-02",
		clickLive(`button[data-action="drain"][data-host="dev-02"]`),
		chromedp.WaitVisible(chromedp.CSS(".flash.ok")),
		chromedp.WaitVisible(chromedp.CSS(`button[data-action="undrain"][data-host="dev-02"]`)),
	)
	if allow("dev-02") {
		t.Fatal("the console said drained but the API shows dev-02 still taking sessions")
	}
	if got := text(t, ctx, ".flash.ok"); !strings.Contains(got, "dev-02 is drained") {
		t.Errorf("flash after drain = %q", got)
	}
	screenshot(t, ctx, "console-pool.png")
	errs.check(t, "pool page")

	// dev-depth is DepthFirst: its settings show no load index field, and
	// the form is grouped.
	if n := count(t, ctx, `document.querySelectorAll('#settings [name^="loadBalancing."]:not([name="loadBalancing.sampleIntervalSeconds"])').length`); n != 0 {
		t.Errorf("the DepthFirst pool's settings show %d load index fields, want none", n)
	}
	if n := count(t, ctx, `document.querySelectorAll('#group-load-index').length`); n != 0 {
		t.Error("the DepthFirst pool's settings have a Load index section")
	}
	for _, g := range []string{"capacity", "timeouts", "general"} {
		if n := count(t, ctx, `document.querySelectorAll('#settings fieldset#group-`+g+` legend').length`); n != 1 {
			t.Errorf("settings section %s: %d legends, want 1", g, n)
		}
	}

	// The drained host's page says who drained it and since when.
	step(t, ctx, "host page of the drained dev-02",
		clickLive(`tr[data-host="dev-02"] a[data-host-link]`),
		chromedp.WaitVisible(chromedp.CSS(`#checks`)),
	)
	if got := text(t, ctx, `li[data-check="Drained"]`); !strings.Contains(got, "Drained by admin since") {
		t.Errorf("dev-02's drain check = %q, want it to name the admin and the time", got)
	}
	if got := text(t, ctx, `#host-status`); got == "" {
		t.Error("host page shows no status")
	}
	screenshot(t, ctx, "console-host-drained.png")
	errs.check(t, "host page (drained)")

	// rds-06 is not standard: its page gives the Horizon bucket 2 reason,
	// and the rule id links to the behaviour reference.
	step(t, ctx, "host page of the non-standard rds-06",
		chromedp.Navigate(base+"/pools/rds-loadindex/hosts/rds-06"),
		chromedp.WaitVisible(chromedp.CSS(`#checks`)),
	)
	if got := text(t, ctx, `li[data-check="Not standard: bucket 2 at best"]`); !strings.Contains(got, "never in bucket 1") {
		t.Errorf("rds-06's bucket check = %q", got)
	}
	if got := text(t, ctx, `#verdict`); !strings.Contains(got, "ucket") {
		t.Errorf("rds-06's verdict = %q, want it to name its bucket", got)
	}
	screenshot(t, ctx, "console-host-nonstandard.png")
	errs.check(t, "host page (non-standard)")
	step(t, ctx, "rule link to the reference",
		clickLive(`li[data-check="Not standard: bucket 2 at best"] a.rule[href="/rules#R-LI3"]`), // in the live #why
		chromedp.WaitVisible(chromedp.CSS(`li#R-LI3`)),
	)
	if got := text(t, ctx, `li#R-LI3`); !strings.Contains(got, "buckets") {
		t.Errorf("the reference's R-LI3 = %q", got)
	}
	screenshot(t, ctx, "console-rules.png")
	errs.check(t, "behaviour reference")

	// The LoadIndex pool's chart labels every quarter and its threshold.
	step(t, ctx, "LoadIndex pool", chromedp.Navigate(base+"/pools/rds-loadindex"), chromedp.WaitVisible(chromedp.CSS(`svg[aria-label="Load index per host"]`)))
	// Read in one evaluation: the chart is a live part (see text).
	if got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('svg[aria-label="Load index per host"] text.threshold').textContent`)); err != nil || got != "loadIndexThreshold 40" {
		t.Errorf("threshold label = %q (%v)", got, err)
	}
	if n := count(t, ctx, `[...document.querySelectorAll('svg[aria-label="Load index per host"] text.axis')].filter(e => e.textContent === "50").length`); n != 1 {
		t.Errorf("the load index axis labels 50 %d times, want once", n)
	}
	if n := count(t, ctx, `document.querySelectorAll('#group-load-index [name^="loadBalancing."]').length`); n == 0 {
		t.Error("the LoadIndex pool's settings have no load index fields")
	}
	screenshot(t, ctx, "console-pool-loadindex.png")
	errs.check(t, "LoadIndex pool page")

	// The page refreshes its live parts by itself (console.js polling the
	// page; allowed by the Content-Security-Policy).
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_, err := chromedp.Run(pctx, chromedp.Poll[bool](`document.getElementById("live").title.startsWith("Updated")`,
		chromedp.WithPollingInterval(200*time.Millisecond)))
	cancel()
	if err != nil {
		t.Errorf("live refresh never ran: %v", err)
	}

	// The other pages, for people to look at (the handler tests check them).
	step(t, ctx, "overview", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`svg[aria-label="Sessions over the last hour"]`)))
	screenshot(t, ctx, "console-overview.png")
	errs.check(t, "overview")
	step(t, ctx, "sessions", chromedp.Navigate(base+"/sessions?pool=dev-depth"), chromedp.WaitVisible(chromedp.CSS(`tr[data-session]`)))
	screenshot(t, ctx, "console-sessions.png")
	errs.check(t, "sessions")
	step(t, ctx, "placement", clickLive(`tr[data-session] a[href$="/placement"]`), chromedp.WaitVisible(chromedp.CSS(`.story`)))
	screenshot(t, ctx, "console-placement.png")
	errs.check(t, "placement")

	var reader *vhttp.TokenResponse
	// Sign out, then a Reader: sees the pool, and no control it may not use
	// (the API's refusal of a Reader's drain is tested in package console).
	reader, err = api.CreateToken(context.Background(), vhttp.TokenRequest{Role: vdibroker.RoleReader, Subject: "browser-reader"})
	if err != nil {
		t.Fatal(err)
	}
	step(t, ctx, "sign out and sign in as Reader",
		chromedp.Click(chromedp.CSS(`form.signout button`)),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), reader.Secret),
		chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-pool="dev-depth"]`)),
		chromedp.Navigate(base+"/pools/dev-depth"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-host="dev-03"]`)),
		chromedp.WaitVisible(chromedp.CSS("#read-only")),
	)
	controls, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('button[data-action], #save-settings').length`))
	if err != nil {
		t.Fatal(err)
	}
	if controls != 0 {
		t.Errorf("the Reader's pool page shows %d drain or settings buttons, want none", controls)
	}
	if !allow("dev-03") {
		t.Fatal("dev-03 was drained")
	}
	errs.check(t, "Reader's pool page")
}

// TestConsoleSessionsAtScale: with 10,000 open sessions in one pool the
// sessions page finds one user by search (the API's ?user=) and pages
// through all the others with the API's nextLink, 500 rows a page, each
// session exactly once; the page needs no script and shows no console
// error.
func TestConsoleSessionsAtScale(t *testing.T) {
	ctx := newBrowser(t)
	b := startCLIBroker(t)
	base := b.m.URL()
	api := vhttp.NewClient(base, b.m.AdminToken)
	bg := context.Background()
	const pool, hosts, users = "big", 25, 10000
	if _, err := api.PutHostPool(bg, pool, map[string]any{"heartbeatTimeoutSeconds": 3600, "pendingTimeoutSeconds": 3600}); err != nil {
		t.Fatal(err)
	}
	rt, err := api.CreateRegistrationToken(bg, pool, vhttp.RegistrationTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range hosts {
		name := fmt.Sprintf("big-%02d", i+1)
		reg, err := api.Register(bg, &vdibroker.RegisterRequest{Token: rt.Token, HostName: name, Address: name + ":3389", Protocols: []string{"RDP"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := api.Heartbeat(bg, reg.Credential, &vdibroker.HeartbeatRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	work := make(chan int)
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range 16 {
		wg.Go(func() {
			for i := range work {
				if _, err := api.Connect(bg, pool, vhttp.ConnectRequest{User: fmt.Sprintf("user-%05d", i)}); err != nil {
					failed.Add(1)
					t.Errorf("connect %d: %v", i, err)
				}
			}
		})
	}
	for i := range users {
		if failed.Load() > 0 {
			break
		}
		work <- i
	}
	close(work)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("%d connects in %s", users, time.Since(start).Round(time.Millisecond))
	errs := watchConsole(t, ctx)

	step(t, ctx, "sign in", chromedp.Navigate(base+"/sessions?pool="+pool+"&limit=500"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), b.m.AdminToken),
		chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS(`#sessions-table`)),
	)
	if got := text(t, ctx, "#count"); !strings.Contains(got, "500 sessions on this page of 10000 open") {
		t.Errorf("count line = %q", got)
	}
	screenshot(t, ctx, "console-sessions-10000.png")
	errs.check(t, "sessions, first page")

	// Page through every session.
	seen := map[string]bool{}
	pages := 0
	for {
		pages++
		ids, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("tr[data-session]")].map(r => r.dataset.session)`))
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if seen[id] {
				t.Fatalf("page %d shows session %s again", pages, id)
			}
			seen[id] = true
		}
		if count(t, ctx, `document.querySelectorAll("#next-page").length`) == 0 {
			break
		}
		if pages > users/500+1 {
			t.Fatalf("still a next page after %d pages", pages)
		}
		// The link followed as its address, read in one evaluation: a
		// click's navigation leaves the page before (with its own first
		// page link) to be read again, and the link may be swapped by
		// the live refresh between its look-up and the click.
		next, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#next-page").href`))
		if err != nil {
			t.Fatal(err)
		}
		step(t, ctx, fmt.Sprintf("page %d", pages+1), chromedp.Navigate(next), chromedp.WaitVisible(chromedp.CSS("#first-page")))
	}
	if len(seen) != users || pages != users/500 {
		t.Errorf("paged through %d sessions in %d pages, want %d in %d", len(seen), pages, users, users/500)
	}
	errs.check(t, "sessions, paging")

	// Search one user among them.
	step(t, ctx, "search user-04242",
		chromedp.Navigate(base+"/sessions"),
		chromedp.WaitVisible(chromedp.CSS("#user")),
		chromedp.SendKeys(chromedp.CSS("#user"), "user-04242"),
		chromedp.Click(chromedp.CSS("#search")),
		// The answer's field holds the name as its attribute (typing
		// sets only the property): the page before cannot match.
		chromedp.WaitVisible(chromedp.CSS(`#user[value="user-04242"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-user="user-04242"]`)),
	)
	if n := count(t, ctx, `document.querySelectorAll("tr[data-session]").length`); n != 1 {
		t.Errorf("search for user-04242 shows %d rows, want 1", n)
	}
	screenshot(t, ctx, "console-sessions-search.png")
	// Its host links to the host page.
	step(t, ctx, "host link", clickLive(`tr[data-user="user-04242"] a[data-host-link]`), chromedp.WaitVisible(chromedp.CSS("#checks")))
	screenshot(t, ctx, "console-host-big.png")
	errs.check(t, "search and host page")
	step(t, ctx, "a page of 25, sorted by host", chromedp.Navigate(base+"/sessions?pool="+pool+"&limit=25&sort=host"), chromedp.WaitVisible(chromedp.CSS("#sessions-table")))
	screenshot(t, ctx, "console-sessions-25.png")
	errs.check(t, "sorted page")
}
