package loadgen

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker/console"
	"github.com/vdibroker/vdibroker/internal/testserver"
	"github.com/vdibroker/vdibroker/metrics"
	"github.com/vdibroker/vdibroker/portal"
	"github.com/vdibroker/vdibroker/store"
)

// podTestBroker is the broker wired as vdibroker serve wires it (store
// timed for /metrics, API, console at /, /metrics), in this process on
// 127.0.0.1:0, and restartable on the same data dir or database, as the
// pod bench needs.
type podTestBroker struct {
	dataDir  string
	database string
	stop     func() error
}

func (b *podTestBroker) start(ctx context.Context, phase string) (string, int, error) {
	st, err := store.Open(ctx, b.database, b.dataDir, nil)
	if err != nil {
		return "", 0, err
	}
	st = metrics.InstrumentStore(st)
	srv := testserver.New(testserver.Config{Store: st, AdminToken: testAdmin, ObservePlacement: metrics.ObservePlacement})
	con := console.New(console.Config{API: srv.Handler(), Store: st, Sessions: st})
	srv.Mux().Handle("/", con)
	ptl := portal.New(portal.Config{API: srv.Handler(), Sessions: st, Launches: st})
	srv.Mux().Handle(portal.Prefix, ptl)
	srv.Mux().Handle("GET /metrics", metrics.Handler(metrics.NewRegistry(metrics.Config{Store: st})))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		st.Close()
		return "", 0, err
	}
	hs := &http.Server{Handler: metrics.InstrumentAPI(srv.Handler()), ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	b.stop = func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return errors.Join(hs.Shutdown(ctx), con.Close(), ptl.Close(), srv.Close(), st.Close())
	}
	return "http://" + ln.Addr().String(), os.Getpid(), nil
}

func (b *podTestBroker) close() error {
	if b.stop == nil {
		return nil
	}
	err := b.stop()
	b.stop = nil
	return err
}

