package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// openMain starts the real broker on 127.0.0.1:0 with a temp data dir.
func openMain(tb testing.TB) *Main {
	tb.Helper()
	m := &Main{Listen: "127.0.0.1:0", DataDir: tb.TempDir()}
	if err := m.Open(context.Background()); err != nil {
		tb.Fatalf("open broker: %v", err)
	}
	tb.Cleanup(func() { m.Close() })
	return m
}

// TestServeAdminTokenFile checks R-SEC: without VDIBROKER_ADMIN_TOKEN the
// broker creates <data-dir>/admin.token with mode 0600 on first start and
// reuses it on the next; with the variable set, the variable wins.
func TestServeAdminTokenFile(t *testing.T) {
	t.Setenv("VDIBROKER_ADMIN_TOKEN", "")
	dir := t.TempDir()
	first, err := adminToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("admin.token mode = %o, want 600", got)
	}
	second, err := adminToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	if first == "" || first != second {
		t.Errorf("admin token not reused: first %q, second %q", first, second)
	}
	t.Setenv("VDIBROKER_ADMIN_TOKEN", "from-env-token")
	if got, _ := adminToken(dir); got != "from-env-token" {
		t.Errorf("admin token = %q, want the environment's", got)
	}
}

// TestServeMountsConsoleAndMetrics checks that serve wires the console at /,
// /metrics, and the placement latency hook: after one connect on a host that
// registered and heartbeated, the connect counter and the placement
// histogram have moved.
func TestServeMountsConsoleAndMetrics(t *testing.T) {
	t.Setenv("VDIBROKER_ADMIN_TOKEN", "")
	m := openMain(t)
	ctx := t.Context()
	c := vhttp.NewClient(m.URL(), m.AdminToken)
	if _, err := c.PutHostPool(ctx, "servepool", map[string]any{"loadBalancerType": "DepthFirst", "maxSessionLimit": 5}); err != nil {
		t.Fatal(err)
	}
	rt, err := c.CreateRegistrationToken(ctx, "servepool", vhttp.RegistrationTokenRequest{ExpiresInSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := c.Register(ctx, &vdibroker.RegisterRequest{Token: rt.Token, HostName: "sh-01", Address: "127.0.0.1:3389"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Heartbeat(ctx, reg.Credential, &vdibroker.HeartbeatRequest{}); err != nil {
		t.Fatal(err)
	}
	before := scrape(t, m.URL())
	res, err := c.Connect(ctx, "servepool", vhttp.ConnectRequest{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if res.SessionHost != "sh-01" {
		t.Fatalf("connect placed on %q, want sh-01", res.SessionHost)
	}
	after := scrape(t, m.URL())
	for _, series := range []string{
		`vdibroker_placement_duration_seconds_count{algorithm="DepthFirst"}`,
		`vdibroker_connects_total{code="OK",pool="servepool"}`,
	} {
		if got, was := metricValue(after, series), metricValue(before, series); got != was+1 {
			t.Errorf("%s = %v after one connect, want %v", series, got, was+1)
		}
	}

	resp, err := http.Get(m.URL() + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(strings.ToLower(string(body)), "sign in") {
		t.Errorf("GET / = %d, want the console's sign-in page; body starts %.200q", resp.StatusCode, body)
	}
}

func scrape(tb testing.TB, base string) string {
	tb.Helper()
	return scrapeWith(tb, http.DefaultClient, base)
}

// scrapeWith is scrape with client (an HTTPS broker's).
func scrapeWith(tb testing.TB, client *http.Client, base string) string {
	tb.Helper()
	resp, err := client.Get(base + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("GET /metrics = %d, %v", resp.StatusCode, err)
	}
	return string(b)
}

// metricValue returns the value of one series in a Prometheus text
// exposition, 0 when absent.
func metricValue(exposition, series string) float64 {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`)
	m := re.FindStringSubmatch(exposition)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// TestExitStatusUsageVersusServer checks the CLI's exit statuses: 2 for a
// usage error, 1 for an error the broker answered, even when the broker's
// message reads like a usage error.
func TestExitStatusUsageVersusServer(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"wrapped usage error", fmt.Errorf("hostpool: %w", usageError{errors.New("bad flag")}), true},
		{"cobra unknown command", errors.New(`unknown command "frob" for "vdibroker"`), true},
		{"broker message that mentions an invalid argument", &vdibroker.Error{Code: vdibroker.EInvalid, Message: "invalid argument: maxSessionLimit"}, false},
		{"wrapped broker error", fmt.Errorf("show: %w", &vdibroker.Error{Code: vdibroker.ENotFound, Message: "unknown command queue"}), false},
		{"other error", errors.New("cannot reach the broker"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isUsageError(tt.err); got != tt.want {
				t.Errorf("isUsageError(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// TestServeAdminTokenFileChecks (R-SEC): an admin.token others
// may read, an empty one or a short one stops the start with a message
// saying what to do; a good one is used.
func TestServeAdminTokenFileChecks(t *testing.T) {
	t.Setenv("VDIBROKER_ADMIN_TOKEN", "")
	good := strings.Repeat("k", minAdminTokenLen)
	for _, tc := range []struct {
		name, content string
		mode          os.FileMode
		wantErr       string
	}{
		{"world-readable", good, 0o644, "chmod 600"},
		{"group-readable", good, 0o640, "chmod 600"},
		{"empty", "\n", 0o600, "is empty"},
		{"short", "short-token", 0o600, "at least 32"},
		{"good", good + "\n", 0o600, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "admin.token")
			if err := os.WriteFile(path, []byte(tc.content), tc.mode); err != nil {
				t.Fatal(err)
			}
			os.Chmod(path, tc.mode) // past the umask
			got, err := adminToken(dir)
			if tc.wantErr == "" {
				if err != nil || got != good {
					t.Fatalf("adminToken = %q, %v; want the file's token", got, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("adminToken = %q, %v; want an error saying %q", got, err, tc.wantErr)
			}
		})
	}
}

// TestServeLoadIndexMetricIsTheAPIs: vdibroker_host_load_index
// is the load index the API shows for each host, on the real serve wiring
// (store, /metrics). Before, the collector read a field the store never
// fills and every host read 0.
func TestServeLoadIndexMetricIsTheAPIs(t *testing.T) {
	t.Setenv("VDIBROKER_ADMIN_TOKEN", "")
	m := openMain(t)
	ctx := t.Context()
	c := vhttp.NewClient(m.URL(), m.AdminToken)
	if _, err := c.PutHostPool(ctx, "lipool", map[string]any{"loadBalancerType": "LoadIndex", "maxSessionLimit": 10,
		"loadBalancing": map[string]any{"cpuThreshold": 80}}); err != nil {
		t.Fatal(err)
	}
	rt, err := c.CreateRegistrationToken(ctx, "lipool", vhttp.RegistrationTokenRequest{ExpiresInSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}
	// cpu 60 % of a threshold of 80 → 75; 20 % → 25; no sample → the
	// session factor, 0 (R-IDX1, R-IDX2).
	for name, cpu := range map[string]float64{"li-01": 60, "li-02": 20, "li-03": -1} {
		reg, err := c.Register(ctx, &vdibroker.RegisterRequest{Token: rt.Token, HostName: name, Address: "127.0.0.1:3389"})
		if err != nil {
			t.Fatal(err)
		}
		hb := &vdibroker.HeartbeatRequest{}
		if cpu >= 0 {
			hb.Metrics = &vdibroker.Metrics{CPUPercent: cpu, SampledAt: time.Now().UTC()}
		}
		if _, err := c.Heartbeat(ctx, reg.Credential, hb); err != nil {
			t.Fatal(err)
		}
	}
	hosts, err := c.ListSessionHosts(ctx, "lipool")
	if err != nil {
		t.Fatal(err)
	}
	exp := scrape(t, m.URL())
	seen := map[int]bool{}
	for _, h := range hosts {
		series := fmt.Sprintf(`vdibroker_host_load_index{host=%q,pool="lipool"}`, h.Name)
		if !strings.Contains(exp, series+" ") {
			t.Errorf("no series %s in /metrics", series)
			continue
		}
		if got := metricValue(exp, series); got != float64(h.LoadIndex) {
			t.Errorf("%s = %v, the API shows loadIndex %d", series, got, h.LoadIndex)
		}
		seen[h.LoadIndex] = true
	}
	if !seen[75] || !seen[25] {
		t.Errorf("API load indexes %v, want 75 and 25 among them (the test's samples)", seen)
	}
}

// TestServeCutsOffASlowBody: a client that sends its body a
// byte at a time is cut off at the read timeout instead of holding a
// connection open for as long as it likes. --read-timeout is 500ms here;
// without it the server's default of 30 s would hold the connection. The
// trickle goes on for at most 20 s (a byte every 200ms, 100 of the
// body's 1000): far more than the 500ms on any machine, yet short of the
// default, so the cut-off is the flag's and no figure of speed is
// checked. The handler's read of the body fails at the deadline: the
// answer is 400 naming the i/o timeout, and the connection is closed.
func TestServeCutsOffASlowBody(t *testing.T) {
	t.Setenv("VDIBROKER_ADMIN_TOKEN", "")
	m := &Main{Listen: "127.0.0.1:0", DataDir: t.TempDir(), ReadTimeout: 500 * time.Millisecond}
	if err := m.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	conn, err := net.Dial("tcp", strings.TrimPrefix(m.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /api/v1/agent/register HTTP/1.1\r\nHost: broker\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
	closed := make(chan string, 1)
	go func() {
		var got []byte
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				closed <- string(got)
				return
			}
		}
	}()
	for sent := range 100 {
		select {
		case got := <-closed:
			if !strings.HasPrefix(got, "HTTP/1.1 400 ") || !strings.Contains(got, "i/o timeout") {
				t.Errorf("cut off after %d bytes of the body with %q; want 400 naming the i/o timeout", sent, got)
			}
			return
		case <-time.After(200 * time.Millisecond):
			conn.Write([]byte("{"))
		}
	}
	t.Fatal("a body sent a byte every 200ms kept its connection for 100 bytes (20 s and more); the read timeout is 500ms")
}

// TestServeLeavesNoTempFilesFromBigForms: an unauthenticated
// multipart POST to /signin of 40 MB is refused and leaves nothing in the
// temp directory. Before, each one left its upload behind (the middleware's
// request copy hid the parsed form from net/http's cleanup) and console
// routes had no body limit.
func TestServeLeavesNoTempFilesFromBigForms(t *testing.T) {
	t.Setenv("VDIBROKER_ADMIN_TOKEN", "")
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	m := openMain(t)
	for _, size := range []int{40 << 20, 900 << 10} { // over the limit, and under it
		var body strings.Builder
		body.WriteString("--XX\r\nContent-Disposition: form-data; name=\"token\"; filename=\"t.bin\"\r\n\r\n")
		body.WriteString(strings.Repeat("x", size))
		body.WriteString("\r\n--XX--\r\n")
		resp, err := http.Post(m.URL()+"/signin", "multipart/form-data; boundary=XX", strings.NewReader(body.String()))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 400 && resp.StatusCode != http.StatusSeeOther {
			t.Errorf("multipart sign-in of %d bytes answered %d", size, resp.StatusCode)
		}
	}
	left, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		if strings.HasPrefix(e.Name(), "multipart-") {
			t.Errorf("a sign-in left %s in the temp directory", e.Name())
		}
	}
}

// TestServeMetricsBehindAToken: with a metrics token, /metrics
// answers 401 without it or with another, and the exposition with it.
func TestServeMetricsBehindAToken(t *testing.T) {
	t.Setenv("VDIBROKER_ADMIN_TOKEN", "")
	m := &Main{Listen: "127.0.0.1:0", DataDir: t.TempDir(), MetricsToken: "scrape-secret-0123456789"}
	if err := m.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	for _, tc := range []struct {
		auth string
		want int
	}{
		{"", http.StatusUnauthorized},
		{"Bearer wrong", http.StatusUnauthorized},
		{"Bearer " + m.AdminToken, http.StatusUnauthorized},
		{"Bearer scrape-secret-0123456789", http.StatusOK},
	} {
		req, _ := http.NewRequest("GET", m.URL()+"/metrics", nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("GET /metrics with %q = %d, want %d", tc.auth, resp.StatusCode, tc.want)
		}
		if tc.want == http.StatusOK && !strings.Contains(string(body), "vdibroker_store_up") {
			t.Errorf("the exposition lacks vdibroker_store_up")
		}
	}
}

// TestServeExportsClockOffset: serve's maintenance loop compares its
// clock with the database's and /metrics exports the difference (here
// the embedded store's clock is this machine's: within the tolerance).
func TestServeExportsClockOffset(t *testing.T) {
	t.Setenv("VDIBROKER_ADMIN_TOKEN", "")
	m := &Main{Listen: "127.0.0.1:0", DataDir: t.TempDir(), MaintenanceInterval: 20 * time.Millisecond}
	if err := m.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	re := regexp.MustCompile(`(?m)^vdibroker_clock_offset_seconds (\S+)$`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		req, _ := http.NewRequest("GET", m.URL()+"/metrics", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if g := re.FindSubmatch(body); g != nil {
			v, err := strconv.ParseFloat(string(g[1]), 64)
			if err != nil || math.Abs(v) > vdibroker.ClockTolerance.Seconds() {
				t.Fatalf("vdibroker_clock_offset_seconds %s; want within ±%s", g[1], vdibroker.ClockTolerance)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no vdibroker_clock_offset_seconds in /metrics 10 s after start, with a maintenance tick of 20 ms")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServeSecureCookiesBehindAProxy: reached over plain HTTP
// behind a TLS-terminating proxy (--external-url https://...), the
// console's cookies are still Secure; without it, over plain HTTP, not.
func TestServeSecureCookiesBehindAProxy(t *testing.T) {
	t.Setenv("VDIBROKER_ADMIN_TOKEN", "")
	for _, tc := range []struct {
		external string
		secure   bool
	}{{"https://vdi.example.com", true}, {"", false}} {
		m := &Main{Listen: "127.0.0.1:0", DataDir: t.TempDir()}
		m.Federation.ExternalURL = tc.external
		if err := m.Open(t.Context()); err != nil {
			t.Fatal(err)
		}
		resp, err := http.Get(m.URL() + "/signin")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		cookies := resp.Cookies()
		if len(cookies) == 0 {
			t.Fatalf("GET /signin set no cookie")
		}
		for _, c := range cookies {
			if c.Secure != tc.secure {
				t.Errorf("external URL %q: cookie %s Secure=%v, want %v", tc.external, c.Name, c.Secure, tc.secure)
			}
		}
		m.Close()
	}
}

// TestServeMaxConnectWaitFlag (R-U4): the server's bound of a held connect
// is 1s..10m (the start timeout); anything else is a usage error naming
// the flag and the range.
func TestServeMaxConnectWaitFlag(t *testing.T) {
	for _, v := range []string{"0s", "-1s", "11m", "10m1s"} {
		cmd := newServeCmd()
		cmd.SetArgs([]string{"--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--max-connect-wait", v})
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		err := cmd.Execute()
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--max-connect-wait: must be 1s..10m") {
			t.Errorf("serve --max-connect-wait %s = %v, want a usage error naming the range", v, err)
		}
	}
}

// TestServeStartFailureExitsOne: serve failing to start on an error of
// the system whose text reads like one of cobra's ("bind: invalid
// argument", a link-local listen address without its zone) exits 1,
// which the unit restarts, not 2, which it does not
// (RestartPreventExitStatus=2, docs/operations.md); a mistake in its flags still
// exits 2.
func TestServeStartFailureExitsOne(t *testing.T) {
	serve := func(args ...string) (int, string) {
		root := &cobra.Command{Use: "vdibroker", SilenceUsage: true, SilenceErrors: true}
		root.AddCommand(newServeCmd())
		var stderr bytes.Buffer
		root.SetOut(io.Discard)
		root.SetErr(&stderr)
		root.SetContext(t.Context())
		code := execute(root, append([]string{"serve", "--data-dir", t.TempDir()}, args...), &stderr)
		return code, stderr.String()
	}
	code, stderr := serve("--listen", "[fe80::1]:0")
	if !strings.Contains(stderr, "bind: invalid argument") {
		t.Skipf("binding fe80::1 without a zone did not fail with EINVAL here: exit %d, %q", code, stderr)
	}
	if code != 1 {
		t.Errorf("serve that cannot bind: exit %d, want 1; stderr %q", code, stderr)
	}
	if code, stderr := serve("--max-connect-wait", "0s"); code != 2 {
		t.Errorf("serve --max-connect-wait 0s: exit %d, want 2; stderr %q", code, stderr)
	}
}
