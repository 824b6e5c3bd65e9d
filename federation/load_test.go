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
		// A farm whose hosts report no load index (our choice): 100 *
		// sessions / capacity, 10 sessions on 4 unlimited hosts: 1000 /
		// (150*4) = 1.67; never above 100.
		{"RDS farm without load indexes", vdibroker.PoolFacts{Found: true, LoadBalancerType: vdibroker.LoadIndex, Hosts: 4, Sessions: 10, MaxSessionLimit: vdibroker.NoSessionLimit}, vdibroker.DistributionLoadIndex, 1000.0 / 600, true},
		{"RDS farm without load indexes, over its limits", vdibroker.PoolFacts{Found: true, LoadBalancerType: vdibroker.BreadthFirst, Hosts: 2, Sessions: 50, MaxSessionLimit: 20}, vdibroker.DistributionLoadIndex, 100, true},
		// A multi-session pooled pool is a farm whatever its load
		// balancer (the deviation fixed: 2 hosts, limit 20, 30 sessions
		// was 30*100/2 = 1500 beside a farm at 35): its hosts' mean load
		// index, here their session factors 100*15/20 = 75 and 75: 75.
		{"multi-session BreadthFirst pool is a farm", vdibroker.PoolFacts{Found: true, HostPoolType: vdibroker.Pooled, LoadBalancerType: vdibroker.BreadthFirst, MaxSessionLimit: 20, Hosts: 2, Sessions: 30, LoadIndexes: []int{75, 75}}, vdibroker.DistributionLoadIndex, 75, true},
		// A personal pool is a desktop pool: 1 session * 100 / 2 VMs = 50,
		// load indexes or not.
		{"personal pool LoadIndex", vdibroker.PoolFacts{Found: true, HostPoolType: vdibroker.Personal, LoadBalancerType: vdibroker.Persistent, MaxSessionLimit: vdibroker.NoSessionLimit, Hosts: 2, Sessions: 1, LoadIndexes: []int{1, 0}}, vdibroker.DistributionLoadIndex, 50, true},
		// "For desktop pools, the session count is the total number of
		// sessions / the maximum pool size": 1 session on 2 personal
		// desktops is 1/2 = 0.5 (was 1/(150*2) = 0.0033).
		{"SessionCount personal pool 1 of 2 desktops", vdibroker.PoolFacts{Found: true, HostPoolType: vdibroker.Personal, LoadBalancerType: vdibroker.Persistent, MaxSessionLimit: vdibroker.NoSessionLimit, Hosts: 2, Sessions: 1}, vdibroker.DistributionSessionCount, 0.5, true},
		// A personal pool from a peer that does not send its type: known
		// by its load balancer, 3 sessions on 4 desktops: 0.75.
		{"SessionCount personal pool of an older peer", vdibroker.PoolFacts{Found: true, LoadBalancerType: vdibroker.MultiplePersistent, MaxSessionLimit: vdibroker.NoSessionLimit, Hosts: 4, Sessions: 3}, vdibroker.DistributionSessionCount, 0.75, true},
		// A pooled pool of single-session hosts (limit 1) is a desktop
		// pool: 20 sessions on 100 VMs, 0.2.
		{"SessionCount single-session pool", vdibroker.PoolFacts{Found: true, LoadBalancerType: vdibroker.BreadthFirst, Hosts: 100, Sessions: 20, MaxSessionLimit: 1}, vdibroker.DistributionSessionCount, 0.2, true},
		// "For RDS farms, the session count is the total number of
		// sessions / the maximum session count": 30 / (10*6) = 0.5.
		{"SessionCount farm limit 10", vdibroker.PoolFacts{Found: true, Hosts: 6, Sessions: 30, MaxSessionLimit: 10}, vdibroker.DistributionSessionCount, 0.5, true},
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

// TestFactsOfAFarm (R-G2): the facts of a multi-session pooled pool carry
// its placeable hosts' load indexes as the API shows them, whatever its
// load balancer; a personal pool's carry none and say it is Personal.
func TestFactsOfAFarm(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	beat := now.Add(-time.Second)
	pool := vdibroker.NewHostPool("farm")
	pool.MaxSessionLimit = 20
	pool.FillDefaults() // BreadthFirst
	hosts := []*vdibroker.SessionHost{
		{Name: "h1", Sessions: 15, AllowNewSession: true, LastHeartBeat: &beat, LoadIndex: 75},
		{Name: "h2", Sessions: 15, AllowNewSession: true, LastHeartBeat: &beat, LoadIndex: 75},
		{Name: "h3", Sessions: 0, AllowNewSession: true, LoadIndex: 0}, // Unavailable: not counted
	}
	f := FactsAt(pool, hosts, now)
	if l, _ := PoolLoad(f, vdibroker.DistributionLoadIndex); l != 75 || f.HostPoolType != vdibroker.Pooled {
		t.Errorf("farm of 2 hosts at 75 and one down: load %v, facts %+v; want 75", l, f)
	}
	personal := vdibroker.NewHostPool("desks")
	personal.HostPoolType = vdibroker.Personal
	personal.FillDefaults()
	desks := []*vdibroker.SessionHost{
		{Name: "d1", Sessions: 1, AllowNewSession: true, LastHeartBeat: &beat, LoadIndex: 1},
		{Name: "d2", Sessions: 0, AllowNewSession: true, LastHeartBeat: &beat, LoadIndex: 0},
	}
	f = FactsAt(personal, desks, now)
	if len(f.LoadIndexes) != 0 || f.HostPoolType != vdibroker.Personal {
		t.Errorf("personal facts %+v", f)
	}
	// Seed 004: 1 session / 2 desktops = 0.5; 1 * 100 / 2 = 50.
	if l, _ := PoolLoad(f, vdibroker.DistributionSessionCount); l != 0.5 {
		t.Errorf("personal SessionCount %v, want 1/2 = 0.5", l)
	}
	if l, _ := PoolLoad(f, vdibroker.DistributionLoadIndex); l != 50 {
		t.Errorf("personal LoadIndex %v, want 1*100/2 = 50", l)
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
