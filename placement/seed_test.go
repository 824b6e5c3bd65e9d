package placement

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
)

var testNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// liveHost is an Available, undrained, standard host with n sessions.
func liveHost(name string, n int) Host {
	hb := testNow.Add(-10 * time.Second)
	return Host{Name: name, AllowNewSession: true, StandardFeatures: true, LastHeartBeat: &hb, Sessions: n}
}

func testOptions(seed uint64) Options {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return Options{Rand: rng.IntN, Now: func() time.Time { return testNow }}
}

// implementations runs f against both implementations.
func implementations(t *testing.T, f func(t *testing.T, newPlacer func(Pool, []Host, Options) Placer)) {
	t.Helper()
	t.Run("indexed", func(t *testing.T) { f(t, New) })
	t.Run("reference", func(t *testing.T) { f(t, NewReference) })
}

// TestSeedBreadthFirstNineHosts is SPEC R-BF2's example: nine hosts with
// 11..19 sessions; ceil(9/2) = 5, so only the hosts with 11..15 sessions are
// picked, each with probability 1/5. Over 10,000 seeded draws each expects
// 2,000; the bound 1,800..2,200 is about 5 standard deviations
// (sqrt(10000 × 0.2 × 0.8) = 40), so a fair draw never fails it.
func TestSeedBreadthFirstNineHosts_RBF2(t *testing.T) {
	implementations(t, func(t *testing.T, newPlacer func(Pool, []Host, Options) Placer) {
		var hosts []Host
		for i := 11; i <= 19; i++ {
			hosts = append(hosts, liveHost(fmt.Sprintf("h%d", i), i))
		}
		p := newPlacer(Pool{Name: "p", LoadBalancerType: vdibroker.BreadthFirst, MaxSessionLimit: 100}, hosts, testOptions(1))
		got := map[string]int{}
		const draws = 10000
		for range draws {
			d, err := p.Place(Request{User: "u"})
			if err != nil {
				t.Fatal(err)
			}
			got[d.Host]++
		}
		for i := 11; i <= 19; i++ {
			n := got[fmt.Sprintf("h%d", i)]
			if i <= 15 && (n < 1800 || n > 2200) {
				t.Errorf("h%d picked %d of %d times, want about 2000", i, n, draws)
			}
			if i > 15 && n != 0 {
				t.Errorf("h%d picked %d times, want never", i, n)
			}
		}
	})
}

// TestSeedDepthFirst is SPEC R-DF2's example: counts 3,5,5,2 with limit 5;
// the two hosts with 5 are at the limit, so the most loaded candidate is
// the one with 3.
func TestSeedDepthFirst_RDF2(t *testing.T) {
	implementations(t, func(t *testing.T, newPlacer func(Pool, []Host, Options) Placer) {
		hosts := []Host{liveHost("a", 3), liveHost("b", 5), liveHost("c", 5), liveHost("d", 2)}
		p := newPlacer(Pool{Name: "p", LoadBalancerType: vdibroker.DepthFirst, MaxSessionLimit: 5}, hosts, testOptions(1))
		d, err := p.Place(Request{User: "u"})
		if err != nil {
			t.Fatal(err)
		}
		if d.Host != "a" {
			t.Errorf("chose %q, want a (3 sessions)", d.Host)
		}
	})
}
