package grafana_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/deploy/grafana"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/pgtest"
)

// The dashboard against a real Prometheus scraping two replicas of
// `vdibroker serve` on one PostgreSQL database (VDIBROKER_TEST_PROMETHEUS=1
// and VDIBROKER_TEST_POSTGRES_DSN; Debian's prometheus package). Every
// replica exports the same store gauges, so a panel that sums them counts
// each pool once per replica; every panel's every query is evaluated
// through Prometheus' HTTP API and compared with the truth the API tells.

const promEnv = "VDIBROKER_TEST_PROMETHEUS"

// fullDashboard is the dashboard's panels with the fields the test reads.
type fullDashboard struct {
	Panels []struct {
		Title   string `json:"title"`
		Type    string `json:"type"`
		Targets []struct {
			Expr         string `json:"expr"`
			LegendFormat string `json:"legendFormat"`
		} `json:"targets"`
	} `json:"panels"`
}

// replica is a running `vdibroker serve`.
type replica struct {
	base string // http://127.0.0.1:port
	cmd  *exec.Cmd
}

func buildBroker(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "vdibroker")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/vdibroker").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// child is a process startProcess started.
type child struct {
	cmd     *exec.Cmd
	done    chan struct{} // closed once it exited
	logPath string        // its stderr
}

// startProcess runs name with args, its output in a file of dir kept for
// the failure message, killed when the test ends. With a prefix, it
// returns what follows the first stdout line that starts with it.
func startProcess(t *testing.T, dir, name string, env, args []string, prefix string) (*child, string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	logPath := filepath.Join(dir, fmt.Sprintf("%s-%d.log", filepath.Base(name), time.Now().UnixNano()))
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logFile
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); pw.Close(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("%s %s, last output:\n%s", filepath.Base(name), args[0], b)
		}
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), prefix); ok && prefix != "" {
				select {
				case found <- rest:
				default:
				}
			}
		}
	}()
	c := &child{cmd: cmd, done: done, logPath: logPath}
	if prefix == "" {
		return c, ""
	}
	select {
	case rest := <-found:
		return c, rest
	case <-done:
		t.Fatalf("%s exited before printing %q", name, prefix)
	case <-time.After(60 * time.Second):
		t.Fatalf("%s printed no %q", name, prefix)
	}
	return nil, ""
}

// portAttempts bounds the starts of a child on a port freePort picked:
// another process may take the port between freePort and the child's
// bind, and the child is then started again on another.
const portAttempts = 5

// portTaken reports whether a child's output says it could not listen
// because its address was in use.
func portTaken(output string) bool {
	return strings.Contains(output, "address already in use") || strings.Contains(output, "Only one usage of each socket address")
}

// startPrometheus runs Prometheus with args on a loopback port of its
// own and returns its address once it is ready, starting it again on
// another port when one freePort picked was taken before it bound it.
func startPrometheus(t *testing.T, dir, bin string, args ...string) string {
	t.Helper()
	for attempt := 1; ; attempt++ {
		addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		c, _ := startProcess(t, dir, bin, nil, append(slices.Clip(args), "--web.listen-address="+addr), "")
		exited := false
		eventually(t, "Prometheus ready", 60*time.Second, func() bool {
			select {
			case <-c.done:
				exited = true
				return true
			default:
			}
			// Bounded: what took the port may not answer.
			res, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + addr + "/-/ready")
			if err != nil {
				return false
			}
			res.Body.Close()
			return res.StatusCode == 200
		})
		if !exited {
			return addr
		}
		out, _ := os.ReadFile(c.logPath)
		if !portTaken(string(out)) || attempt == portAttempts {
			t.Fatalf("Prometheus on %s exited (attempt %d of %d):\n%s", addr, attempt, portAttempts, out)
		}
	}
}

// freePort returns a loopback port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// promSample is one element of an instant vector.
type promSample struct {
	Metric map[string]string
	Value  float64
}

