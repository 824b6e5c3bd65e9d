package federation

import (
	"math"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
)

// TestPoolLoad is R-G2 with the source document's examples (Horizon 8,
// "session load distribution" of global entitlements).
func TestPoolLoad(t *testing.T) {
	for _, tc := range []struct {
		name   string
		f      vdibroker.PoolFacts
		policy string
		want   float64
		ok     bool
	}{
		// "if the total number of VMs in a desktop pool is 100 and the
		// current session count is 20, the load index is 20*100/100 = 20".
		{"desktop pool 100 VMs 20 sessions", vdibroker.PoolFacts{Found: true, LoadBalancerType: vdibroker.BreadthFirst, Hosts: 100, Sessions: 20, MaxSessionLimit: 1}, vdibroker.DistributionLoadIndex, 20, true},
		// "a farm of 4 RDS hosts reporting 20, 30, 40 and 50 has the
		// average load index 35".
		{"RDS farm 20 30 40 50", vdibroker.PoolFacts{Found: true, LoadBalancerType: vdibroker.LoadIndex, Hosts: 4, Sessions: 7, LoadIndexes: []int{20, 30, 40, 50}}, vdibroker.DistributionLoadIndex, 35, true},
		// A farm whose hosts report no load index: the desktop formula,
		// 10 sessions * 100 / 4 hosts = 250.
		{"RDS farm without load indexes", vdibroker.PoolFacts{Found: true, LoadBalancerType: vdibroker.LoadIndex, Hosts: 4, Sessions: 10}, vdibroker.DistributionLoadIndex, 250, true},
		// SessionCount: sessions / (maxSessionLimit * hosts): 30 / (10*6).
		{"SessionCount limit 10", vdibroker.PoolFacts{Found: true, Hosts: 6, Sessions: 30, MaxSessionLimit: 10}, vdibroker.DistributionSessionCount, 0.5, true},
		// "150 sessions is used as the default capacity if unlimited is
		// selected": 30 / (150*2) = 0.1.
		{"SessionCount unlimited uses 150 per host", vdibroker.PoolFacts{Found: true, Hosts: 2, Sessions: 30, MaxSessionLimit: vdibroker.NoSessionLimit}, vdibroker.DistributionSessionCount, 0.1, true},
		{"no host has no load", vdibroker.PoolFacts{Found: true, Hosts: 0}, vdibroker.DistributionSessionCount, 0, false},
		{"missing pool has no load", vdibroker.PoolFacts{Found: false, Hosts: 3}, vdibroker.DistributionLoadIndex, 0, false},
		{"None compares nothing", vdibroker.PoolFacts{Found: true, Hosts: 3, Sessions: 1}, vdibroker.DistributionNone, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := PoolLoad(tc.f, tc.policy)
			if ok != tc.ok || math.Abs(got-tc.want) > 1e-9 {
				t.Fatalf("PoolLoad = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestFactsCountsEveryOpenState: Pending, Active and Disconnected sessions
// all count (R-G2); a host's count (R-S1) already holds all three, so the
// pool's is their sum over every host, placeable or not. Capacity needs a
// placeable, undrained host under the limit.
func TestFactsCountsEveryOpenState(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	beat := now.Add(-time.Second)
	pool := vdibroker.NewHostPool("office")
	pool.MaxSessionLimit = 5
	hosts := []*vdibroker.SessionHost{
		// 1 Pending + 2 Active + 2 Disconnected = 5: at the limit.
		{Name: "h1", Sessions: 5, ConnectingSessions: 1, AllowNewSession: true, LastHeartBeat: &beat},
		// Drained, 1 Disconnected.
		{Name: "h2", Sessions: 1, AllowNewSession: false, LastHeartBeat: &beat},
		// Unavailable (never heard of), 2 sessions still open.
		{Name: "h3", Sessions: 2, AllowNewSession: true},
	}
	f := FactsAt(pool, hosts, now)
	if f.Sessions != 8 || f.Hosts != 3 || f.HasCapacity {
		t.Fatalf("facts = %+v; want 8 sessions on 3 hosts, no capacity", f)
	}
	hosts[1].AllowNewSession = true
	if f := FactsAt(pool, hosts, now); !f.HasCapacity {
		t.Fatalf("undrained h2 (1 of 5): want capacity, got %+v", f)
	}
}

// TestAggregate: a pod's and a site's load is their member pools' as one
// pool (see the package doc).
func TestAggregate(t *testing.T) {
	a := vdibroker.PoolFacts{Found: true, Hosts: 100, Sessions: 20, MaxSessionLimit: 1}
	b := vdibroker.PoolFacts{Found: true, Hosts: 50, Sessions: 40, MaxSessionLimit: 1}
	// LoadIndex: (20+40)*100/(100+50) = 40 (host-weighted mean of 20, 80).
	if got, _ := Aggregate([]vdibroker.PoolFacts{a, b}, vdibroker.DistributionLoadIndex); math.Abs(got-40) > 1e-9 {
		t.Errorf("LoadIndex aggregate = %v, want 40", got)
	}
	c := vdibroker.PoolFacts{Found: true, Hosts: 2, Sessions: 30, MaxSessionLimit: vdibroker.NoSessionLimit} // capacity 300
	d := vdibroker.PoolFacts{Found: true, Hosts: 10, Sessions: 90, MaxSessionLimit: 10}                      // capacity 100
	// SessionCount: (30+90)/(300+100) = 0.3.
	if got, _ := Aggregate([]vdibroker.PoolFacts{c, d, {HostPool: "missing"}}, vdibroker.DistributionSessionCount); math.Abs(got-0.3) > 1e-9 {
		t.Errorf("SessionCount aggregate = %v, want 0.3", got)
	}
	if _, ok := Aggregate([]vdibroker.PoolFacts{{HostPool: "missing"}}, vdibroker.DistributionSessionCount); ok {
		t.Error("no weight: want no load")
	}
}
