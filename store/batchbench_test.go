package store_test

import (
	"fmt"
	"testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

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
