package metrics_test

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/loadindex"
	"github.com/vdibroker/vdibroker/metrics"
	"github.com/vdibroker/vdibroker/store"
)

// fakeStore is a Store that fails: a store down, and InstrumentStore's
// pass-through of errors; the methods it does not define panic through the
// nil embedded interface.
type fakeStore struct {
	vdibroker.Store
	err error
}

func (f *fakeStore) ListHostPools(context.Context) ([]*vdibroker.HostPool, error) {
	return nil, f.err
}

func (f *fakeStore) ListHostStates(context.Context, string) ([]*vdibroker.SessionHost, error) {
	return nil, f.err
}

func (f *fakeStore) ListSessionHostsPage(context.Context, string, string, int) ([]*vdibroker.SessionHost, error) {
	return nil, f.err
}

func (f *fakeStore) GetHostPool(_ context.Context, name string) (*vdibroker.HostPool, error) {
	if f.err != nil {
		return nil, f.err
	}
	return nil, vdibroker.Errorf(vdibroker.ENotFound, "host pool %q not found", name)
}

// scrape serves h over real HTTP and parses the text exposition.
func scrape(t *testing.T, h http.Handler) map[string]*dtoFamily {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	return scrapeURL(t, srv.URL)
}

// scrapeURL GETs a Prometheus endpoint and parses the text exposition.
func scrapeURL(t *testing.T, u string) map[string]*dtoFamily {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /metrics: %s\n%s", resp.Status, b)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dtoFamily{}
	for name, f := range fams {
		df := &dtoFamily{}
		for _, m := range f.Metric {
			labels := map[string]string{}
			for _, l := range m.Label {
				labels[l.GetName()] = l.GetValue()
			}
			var v, sum float64
			switch {
			case m.Counter != nil:
				v = m.Counter.GetValue()
			case m.Gauge != nil:
				v = m.Gauge.GetValue()
			case m.Histogram != nil:
				v = float64(m.Histogram.GetSampleCount())
				sum = m.Histogram.GetSampleSum()
			case m.Untyped != nil:
				v = m.Untyped.GetValue()
			}
			df.samples = append(df.samples, sample{labels, v, sum})
		}
		out[name] = df
	}
	return out
}

type sample struct {
	labels map[string]string
	value  float64 // a histogram's: its count
	sum    float64 // a histogram's sum
}

type dtoFamily struct{ samples []sample }

// value returns the sample whose labels include want, and whether one exists.
func (f *dtoFamily) value(want map[string]string) (float64, bool) {
	if f == nil {
		return 0, false
	}
next:
	for _, s := range f.samples {
		for k, v := range want {
			if s.labels[k] != v {
				continue next
			}
		}
		return s.value, true
	}
	return 0, false
}

func get(t *testing.T, fams map[string]*dtoFamily, name string, labels map[string]string) float64 {
	t.Helper()
	v, ok := fams[name].value(labels)
	if !ok {
		t.Fatalf("no sample %s%v in scrape", name, labels)
	}
	return v
}

func TestConnectCountersMove(t *testing.T) {
	h := metrics.Handler(metrics.NewRegistry(metrics.Config{}))
	// Counters are process-wide, so compare before and after.
	before := scrape(t, h)
	okBefore, _ := before["vdibroker_connects_total"].value(map[string]string{"pool": "mtest-a", "code": "OK"})

	metrics.ObserveConnect("mtest-a", metrics.CodeOK, 3*time.Millisecond)
	metrics.ObserveConnect("mtest-a", metrics.CodeOK, 4*time.Millisecond)
	metrics.ObserveConnect("mtest-a", vdibroker.ENoCapacity, time.Millisecond)
	metrics.ObservePlacement(vdibroker.BreadthFirst, 20*time.Microsecond)
	metrics.ObserveStoreTx("CommitPlacement", 2*time.Millisecond)

	after := scrape(t, h)
	if got, want := get(t, after, "vdibroker_connects_total", map[string]string{"pool": "mtest-a", "code": "OK"})-okBefore, 2.0; got != want {
		t.Errorf("connects_total{OK} moved by %v, want %v", got, want)
	}
	if got := get(t, after, "vdibroker_connects_total", map[string]string{"pool": "mtest-a", "code": "NoCapacity"}); got < 1 {
		t.Errorf("connects_total{NoCapacity} = %v, want >= 1", got)
	}
	if got := get(t, after, "vdibroker_placement_duration_seconds", map[string]string{"algorithm": "BreadthFirst"}); got < 1 {
		t.Errorf("placement_duration_seconds count = %v, want >= 1", got)
	}
	if got := get(t, after, "vdibroker_store_tx_duration_seconds", map[string]string{"op": "CommitPlacement"}); got < 1 {
		t.Errorf("store_tx_duration_seconds count = %v, want >= 1", got)
	}
	// The Go runtime collector is registered.
	if _, ok := after["go_goroutines"]; !ok {
		t.Error("go_goroutines missing: Go runtime collector not registered")
	}
}

