package metrics_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/metrics"
)

// fakeStore is an in-memory Store for the collector's logic; the methods the
// collector does not call panic through the nil embedded interface.
type fakeStore struct {
	vdibroker.Store
	pools    []*vdibroker.HostPool
	hosts    map[string][]*vdibroker.SessionHost
	sessions []*vdibroker.UserSession
	err      error
}

func (f *fakeStore) ListHostPools(context.Context) ([]*vdibroker.HostPool, error) {
	return f.pools, f.err
}

func (f *fakeStore) ListSessionHosts(_ context.Context, pool string) ([]*vdibroker.SessionHost, error) {
	return f.hosts[pool], nil
}

func (f *fakeStore) ListUserSessions(_ context.Context, flt vdibroker.SessionFilter) ([]*vdibroker.UserSession, error) {
	var out []*vdibroker.UserSession
	for _, s := range f.sessions {
		if s.HostPool == flt.HostPool && s.Open() {
			out = append(out, s)
		}
	}
	return out, nil
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
			var v float64
			switch {
			case m.Counter != nil:
				v = m.Counter.GetValue()
			case m.Gauge != nil:
				v = m.Gauge.GetValue()
			case m.Histogram != nil:
				v = float64(m.Histogram.GetSampleCount())
			case m.Untyped != nil:
				v = m.Untyped.GetValue()
			}
			df.samples = append(df.samples, sample{labels, v})
		}
		out[name] = df
	}
	return out
}

type sample struct {
	labels map[string]string
	value  float64
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

func TestStoreCollector(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	ago := func(s int) *time.Time { t := now.Add(-time.Duration(s) * time.Second); return &t }
	st := &fakeStore{
		pools: []*vdibroker.HostPool{{Name: "pool-a", LoadBalancerType: vdibroker.DepthFirst, MaxSessionLimit: 10, HeartbeatTimeoutSeconds: 90}},
		hosts: map[string][]*vdibroker.SessionHost{"pool-a": {
			// h1: heartbeat 5 s ago -> Available (R-H1).
			{Name: "h1", AllowNewSession: true, LastHeartBeat: ago(5), Sessions: 3, LoadIndex: 30},
			// h2: 120 s > 90 s timeout -> Unavailable; drained.
			{Name: "h2", AllowNewSession: false, LastHeartBeat: ago(120), Sessions: 0, LoadIndex: 0},
			// h3: never heard from -> Unavailable, no heartbeat age sample.
			{Name: "h3", AllowNewSession: true, LoadIndex: -1},
		}},
		sessions: []*vdibroker.UserSession{
			{HostPool: "pool-a", State: vdibroker.StateActive},
			{HostPool: "pool-a", State: vdibroker.StateActive},
			{HostPool: "pool-a", State: vdibroker.StatePending},
			{HostPool: "pool-a", State: vdibroker.StateLoggedOff},
		},
	}
	h := metrics.Handler(metrics.NewRegistry(metrics.Config{Store: st, Now: func() time.Time { return now }}))
	fams := scrape(t, h)
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"vdibroker_store_up", nil, 1},
		{"vdibroker_pool_max_session_limit", map[string]string{"pool": "pool-a"}, 10},
		{"vdibroker_hosts", map[string]string{"pool": "pool-a", "status": "Available"}, 1},
		{"vdibroker_hosts", map[string]string{"pool": "pool-a", "status": "Unavailable"}, 2},
		{"vdibroker_hosts", map[string]string{"pool": "pool-a", "status": "Shutdown"}, 0},
		{"vdibroker_hosts_drained", map[string]string{"pool": "pool-a"}, 1},
		{"vdibroker_sessions", map[string]string{"pool": "pool-a", "state": "Active"}, 2},
		{"vdibroker_sessions", map[string]string{"pool": "pool-a", "state": "Pending"}, 1},
		{"vdibroker_sessions", map[string]string{"pool": "pool-a", "state": "Disconnected"}, 0},
		{"vdibroker_host_sessions", map[string]string{"pool": "pool-a", "host": "h1"}, 3},
		{"vdibroker_host_load_index", map[string]string{"host": "h1"}, 30},
		{"vdibroker_host_load_index", map[string]string{"host": "h3"}, -1},
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

func TestInstrumentStore(t *testing.T) {
	st := metrics.InstrumentStore(&fakeStore{})
	_, err := st.GetHostPool(t.Context(), "nope")
	if vdibroker.ErrorCode(err) != vdibroker.ENotFound {
		t.Fatalf("GetHostPool error = %v, want NotFound passed through", err)
	}
	fams := scrape(t, metrics.Handler(metrics.NewRegistry(metrics.Config{})))
	if got := get(t, fams, "vdibroker_store_tx_duration_seconds", map[string]string{"op": "GetHostPool"}); got < 1 {
		t.Errorf("GetHostPool not timed: count %v", got)
	}
	if _, ok := fams["vdibroker_store_tx_errors_total"].value(map[string]string{"op": "GetHostPool"}); ok {
		t.Error("NotFound counted as a store error; only internal errors should be")
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
