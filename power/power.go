package power

import (
	"context"
	"fmt"
	"sort"
)

// Target is the host a driver acts on: its pool, name and registered
// address (empty before the agent first registered).
type Target struct {
	Pool    string
	Host    string
	Address string
}

// Driver starts, stops and reports the power state of session hosts.
// Start and Stop return once the infrastructure accepted the request, not
// when the host is up or down: the broker learns that from the agent's
// heartbeats (Running) or from Status.
type Driver interface {
	Start(ctx context.Context, t Target) error
	Stop(ctx context.Context, t Target) error
	// Status returns one of the vdibroker.Power* states; ErrNoStatus when
	// the driver has no way to tell.
	Status(ctx context.Context, t Target) (string, error)
}

// ErrNoStatus is Status's answer from a driver configured without one.
var ErrNoStatus = fmt.Errorf("power driver has no status action")

// Set is the loaded drivers by name.
type Set map[string]Driver

// Names returns the drivers' names in order.
func (s Set) Names() []string {
	out := make([]string, 0, len(s))
	for n := range s {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
