package loadindex

import (
	"time"

	"github.com/vdibroker/vdibroker"
)

// Present fills the read-time fields of the hosts in show (all of them
// when show is empty), as the API shows them and /metrics exports them:
// Status (R-H1, vdibroker.HostStatus at now with the pool's heartbeat
// timeout) and LoadIndex (Displayed: R-IDX1..3 with R-LI6). all are every
// host of pool: the pool-wide inputs of R-IDX3 and R-LI6 (PoolOf) come
// from them. show may be a subset of all.
func Present(pool *vdibroker.HostPool, all []*vdibroker.SessionHost, now time.Time, show ...*vdibroker.SessionHost) {
	if len(show) == 0 {
		show = all
	}
	PresentWith(pool, PoolOfHosts(all), now, show...)
}

// PoolOfHosts is PoolOf of a pool's domain hosts.
func PoolOfHosts(all []*vdibroker.SessionHost) Pool {
	hosts := make([]Host, len(all))
	for i, h := range all {
		hosts[i] = Host{Sessions: h.Sessions, Metrics: h.Metrics, MetricsSessions: h.MetricsSessions}
	}
	return PoolOf(hosts)
}

// PresentWith is Present with the pool-wide inputs given (lp, from
// PoolOfHosts of every host of the pool): for a page of a large pool.
func PresentWith(pool *vdibroker.HostPool, lp Pool, now time.Time, show ...*vdibroker.SessionHost) {
	timeout := pool.HeartbeatTimeout()
	for _, h := range show {
		h.Status = vdibroker.HostStatus(h, timeout, now)
		h.LoadIndex = Displayed(pool.LoadBalancing, pool.MaxSessionLimit,
			Host{Sessions: h.Sessions, Metrics: h.Metrics, MetricsSessions: h.MetricsSessions}, lp)
	}
}
