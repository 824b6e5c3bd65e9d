package http_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/cputime"
	"github.com/vdibroker/vdibroker/internal/testserver"
	"github.com/vdibroker/vdibroker/store"
)

// Benchmarks of the performance targets. Fixtures (a server on a
// SQLite store with N registered, heartbeating hosts) are built once per
// process, because a benchmark function runs several times with growing
// b.N. Run for example:
//
//	go test ./http -run '^$' -bench . -benchtime 3000x

// benchFixture is a server, its store and a pool of Available hosts.
type benchFixture struct {
	store  vdibroker.Store
	url    string
	pool   string
	hosts  int
	client *vhttp.Client
}

var (
	fixturesMu sync.Mutex
	fixtures   = map[string]*benchFixture{}
	fixtureDir string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if fixtureDir != "" {
		os.RemoveAll(fixtureDir)
	}
	os.Exit(code)
}

// benchHTTPClient keeps enough idle connections for 64 concurrent clients,
// so neither side of a comparison pays for connection churn.
func benchHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute}}
}

// fixture returns the server with a pool of n hosts, building it on first use.
func fixture(b *testing.B, n int) *benchFixture {
	b.Helper()
	fixturesMu.Lock()
	defer fixturesMu.Unlock()
	key := fmt.Sprint(n)
	if f, ok := fixtures[key]; ok {
		return f
	}
	if fixtureDir == "" {
		d, err := os.MkdirTemp("", "vdibroker-bench-")
		if err != nil {
			b.Fatal(err)
		}
		fixtureDir = d
	}
	ctx := context.Background()
	dir, _ := os.MkdirTemp(fixtureDir, key)
	st, err := store.Open(ctx, "", dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	srv := testserver.New(testserver.Config{Store: st, AdminToken: adminToken})
	ts := httptest.NewServer(srv.Handler()) // lives until the process ends
	c := vhttp.NewClient(ts.URL, adminToken)
	c.HTTPClient = benchHTTPClient()
	pool := "bench" + key
	// A long heartbeat timeout keeps the hosts Available for the whole run
	// without heartbeats competing with the measured requests.
	if _, err := c.PutHostPool(ctx, pool, map[string]any{"heartbeatTimeoutSeconds": 3600}); err != nil {
		b.Fatal(err)
	}
	// A token for every 250 new hosts: the broker takes a token's
	// NewHostsPerTokenBurst at once, then a second each (R-SEC).
	perToken := vhttp.NewHostsPerTokenBurst / 2
	tokens := make([]string, (n+perToken-1)/perToken)
	for i := range tokens {
		rt, err := c.CreateRegistrationToken(ctx, pool, vhttp.RegistrationTokenRequest{})
		if err != nil {
			b.Fatal(err)
		}
		tokens[i] = rt.Token
	}
	work := make(chan int)
	var wg sync.WaitGroup
	var failed atomic.Value
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				name := fmt.Sprintf("h%05d", i)
				reg, err := c.Register(ctx, &vdibroker.RegisterRequest{Token: tokens[i/perToken], HostName: name, Address: name + ":3389"})
				if err == nil {
					_, err = c.Heartbeat(ctx, reg.Credential, &vdibroker.HeartbeatRequest{})
				}
				if err != nil {
					failed.Store(err)
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatalf("register hosts: %v", err)
	}
	f := &benchFixture{store: st, url: ts.URL, pool: pool, hosts: n, client: c}
	fixtures[key] = f
	return f
}

// runClients runs total requests from `clients` goroutines and returns the
// rate per second and the latencies.
func runClients(clients, total int, do func(i int) error) (rate float64, lat []time.Duration, err error) {
	var next atomic.Int64
	var mu sync.Mutex
	var firstErr error
	lat = make([]time.Duration, 0, total)
	var wg sync.WaitGroup
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, 0, total/clients+1)
			for {
				i := int(next.Add(1)) - 1
				if i >= total {
					break
				}
				t0 := time.Now()
				if e := do(i); e != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = e
					}
					mu.Unlock()
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return float64(total) / time.Since(start).Seconds(), lat, firstErr
}

func p99(lat []time.Duration) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	slices.Sort(lat)
	return lat[(len(lat)*99)/100]
}

var benchUser atomic.Int64

