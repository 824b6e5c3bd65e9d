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
	hosts := make([]Host, len(all))
	for i, h := range all {
		hosts[i] = Host{Sessions: h.Sessions, Metrics: h.Metrics, MetricsSessions: h.MetricsSessions}
	}
	lp := PoolOf(hosts)
	timeout := pool.HeartbeatTimeout()
	if len(show) == 0 {
		show = all
	}
	for _, h := range show {
		h.Status = vdibroker.HostStatus(h, timeout, now)
		h.LoadIndex = Displayed(pool.LoadBalancing, pool.MaxSessionLimit,
			Host{Sessions: h.Sessions, Metrics: h.Metrics, MetricsSessions: h.MetricsSessions}, lp)
	}
}
