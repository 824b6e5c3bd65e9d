package sim

import (
	"context"
	"os"
	"testing"
)

// BenchmarkWorkday10k is the speed figure of docs/benchmarks-history.md
// ("Simulator"): one algorithm on the 10,000-host, 250,000-user workday of
// testdata/workday-10k.yaml.
// placements/s counts new sessions placed, decisions/s every Place call
// (placements, rejections, reconnects), both over the wall time of the
// whole simulation: the agents' samples and the bookkeeping included.
func BenchmarkWorkday10k(b *testing.B) {
	for _, alg := range []string{"BreadthFirst", "DepthFirst", "LoadIndex"} {
		b.Run(alg, func(b *testing.B) {
			data, err := os.ReadFile("testdata/workday-10k.yaml")
			if err != nil {
				b.Fatal(err)
			}
			sc, err := Parse("workday-10k.yaml", data)
			if err != nil {
				b.Fatal(err)
			}
			sc.Algorithms = []string{alg}
			placed, decisions := 0, 0
			b.ResetTimer()
			for b.Loop() {
				rep, err := Run(context.Background(), sc, Options{Parallel: 1, NoSeries: true})
				if err != nil {
					b.Fatal(err)
				}
				placed += rep.Placements()
				decisions += rep.Decisions()
			}
			b.ReportMetric(float64(placed)/b.Elapsed().Seconds(), "placements/s")
			b.ReportMetric(float64(placed)/b.Elapsed().Seconds()*60, "placements/min")
			b.ReportMetric(float64(decisions)/b.Elapsed().Seconds(), "decisions/s")
		})
	}
}
