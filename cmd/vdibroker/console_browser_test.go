package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
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

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := chromedp.Run(sctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
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

	// Admin: sign in, open the pool from the overview, drain dev-02.
	step(t, ctx, "sign in as admin",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), d.Main.AdminToken),
		chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-pool="dev-depth"]`)),
		chromedp.Click(chromedp.CSS(`tr[data-pool="dev-depth"] a`)),
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
	step(t, ctx, "drain dev-02",
		chromedp.Click(chromedp.CSS(`button[data-action="drain"][data-host="dev-02"]`)),
		chromedp.WaitVisible(chromedp.CSS(`button[data-action="undrain"][data-host="dev-02"]`)),
	)
	if allow("dev-02") {
		t.Fatal("the console said drained but the API shows dev-02 still taking sessions")
	}
	if got := text(t, ctx, ".flash.ok"); !strings.Contains(got, "dev-02 is drained") {
		t.Errorf("flash after drain = %q", got)
	}
	screenshot(t, ctx, "console-pool.png")

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
	step(t, ctx, "sessions", chromedp.Navigate(base+"/sessions?pool=dev-depth"), chromedp.WaitVisible(chromedp.CSS(`tr[data-session]`)))
	screenshot(t, ctx, "console-sessions.png")
	step(t, ctx, "placement", chromedp.Click(chromedp.CSS(`tr[data-session] a[href$="/placement"]`)), chromedp.WaitVisible(chromedp.CSS(`.story`)))
	screenshot(t, ctx, "console-placement.png")

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
}
