package broker

import "context"

// AutoscaleActions are what the autoscaler acts through (autoscale.Actions,
// R-A2): the service's pools and hosts (SessionHosts, StorePool), and its
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