// TestPodBenchTiny runs the whole pod bench at a tiny size against the
// real broker, on SQLite (and PostgreSQL when VDIBROKER_TEST_POSTGRES_DSN
// is set), and checks the report is complete and sane: the state was
// built as asked, every phase and reader ran, every target was evaluated.
// It asserts nothing about speed.
func TestPodBenchTiny(t *testing.T) {
	engines := map[string]string{"sqlite": ""}
	if dsn := os.Getenv("VDIBROKER_TEST_POSTGRES_DSN"); dsn != "" {
		engines["postgres"] = dsn
	}
	for name, base := range engines {
		t.Run(name, func(t *testing.T) {
			b := &podTestBroker{dataDir: t.TempDir()}
			if base != "" {
				dsn, drop, err := PostgresSchema(t.Context(), base)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					if err := drop(context.Background()); err != nil {
						t.Error(err)
					}
				})
				b.database = dsn
			}
			t.Cleanup(func() { b.close() })
			cfg := PodConfig{
				Broker: PodBroker{Start: b.start, Stop: b.close},
				Token:  testAdmin, Database: b.database, DataDir: b.dataDir,
				Hosts: 20, SmallHosts: 4, SessionsPerHost: 3,
				HistoryDays: 7, LogonsPerSeatDay: 1.5,
				Interval: time.Second, Rounds: 1, Phase: 500 * time.Millisecond,
				Concurrency: 4, AgentConcurrency: 8,
				ListEvery: 50 * time.Millisecond, MetricsEvery: 200 * time.Millisecond, ConsoleEvery: 200 * time.Millisecond,
				SeedTimeout: time.Minute, Timeout: 20 * time.Second,
				Progress: func(f string, a ...any) { t.Logf(f, a...) },
			}
			res, err := RunPod(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			res.WriteTable(&out)
			t.Log("\n" + out.String())

			// 20 hosts × 3 + 4 × 3 = 72 seats; history 72 × 7 × 1.5 = 756 rows.
			if res.Seed.OpenSessions != 72 || res.Seed.PendingLeft != 0 {
				t.Errorf("open sessions %d, Pending left %d: want 72 placed, none Pending", res.Seed.OpenSessions, res.Seed.PendingLeft)
			}
			if res.Seed.HistoryRows != 756 {
				t.Errorf("history rows %d, want 756", res.Seed.HistoryRows)
			}
			for name, p := range map[string]PhaseStats{
				"dry runs large": res.DryRunLarge, "dry runs small": res.DryRunSmall,
				"connects large": res.ConnectLarge, "connects small": res.ConnectSmall,
			} {
				if p.OK == 0 || p.Rate <= 0 || p.P99 <= 0 || len(p.Errors) > 0 {
					t.Errorf("%s: %d ok, rate %.1f, p99 %s, errors %v: want answers, a rate and no error", name, p.OK, p.Rate, p.P99, p.Errors)
				}
			}
			for name, r := range map[string]ReaderStats{
				"listings": res.UserListings, "scrapes": res.MetricsScrapes,
				"overview": res.ConsoleOverview, "pool page": res.ConsolePool, "portal page": res.PortalHome,
			} {
				if r.OK == 0 || r.OK != r.Requests || r.Bytes == 0 {
					t.Errorf("%s: %d of %d ok, %d bytes: want every one answered", name, r.OK, r.Requests, r.Bytes)
				}
			}
			// 24 hosts every second.
			if h := res.Heartbeats; h.OK == 0 || h.HandledRate <= 0 || h.OfferedRate < 20 || h.OfferedRate > 28 || len(h.Errors) > 0 {
				t.Errorf("heartbeats: %+v: want about 24/s offered, some handled, no error", h)
			}
			if res.DryRunRatio <= 0 || res.ConnectRatio <= 0 || res.BrokerRSS <= 0 {
				t.Errorf("ratios %.2f %.2f, RSS %d: want all > 0", res.DryRunRatio, res.ConnectRatio, res.BrokerRSS)
			}
			if len(res.Targets) != 9 {
				t.Errorf("%d targets, want 9", len(res.Targets))
			}
			for _, tg := range res.Targets {
				if tg.Name == "" || tg.Measured == "" || tg.Target == "" || tg.Limit <= 0 {
					t.Errorf("target not evaluated: %+v", tg)
				}
			}
			if !strings.Contains(out.String(), "PASS") && !strings.Contains(out.String(), "FAIL") {
				t.Error("table has no verdict")
			}
			// A PostgreSQL run names the server settings its figures
			// depend on; a SQLite run has none.
			if base != "" {
				for _, name := range postgresSettingNames {
					if res.PostgresSettings[name] == "" {
						t.Errorf("PostgreSQL setting %s not reported: %v", name, res.PostgresSettings)
					}
				}
				if !strings.Contains(out.String(), "shared_buffers="+res.PostgresSettings["shared_buffers"]) {
					t.Error("the table does not show the PostgreSQL settings")
				}
			} else if res.PostgresSettings != nil {
				t.Errorf("a SQLite run reports PostgreSQL settings: %v", res.PostgresSettings)
			}
			// The broker's heartbeat times are read from /metrics: its
			// store's and its whole answer's. A phase too short for two
			// scrapes has neither; a phase may have one alone, when a slow
			// heartbeat's store write lands before a scrape and its answer
			// after it (on a loaded machine). Some phase has both.
			timed := 0
			for _, p := range res.Heartbeats.ByPhase {
				if p.StoreMean > 0 && p.AnswerMean > 0 {
					timed++
				}
			}
			if timed == 0 {
				t.Errorf("no phase has both the broker's heartbeat times (store and answer): %+v", res.Heartbeats.ByPhase)
			}
		})
	}
}

