package outage

import (
	"context"
	"errors"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/intercept"
)

// guardedStore is the store as the service and its transports use it: every
// call runs under the store timeout, so a paused or unreachable database
// answers within it instead of hanging (R-OUT1), and every failure goes
// through Health, which turns an outage into StoreUnavailable. During an
// outage calls fail at once; the prober alone asks the store whether it
// is back. Every method of vdibroker.Store is guarded: the wrapper is the
// generated intercept.Store, with guard.around as its hook.
func guardedStore(st vdibroker.Store, timeout time.Duration, health *Health) *intercept.Store {
	g := &guard{timeout: timeout, health: health}
	return intercept.NewStore(st, g.around)
}

// Guard returns st as the broker uses it: every call bounded by timeout,
// and every failure checked by h, which turns an outage into
// StoreUnavailable (guardedStore).
func Guard(st vdibroker.Store, timeout time.Duration, h *Health) vdibroker.Store {
	return guardedStore(st, timeout, h)
}

// guard is guardedStore's hook.
type guard struct {
	timeout time.Duration
	health  *Health
}

// errDown is the cause of a call refused during an outage.
var errDown = errors.New("the store is down; waiting for it to answer a ping")

// around runs one store call op under the guard.
func (g *guard) around(ctx context.Context, op string, call func(context.Context) error) error {
	switch op {
	case intercept.OpClose:
		return call(ctx)
	case intercept.OpPing:
		// A failed ping is confirmed like any other failure (a caller that
		// hangs up, or one slow ping, does not start an outage), and it
		// asks the store during an outage: that is how it ends.
		ctx, cancel := context.WithTimeout(ctx, g.timeout)
		defer cancel()
		err := call(ctx)
		if err == nil || errors.Is(err, context.Canceled) {
			return err
		}
		return g.health.check(err)
	}
	if g.health.Down() {
		return unavailable(errDown)
	}
	if op == intercept.OpPruneHistory {
		// It deletes in many short batches (store.PruneHistory); the
		// whole of it may take longer than one store timeout, so it runs
		// under its caller's deadline.
		return g.health.check(call(ctx))
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	return g.health.check(call(ctx))
}
