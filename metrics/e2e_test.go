package metrics_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/testserver"
	"github.com/vdibroker/vdibroker/metrics"
	"github.com/vdibroker/vdibroker/store"
)

// TestScrapeAfterConnects runs the real broker (SQLite store, API server
// wrapped by InstrumentAPI, /metrics on its mux), makes connects with every
// kind of answer, and scrapes /metrics over HTTP: the counters moved and the
// store gauges show the sessions and hosts.
func TestScrapeAfterConnects(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, "", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv := testserver.New(testserver.Config{Store: st, AdminToken: "metrics-admin"})
	t.Cleanup(func() { srv.Close() })
	srv.Mux().Handle("GET /metrics", metrics.Handler(metrics.NewRegistry(metrics.Config{Store: st})))
	ts := httptest.NewServer(metrics.InstrumentAPI(srv.Handler()))
	t.Cleanup(ts.Close)
	c := vhttp.NewClient(ts.URL, "metrics-admin")
	// Counters are process-wide: compare with a scrape before.
	before := scrapeURL(t, ts.URL+"/metrics")
	hbBefore, _ := before["vdibroker_heartbeats_total"].value(map[string]string{"code": "OK"})

	// Pool "m-e2e": DepthFirst, one session per host, two hosts.
	if _, err := c.PutHostPool(ctx, "m-e2e", map[string]any{"loadBalancerType": "DepthFirst", "maxSessionLimit": 1}); err != nil {
		t.Fatal(err)
	}
	rt, err := c.CreateRegistrationToken(ctx, "m-e2e", vhttp.RegistrationTokenRequest{ExpiresInSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"mh-1", "mh-2"} {
		reg, err := c.Register(ctx, &vdibroker.RegisterRequest{Token: rt.Token, HostName: name, Address: name + ":3389"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Heartbeat(ctx, reg.Credential, &vdibroker.HeartbeatRequest{Metrics: &vdibroker.Metrics{CPUPercent: 10}}); err != nil {
			t.Fatal(err)
		}
	}

	unknownBefore, _ := before["vdibroker_connects_total"].value(map[string]string{"pool": "", "code": "NotFound"})
	connectsBefore := func(code string) float64 {
		v, _ := before["vdibroker_connects_total"].value(map[string]string{"pool": "m-e2e", "code": code})
		return v
	}

	connect := func(pool, user string, dry bool) {
		_, _ = c.Connect(ctx, pool, vhttp.ConnectRequest{User: user, DryRun: dry})
	}
	connect("m-e2e", "alice", false) // OK: mh-1
	connect("m-e2e", "alice", false) // Reconnect (R-C1)
	connect("m-e2e", "bob", false)   // OK: mh-2
	connect("m-e2e", "carol", false) // NoCapacity: both at limit 1 (R-C5)
	connect("m-e2e", "alice", true)  // dry run of a reconnect (R-C8)
	connect("no-such-pool", "dave", false)
	// Made-up names answered 400 (bad user) and 403 (a User token for
	// someone else) before any pool is looked up.
	connect("made-up-400", "", false)
	ut, err := c.CreateToken(ctx, vhttp.TokenRequest{Role: vdibroker.RoleUser, Subject: "erin"})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = vhttp.NewClient(ts.URL, ut.Secret).Connect(ctx, "made-up-403", vhttp.ConnectRequest{User: "frank"})

	after := scrapeURL(t, ts.URL+"/metrics")
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"vdibroker_connects_total", map[string]string{"pool": "m-e2e", "code": "OK"}, connectsBefore("OK") + 2},
		{"vdibroker_connects_total", map[string]string{"pool": "m-e2e", "code": "Reconnect"}, connectsBefore("Reconnect") + 1},
		{"vdibroker_connects_total", map[string]string{"pool": "m-e2e", "code": "NoCapacity"}, connectsBefore("NoCapacity") + 1},
		{"vdibroker_connects_total", map[string]string{"pool": "m-e2e", "code": "DryRun"}, connectsBefore("DryRun") + 1},
		{"vdibroker_connects_total", map[string]string{"pool": "", "code": "NotFound"}, unknownBefore + 1},
		{"vdibroker_sessions", map[string]string{"pool": "m-e2e", "state": "Pending"}, 2},
		{"vdibroker_hosts", map[string]string{"pool": "m-e2e", "status": "Available"}, 2},
		{"vdibroker_host_sessions", map[string]string{"pool": "m-e2e", "host": "mh-1"}, 1},
		{"vdibroker_pool_max_session_limit", map[string]string{"pool": "m-e2e"}, 1},
		{"vdibroker_store_up", nil, 1},
		{"vdibroker_heartbeats_total", map[string]string{"code": "OK"}, hbBefore + 2},
	}
	for _, ck := range checks {
		if got := get(t, after, ck.name, ck.labels); got != ck.want {
			t.Errorf("%s%v = %v, want %v", ck.name, ck.labels, got, ck.want)
		}
	}
	for _, made := range []string{"no-such-pool", "made-up-400", "made-up-403"} {
		if _, ok := after["vdibroker_connects_total"].value(map[string]string{"pool": made}); ok {
			t.Errorf("a made-up pool name (%s) became a label value", made)
		}
	}
	okBefore, _ := before["vdibroker_connect_duration_seconds"].value(map[string]string{"code": "OK"})
	if got := get(t, after, "vdibroker_connect_duration_seconds", map[string]string{"code": "OK"}); got-okBefore != 2 {
		t.Errorf("connect_duration_seconds{OK} count moved by %v, want 2", got-okBefore)
	}
}
