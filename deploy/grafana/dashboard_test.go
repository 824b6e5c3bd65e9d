package grafana_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/deploy/grafana"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/testserver"
	"github.com/vdibroker/vdibroker/metrics"
	"github.com/vdibroker/vdibroker/store"
)

type dashboard struct {
	Panels []struct {
		Title   string `json:"title"`
		Type    string `json:"type"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

var metricName = regexp.MustCompile(`\bvdibroker_[a-z_]+\b`)

// queried returns every metric name the dashboard's queries and variables
// use, each with the panel that uses it.
func queried(t *testing.T) map[string]string {
	t.Helper()
	var d dashboard
	if err := json.Unmarshal(grafana.Dashboard, &d); err != nil {
		t.Fatalf("vdibroker.json: %v", err)
	}
	names := map[string]string{}
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, n := range metricName.FindAllString(tg.Expr, -1) {
				names[n] = p.Title
			}
		}
	}
	for _, v := range d.Templating.List {
		for _, n := range metricName.FindAllString(v.Definition, -1) {
			names[n] = "variable " + v.Name
		}
	}
	if len(names) < 8 {
		t.Fatalf("the dashboard queries only %d metrics: %v", len(names), names)
	}
	return names
}

// TestDashboardQueriesServedMetrics: a real broker (store, API, /metrics
// as serve wires them) on loopback, with a pool, a host that heartbeats, a
// connect placed and one refused; every metric the dashboard queries is
// in its /metrics (a histogram's _bucket, _sum and _count by its family),
// with the labels the dashboard groups by.
func TestDashboardQueriesServedMetrics(t *testing.T) {
	names := queried(t)
	ctx := context.Background()
	st, err := store.Open(ctx, "", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	st = metrics.InstrumentStore(st)
	t.Cleanup(func() { st.Close() })
	srv := testserver.New(testserver.Config{Store: st, AdminToken: "grafana-test", ObservePlacement: metrics.ObservePlacement})
	t.Cleanup(func() { srv.Close() })
	srv.Mux().Handle("GET /metrics", metrics.Handler(metrics.NewRegistry(metrics.Config{Store: st})))
	ts := httptest.NewServer(metrics.InstrumentAPI(srv.Handler()))
	t.Cleanup(ts.Close)

	c := vhttp.NewClient(ts.URL, "grafana-test")
	if _, err := c.PutHostPool(ctx, "g-pool", map[string]any{"maxSessionLimit": 1}); err != nil {
		t.Fatal(err)
	}
	rt, err := c.CreateRegistrationToken(ctx, "g-pool", vhttp.RegistrationTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := c.Register(ctx, &vdibroker.RegisterRequest{Token: rt.Token, HostName: "g-host", Address: "g-host:3389", Protocols: []string{"RDP"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Heartbeat(ctx, reg.Credential, &vdibroker.HeartbeatRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Connect(ctx, "g-pool", vhttp.ConnectRequest{User: "alice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Connect(ctx, "g-pool", vhttp.ConnectRequest{User: "bob"}); vdibroker.ErrorCode(err) != vdibroker.ENoCapacity {
		t.Fatalf("second connect: %v, want NoCapacity (limit 1)", err)
	}

	resp, err := http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	families := map[string]string{} // name -> type
	served := map[string]bool{}     // sample names
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if f, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(f, " ")
			families[name] = typ
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name := line[:strings.IndexAny(line, "{ ")]
		served[name] = true
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for name, panel := range names {
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suffix); ok && families[b] == "histogram" {
				base = b
			}
		}
		if _, ok := families[base]; !ok {
			t.Errorf("panel %q queries %s, which /metrics does not declare", panel, name)
			continue
		}
		if !served[name] {
			t.Errorf("panel %q queries %s, which /metrics has no sample of", panel, name)
		}
	}
	// The labels the dashboard groups and filters by.
	body := string(grafana.Dashboard)
	for _, want := range []struct{ metric, label string }{
		{"vdibroker_connects_total", "code"}, {"vdibroker_connects_total", "pool"},
		{"vdibroker_placement_duration_seconds_bucket", "algorithm"}, {"vdibroker_hosts", "status"},
		{"vdibroker_host_heartbeat_age_seconds", "host"}, {"vdibroker_sessions", "state"},
	} {
		if !strings.Contains(body, want.metric) {
			t.Errorf("the dashboard no longer queries %s", want.metric)
		}
		if !hasLabel(t, ts.URL, want.metric, want.label) {
			t.Errorf("/metrics has no %s with label %s", want.metric, want.label)
		}
	}
	if !slices.Contains([]string{"counter"}, families["vdibroker_connects_total"]) {
		t.Errorf("vdibroker_connects_total is a %q, the dashboard takes its rate", families["vdibroker_connects_total"])
	}
}

// hasLabel reports whether /metrics has a sample of metric with label.
func hasLabel(t *testing.T, base, metric, label string) bool {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, metric+"{") && strings.Contains(line, label+"=") {
			return true
		}
	}
	return false
}
