package store_test

import (
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// BenchmarkCommitPlacement measures durable placements per second on SQLite
// with 64 concurrent callers spread over a pool of 500 hosts (the load
// shape of `bench connect`), with group commit as configured by default
// and with a short linger.
func BenchmarkCommitPlacement(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts store.Options
	}{
		{"postgres/default", store.Options{}}, // skipped without VDIBROKER_TEST_POSTGRES_DSN
		{"sqlite/default", store.Options{}},
		{"sqlite/linger=none", store.Options{Linger: -1}},
		{"sqlite/maxbatch=1", store.Options{MaxBatch: 1}},
		{"sqlite/synchronous=NORMAL", store.Options{Synchronous: "NORMAL"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			open := sqliteOpener(b)
			if strings.HasPrefix(bc.name, "postgres") {
				open = postgresOpener(b)
			}
			s := open(b, bc.opts)
			mustPool(b, s, pool("bench", vdibroker.Pooled))
			const hosts = 500
			for i := range hosts {
				mustHost(b, s, "bench", fmt.Sprintf("host%03d", i))
			}
			var n atomic.Int64
			// 64 goroutines in all, whatever GOMAXPROCS is.
			b.SetParallelism((64 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					c := placement("bench", fmt.Sprintf("host%03d", i%hosts), fmt.Sprintf("user%d", i), vdibroker.NoSessionLimit)
					if err := s.CommitPlacement(b.Context(), c); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
			st := s.CommitStats()
			b.ReportMetric(float64(st.Writes)/float64(max(st.Batches, 1)), "writes/batch")
		})
	}
}

// BenchmarkApplyHeartbeat measures heartbeats per second on SQLite from 64
// concurrent agents over 1,000 hosts with 25 sessions each (a full pod's load
// shape, scaled down: 10,000 hosts every 10 s is 1,000 heartbeats/s).
func BenchmarkApplyHeartbeat(b *testing.B) {
	s := sqliteOpener(b)(b, store.Options{})
	mustPool(b, s, pool("bench", vdibroker.Pooled))
	const hosts, perHost = 1000, 25
	reports := make([][]vdibroker.AgentSession, hosts)
	for i := range hosts {
		name := fmt.Sprintf("host%04d", i)
		mustHost(b, s, "bench", name)
		for j := range perHost {
			reports[i] = append(reports[i], vdibroker.AgentSession{ID: fmt.Sprint(j), User: fmt.Sprintf("u%d-%d", i, j), State: vdibroker.StateActive})
		}
		// The first heartbeat adopts the host's sessions.
		if _, err := s.ApplyHeartbeat(b.Context(), "bench", name, &vdibroker.HeartbeatRequest{Sessions: reports[i]}, t0); err != nil {
			b.Fatal(err)
		}
	}
	var n atomic.Int64
	before := s.CommitStats()
	b.SetParallelism((64 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := int(n.Add(1)) % hosts
			hb := &vdibroker.HeartbeatRequest{Sessions: reports[i], Metrics: &vdibroker.Metrics{CPUPercent: 10, SampledAt: t0}}
			if _, err := s.ApplyHeartbeat(b.Context(), "bench", fmt.Sprintf("host%04d", i), hb, t0.Add(time.Minute)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "heartbeats/s")
	st := s.CommitStats()
	b.ReportMetric(float64(st.Writes-before.Writes)/float64(max(st.Batches-before.Batches, 1)), "writes/batch")
}

// BenchmarkCommitBatch measures the database work of one 64-placement
// group-commit transaction on SQLite, without callers: the ceiling of
// CommitPlacement throughput.
func BenchmarkCommitBatch(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		b.Run("sqlite/synchronous="+sync, func(b *testing.B) {
			s := sqliteOpener(b)(b, store.Options{Synchronous: sync})
			mustPool(b, s, pool("bench", vdibroker.Pooled))
			const hosts = 500
			for i := range hosts {
				mustHost(b, s, "bench", fmt.Sprintf("host%03d", i))
			}
			n := 0
			b.ResetTimer()
			for b.Loop() {
				batch := make([]*vdibroker.PlacementCommit, 64)
				for i := range batch {
					n++
					batch[i] = placement("bench", fmt.Sprintf("host%03d", n%hosts), fmt.Sprintf("user%d", n), vdibroker.NoSessionLimit)
				}
				for _, err := range s.CommitBatch(batch) {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.N*64)/b.Elapsed().Seconds(), "commits/s")
		})
	}
}

// BenchmarkHeartbeatLogons measures one heartbeat that logs on 170 of its
// host's sessions (the small pool's heartbeats in bench pod's connect
// phases: a connect storm's sessions reported for the first time), on
// SQLite (a batch of heartbeats alone: unsynced); the sessions are placed
// outside the timer. 2026-12-04, 2 shared cores: 20-24 µs a logon with
// one statement for all of them, 22-26 µs with an UPDATE each.
func BenchmarkHeartbeatLogons(b *testing.B) {
	const logons = 170
	s := sqliteOpener(b)(b, store.Options{})
	mustPool(b, s, pool("bench", vdibroker.Pooled))
	mustHost(b, s, "bench", "h")
	n := 0
	for b.Loop() {
		b.StopTimer()
		report := make([]vdibroker.AgentSession, 0, logons)
		for range logons {
			n++
			user := fmt.Sprintf("u%d", n)
			if err := s.CommitPlacement(b.Context(), placement("bench", "h", user, vdibroker.NoSessionLimit)); err != nil {
				b.Fatal(err)
			}
			report = append(report, vdibroker.AgentSession{ID: fmt.Sprint(n), User: user, State: vdibroker.StateActive})
		}
		b.StartTimer()
		if _, err := s.ApplyHeartbeat(b.Context(), "bench", "h", &vdibroker.HeartbeatRequest{Sessions: report}, t0); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		// The host's sessions end, so the next heartbeat's reads stay the same size.
		if _, err := s.ApplyHeartbeat(b.Context(), "bench", "h", &vdibroker.HeartbeatRequest{}, t0); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*logons), "µs/logon")
}

// BenchmarkDropDirectoryPod measures what dropping the session directory
// entries of a pod removed from the document (DropDirectoryPods, R-G1)
// costs the writes beside it: a pod at MaxDirectoryEntriesPerPod entries
// is dropped while 8 callers commit placements; each op is one drop, and
// the metric is the slowest commit during it (every write waits for the
// one writer on SQLite; on PostgreSQL for the hosts' rows only).
func BenchmarkDropDirectoryPod(b *testing.B) {
	for _, engine := range []string{"sqlite", "postgres"} {
		b.Run(engine, func(b *testing.B) {
			open := sqliteOpener(b)
			if engine == "postgres" {
				open = postgresOpener(b)
			}
			s := open(b, store.Options{})
			ctx := b.Context()
			mustPool(b, s, pool("bench", vdibroker.Pooled))
			const hosts = 100
			for i := range hosts {
				mustHost(b, s, "bench", fmt.Sprintf("host%03d", i))
			}
			var worst time.Duration
			var n atomic.Int64
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				users := make([]string, 0, vdibroker.MaxDirectoryUsers)
				for j := range vdibroker.MaxDirectoryEntriesPerPod {
					users = append(users, fmt.Sprintf("user%07d", j))
					if len(users) == cap(users) {
						last := j == vdibroker.MaxDirectoryEntriesPerPod-1
						if err := s.RegisterDirectory(ctx, "old", 1, users, true, last, t0); err != nil {
							b.Fatal(err)
						}
						users = users[:0]
					}
				}
				stop := make(chan struct{})
				slowest := make(chan time.Duration, 8)
				for range 8 {
					go func() {
						var most time.Duration
						defer func() { slowest <- most }()
						for {
							select {
							case <-stop:
								return
							default:
							}
							k := n.Add(1)
							c := placement("bench", fmt.Sprintf("host%03d", k%hosts), fmt.Sprintf("u%d", k), vdibroker.NoSessionLimit)
							start := time.Now()
							if err := s.CommitPlacement(ctx, c); err != nil {
								b.Error(err)
								return
							}
							most = max(most, time.Since(start))
						}
					}()
				}
				time.Sleep(100 * time.Millisecond) // the commits under way
				b.StartTimer()
				dropped, err := s.DropDirectoryPods(ctx, []string{"other"})
				b.StopTimer()
				time.Sleep(100 * time.Millisecond)
				close(stop)
				for range 8 {
					worst = max(worst, <-slowest)
				}
				if err != nil || len(dropped) != 1 {
					b.Fatalf("dropped %v, %v; want old", dropped, err)
				}
			}
			b.ReportMetric(float64(worst.Microseconds())/1000, "slowest-commit-ms")
		})
	}
}

// BenchmarkSignIn measures a portal sign-in (CreateWebSession with the
// area's bound) in an area already holding n unexpired sign-ins: the
// bound's count is the part that grows with n.
func BenchmarkSignIn(b *testing.B) {
	for _, engine := range []string{"sqlite", "postgres"} {
		for _, n := range []int{10_000, 250_000} {
			b.Run(fmt.Sprintf("%s/%d", engine, n), func(b *testing.B) {
				s := prefilled(b, engine, n, `INSERT INTO web_sessions (id_hash, area, principal, role, sealed, flash, create_time, expire_time)
					SELECT 'h' || i, 'portal', 'oidc:u' || i, 'User', 'sealed', '', %d, %d FROM (%s) AS s`, t0.Add(12*time.Hour))
				lim := vdibroker.WebSessionLimits{PerPrincipal: 16, Window: time.Minute, PerArea: 1_000_000}
				b.ResetTimer()
				for i := range b.N {
					ws := &vdibroker.WebSession{IDHash: fmt.Sprintf("new%d", i), Area: "portal", Principal: fmt.Sprintf("oidc:new%d", i), Role: "User",
						Sealed: []byte("sealed"), CreateTime: t0, ExpireTime: t0.Add(12 * time.Hour)}
					if err := s.CreateWebSession(b.Context(), ws, lim, t0); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkPortalLaunch measures a portal launch's making
// (CreatePortalLaunch with the pod's bound) while the pod keeps n
// launches under way: the bound's count is the part that grows with n.
func BenchmarkPortalLaunch(b *testing.B) {
	for _, engine := range []string{"sqlite", "postgres"} {
		for _, n := range []int{10_000, 100_000} {
			b.Run(fmt.Sprintf("%s/%d", engine, n), func(b *testing.B) {
				s := prefilled(b, engine, n, `INSERT INTO portal_launches (id_hash, owner, name, state, create_time, expire_time)
					SELECT 'h' || i, 'o' || i, 'Office desktop', 'waiting', %d, %d FROM (%s) AS s`, t0.Add(7*time.Minute))
				b.ResetTimer()
				for i := range b.N {
					l := &vdibroker.PortalLaunch{IDHash: fmt.Sprintf("new%d", i), Owner: fmt.Sprintf("new%d", i), Name: "Office desktop",
						State: "waiting", CreateTime: t0, ExpireTime: t0.Add(7 * time.Minute)}
					if err := s.CreatePortalLaunch(b.Context(), l, 3, 1_000_000, t0); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// prefilled opens a store of engine ("sqlite" or "postgres") and runs
// insert, a statement of n rows: its verbs are the rows' create time (t0)
// and expiry (expires), both in nanoseconds, and a query of i from 1 to n.
func prefilled(b *testing.B, engine string, n int, insert string, expires time.Time) *store.DB {
	b.Helper()
	open := sqliteOpener(b)
	series := fmt.Sprintf(`WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < %d) SELECT i FROM g`, n)
	if engine == "postgres" {
		open = postgresOpener(b)
		series = fmt.Sprintf(`SELECT i FROM generate_series(1, %d) AS g(i)`, n)
	}
	s := open(b, store.Options{})
	if err := s.ExecRaw(b.Context(), fmt.Sprintf(insert, t0.UnixNano(), expires.UnixNano(), series)); err != nil {
		b.Fatal(err)
	}
	return s
}
