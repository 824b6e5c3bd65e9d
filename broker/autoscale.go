package broker

import (
	"context"
	"errors"

	"github.com/vdibroker/vdibroker"
)

// AutoscaleActions are what the autoscaler acts through (autoscale.Actions,
// R-A2): the service's pools and hosts (SessionHosts, SetLoadBalancer), and its
// power service's starts, stops and drains (R-A4). Serve gives it these.
type AutoscaleActions struct{ *Service }

// StartHost asks the pool's power driver to start the host (R-A4), never
// one Starting (power.Service.AutoscaleStart): only an admin starts again
// a host whose start timed out.
func (a AutoscaleActions) StartHost(ctx context.Context, pool, host, by string) error {
	return a.Power().AutoscaleStart(ctx, pool, host, by)
}

// StopHost asks the driver to stop it: Conflict while it has sessions
// unless force.
func (a AutoscaleActions) StopHost(ctx context.Context, pool, host string, force bool, by string) error {
	return a.Power().StopHost(ctx, pool, host, force, by)
}

// SetAutoscaleDrain sets or clears the host's autoscale drain (R-A3).
func (a AutoscaleActions) SetAutoscaleDrain(ctx context.Context, pool, host string, on bool) error {
	return a.Power().SetAutoscaleDrain(ctx, pool, host, on)
}

// errNotFrom refuses SetLoadBalancer's change: the load balancer is no
// longer the one the autoscaler read.
var errNotFrom = errors.New("load balancer changed")

// SetLoadBalancer sets pool's load balancer type to to while it is from,
// through UpdatePool: on the pool as the store's write reads it, so an
// administrator's change that landed after the autoscaler read the pool
// is kept, and nothing but the load balancer changes (R-A2, R-E13).
func (a AutoscaleActions) SetLoadBalancer(ctx context.Context, pool, from, to string) (*vdibroker.HostPool, bool, error) {
	p, err := a.UpdatePool(ctx, pool, func(p *vdibroker.HostPool) error {
		if p.LoadBalancerType != from {
			return errNotFrom
		}
		p.LoadBalancerType = to
		return nil
	}, vdibroker.Precondition{})
	if errors.Is(err, errNotFrom) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return p, true, nil
}