func TestPodValidate(t *testing.T) {
	noop := PodBroker{
		Start: func(context.Context, string) (string, int, error) { return "", 0, nil },
		Stop:  func() error { return nil },
	}
	for _, tc := range []struct {
		name string
		cfg  PodConfig
		want string
	}{
		{"no broker", PodConfig{DataDir: "x"}, "no broker"},
		{"no data dir for sqlite", PodConfig{Broker: noop}, "dataDir"},
		{"too many hosts", PodConfig{Broker: noop, DataDir: "x", Hosts: 200_000}, "hosts"},
		{"phase too short", PodConfig{Broker: noop, DataDir: "x", Phase: time.Millisecond}, "phase"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.defaults()
			err := tc.cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

// TestBrokerHeartbeatTimes: a phase's broker times are read from the
// first and last /metrics scrape inside it, the store's
// (ApplyHeartbeat) and the whole answer's (code OK) apart, other series
// and scrapes outside the phase left out.
func TestBrokerHeartbeatTimes(t *testing.T) {
	scrapeAt := func(count, storeSum, answerSum float64, storeUnder25ms, answerUnder250ms float64) string {
		return fmt.Sprintf(`# HELP vdibroker_store_tx_duration_seconds x
vdibroker_store_tx_duration_seconds_bucket{op="ApplyHeartbeat",le="0.025"} %[4]g
vdibroker_store_tx_duration_seconds_bucket{op="ApplyHeartbeat",le="0.25"} %[1]g
vdibroker_store_tx_duration_seconds_bucket{op="ApplyHeartbeat",le="+Inf"} %[1]g
vdibroker_store_tx_duration_seconds_sum{op="ApplyHeartbeat"} %[2]g
vdibroker_store_tx_duration_seconds_count{op="ApplyHeartbeat"} %[1]g
vdibroker_store_tx_duration_seconds_bucket{op="CommitPlacement",le="0.025"} 0
vdibroker_store_tx_duration_seconds_sum{op="CommitPlacement"} 99
vdibroker_store_tx_duration_seconds_count{op="CommitPlacement"} 7
vdibroker_heartbeat_duration_seconds_bucket{code="OK",le="0.025"} 0
vdibroker_heartbeat_duration_seconds_bucket{code="OK",le="0.25"} %[5]g
vdibroker_heartbeat_duration_seconds_bucket{code="OK",le="0.5"} %[1]g
vdibroker_heartbeat_duration_seconds_bucket{code="OK",le="+Inf"} %[1]g
vdibroker_heartbeat_duration_seconds_sum{code="OK"} %[3]g
vdibroker_heartbeat_duration_seconds_count{code="OK"} %[1]g
vdibroker_heartbeat_duration_seconds_count{code="Unauthenticated"} 5
vdibroker_heartbeat_duration_seconds_sum{code="Unauthenticated"} 500
go_memstats_heap_inuse_bytes 1024
`, count, storeSum, answerSum, storeUnder25ms, answerUnder250ms)
	}
	var g scrapeReading
	g.observe([]byte(scrapeAt(100, 1, 10, 100, 100))) // before the phase
	g.observe([]byte(scrapeAt(1000, 10, 100, 1000, 1000)))
	// 1,000 more heartbeats: the store 2 ms each, all under 25 ms; the
	// answers 40 ms each, 11 of them over 250 ms.
	g.observe([]byte(scrapeAt(2000, 12, 140, 2000, 1989)))
	g.observe([]byte(scrapeAt(3000, 100, 1000, 2000, 2000))) // after it
	t0 := time.Date(2026, 12, 4, 23, 0, 0, 0, time.UTC)
	for i := range g.beats {
		g.beats[i].at = t0.Add(time.Duration(i) * time.Second)
	}
	phases := []HeartbeatPhase{{Phase: "p"}}
	g.brokerTimes(phases, []phaseWindow{{name: "p", start: t0.Add(time.Second), end: t0.Add(3 * time.Second)}})
	p := phases[0]
	if p.StoreMean != 2*time.Millisecond || p.StoreP99Below != 25*time.Millisecond {
		t.Errorf("store: mean %v p99 under %v, want 2ms and 25ms", p.StoreMean, p.StoreP99Below)
	}
	if p.AnswerMean != 40*time.Millisecond || p.AnswerP99Below != 500*time.Millisecond {
		t.Errorf("answer: mean %v p99 under %v, want 40ms and 500ms", p.AnswerMean, p.AnswerP99Below)
	}
	if g.heapInuse != 1024 {
		t.Errorf("heap in use %d, want 1024", g.heapInuse)
	}
}
