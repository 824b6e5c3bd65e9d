package http_test

import (
	"context"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/testserver"
)

// TestPanicInPlacementDoesNotWedgePool: a panic while the pool's view is
// locked for a decision (here from the ObservePlacement hook, standing for
// any panic in the engine) is answered 500 by the middleware and must leave
// the view unlocked and the idempotency key released. Before, the lock was
// never released: every later connect to the pool, the maintenance loop's
// markAllStale and Server.Close waited forever at 0% CPU, and so did a
// retry with the same Idempotency-Key.
func TestPanicInPlacementDoesNotWedgePool(t *testing.T) {
	e := newEnv(t)
	var calls atomic.Int32
	srv := testserver.New(testserver.Config{Store: e.store, Now: e.clock.Now, AdminToken: adminToken,
		MaintenanceInterval: 10 * time.Millisecond,
		ObservePlacement: func(string, time.Duration) {
			if calls.Add(1) == 1 {
				panic("placement exploded")
			}
		}})
	ts := httptest.NewServer(srv.Handler())
	e.pool("wedge", nil)
	e.addHosts("wedge", "wh", 2)
	c := vhttp.NewClient(ts.URL, adminToken)
	// The deadline only bounds a hang.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	_, err := c.ConnectIdempotent(ctx, "wedge", vhttp.ConnectRequest{User: "alice"}, "key-1")
	wantCode(t, err, vdibroker.EInternal)
	r, err := c.ConnectIdempotent(ctx, "wedge", vhttp.ConnectRequest{User: "alice"}, "key-1")
	if err != nil || !r.Created {
		t.Fatalf("retry with the same key after a panic: %+v, %v", r, err)
	}
	if _, err := c.Connect(ctx, "wedge", vhttp.ConnectRequest{User: "bob"}); err != nil {
		t.Fatalf("connect after a panic: %v", err)
	}
	ts.Close()
	closed := make(chan struct{})
	go func() { srv.Close(); close(closed) }()
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("Server.Close waited for the pool lock")
	}
}
