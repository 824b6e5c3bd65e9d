//go:build unix

package main

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/internal/pgtest"
)

// BenchmarkOutage measures issue 19's reliability figures (BENCHMARKS.md):
// two real `vdibroker serve` replicas and four real agents on a PostgreSQL
// server of the benchmark's own, 120 users with open sessions; a steady
// connect load (8 clients, each a connect every 20 ms through a random
// replica: three of four an existing user's reconnect, one a new user)
// runs while PostgreSQL is stopped for VDIBROKER_BENCH_OUTAGE (60s) and
// started again. Reported: the share of reconnects answered 200 with the
// user's session, the p50/p99 of the refusals of new users (503
// StoreUnavailable), and the sessions lost (acknowledged, not in the
// database after recovery). With VDIBROKER_BENCH_OUTAGE_PLACEMENT=1 the
// replicas run --outage-placement and new users are placed within their
// escrows until these run out. VDIBROKER_BENCH_OUTAGE_MODE=paused pauses
// PostgreSQL with SIGSTOP instead of stopping it (connections stay open,
// nothing answers).
//
//	VDIBROKER_TEST_POSTGRES_DSN=... go test -run '^$' -bench BenchmarkOutage -benchtime 1x ./cmd/vdibroker
func BenchmarkOutage(b *testing.B) {
	outage := 60 * time.Second
	if v := os.Getenv("VDIBROKER_BENCH_OUTAGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("VDIBROKER_BENCH_OUTAGE: %v", err)
		}
		outage = d
	}
	var extra []string
	if os.Getenv("VDIBROKER_BENCH_OUTAGE_PLACEMENT") == "1" {
		extra = []string{"--outage-placement", "--outage-escrow-renew", "1s"}
	}
	paused := os.Getenv("VDIBROKER_BENCH_OUTAGE_MODE") == "paused"
	bin := e2eBuild(b, b.TempDir())
	pg := pgtest.Start(b)
	for range b.N {
		w := startOutageWorldLimit(b, bin, pg.DSN, []string{b.TempDir(), b.TempDir()}, 4, 40, extra...)
		w.place(120)
		if len(extra) > 0 {
			waitEscrowsSettled(b, pg.DSN, 2)
		}
		users := make([]string, 0, len(w.placed))
		for u := range w.placed {
			users = append(users, u)
		}
		slices.Sort(users)

		var (
			mu                      sync.Mutex
			reconnects, reconnected int
			refusals                []time.Duration
			reconnectTook           []time.Duration
			newPlaced               = map[string]outageConnect{}
			otherNew                = map[string]int{}
			reqs                    int
		)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for c := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(c), 19))
				tick := time.NewTicker(20 * time.Millisecond)
				defer tick.Stop()
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					i := r.IntN(len(w.brokers))
					if n%4 != 3 {
						user := users[r.IntN(len(users))]
						a, err := w.try(i, user)
						mu.Lock()
						reqs++
						reconnects++
						if err == nil && a.Status == http.StatusOK && a.Reconnect && a.SessionID == w.placed[user].SessionID {
							reconnected++
						}
						reconnectTook = append(reconnectTook, a.Took)
						mu.Unlock()
						continue
					}
					user := fmt.Sprintf("new-%d-%d", c, n)
					a, err := w.try(i, user)
					mu.Lock()
					reqs++
					switch {
					case err != nil:
						otherNew["error"]++
					case a.Status == http.StatusCreated:
						newPlaced[user] = a
					case a.Status == http.StatusServiceUnavailable && a.Error != nil && a.Error.Code == vdibroker.EStoreUnavailable:
						refusals = append(refusals, a.Took)
					default:
						otherNew[fmt.Sprint(a.Status)]++
					}
					mu.Unlock()
				}
			}()
		}
		t0 := time.Now()
		if paused {
			pg.Pause()
		} else {
			pg.Stop()
		}
		w.waitHealth(http.StatusServiceUnavailable, 30*time.Second)
		detected := time.Since(t0)
		time.Sleep(max(outage-detected, 0))
		// Only what was answered while the store was down counts.
		mu.Lock()
		outReconnects, outReconnected, outRefusals, outReqs := reconnects, reconnected, slices.Clone(refusals), reqs
		outReconnectTook := slices.Clone(reconnectTook)
		mu.Unlock()
		if paused {
			pg.Resume()
		} else {
			pg.Restart()
		}
		w.waitHealth(http.StatusOK, 60*time.Second)
		recovered := time.Since(t0)
		close(stop)
		wg.Wait()
		// Every acknowledged session, the outage's placements included,
		// must be in the database.
		for u, a := range newPlaced {
			w.placed[u] = a
		}
		var lost []string
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			open := w.openSessions()
			lost = lost[:0]
			for u, a := range w.placed {
				if s, ok := open[u]; !ok || s.ID != a.SessionID {
					lost = append(lost, u)
				}
			}
			if len(lost) == 0 || time.Now().After(deadline) {
				break
			}
		}
		for _, u := range lost {
			all := w.brokers[0].api.sessions(outagePool, url.Values{"user": {u}, "state": {vdibroker.StateLoggedOff}})
			b.Errorf("session of %s lost (acknowledged %+v): ended %+v", u, w.placed[u], all)
		}
		slices.Sort(outRefusals)
		slices.Sort(outReconnectTook)
		pctOf := func(l []time.Duration, p float64) time.Duration {
			if len(l) == 0 {
				return 0
			}
			return l[min(len(l)-1, int(p*float64(len(l))))]
		}
		pct := func(p float64) time.Duration { return pctOf(outRefusals, p) }
		share := 100 * float64(outReconnected) / float64(max(outReconnects, 1))
		b.ReportMetric(share, "%reconnects-answered")
		b.ReportMetric(float64(pct(0.99).Microseconds())/1000, "p99-refusal-ms")
		b.ReportMetric(float64(len(lost)), "sessions-lost")
		b.ReportMetric(float64(pctOf(outReconnectTook, 0.99).Microseconds())/1000, "p99-reconnect-ms")
		b.Logf("outage %v, PostgreSQL %s (known after %v, over after %v): %d requests while down; reconnects %d/%d answered (%.2f %%; p99 %v, max %v); new users refused %d (p50 %v, p99 %v, max %v), placed %d in all, other answers %v; sessions lost %d of %d",
			outage, map[bool]string{false: "stopped", true: "paused"}[paused], detected.Round(time.Millisecond), recovered.Round(time.Millisecond), outReqs, outReconnected, outReconnects, share, pctOf(outReconnectTook, 0.99), pctOf(outReconnectTook, 1),
			len(outRefusals), pct(0.5), pct(0.99), pct(1), len(newPlaced), otherNew, len(lost), len(w.placed))
	}
}
