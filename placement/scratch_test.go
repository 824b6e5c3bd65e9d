package placement

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/vdibroker/vdibroker"
)

func BenchmarkScratch(b *testing.B) {
	for _, part := range []string{"host", "place", "upsert", "hash", "chain"} {
		for _, n := range []int{1000, 100000} {
			b.Run(fmt.Sprintf("part=%s/hosts=%d", part, n), func(b *testing.B) {
				pool, hosts := benchPool(vdibroker.BreadthFirst, n)
				p := New(pool, hosts, testOptions(1))
				x := p.(*indexed)
				names := make([]string, n)
				for i, h := range hosts {
					names[i] = h.Name
				}
				rng := rand.New(rand.NewPCG(2, 3))
				req := Request{User: "bench"}
				var sink uint64
				for b.Loop() {
					switch part {
					case "host":
						h, _ := p.Host(names[rng.IntN(n)])
						sink += uint64(h.Sessions)
					case "chain":
						e := x.entries.get(names[int(sink%uint64(n))])
						sink = sink*31 + uint64(e.h.Sessions) + 7
					case "hash":
						sink += x.entries.hash(names[rng.IntN(n)])
					case "place":
						d, _ := p.Place(req)
						sink += uint64(len(d.Host))
					case "upsert":
						h, _ := p.Host(names[rng.IntN(n)])
						if h.Sessions > 0 && rng.IntN(2) == 0 {
							h.Sessions--
						} else {
							h.Sessions++
						}
						p.Upsert(h)
					}
				}
				_ = sink
			})
		}
	}
}