// BenchmarkDurableConnects measures durable connects per second (each a new
// user, answered 201 only once committed to SQLite with fsync) from 64
// concurrent clients against a 500-host pool, and, in the same run with the
// same client, a bare net/http server that decodes the same request and
// answers the broker's answer (same fields and .rdp file) without any
// work. Reported: connects/s,
// bare_req/s, ratio (target ≥ 0.5, floor 0.3) and p99 latencies.
func BenchmarkDurableConnects(b *testing.B) {
	const clients = 64
	f := fixture(b, 500)
	ctx := context.Background()

	// The bare server answers what the broker answers: the same fields,
	// the same .rdp file (from a real dry run), a session id of the same
	// length, encoded per request. What remains between the two is what the
	// broker itself does.
	sample, err := f.client.Connect(ctx, f.pool, vhttp.ConnectRequest{User: "bare-sample", DryRun: true})
	if err != nil {
		b.Fatal(err)
	}
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req vhttp.ConnectRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(vhttp.ConnectResponse{SessionID: "019ad0f3c2e1a4b5c6d7e8f9a0b1", User: req.User,
			HostPool: sample.HostPool, SessionHost: sample.SessionHost, Address: sample.Address, State: "Pending",
			RDPFile: strings.Replace(sample.RDPFile, "bare-sample", req.User, 1)})
	}))
	defer bare.Close()
	bareClient := vhttp.NewClient(bare.URL, adminToken)
	bareClient.HTTPClient = benchHTTPClient()

	type statser interface{ CommitStats() store.CommitStats }
	var before store.CommitStats
	if s, ok := f.store.(statser); ok {
		before = s.CommitStats()
	}
	b.ResetTimer()
	cpu0, wall0 := cputime.Process(), time.Now()
	rate, lat, err := runClients(clients, b.N, func(int) error {
		r, err := f.client.Connect(ctx, f.pool, vhttp.ConnectRequest{User: fmt.Sprintf("bu%09d", benchUser.Add(1))})
		if err == nil && !r.Created {
			err = fmt.Errorf("connect not created: %+v", r)
		}
		return err
	})
	b.StopTimer()
	// cores is the CPU the whole process (clients included) used while the
	// broker ran: near 2 on this machine means CPU-bound, lower means
	// something serial (the single SQLite writer) holds the rate.
	cores := float64(cputime.Process()-cpu0) / float64(time.Since(wall0))
	if err != nil {
		b.Fatalf("broker connect: %v", err)
	}
	// The bare server is four times faster: four times the requests give
	// both phases about the same duration, so a short hiccup weighs the
	// same in each.
	bareRate, bareLat, err := runClients(clients, 4*b.N, func(i int) error {
		_, err := bareClient.Connect(ctx, "bench", vhttp.ConnectRequest{User: fmt.Sprintf("bu%09d", i)})
		return err
	})
	if err != nil {
		b.Fatalf("bare: %v", err)
	}
	if s, ok := f.store.(statser); ok {
		after := s.CommitStats()
		if n := after.Batches - before.Batches; n > 0 {
			b.ReportMetric(float64(after.Writes-before.Writes)/float64(n), "writes/batch")
		}
	}
	if cores > 0 {
		b.ReportMetric(cores, "cores")
	}
	b.ReportMetric(rate, "connects/s")
	b.ReportMetric(bareRate, "bare_req/s")
	b.ReportMetric(rate/bareRate, "ratio")
	b.ReportMetric(float64(p99(lat).Microseconds())/1000, "p99_ms")
	b.ReportMetric(float64(p99(bareLat).Microseconds())/1000, "bare_p99_ms")
}

// BenchmarkDryRunPoolSize measures dry-run decisions per second (64
// concurrent clients, through the API) in a 10,000-host pool and in a
// 100-host pool, and their ratio (target ≥ 0.7): a decision's cost must
// not grow with the pool.
func BenchmarkDryRunPoolSize(b *testing.B) {
	const clients = 64
	small, large := fixture(b, 100), fixture(b, 10000)
	ctx := context.Background()
	dry := func(f *benchFixture) func(int) error {
		return func(i int) error {
			r, err := f.client.Connect(ctx, f.pool, vhttp.ConnectRequest{User: fmt.Sprintf("dry%07d", i), DryRun: true})
			if err == nil && !r.DryRun {
				err = fmt.Errorf("not a dry run: %+v", r)
			}
			return err
		}
	}
	b.ResetTimer()
	largeRate, largeLat, err := runClients(clients, b.N, dry(large))
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	smallRate, _, err := runClients(clients, b.N, dry(small))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(largeRate, "decisions/s_10000")
	b.ReportMetric(smallRate, "decisions/s_100")
	b.ReportMetric(largeRate/smallRate, "ratio")
	b.ReportMetric(float64(p99(largeLat).Microseconds())/1000, "p99_ms_10000")
}
