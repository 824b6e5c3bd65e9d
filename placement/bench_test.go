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

// BenchmarkPlace measures one op = one Place, the Apply that records it, and
// one session ending elsewhere (an Upsert with one session fewer), so the
// pool stays in steady state instead of filling up. Besides ns/op (wall
// clock) it reports cpu-ns/op, the process CPU time per op (GC included),
// which other processes on a shared machine do not inflate.
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
}