func TestConnectCode(t *testing.T) {
	tests := []struct {
		name              string
		err               error
		reconnect, dryRun bool
		want              string
	}{
		{"new session", nil, false, false, "OK"},
		{"reconnect R-C1", nil, true, false, "Reconnect"},
		{"dry run R-C8", nil, false, true, "DryRun"},
		{"no capacity R-C5", vdibroker.Errorf(vdibroker.ENoCapacity, "full"), false, false, "NoCapacity"},
		{"plain error is internal", errors.New("boom"), false, false, "Internal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := metrics.ConnectCode(tt.err, tt.reconnect, tt.dryRun); got != tt.want {
				t.Errorf("ConnectCode = %q, want %q", got, tt.want)
			}
		})
	}
}

// noSessionReads is a real store whose ListUserSessions fails the test: a
// scrape must not read the sessions one by one (250,000 at a full pod).
type noSessionReads struct {
	vdibroker.Store
	t *testing.T
}

func (s noSessionReads) ListUserSessions(context.Context, vdibroker.SessionFilter) ([]*vdibroker.UserSession, error) {
	s.t.Error("a scrape listed user sessions")
	return nil, errors.New("a scrape must not list user sessions")
}

// TestStoreCollector scrapes a real SQLite store whose hosts sent real
// metrics samples: every host's vdibroker_host_load_index and status
// count are what the API shows (loadindex.Present), which the store does
// not fill in (which once left the load index gauge at 0 in production).
func TestStoreCollector(t *testing.T) {
	ctx := t.Context()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	ago := func(s int) time.Time { return now.Add(-time.Duration(s) * time.Second) }
	st, err := store.Open(ctx, "", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })

	lb := vdibroker.DefaultLoadBalancing()
	lb.CPUThreshold = 80
	custom := vdibroker.DefaultLoadBalancing()
	custom.UseCustomScript = true
	pools := []*vdibroker.HostPool{
		{Name: "pool-a", LoadBalancerType: vdibroker.LoadIndex, MaxSessionLimit: 10, LoadBalancing: lb},
		// A custom script pool where no host reports a value: load
		// balancing off, every host -1 (R-IDX3).
		{Name: "pool-b", LoadBalancerType: vdibroker.BreadthFirst, MaxSessionLimit: 10, LoadBalancing: custom},
	}
	for _, p := range pools {
		p.HostPoolType, p.HeartbeatTimeoutSeconds, p.PendingTimeoutSeconds = vdibroker.Pooled, 90, 300
		p.CreateTime, p.UpdateTime = ago(3600), ago(3600)
		if _, err := st.PutHostPool(ctx, p, vdibroker.Precondition{}); err != nil {
			t.Fatal(err)
		}
	}
	host := func(pool, name string, allowNew bool) {
		t.Helper()
		h := &vdibroker.SessionHost{HostPool: pool, Name: name, Address: name + ":3389", StandardFeatures: true, AllowNewSession: allowNew, CreateTime: ago(3600)}
		if _, err := st.PutSessionHost(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	place := func(pool, name, user string, at time.Time) {
		t.Helper()
		u := &vdibroker.UserSession{ID: vdibroker.NewID(), User: user, HostPool: pool, SessionHost: name, State: vdibroker.StatePending, CreateTime: at, StateTime: at}
		if err := st.CommitPlacement(ctx, &vdibroker.PlacementCommit{Session: u, MaxSessionLimit: 10, Pooled: true}); err != nil {
			t.Fatal(err)
		}
	}
	beat := func(pool, name string, at time.Time, m *vdibroker.Metrics, sessions ...vdibroker.AgentSession) {
		t.Helper()
		if _, err := st.ApplyHeartbeat(ctx, pool, name, &vdibroker.HeartbeatRequest{Metrics: m, Sessions: sessions}, at); err != nil {
			t.Fatal(err)
		}
	}
	active := func(users ...string) []vdibroker.AgentSession {
		var l []vdibroker.AgentSession
		for _, u := range users {
			l = append(l, vdibroker.AgentSession{ID: u, User: u, State: vdibroker.StateActive})
		}
		return l
	}
	// h1: four users logged on, sampled at 40 % CPU, then two placements
	// (Pending): 40 + 40/4 × 2 = 60 → 100 × 60/80 = 75; sessions 60 % of
	// the limit; index 75 (R-IDX2, R-LI6). Available (5 s ago).
	host("pool-a", "h1", true)
	for _, u := range []string{"u1", "u2", "u3", "u4"} {
		place("pool-a", "h1", u, ago(60))
	}
	beat("pool-a", "h1", ago(5), &vdibroker.Metrics{CPUPercent: 40, SampledAt: ago(8)}, active("u1", "u2", "u3", "u4")...)
	place("pool-a", "h1", "u5", ago(3))
	place("pool-a", "h1", "u6", ago(2))
	// h2: drained, last heard from 120 s ago (> 90 s: Unavailable), idle
	// in its sample of 121 s ago; dora's disconnected session, adopted by
	// that heartbeat, came after the sample, so the pool's mean per
	// session (h1's 40/4 = 10) estimates hers (R-LI6): 0 + 10 × 1 → 100 ×
	// 10/80 = 12.5 → 13; sessions 10 % of the limit; index 13.
	host("pool-a", "h2", false)
	beat("pool-a", "h2", ago(120), &vdibroker.Metrics{CPUPercent: 0, SampledAt: ago(121)},
		vdibroker.AgentSession{ID: "d1", User: "dora", State: vdibroker.StateDisconnected})
	// h3: never heard from: Unavailable, no heartbeat age, index 0.
	host("pool-a", "h3", true)
	host("pool-b", "b1", true)
	beat("pool-b", "b1", ago(1), &vdibroker.Metrics{CPUPercent: 10, SampledAt: ago(1)})

	reg := metrics.NewRegistry(metrics.Config{Store: noSessionReads{st, t}, Now: func() time.Time { return now }})
	fams := scrape(t, metrics.Handler(reg))

	// What the API shows, host by host.
	for _, p := range pools {
		hosts, err := st.ListSessionHosts(ctx, p.Name)
		if err != nil {
			t.Fatal(err)
		}
		loadindex.Present(p, hosts, now)
		for _, h := range hosts {
			if got := get(t, fams, "vdibroker_host_load_index", map[string]string{"pool": p.Name, "host": h.Name}); got != float64(h.LoadIndex) {
				t.Errorf("%s/%s: load index gauge %v, the API shows %d", p.Name, h.Name, got, h.LoadIndex)
			}
		}
	}
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"vdibroker_store_up", nil, 1},
		{"vdibroker_host_load_index", map[string]string{"host": "h1"}, 75},
		{"vdibroker_host_load_index", map[string]string{"host": "h2"}, 13},
		{"vdibroker_host_load_index", map[string]string{"host": "h3"}, 0},
		{"vdibroker_host_load_index", map[string]string{"host": "b1"}, -1},
		{"vdibroker_pool_max_session_limit", map[string]string{"pool": "pool-a"}, 10},
		{"vdibroker_hosts", map[string]string{"pool": "pool-a", "status": "Available"}, 1},
		{"vdibroker_hosts", map[string]string{"pool": "pool-a", "status": "Unavailable"}, 2},
		{"vdibroker_hosts", map[string]string{"pool": "pool-a", "status": "Shutdown"}, 0},
		{"vdibroker_hosts", map[string]string{"pool": "pool-b", "status": "Available"}, 1},
		{"vdibroker_hosts_drained", map[string]string{"pool": "pool-a"}, 1},
		{"vdibroker_sessions", map[string]string{"pool": "pool-a", "state": "Active"}, 4},
		{"vdibroker_sessions", map[string]string{"pool": "pool-a", "state": "Pending"}, 2},
		{"vdibroker_sessions", map[string]string{"pool": "pool-a", "state": "Disconnected"}, 1},
		{"vdibroker_sessions", map[string]string{"pool": "pool-b", "state": "Active"}, 0},
		{"vdibroker_host_sessions", map[string]string{"pool": "pool-a", "host": "h1"}, 6},
		{"vdibroker_host_heartbeat_age_seconds", map[string]string{"host": "h2"}, 120},
	}
	for _, c := range checks {
		if got := get(t, fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if _, ok := fams["vdibroker_host_heartbeat_age_seconds"].value(map[string]string{"host": "h3"}); ok {
		t.Error("heartbeat age reported for a host that never sent a heartbeat")
	}
}

func TestStoreCollectorStoreDown(t *testing.T) {
	st := &fakeStore{err: errors.New("database is locked")}
	fams := scrape(t, metrics.Handler(metrics.NewRegistry(metrics.Config{Store: st})))
	if got := get(t, fams, "vdibroker_store_up", nil); got != 0 {
		t.Errorf("store_up = %v, want 0", got)
	}
	if _, ok := fams["go_goroutines"]; !ok {
		t.Error("runtime metrics missing when the store is down")
	}
}

// TestStoreUpFollowsTheBrokersOutage (R-OUT1): while the broker counts
// its store as down, vdibroker_store_up is 0 even if a read got through,
// and the outage seconds are exported as a counter.
func TestStoreUpFollowsTheBrokersOutage(t *testing.T) {
	st, err := store.Open(t.Context(), "", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	down, seconds := true, 12.5
	reg := metrics.NewRegistry(metrics.Config{Store: st, Outage: func() (bool, float64) { return down, seconds }})
	fams := scrape(t, metrics.Handler(reg))
	if got := get(t, fams, "vdibroker_store_up", nil); got != 0 {
		t.Errorf("store_up = %v during an outage, want 0", got)
	}
	if got := get(t, fams, "vdibroker_store_outage_seconds_total", nil); got != 12.5 {
		t.Errorf("store_outage_seconds_total = %v, want 12.5", got)
	}
	down = false
	fams = scrape(t, metrics.Handler(reg))
	if got := get(t, fams, "vdibroker_store_up", nil); got != 1 {
		t.Errorf("store_up = %v after the outage, want 1", got)
	}
}

// TestClockOffsetGauge: vdibroker_clock_offset_seconds is the replica's
// last comparison of its clock with the database's, absent before the
// first.
func TestClockOffsetGauge(t *testing.T) {
	var offset time.Duration
	measured := false
	reg := metrics.NewRegistry(metrics.Config{ClockOffset: func() (time.Duration, bool) { return offset, measured }})
	if _, ok := scrape(t, metrics.Handler(reg))["vdibroker_clock_offset_seconds"]; ok {
		t.Error("vdibroker_clock_offset_seconds before the first comparison; want it absent")
	}
	offset, measured = -1500*time.Millisecond, true
	if got := get(t, scrape(t, metrics.Handler(reg)), "vdibroker_clock_offset_seconds", nil); got != -1.5 {
		t.Errorf("vdibroker_clock_offset_seconds = %v, want -1.5", got)
	}
}

// TestInstrumentStore: every operation is timed under its method's name
// (ListHostStates and ListSessionHostsPage were once passed through
// untimed), and only internal errors are counted as failures.
func TestInstrumentStore(t *testing.T) {
	st := metrics.InstrumentStore(&fakeStore{})
	_, err := st.GetHostPool(t.Context(), "nope")
	if vdibroker.ErrorCode(err) != vdibroker.ENotFound {
		t.Fatalf("GetHostPool error = %v, want NotFound passed through", err)
	}
	if _, err := st.ListHostStates(t.Context(), "p"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ListSessionHostsPage(t.Context(), "p", "", 10); err != nil {
		t.Fatal(err)
	}
	broken := metrics.InstrumentStore(&fakeStore{err: errors.New("database is locked")})
	if _, err := broken.ListHostPools(t.Context()); err == nil {
		t.Fatal("ListHostPools of a broken store succeeded")
	}
	fams := scrape(t, metrics.Handler(metrics.NewRegistry(metrics.Config{})))
	for _, op := range []string{"GetHostPool", "ListHostStates", "ListSessionHostsPage", "ListHostPools"} {
		if got := get(t, fams, "vdibroker_store_tx_duration_seconds", map[string]string{"op": op}); got < 1 {
			t.Errorf("%s not timed: count %v", op, got)
		}
	}
	if _, ok := fams["vdibroker_store_tx_errors_total"].value(map[string]string{"op": "GetHostPool"}); ok {
		t.Error("NotFound counted as a store error; only internal errors should be")
	}
	if got := get(t, fams, "vdibroker_store_tx_errors_total", map[string]string{"op": "ListHostPools"}); got < 1 {
		t.Errorf("an internal error of ListHostPools not counted: %v", got)
	}
}

func TestInstrumentAPIPaths(t *testing.T) {
	answer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"sessionId":"1","reconnect":false}`))
	})
	h := metrics.InstrumentAPI(answer)
	reg := metrics.Handler(metrics.NewRegistry(metrics.Config{}))
	count := func(pool string) float64 {
		v, _ := scrape(t, reg)["vdibroker_connects_total"].value(map[string]string{"pool": pool, "code": "OK"})
		return v
	}
	tests := []struct {
		name, method, path, pool string
		counted                  bool
	}{
		{"pool name with a space", http.MethodPost, "/api/v1/hostpools/Finance%20Pool/connect", "Finance Pool", true},
		{"GET is not a connect", http.MethodGet, "/api/v1/hostpools/mw-get/connect", "mw-get", false},
		{"host path is not a connect", http.MethodPost, "/api/v1/hostpools/mw-a/sessionhosts/connect", "mw-a", false},
		{"other path", http.MethodPost, "/api/v1/hostpools/mw-b/registrationtoken", "mw-b", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := count(tt.pool)
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(tt.method, tt.path, nil))
			if got := count(tt.pool) - before; (got == 1) != tt.counted {
				t.Errorf("counted %v, want counted=%v", got, tt.counted)
			}
		})
	}
}

// TestHeartbeatDuration: InstrumentAPI times each agent heartbeat from
// its request to its answer, by result code, and leaves the histogram
// alone for other requests.
func TestHeartbeatDuration(t *testing.T) {
	clock := time.Date(2026, 12, 4, 23, 0, 0, 0, time.UTC)
	t.Cleanup(metrics.SetNow(func() time.Time { return clock }))
	took := map[string]time.Duration{"ok": 300 * time.Millisecond, "revoked": 20 * time.Millisecond, "connect": 5 * time.Second}
	h := metrics.InstrumentAPI(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		which := r.URL.Query().Get("as")
		clock = clock.Add(took[which])
		switch which {
		case "revoked":
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":{"code":"Unauthenticated","message":"host credential is invalid or revoked"}}`))
		case "connect":
			w.WriteHeader(http.StatusCreated)
		default:
			w.Write([]byte(`{"commands":[]}`))
		}
	}))
	reg := metrics.Handler(metrics.NewRegistry(metrics.Config{}))
	read := func(code string) (count, sum float64) {
		for _, s := range scrape(t, reg)["vdibroker_heartbeat_duration_seconds"].samples {
			if s.labels["code"] == code {
				return s.value, s.sum
			}
		}
		t.Fatalf("no vdibroker_heartbeat_duration_seconds{code=%q}", code)
		return 0, 0
	}
	okCount, okSum := read(metrics.CodeOK)
	badCount, badSum := read(vdibroker.EUnauthenticated)
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/api/v1/agent/heartbeat?as=ok", nil))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/api/v1/agent/heartbeat?as=revoked", nil))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/api/v1/hostpools/hb-d/connect?as=connect", nil))
	c, s := read(metrics.CodeOK)
	if c-okCount != 1 || math.Abs(s-okSum-0.3) > 1e-9 {
		t.Errorf("OK heartbeats: count moved by %v, sum by %v; want 1 and 0.3", c-okCount, s-okSum)
	}
	c, s = read(vdibroker.EUnauthenticated)
	if c-badCount != 1 || math.Abs(s-badSum-0.02) > 1e-9 {
		t.Errorf("Unauthenticated heartbeats: count moved by %v, sum by %v; want 1 and 0.02", c-badCount, s-badSum)
	}
}

