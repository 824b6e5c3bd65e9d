package broker

import (
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/loadindex"
)

// present fills the read-time fields of hosts: status (R-H1, from the
// heartbeat age at now) and loadIndex (R-IDX, -1 when load balancing is
// off). The load index needs pool-wide figures, so all should be all the
// pool's hosts when there is more than one.
func present(pool *vdibroker.HostPool, all []*vdibroker.SessionHost, now time.Time, show ...*vdibroker.SessionHost) {
	var lp loadindex.Pool
	var mean loadindex.Mean
	for _, h := range all {
		if loadindex.ValidCustom(h.Metrics) {
			lp.AnyCustom = true
		}
		mean.Add(h.Metrics, h.MetricsSessions)
	}
	lp.PerSession = mean.PerSession()
	timeout := pool.HeartbeatTimeout()
	if len(show) == 0 {
		show = all
	}
	for _, h := range show {
		h.Status = vdibroker.HostStatus(h, timeout, now)
		h.LoadIndex = loadindex.Displayed(pool.LoadBalancing, pool.MaxSessionLimit,
			loadindex.Host{Sessions: h.Sessions, Metrics: h.Metrics, MetricsSessions: h.MetricsSessions}, lp)
		if h.Protocols == nil {
			h.Protocols = []string{}
		}
		if h.AssignedUsers == nil {
			h.AssignedUsers = []string{}
		}
	}
}
