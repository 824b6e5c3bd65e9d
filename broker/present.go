package broker

import (
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/loadindex"
)

// present fills the read-time fields of hosts as the API shows them:
// status and load index as loadindex.Present computes them (the metrics
// read the same), the power state (PowerStateOf), and empty lists rather
// than null.
func present(pool *vdibroker.HostPool, all []*vdibroker.SessionHost, now time.Time, show ...*vdibroker.SessionHost) {
	if len(show) == 0 {
		show = all
	}
	loadindex.Present(pool, all, now, show...)
	for _, h := range show {
		presentFields(pool, h, now)
	}
}

// presentFields fills h's read-time fields that need no other host: the
// power state (PowerStateOf) and empty lists rather than null.
func presentFields(pool *vdibroker.HostPool, h *vdibroker.SessionHost, now time.Time) {
	h.PowerState = vdibroker.PowerStateOf(h, pool.HeartbeatTimeout(), now)
	if h.Protocols == nil {
		h.Protocols = []string{}
	}
	if h.AssignedUsers == nil {
		h.AssignedUsers = []string{}
	}
}
