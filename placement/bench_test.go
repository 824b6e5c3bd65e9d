package placement

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/internal/cputime"
)

// benchPool builds a pool of n live hosts in steady state: limit 50, 0..25
// sessions each, metrics sampled at the current count.
func benchPool(algo string, n int) (Pool, []Host) {
	lb := vdibroker.DefaultLoadBalancing()
	lb.CPUThreshold = 80
	pool := Pool{Name: "bench", HostPoolType: vdibroker.Pooled, LoadBalancerType: algo, MaxSessionLimit: 50,
		HeartbeatTimeoutSeconds: 3600, LoadBalancing: lb}
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	hb := testNow
	hosts := make([]Host, n)
	for i := range hosts {
		s := rng.IntN(26)
		hosts[i] = Host{
			Name: fmt.Sprintf("host%06d", i), AllowNewSession: true, StandardFeatures: i%10 != 0,
			LastHeartBeat: &hb, Sessions: s, Connecting: rng.IntN(3),
			Metrics:         &vdibroker.Metrics{CPUPercent: float64(rng.IntN(60)), MemoryPercent: 40, SampledAt: testNow},
			MetricsSessions: s,
		}
	}
	return pool, hosts
}

// benchChunk is how many timed ops BenchmarkPlace runs before it puts the
// pool back, untimed, into its starting state.
const benchChunk = 256

// BenchmarkPlace measures the op the placement issue names: one Place and
// the Apply that records its session (the count update that follows it).
// So that the pool stays in steady state instead of filling up, every
// benchChunk ops the timer stops and every host placed on is put back as it
// was (Upsert of its starting value), so each chunk starts from the same
// pool. Besides ns/op (wall clock) it reports cpu-ns/op, the process CPU
// time of the timed ops (GC included), which other processes on a shared
// machine do not inflate. BenchmarkChurn keeps a session ending in the op.
func BenchmarkPlace(b *testing.B) {
	impls := []struct {
		name string
		new  func(Pool, []Host, Options) Placer
	}{{"indexed", New}, {"naive", NewReference}}
	for _, algo := range []string{vdibroker.BreadthFirst, vdibroker.DepthFirst, vdibroker.LoadIndex} {
		for _, n := range []int{100, 1000, 10000, 100000} {
			for _, impl := range impls {
				b.Run(fmt.Sprintf("algorithm=%s/hosts=%d/impl=%s", algo, n, impl.name), func(b *testing.B) {
					pool, hosts := benchPool(algo, n)
					p := impl.new(pool, hosts, testOptions(1))
					start := make(map[string]Host, n)
					for _, h := range hosts {
						start[h.Name] = h
					}
					placed := make([]string, 0, benchChunk)
					req := Request{User: "bench"}
					var cpu, cpu0 time.Duration
					for b.Loop() {
						if len(placed) == 0 {
							cpu0 = cputime.Process()
						}
						d, err := p.Place(req)
						if err != nil {
							b.Fatal(err)
						}
						p.Apply(d)
						placed = append(placed, d.Host)
						if len(placed) == benchChunk {
							cpu += cputime.Process() - cpu0
							b.StopTimer()
							for _, name := range placed {
								p.Upsert(start[name])
							}
							placed = placed[:0]
							b.StartTimer()
						}
					}
					if len(placed) > 0 {
						cpu += cputime.Process() - cpu0
					}
					b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
				})
			}
		}
	}
}

// BenchmarkChurn measures the indexed engine under churn: one op is a
// Place, its Apply, and one session ending on a host drawn at random (a
// lookup by name and an Upsert with one session fewer), all timed. At
// 100,000 hosts the session end is most of the op: the drawn host's name,
// table entry and tree leaves are random memory reads that a pool of 1,000
// keeps in cache.
func BenchmarkChurn(b *testing.B) {
	for _, algo := range []string{vdibroker.BreadthFirst, vdibroker.DepthFirst, vdibroker.LoadIndex} {
		for _, n := range []int{1000, 100000} {
			b.Run(fmt.Sprintf("algorithm=%s/hosts=%d", algo, n), func(b *testing.B) {
				pool, hosts := benchPool(algo, n)
				p := New(pool, hosts, testOptions(1))
				names := make([]string, n)
				for i, h := range hosts {
					names[i] = h.Name
				}
				rng := rand.New(rand.NewPCG(2, 3))
				req := Request{User: "bench"}
				var cpu0 time.Duration
				for b.Loop() {
					if cpu0 == 0 {
						cpu0 = cputime.Process()
					}
					d, err := p.Place(req)
					if err != nil {
						b.Fatal(err)
					}
					p.Apply(d)
					for range 4 {
						h, _ := p.Host(names[rng.IntN(n)])
						if h.Sessions > 0 {
							h.Sessions--
							h.Connecting = 0
							p.Upsert(h)
							break
						}
					}
				}
				b.ReportMetric(float64(cputime.Process()-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
