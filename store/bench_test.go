package store_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// BenchmarkCommitPlacement measures durable placements per second on SQLite
// with 64 concurrent callers spread over a pool of 500 hosts (issue 3's
// load shape), with group commit as configured by default and with a short
// linger.
func BenchmarkCommitPlacement(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts store.Options
	}{
		{"sqlite/default", store.Options{}},
		{"sqlite/linger=200us", store.Options{Linger: 200 * time.Microsecond}},
		{"sqlite/maxbatch=1", store.Options{MaxBatch: 1}},
		{"sqlite/synchronous=NORMAL", store.Options{Synchronous: "NORMAL"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := sqliteOpener(b)(b, bc.opts)
			mustPool(b, s, pool("bench", vdibroker.Pooled))
			const hosts = 500
			for i := range hosts {
				mustHost(b, s, "bench", fmt.Sprintf("host%03d", i))
			}
			var n atomic.Int64
			// 64 goroutines in all, whatever GOMAXPROCS is.
			b.SetParallelism((64 + testingProcs() - 1) / testingProcs())
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
			b.ReportMetric(float64(st.Placements)/float64(max(st.Batches, 1)), "placements/batch")
		})
	}
}
