package loadgen

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/testserver"
	"github.com/vdibroker/vdibroker/store"
)

const testAdmin = "bench-admin-token"

// newBroker starts the real broker (SQLite store in a temp dir, the API
// server) on 127.0.0.1:0 and returns its URL.
func newBroker(t *testing.T) string {
	t.Helper()
	st, err := store.Open(t.Context(), "", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := testserver.New(testserver.Config{Store: st, AdminToken: testAdmin})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ts.Close()
		srv.Close()
		st.Close()
	})
	return ts.URL
}

// getList GETs a list of the API (one page of up to 1000) into value.
func getList[T any](t *testing.T, url string) []T {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+testAdmin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct {
		Value    []T    `json:"value"`
		NextLink string `json:"nextLink"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	if page.NextLink != "" {
		t.Fatalf("GET %s: more than one page", url)
	}
	return page.Value
}

// TestHeartbeatAgainstRealBroker: 20 hosts with 3 sessions each, every
// second for 3 s. The generator creates the pool, registers every host,
// and sends 20 × 3 = 60 heartbeats, all answered 200; the broker then shows
// every host Available with its 3 sessions, adopted as Active (R-S2, R-H1).
// A second run on the same pool reuses it and re-keys the same hosts.
func TestHeartbeatAgainstRealBroker(t *testing.T) {
	url := newBroker(t)
	cfg := HeartbeatConfig{
		Server: url, Token: testAdmin, HostPool: "hb pool", Hosts: 20, SessionsPerHost: 3,
		Interval: time.Second, Duration: 3 * time.Second, Concurrency: 4,
		// However slow this machine is, every heartbeat goes out: the counts
		// below do not depend on timing.
		Grace:     time.Minute,
		ServerPID: os.Getpid(),
	}
	res, err := Heartbeat(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	type counts struct {
		PoolCreated                         bool
		Hosts, Scheduled, Sent, Skipped, OK int
		RegisterErrors, Errors              []ErrorCount
	}
	want := counts{PoolCreated: true, Hosts: 20, Scheduled: 60, Sent: 60, OK: 60, RegisterErrors: []ErrorCount{}, Errors: []ErrorCount{}}
	got := counts{res.PoolCreated, res.Hosts, res.Scheduled, res.Sent, res.Skipped, res.OK, res.RegisterErrors, res.Errors}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	if res.OfferedRate != 20 {
		t.Errorf("offered rate %v, want 60 heartbeats / 3 s = 20", res.OfferedRate)
	}
	if !(res.P50 > 0 && res.P50 <= res.P95 && res.P95 <= res.P99 && res.P99 <= res.Max) {
		t.Errorf("latencies p50 %s p95 %s p99 %s max %s: want ordered and positive", res.P50, res.P95, res.P99, res.Max)
	}
	if runtime.GOOS == "linux" && (res.ServerBefore == nil || res.ServerAfter == nil || res.ServerAfter.VmRSS <= 0 || res.ServerAfter.VmHWM < res.ServerAfter.VmRSS) {
		t.Errorf("server memory before %+v after %+v: want RSS > 0 and peak ≥ RSS", res.ServerBefore, res.ServerAfter)
	}

	pool := url + "/api/v1/hostpools/hb%20pool"
	hosts := getList[vdibroker.SessionHost](t, pool+"/sessionhosts?limit=1000")
	if len(hosts) != 20 {
		t.Fatalf("broker has %d hosts, want 20", len(hosts))
	}
	for i, h := range hosts {
		if want := fmt.Sprintf("hb%02d", i+1); h.Name != want || h.Status != vdibroker.StatusAvailable || h.Sessions != 3 || h.Metrics == nil {
			t.Errorf("host %d: %s status %s sessions %d metrics %v, want %s Available with 3 sessions and metrics", i, h.Name, h.Status, h.Sessions, h.Metrics, want)
		}
	}
	sessions := getList[vdibroker.UserSession](t, pool+"/usersessions?limit=1000")
	if len(sessions) != 60 {
		t.Errorf("broker has %d open sessions, want 60", len(sessions))
	}
	for _, s := range sessions {
		if s.State != vdibroker.StateActive || !strings.HasPrefix(s.User, s.SessionHost+"-u") {
			t.Errorf("session %+v: want Active, user of its own host", s)
		}
	}

	res, err = Heartbeat(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.PoolCreated || res.Hosts != 20 || res.OK != 60 {
		t.Errorf("second run: pool created %v, hosts %d, ok %d; want false, 20, 60", res.PoolCreated, res.Hosts, res.OK)
	}
	if n := len(getList[vdibroker.UserSession](t, pool+"/usersessions?limit=1000")); n != 60 {
		t.Errorf("after the second run the broker has %d open sessions, want the same 60", n)
	}
}

// TestHeartbeatWrongToken: without a valid admin token nothing is sent
// past the pool lookup, and the error says why.
func TestHeartbeatWrongToken(t *testing.T) {
	url := newBroker(t)
	_, err := Heartbeat(t.Context(), HeartbeatConfig{
		Server: url, Token: "nope", HostPool: "hbpool", Hosts: 2, SessionsPerHost: 1,
		Interval: time.Second, Duration: time.Second, Concurrency: 1,
	})
	if err == nil || !strings.Contains(err.Error(), "401 Unauthenticated") {
		t.Errorf("got %v, want a 401 Unauthenticated error", err)
	}
}

// TestSchedule: heartbeats are spread evenly over each interval, host j%n
// in round j/n, and exactly those due before the end are scheduled.
func TestSchedule(t *testing.T) {
	tests := []struct {
		name               string
		hosts              int
		interval, duration time.Duration
		want               int
	}{
		{"full pod load", 10_000, 10 * time.Second, 60 * time.Second, 60_000},
		{"test load", 20, time.Second, 3 * time.Second, 60},
		// 3 hosts, 1 s: due at 0, 333.3ms, 666.6ms, 1s, ...; in 1.5 s the
		// ones at 0..1.333 s are due: 5.
		{"partial round", 3, time.Second, 1500 * time.Millisecond, 5},
		// 7 hosts, 10 s: due every 1.428 s; in 10 s exactly 7.
		{"uneven spacing", 7, 10 * time.Second, 10 * time.Second, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := scheduled(tt.hosts, tt.interval, tt.duration)
			if n != tt.want {
				t.Errorf("scheduled = %d, want %d", n, tt.want)
			}
			if dueOffset(n-1, tt.hosts, tt.interval) >= tt.duration || dueOffset(n, tt.hosts, tt.interval) < tt.duration {
				t.Errorf("heartbeat %d due at %s, %d at %s: want the last before %s and the next at or after it",
					n-1, dueOffset(n-1, tt.hosts, tt.interval), n, dueOffset(n, tt.hosts, tt.interval), tt.duration)
			}
			// A host's heartbeats are one interval apart.
			if d := dueOffset(tt.hosts+1, tt.hosts, tt.interval) - dueOffset(1, tt.hosts, tt.interval); d != tt.interval {
				t.Errorf("host 1's heartbeats %s apart, want %s", d, tt.interval)
			}
		})
	}
}

func TestParseProc(t *testing.T) {
	status := "Name:\tvdibroker\nVmPeak:\t 2000000 kB\nVmHWM:\t  300000 kB\nVmRSS:\t  250000 kB\nThreads:\t12\n"
	// The command name may hold spaces and parentheses; utime 1500 and
	// stime 250 ticks are fields 14 and 15: 17.5 s of CPU.
	stat := "4242 (vdi (broker) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 1500 250 0 0 20 0 12 0 100 2000000000 62500\n"
	got, err := parseProc(status, stat)
	if err != nil {
		t.Fatal(err)
	}
	want := &ProcSample{VmRSS: 250000 * 1024, VmHWM: 300000 * 1024, CPUTime: 17500 * time.Millisecond}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, bad := range [][2]string{{"Name: x\n", stat}, {"VmRSS: lots kB\n", stat}, {status, "4242 (x) S 1 2"}, {status, "no name"}} {
		if _, err := parseProc(bad[0], bad[1]); err == nil {
			t.Errorf("parseProc(%q, %q): want an error", bad[0], bad[1])
		}
	}
}

func TestHeartbeatValidate(t *testing.T) {
	ok := HeartbeatConfig{Server: "http://x", HostPool: "pool", Hosts: 1, Interval: time.Second, Duration: time.Second, Concurrency: 1}
	tests := []struct {
		name   string
		change func(*HeartbeatConfig)
		field  string
	}{
		{"ok", func(*HeartbeatConfig) {}, ""},
		{"no scheme", func(c *HeartbeatConfig) { c.Server = "x:1" }, "server"},
		{"no pool", func(c *HeartbeatConfig) { c.HostPool = "" }, "hostPool"},
		{"short pool name", func(c *HeartbeatConfig) { c.HostPool = "hb" }, "hostPool"},
		{"no hosts", func(c *HeartbeatConfig) { c.Hosts = 0 }, "hosts"},
		{"negative sessions", func(c *HeartbeatConfig) { c.SessionsPerHost = -1 }, "sessionsPerHost"},
		{"tiny interval", func(c *HeartbeatConfig) { c.Interval = time.Millisecond }, "interval"},
		{"shorter than interval", func(c *HeartbeatConfig) { c.Duration = time.Millisecond * 500 }, "duration"},
		{"no workers", func(c *HeartbeatConfig) { c.Concurrency = 0 }, "concurrency"},
		{"long prefix", func(c *HeartbeatConfig) { c.HostPrefix = strings.Repeat("h", 48) }, "hostPrefix"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.change(&c)
			if got := vdibroker.ErrorField(c.Validate()); got != tt.field {
				t.Errorf("error field %q (%v), want %q", got, c.Validate(), tt.field)
			}
		})
	}
}

// TestHeartbeatRegistersPastOneTokensBurst (R-SEC): a run of more hosts
// than one registration token takes at once (vhttp.NewHostsPerTokenBurst)
// registers every one of them, on a broker whose clock stands still so
// that no new host of a token is taken past its burst: the run gives
// the hosts a token every hostsPerToken (501 hosts: 3 tokens of 250,
// 250 and 1).
func TestHeartbeatRegistersPastOneTokensBurst(t *testing.T) {
	st, err := store.Open(t.Context(), "", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	srv := testserver.New(testserver.Config{Store: st, AdminToken: testAdmin, Now: func() time.Time { return frozen }})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ts.Close()
		srv.Close()
		st.Close()
	})
	n := vhttp.NewHostsPerTokenBurst + 1
	res, err := Heartbeat(t.Context(), HeartbeatConfig{
		Server: ts.URL, Token: testAdmin, HostPool: "burst pool", Hosts: n,
		Interval: time.Second, Duration: time.Second, Concurrency: 8, Grace: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Hosts != n || len(res.RegisterErrors) != 0 {
		t.Errorf("%d hosts registered, errors %v; want %d and none", res.Hosts, res.RegisterErrors, n)
	}
	tokens := getList[vdibroker.RegistrationToken](t, ts.URL+"/api/v1/hostpools/burst%20pool/registrationtokens")
	if len(tokens) != 3 {
		t.Errorf("%d registration tokens, want 3 (one per %d hosts)", len(tokens), hostsPerToken)
	}
}