// prom is a Prometheus server's HTTP API.
type prom struct {
	t    *testing.T
	base string
}

// query evaluates expr now and returns the vector.
func (p prom) query(expr string) []promSample {
	p.t.Helper()
	res, err := http.Get(p.base + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		p.t.Fatal(err)
	}
	defer res.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		p.t.Fatalf("query %s: %v", expr, err)
	}
	if body.Status != "success" || body.Data.ResultType != "vector" {
		p.t.Fatalf("query %s: %s %s (%s)", expr, body.Status, body.Error, body.Data.ResultType)
	}
	out := make([]promSample, 0, len(body.Data.Result))
	for _, r := range body.Data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			p.t.Fatalf("query %s: value %v", expr, r.Value)
		}
		out = append(out, promSample{r.Metric, v})
	}
	return out
}

// eventually polls cond every 200 ms for up to bound.
func eventually(t *testing.T, what string, bound time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(bound); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %s waiting for %s", bound, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// byLabels indexes a vector by the values of labels, joined with "/". Two
// series of one key (a host shown once per replica) are an error.
func byLabels(t *testing.T, v []promSample, labels ...string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, s := range v {
		var k []string
		for _, l := range labels {
			k = append(k, s.Metric[l])
		}
		key := strings.Join(k, "/")
		if _, dup := out[key]; dup {
			t.Errorf("two series of %s: %v", key, v)
		}
		out[key] = s.Value
	}
	return out
}

// truth is what the broker's API says, the numbers the panels must show.
type truth struct {
	pools    map[string]*vdibroker.HostPool
	hosts    map[string][]*vdibroker.SessionHost // by pool
	sessions map[string]map[string]int           // pool -> state -> open sessions
}

func readTruth(t *testing.T, c *vhttp.Client) *truth {
	t.Helper()
	ctx := t.Context()
	tr := &truth{pools: map[string]*vdibroker.HostPool{}, hosts: map[string][]*vdibroker.SessionHost{}, sessions: map[string]map[string]int{}}
	pools, err := c.ListHostPools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pools {
		tr.pools[p.Name] = p.HostPool
		if tr.hosts[p.Name], err = c.ListSessionHosts(ctx, p.Name); err != nil {
			t.Fatal(err)
		}
		ss, err := c.ListUserSessions(ctx, p.Name, vhttp.SessionQuery{})
		if err != nil {
			t.Fatal(err)
		}
		tr.sessions[p.Name] = map[string]int{}
		for _, s := range ss {
			tr.sessions[p.Name][s.State]++
		}
	}
	return tr
}

// TestDashboardAgainstPrometheus: two replicas on one PostgreSQL database,
// pools with hosts in every status (Available, NeedsAssistance, Shutdown,
// drained), sessions Pending, Active and Disconnected and a NoCapacity
// refusal, made through both replicas; a real Prometheus scrapes both
// every second. Every query of every panel (and the pool variable) gives
// the truth: 3 Pending sessions are 3, not 6, one series per host, the
// first NoCapacity refusal of a pool shows in its rate.
func TestDashboardAgainstPrometheus(t *testing.T) {
	if os.Getenv(promEnv) == "" {
		t.Skipf("dashboard against Prometheus skipped: set %s=1 (needs Debian's prometheus package and %s)", promEnv, pgtest.Env)
	}
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("%s is set but prometheus is not installed (Debian package prometheus): %v", promEnv, err)
	}
	dsn := pgtest.SchemaDSN(t, "vdibroker_grafana_", "dashboard against Prometheus")
	dir := t.TempDir()
	bin := buildBroker(t, dir)
	const admin = "vdb_admin_grafana_prometheus_test_0123456789"
	env := []string{"VDIBROKER_ADMIN_TOKEN=" + admin, "VDIBROKER_DATABASE=" + dsn}
	var replicas []*replica
	for _, name := range []string{"a", "b"} {
		c, base := startProcess(t, dir, bin, env, []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, name),
			"--autoscale-interval", "0"}, "vdibroker listening on ")
		replicas = append(replicas, &replica{base: base, cmd: c.cmd})
	}
	cA, cB := vhttp.NewClient(replicas[0].base, admin), vhttp.NewClient(replicas[1].base, admin)

	// Prometheus, scraping both replicas every second.
	var targets []string
	for _, r := range replicas {
		targets = append(targets, fmt.Sprintf("%q", strings.TrimPrefix(r.base, "http://")))
	}
	cfg := filepath.Join(dir, "prometheus.yml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: vdibroker
    static_configs:
      - targets: [%s]
`, strings.Join(targets, ", "))), 0o644)
	promAddr := startPrometheus(t, dir, promBin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"), "--log.level=warn")
	p := prom{t: t, base: "http://" + promAddr}
	eventually(t, "Prometheus scraping both replicas", 60*time.Second, func() bool {
		res, err := http.Get(p.base + "/-/ready")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == 200 && len(p.query(`up{job="vdibroker"} == 1`)) == 2
	})

	ctx := t.Context()
	setup(t, ctx, cA, cB)
	// The pools' connect counters at 0 in Prometheus, from both
	// replicas, before the first connect.
	eventually(t, "the pools' NoCapacity counters scraped at 0", 30*time.Second, func() bool {
		return len(p.query(`vdibroker_connects_total{pool=~"pool-a|pool-b",code="NoCapacity"} == 0`)) == 4
	})
	connects(t, ctx, cA, cB)
	done := time.Now()
	// Two scrapes of each replica after the last change: the gauges show
	// it, and each rate has a sample after each increment.
	eventually(t, "two scrapes after the setup", 30*time.Second, func() bool {
		v := p.query(`timestamp(up{job="vdibroker"})`)
		return len(v) == 2 && v[0].Value > float64(done.Unix())+2 && v[1].Value > float64(done.Unix())+2
	})
	tr := readTruth(t, cA)

	var d fullDashboard
	if err := json.Unmarshal(grafana.Dashboard, &d); err != nil {
		t.Fatal(err)
	}
	checks := panelChecks(tr)
	for _, panel := range d.Panels {
		if panel.Type == "row" {
			continue
		}
		check, ok := checks[panel.Title]
		if !ok {
			t.Errorf("panel %q has no check against the truth: add one", panel.Title)
			continue
		}
		delete(checks, panel.Title)
		for i, tg := range panel.Targets {
			expr := strings.NewReplacer(`$pool`, `.*`, `$__rate_interval`, `1m`).Replace(tg.Expr)
			t.Run(fmt.Sprintf("%s/%d", panel.Title, i), func(t *testing.T) {
				check(t, i, prom{t: t, base: p.base}.query(expr))
			})
		}
	}
	for title := range checks {
		t.Errorf("check %q has no panel", title)
	}
	// The pool variable: label_values(vdibroker_pool_max_session_limit, pool).
	res, err := http.Get(p.base + "/api/v1/label/pool/values?match[]=vdibroker_pool_max_session_limit")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var labels struct {
		Data []string `json:"data"`
	}
	json.NewDecoder(res.Body).Decode(&labels)
	if strings.Join(labels.Data, ",") != "pool-a,pool-b" {
		t.Errorf("pool variable: %v, want pool-a, pool-b", labels.Data)
	}
}

// setup makes, through both replicas, pool-a (BreadthFirst, limit 3)
// with pa-1 Available and pa-2 NeedsAssistance, and pool-b (LoadIndex,
// limit 5) with pb-1 Available, pb-2 Available and drained, pb-3 Shutdown.
func setup(t *testing.T, ctx context.Context, cA, cB *vhttp.Client) {
	t.Helper()
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(cA.PutHostPool(ctx, "pool-a", map[string]any{"loadBalancerType": vdibroker.BreadthFirst, "maxSessionLimit": 3, "heartbeatTimeoutSeconds": 3600}))
	must(cB.PutHostPool(ctx, "pool-b", map[string]any{"loadBalancerType": vdibroker.LoadIndex, "maxSessionLimit": 5, "heartbeatTimeoutSeconds": 3600}))
	metrics := func(cpu float64) *vdibroker.Metrics {
		return &vdibroker.Metrics{CPUPercent: cpu, MemoryPercent: 30, SampledAt: time.Now().UTC()}
	}
	for i, h := range []struct {
		pool, name string
		hb         vdibroker.HeartbeatRequest
	}{
		{"pool-a", "pa-1", vdibroker.HeartbeatRequest{}},
		{"pool-a", "pa-2", vdibroker.HeartbeatRequest{HealthError: "disk check failed"}},
		{"pool-b", "pb-1", vdibroker.HeartbeatRequest{Metrics: metrics(20)}},
		{"pool-b", "pb-2", vdibroker.HeartbeatRequest{Metrics: metrics(50)}},
		{"pool-b", "pb-3", vdibroker.HeartbeatRequest{Metrics: metrics(10), ShuttingDown: true}},
	} {
		c := []*vhttp.Client{cA, cB}[i%2]
		rt, err := c.CreateRegistrationToken(ctx, h.pool, vhttp.RegistrationTokenRequest{})
		if err != nil {
			t.Fatal(err)
		}
		reg, err := c.Register(ctx, &vdibroker.RegisterRequest{Token: rt.Token, HostName: h.name, Address: h.name + ":3389", Protocols: []string{"RDP"}})
		if err != nil {
			t.Fatal(err)
		}
		creds[h.name], beats[h.name] = reg.Credential, h.hb
		must(c.Heartbeat(ctx, reg.Credential, &h.hb))
	}
	must(cA.PatchSessionHost(ctx, "pool-b", "pb-2", map[string]any{"allowNewSession": false}))
}

// creds are the hosts' credentials and beats their heartbeats (setup),
// for the heartbeats of connects, which keep the rest of what the host
// reported (a health error).
var (
	creds = map[string]string{}
	beats = map[string]vdibroker.HeartbeatRequest{}
)

// connects places six users in pool-a through both replicas (limit 3 × 2
// hosts: full), refuses a seventh (NoCapacity), places one in pool-b; its
// hosts then report one user Active and one Disconnected.
func connects(t *testing.T, ctx context.Context, cA, cB *vhttp.Client) {
	t.Helper()
	placed := map[string][]vdibroker.AgentSession{} // host -> what it reports
	for i := 1; i <= 6; i++ {
		user := fmt.Sprintf("u%d", i)
		res, err := []*vhttp.Client{cA, cB}[i%2].Connect(ctx, "pool-a", vhttp.ConnectRequest{User: user})
		if err != nil {
			t.Fatalf("connect %s: %v", user, err)
		}
		switch user {
		case "u1":
			placed[res.SessionHost] = append(placed[res.SessionHost], vdibroker.AgentSession{ID: "1", User: user, State: vdibroker.StateActive})
		case "u2":
			placed[res.SessionHost] = append(placed[res.SessionHost], vdibroker.AgentSession{ID: "2", User: user, State: vdibroker.StateDisconnected})
		}
	}
	if _, err := cB.Connect(ctx, "pool-a", vhttp.ConnectRequest{User: "u7"}); vdibroker.ErrorCode(err) != vdibroker.ENoCapacity {
		t.Fatalf("seventh connect to pa: %v, want NoCapacity", err)
	}
	if _, err := cA.Connect(ctx, "pool-b", vhttp.ConnectRequest{User: "v1"}); err != nil {
		t.Fatalf("connect to pb: %v", err)
	}
	for host, sessions := range placed {
		hb := beats[host]
		hb.Sessions = sessions
		if _, err := cA.Heartbeat(ctx, creds[host], &hb); err != nil {
			t.Fatal(err)
		}
	}
}

// panelChecks are the checks of the panels' queries by title: check(t, i,
// v) checks the vector v of the panel's i-th query against tr.
func panelChecks(tr *truth) map[string]func(t *testing.T, i int, v []promSample) {
	open := func(pool string) (n int) {
		for _, c := range tr.sessions[pool] {
			n += c
		}
		return n
	}
	hostsWhere := func(keep func(*vdibroker.SessionHost) bool) map[string]*vdibroker.SessionHost {
		out := map[string]*vdibroker.SessionHost{}
		for pool, hs := range tr.hosts {
			for _, h := range hs {
				if keep(h) {
					out[pool+"/"+h.Name] = h
				}
			}
		}
		return out
	}
	// positive checks that the series with a value > 0 are exactly want,
	// by label l (rates and latencies, whose values depend on timing).
	positive := func(l string, want ...string) func(t *testing.T, i int, v []promSample) {
		return func(t *testing.T, _ int, v []promSample) {
			var got []string
			for _, s := range v {
				if s.Value > 0 && !math.IsNaN(s.Value) && !math.IsInf(s.Value, 0) {
					got = append(got, s.Metric[l])
				}
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("series > 0 by %s: %v, want %v (all: %v)", l, got, want, v)
			}
		}
	}
	equal := func(t *testing.T, what string, got, want map[string]float64) {
		t.Helper()
		for k, w := range want {
			if g, ok := got[k]; !ok || math.Abs(g-w) > 1e-9 {
				t.Errorf("%s %s: %v (present %v), want %v", what, k, g, ok, w)
			}
		}
		for k, g := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("%s %s: %v, which the truth does not have", what, k, g)
			}
		}
	}
	return map[string]func(t *testing.T, i int, v []promSample){
		// Six placed, one refused, one in pb: OK and NoCapacity move.
		"Connects by outcome": positive("code", "OK", "NoCapacity"),
		// 1 refused of 8 connects: 0.125 (rates over the same samples).
		"NoCapacity share": func(t *testing.T, _ int, v []promSample) {
			if len(v) != 1 || v[0].Value < 0.08 || v[0].Value > 0.2 {
				t.Errorf("NoCapacity share %v, want one value near 1/8", v)
			}
		},
		"Connect latency (p50, p99)": func(t *testing.T, _ int, v []promSample) {
			if len(v) != 1 || !(v[0].Value > 0 && v[0].Value <= 5) {
				t.Errorf("latency %v, want one value in (0, 5] s", v)
			}
		},
		"Decision latency by algorithm (p99)": positive("algorithm", vdibroker.BreadthFirst, vdibroker.LoadIndex),
		"Decisions per second":                positive("algorithm", vdibroker.BreadthFirst, vdibroker.LoadIndex),
		// Used capacity as the panel defines it: open sessions / (limit ×
		// Available and NeedsAssistance hosts).
		"Used capacity per pool (R-A1)": func(t *testing.T, _ int, v []promSample) {
			want := map[string]float64{}
			for name, p := range tr.pools {
				placeable := 0
				for _, h := range tr.hosts[name] {
					if h.Status == vdibroker.StatusAvailable || h.Status == vdibroker.StatusNeedsAssistance {
						placeable++
					}
				}
				if placeable > 0 {
					want[name] = float64(open(name)) / float64(p.MaxSessionLimit*placeable)
				}
			}
			equal(t, "used capacity", byLabels(t, v, "pool"), want)
		},
		// The heart of it: 3 Pending sessions are 3.
		"Sessions by state": func(t *testing.T, _ int, v []promSample) {
			want := map[string]float64{vdibroker.StatePending: 0, vdibroker.StateActive: 0, vdibroker.StateDisconnected: 0}
			for _, byState := range tr.sessions {
				for state, n := range byState {
					want[state] += float64(n)
				}
			}
			if want[vdibroker.StatePending] != 5 || want[vdibroker.StateActive] != 1 || want[vdibroker.StateDisconnected] != 1 {
				t.Fatalf("the setup went wrong: sessions by state %v, want Pending 5, Active 1, Disconnected 1", want)
			}
			equal(t, "sessions", byLabels(t, v, "state"), want)
		},
		"Hosts by status (R-H1)": func(t *testing.T, i int, v []promSample) {
			if i == 1 { // drained
				want := float64(len(hostsWhere(func(h *vdibroker.SessionHost) bool { return !h.AllowNewSession })))
				if len(v) != 1 || v[0].Value != want || want != 1 {
					t.Errorf("drained %v, want %v (1)", v, want)
				}
				return
			}
			want := map[string]float64{vdibroker.StatusAvailable: 0, vdibroker.StatusNeedsAssistance: 0, vdibroker.StatusUnavailable: 0, vdibroker.StatusShutdown: 0}
			for _, h := range hostsWhere(func(*vdibroker.SessionHost) bool { return true }) {
				want[h.Status]++
			}
			if want[vdibroker.StatusAvailable] != 3 || want[vdibroker.StatusNeedsAssistance] != 1 || want[vdibroker.StatusShutdown] != 1 {
				t.Fatalf("the setup went wrong: hosts by status %v", want)
			}
			equal(t, "hosts", byLabels(t, v, "status"), want)
		},
		// One series per host that heartbeated, its age since then.
		"Heartbeat lag, worst hosts": func(t *testing.T, _ int, v []promSample) {
			beat := hostsWhere(func(h *vdibroker.SessionHost) bool { return h.LastHeartBeat != nil })
			got := byLabels(t, v, "pool", "host")
			if len(v) != len(beat) || len(beat) != 5 {
				t.Fatalf("%d series for %d hosts that heartbeated: %v", len(v), len(beat), v)
			}
			for k, h := range beat {
				if age, max := got[k], time.Since(*h.LastHeartBeat).Seconds()+1; age < 0 || age > max {
					t.Errorf("%s: heartbeat age %v, want 0..%v", k, age, max)
				}
			}
		},
		"Heartbeats by outcome": positive("code", "OK"),
		"Load index per host (R-IDX)": func(t *testing.T, _ int, v []promSample) {
			want := map[string]float64{}
			for k, h := range hostsWhere(func(h *vdibroker.SessionHost) bool { return h.LoadIndex >= 0 }) {
				want[k] = float64(h.LoadIndex)
			}
			if len(want) == 0 {
				t.Fatal("the setup went wrong: no host has a load index")
			}
			equal(t, "load index", byLabels(t, v, "pool", "host"), want)
		},
		"Sessions per host": func(t *testing.T, _ int, v []promSample) {
			want := map[string]float64{}
			for k, h := range hostsWhere(func(*vdibroker.SessionHost) bool { return true }) {
				want[k] = float64(h.Sessions)
			}
			equal(t, "sessions per host", byLabels(t, v, "pool", "host"), want)
		},
		// Per replica: both read the database.
		"Store up": func(t *testing.T, _ int, v []promSample) {
			if len(v) != 2 || v[0].Value != 1 || v[1].Value != 1 || v[0].Metric["instance"] == v[1].Metric["instance"] {
				t.Errorf("store up %v, want 1 for each of the two replicas", v)
			}
		},
		"Store transaction latency (p99)": func(t *testing.T, _ int, v []promSample) {
			ops := map[string]bool{}
			for _, s := range v {
				if s.Value > 0 && !math.IsNaN(s.Value) {
					ops[s.Metric["op"]] = true
				}
			}
			// The reads of every scrape and every maintenance tick; an
			// operation's first calls are invisible to rate() (its
			// series begins then), and the setup calls most only in a
			// burst.
			for _, op := range []string{"ListHostPools", "CountOpenSessions"} {
				if !ops[op] {
					t.Errorf("no latency of %s: %v", op, v)
				}
			}
		},
	}
}
