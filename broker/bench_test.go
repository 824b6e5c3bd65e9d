package broker

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// Benchmarks of decisions in a large pool against a small one, through the
// broker's Connect (dry runs: the view's decision and the read of the
// user's sessions, R-C8), on a SQLite store whose hosts carry sessions and
// history. Run for example:
//
//	go test ./broker -run '^$' -bench 'Decision|AfterIdle' -benchtime 2000x

// decisionFixture is a broker on a SQLite store with a 10,000-host and a
// 100-host pool. Every host carries sessionsPerHost Active sessions
// (placed, then reported by the host's agent) and one LoggedOff session
// (reported, then no longer: ended NotReported), whose user is a
// returning user: returning(pool, i).
type decisionFixture struct {
	svc   *Service
	st    *store.DB
	dir   string
	hosts map[string]int
}

const (
	largePool, smallPool = "large", "small"
	sessionsPerHost      = 5
)

var (
	decisionOnce sync.Once
	decisionFix  *decisionFixture
	decisionErr  error
)

// returning is the user who logged off host i of pool: history, no open
// session.
func returning(pool string, i int) string { return fmt.Sprintf("%s-gone-%05d", pool, i) }

func benchHostName(i int) string { return fmt.Sprintf("h%05d", i) }

func newDecisionFixture(b *testing.B) *decisionFixture {
	b.Helper()
	decisionOnce.Do(func() { decisionFix, decisionErr = buildDecisionFixture() })
	if decisionErr != nil {
		b.Fatal(decisionErr)
	}
	return decisionFix
}

func buildDecisionFixture() (*decisionFixture, error) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "vdibroker-decide-")
	if err != nil {
		return nil, err
	}
	st, err := store.OpenWith(ctx, "", dir, nil, store.Options{})
	if err != nil {
		return nil, err
	}
	// No maintenance ticks of its own: the benchmarks run RefreshAll
	// themselves, as the loop's tick would.
	svc := New(Config{Store: st, MaintenanceInterval: 24 * time.Hour})
	f := &decisionFixture{svc: svc, st: st, dir: dir, hosts: map[string]int{largePool: 10000, smallPool: 100}}
	now := time.Now().UTC()
	for pool, n := range f.hosts {
		p := vdibroker.NewHostPool(pool)
		p.MaxSessionLimit = 999999
		p.HeartbeatTimeoutSeconds = 3600 // Available for the whole run without heartbeats
		if _, _, err := svc.StorePool(ctx, pool, nil, p, false); err != nil {
			return nil, err
		}
		if err := seedHosts(ctx, svc, st, pool, n, now); err != nil {
			return nil, fmt.Errorf("seed %s: %w", pool, err)
		}
	}
	return f, nil
}

