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
		MaxSessionLimit: pool.MaxSessionLimit, Hosts: len(hosts)}
	for _, h := range hosts {
		f.Sessions += h.Sessions
		placeable := vdibroker.Placeable(h.Status)
		if placeable && pool.LoadBalancerType == vdibroker.LoadIndex && h.LoadIndex >= 0 {
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

// PoolLoad is R-G2: the load of one member pool under policy, and whether
// it has one (a pool that is missing or has no host has none).
//
//   - LoadIndex, desktop pool (any load balancer but LoadIndex):
//     sessions × 100 / hosts. 20 sessions on 100 VMs: 20.
//   - LoadIndex, RDS farm (loadBalancerType LoadIndex): the mean of its
//     hosts' load indexes. Hosts at 20, 30, 40, 50: 35. A farm whose hosts
//     report none falls back to the desktop formula.
//   - SessionCount: sessions / (maxSessionLimit × hosts), with 150 per
//     host when the limit is 999999.
//   - None: no load (R-G4 compares none).
func PoolLoad(f vdibroker.PoolFacts, policy string) (float64, bool) {
	if !f.Found || f.Hosts == 0 {
		return 0, false
	}
	switch policy {
	case vdibroker.DistributionLoadIndex:
		if f.LoadBalancerType == vdibroker.LoadIndex && len(f.LoadIndexes) > 0 {
			sum := 0
			for _, li := range f.LoadIndexes {
				sum += li
			}
			return float64(sum) / float64(len(f.LoadIndexes)), true
		}
		return float64(f.Sessions) * 100 / float64(f.Hosts), true
	case vdibroker.DistributionSessionCount:
		return float64(f.Sessions) / float64(capacity(f)), true
	}
	return 0, false
}

// capacity is the pool's session capacity for SessionCount.
func capacity(f vdibroker.PoolFacts) int {
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
	var sum, w float64
	for _, f := range pools {
		l, ok := PoolLoad(f, policy)
		if !ok {
			continue
		}
		pw := weight(f, policy)
		sum += l * pw
		w += pw
	}
	if w == 0 {
		return math.Inf(1), false
	}
	return sum / w, true
}
