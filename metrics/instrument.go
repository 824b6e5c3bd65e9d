package metrics

import (
	"context"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/intercept"
)

// InstrumentStore returns st with every operation (each method of
// vdibroker.Store, through the generated intercept.Store) timed into
// vdibroker_store_tx_duration_seconds{op} and its internal errors counted in
// vdibroker_store_tx_errors_total{op}; op is the method's name.
func InstrumentStore(st vdibroker.Store) vdibroker.Store {
	return intercept.NewStore(st, timeStoreOp)
}

// timeStoreOp is InstrumentStore's hook. User errors such as NotFound or
// Conflict are answers, not failures: only internal errors are counted.
func timeStoreOp(ctx context.Context, op string, call func(context.Context) error) error {
	start := time.Now()
	err := call(ctx)
	ObserveStoreTx(op, time.Since(start))
	if err != nil && vdibroker.ErrorCode(err) == vdibroker.EInternal {
		storeTxErrors.WithLabelValues(op).Inc()
	}
	return err
}