// seedHosts registers n hosts, places sessionsPerHost+1 sessions on each,
// has the agent report them Active, then report all but the last, which
// ends it (history).
func seedHosts(ctx context.Context, svc *Service, st *store.DB, pool string, n int, now time.Time) error {
	work := make(chan int)
	errs := make(chan error, 64)
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := seedHost(ctx, svc, st, pool, i, now); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

func seedHost(ctx context.Context, svc *Service, st *store.DB, pool string, i int, now time.Time) error {
	name := benchHostName(i)
	if _, err := st.PutSessionHost(ctx, &vdibroker.SessionHost{HostPool: pool, Name: name, Address: name + ":3389",
		Protocols: []string{"RDP"}, StandardFeatures: true, AllowNewSession: true, CreateTime: now}); err != nil {
		return err
	}
	var report []vdibroker.AgentSession
	for j := range sessionsPerHost + 1 {
		user := fmt.Sprintf("%s-on-%05d-%d", pool, i, j)
		if j == sessionsPerHost {
			user = returning(pool, i)
		}
		c := &vdibroker.PlacementCommit{Session: &vdibroker.UserSession{ID: vdibroker.NewID(), User: user, HostPool: pool, SessionHost: name,
			State: vdibroker.StatePending, CreateTime: now, StateTime: now}, MaxSessionLimit: 999999, Pooled: true}
		if err := st.CommitPlacement(ctx, c); err != nil {
			return err
		}
		report = append(report, vdibroker.AgentSession{ID: fmt.Sprint(j + 1), User: user, State: vdibroker.StateActive})
	}
	host := &vdibroker.SessionHost{HostPool: pool, Name: name}
	if _, err := svc.Heartbeat(ctx, host, &vdibroker.HeartbeatRequest{Sessions: report}); err != nil {
		return err
	}
	_, err := svc.Heartbeat(ctx, host, &vdibroker.HeartbeatRequest{Sessions: report[:sessionsPerHost]})
	return err
}

// dryRun is one decision for a returning user of pool.
func (f *decisionFixture) dryRun(b *testing.B, pool string, i int) {
	a, err := f.svc.Connect(context.Background(), pool, vdibroker.ConnectRequest{User: returning(pool, i%f.hosts[pool]), DryRun: true}, "")
	if err != nil || !a.DryRun {
		b.Fatalf("dry run in %s: %+v, %v", pool, a, err)
	}
}

// BenchmarkDecisionPoolSize: the mean latency of a decision (a dry run of
// a returning user, one at a time) in the 10,000-host pool against the
// 100-host pool, for each pooled load balancer type, the two pools taking
// turns decision by decision so both see the same machine. Reported:
// µs/decision in each and their ratio (target about 1.0: a decision's
// cost does not grow with the pool).
func BenchmarkDecisionPoolSize(b *testing.B) {
	f := newDecisionFixture(b)
	ctx := context.Background()
	for _, algo := range []string{vdibroker.BreadthFirst, vdibroker.DepthFirst, vdibroker.LoadIndex} {
		b.Run(algo, func(b *testing.B) {
			for pool := range f.hosts {
				p, err := f.st.GetHostPool(ctx, pool)
				if err != nil {
					b.Fatal(err)
				}
				p.LoadBalancerType = algo
				if _, _, err := f.svc.StorePool(ctx, pool, nil, p, false); err != nil {
					b.Fatal(err)
				}
				f.dryRun(b, pool, 0) // the view with the new settings
			}
			var large, small time.Duration
			b.ResetTimer()
			for i := range b.N {
				t0 := time.Now()
				f.dryRun(b, largePool, i)
				t1 := time.Now()
				f.dryRun(b, smallPool, i)
				large, small = large+t1.Sub(t0), small+time.Since(t1)
			}
			b.ReportMetric(float64(large.Microseconds())/float64(b.N), "µs/decision_10000")
			b.ReportMetric(float64(small.Microseconds())/float64(b.N), "µs/decision_100")
			b.ReportMetric(float64(large)/float64(small), "ratio")
		})
	}
}

// BenchmarkFirstDecisionAfterIdle: the first decision in the 10,000-host
// pool after a maintenance tick found the pool idle (no connect since the
// tick before). "idle" is what the tick does now: the view stays, marked
// idle, and is read again in the background; "stale" is what it did
// before: the view marked stale, read by that first decision (and every
// connect beside it waited for the read). "warm" is a decision in a view
// used since the last tick. Each op is one first decision; the background
// read it starts ends before the next op, outside the timer.
// "idle_tick_µs" is what a tick costs when every loaded view (both
// pools here) is idle: no read, a flag set.
func BenchmarkFirstDecisionAfterIdle(b *testing.B) {
	f := newDecisionFixture(b)
	ctx := context.Background()
	f.dryRun(b, largePool, 0)
	v := f.svc.views.Get(largePool)
	for _, mode := range []string{"idle", "stale", "warm"} {
		b.Run(mode, func(b *testing.B) {
			var tick time.Duration
			var worst time.Duration
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				f.svc.views.Wait()
				f.svc.views.RefreshAll(ctx) // used since the last tick: read
				switch mode {
				case "idle":
					t0 := time.Now()
					f.svc.views.RefreshAll(ctx) // not used since: idle
					tick += time.Since(t0)
				case "stale":
					f.svc.views.RefreshAll(ctx)
					v.MarkStale()
				case "warm":
					f.dryRun(b, largePool, i+1) // used: the next decision is warm
				}
				b.StartTimer()
				t0 := time.Now()
				f.dryRun(b, largePool, i)
				worst = max(worst, time.Since(t0))
			}
			b.StopTimer()
			f.svc.views.Wait()
			b.ReportMetric(float64(worst.Microseconds())/1000, "max_ms")
			if mode == "idle" {
				b.ReportMetric(float64(tick.Microseconds())/float64(b.N), "idle_tick_µs")
			}
		})
	}
}