// TestCountersStartAtZero: once a scrape has seen a pool, the next one
// has its vdibroker_connects_total of every connect code at 0, NoCapacity
// among them, so the pool's first refusal is an increase a rate sees; the
// heartbeat outcomes OK and Unauthenticated are there from the start.
func TestCountersStartAtZero(t *testing.T) {
	st, err := store.Open(t.Context(), "", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p := &vdibroker.HostPool{Name: "zero-pool", HostPoolType: vdibroker.Pooled, LoadBalancerType: vdibroker.BreadthFirst,
		MaxSessionLimit: 1, LoadBalancing: vdibroker.DefaultLoadBalancing(), HeartbeatTimeoutSeconds: 90, PendingTimeoutSeconds: 300}
	if _, err := st.PutHostPool(t.Context(), p, vdibroker.Precondition{}); err != nil {
		t.Fatal(err)
	}
	h := metrics.Handler(metrics.NewRegistry(metrics.Config{Store: st}))
	scrape(t, h) // sees the pool
	fams := scrape(t, h)
	for _, code := range []string{metrics.CodeOK, metrics.CodeReconnect, vdibroker.ENoCapacity, vdibroker.EHostStarting} {
		if v := get(t, fams, "vdibroker_connects_total", map[string]string{"pool": "zero-pool", "code": code}); v != 0 {
			t.Errorf("connects_total{code=%s} = %v before any connect", code, v)
		}
	}
	for _, code := range []string{metrics.CodeOK, vdibroker.EUnauthenticated} {
		get(t, fams, "vdibroker_heartbeats_total", map[string]string{"code": code})
		get(t, fams, "vdibroker_heartbeat_duration_seconds", map[string]string{"code": code})
	}
}
