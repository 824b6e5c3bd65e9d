package federation

import (
	"math"
	"time"

	"github.com/vdibroker/vdibroker"
)

// UnlimitedCapacity is the per-host capacity SessionCount uses for a pool
// whose maxSessionLimit is "unlimited" (999999): Horizon's default of 150
// sessions per RDS host (R-G2).
const UnlimitedCapacity = 150

// Facts summarises a pool whose hosts carry their read-time status and
// load index (broker.Service.Present).
func Facts(pool *vdibroker.HostPool, hosts []*vdibroker.SessionHost) vdibroker.PoolFacts {
	f := vdibroker.PoolFacts{HostPool: pool.Name, Found: true, LoadBalancerType: pool.LoadBalancerType,
		MaxSessionLimit: pool.MaxSessionLimit, Hosts: len(hosts), HostPoolType: pool.HostPoolType}
	farm := !DesktopPool(f)
	for _, h := range hosts {
		f.Sessions += h.Sessions
		placeable := vdibroker.Placeable(h.Status)
		if placeable && farm && h.LoadIndex >= 0 {
			f.LoadIndexes = append(f.LoadIndexes, h.LoadIndex)
		}
		switch {
		case !placeable:
		case pool.HostPoolType == vdibroker.Personal:
			// A personal host's user may be assigned already: the
			// pool's connect decides (R-PE1..R-PE4).
			f.HasCapacity = true
		case h.AllowNewSession && !h.AutoscaleDrain && h.Sessions < pool.MaxSessionLimit: // either drain (R-C2, R-A3)
			f.HasCapacity = true
		}
	}
	return f
}

// FactsAt is Facts for hosts whose status has not been evaluated: it sets
// each host's Status at now (R-H1) first. The load index is taken as read.
func FactsAt(pool *vdibroker.HostPool, hosts []*vdibroker.SessionHost, now time.Time) vdibroker.PoolFacts {
	for _, h := range hosts {
		h.Status = vdibroker.HostStatus(h, pool.HeartbeatTimeout(), now)
	}
	return Facts(pool, hosts)
}

// DesktopPool reports whether a member pool is a desktop pool, in
// Horizon's words, rather than a farm (R-G2): one user per host, a
// Personal pool (by its type, or, from a peer that does not send the
// type, its load balancer) or a pooled one whose limit is one session a
// host. Every other pool is a farm of multi-session hosts, as a Horizon
// RDS farm.
func DesktopPool(f vdibroker.PoolFacts) bool {
	switch {
	case f.HostPoolType == vdibroker.Personal,
		f.LoadBalancerType == vdibroker.Persistent, f.LoadBalancerType == vdibroker.MultiplePersistent:
		return true
	}
	return f.MaxSessionLimit == 1
}

// PoolLoad is R-G2: the load of one member pool under policy, and whether
// it has one (a pool that is missing or has no host has none). Seed 004's
// examples are TestPoolLoad's.
//
//   - LoadIndex, desktop pool: sessions × 100 / hosts (VMs). 20 sessions
//     on 100 VMs: 20.
//   - LoadIndex, farm: the mean of its placeable hosts' load indexes,
//     0..100. Hosts at 20, 30, 40, 50: 35. A farm none of whose hosts
//     reports one (all down, or -1 under a custom script no host runs):
//     100 × sessions / capacity, at most 100 (our choice).
//   - SessionCount, desktop pool: sessions / hosts (the pool's maximum
//     size). 1 session on 2 personal desktops: 0.5.
//   - SessionCount, farm: sessions / (maxSessionLimit × hosts), with 150
//     per host when the limit is 999999.
//   - None: no load (R-G4 compares none).
func PoolLoad(f vdibroker.PoolFacts, policy string) (float64, bool) {
	if !f.Found || f.Hosts == 0 {
		return 0, false
	}
	switch policy {
	case vdibroker.DistributionLoadIndex:
		switch {
		case DesktopPool(f):
			return float64(f.Sessions) * 100 / float64(f.Hosts), true
		case len(f.LoadIndexes) > 0:
			sum := 0
			for _, li := range f.LoadIndexes {
				sum += li
			}
			return float64(sum) / float64(len(f.LoadIndexes)), true
		}
		return min(100, float64(f.Sessions)*100/float64(capacity(f))), true
	case vdibroker.DistributionSessionCount:
		return float64(f.Sessions) / float64(capacity(f)), true
	}
	return 0, false
}

// capacity is the pool's session capacity for SessionCount: a desktop
// pool's hosts, a farm's limit per host times its hosts.
func capacity(f vdibroker.PoolFacts) int {
	if DesktopPool(f) {
		return f.Hosts
	}
	per := f.MaxSessionLimit
	if per <= 0 || per == vdibroker.NoSessionLimit {
		per = UnlimitedCapacity
	}
	return per * f.Hosts
}

// weight is how much a pool counts in its pod's and site's load: hosts
// under LoadIndex, capacity under SessionCount (see the package doc).
func weight(f vdibroker.PoolFacts, policy string) float64 {
	if _, ok := PoolLoad(f, policy); !ok {
		return 0
	}
	if policy == vdibroker.DistributionSessionCount {
		return float64(capacity(f))
	}
	return float64(f.Hosts)
}

// Aggregate is the load of a pod or a site from its member pools' facts
// (see the package doc): their weighted mean, and false when none weighs.
func Aggregate(pools []vdibroker.PoolFacts, policy string) (float64, bool) {
	var s loadSum
	s.add(pools, policy)
	return s.load()
}

// loadSum is Aggregate over several lists of pools, added in order (a
// site's, pod by pod), without copying them into one.
type loadSum struct{ sum, w float64 }

func (s *loadSum) add(pools []vdibroker.PoolFacts, policy string) {
	for _, f := range pools {
		l, ok := PoolLoad(f, policy)
		if !ok {
			continue
		}
		pw := weight(f, policy)
		s.sum += l * pw
		s.w += pw
	}
}

func (s *loadSum) load() (float64, bool) {
	if s.w == 0 {
		return math.Inf(1), false
	}
	return s.sum / s.w, true
}
