package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// TestPanicInWriteReleasesWriter: a panic in the function UpdateSessionHost
// runs inside its write transaction must roll that transaction back. On
// SQLite the store has one writer connection; a transaction left open with
// a context that never ends kept it forever, and every later write (and
// the group committer) waited for it at 0% CPU.
func TestPanicInWriteReleasesWriter(t *testing.T) {
	s := sqliteOpener(t)(t, store.Options{})
	mustPool(t, s, pool("panic-pool", vdibroker.Pooled))
	mustHost(t, s, "panic-pool", "host1")
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Fatalf("recovered %v, want the fn's panic", p)
			}
		}()
		s.UpdateSessionHost(context.Background(), "panic-pool", "host1", func(*vdibroker.SessionHost) error { panic("boom") })
	}()
	// The deadline only bounds a hang.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.PutHostPool(ctx, pool("after-panic", vdibroker.Pooled), vdibroker.Precondition{}); err != nil {
		t.Fatalf("write after a panicked transaction: %v", err)
	}
	if err := s.CommitPlacement(ctx, placement("panic-pool", "host1", "alice", vdibroker.NoSessionLimit)); err != nil {
		t.Fatalf("group commit after a panicked transaction: %v", err)
	}
}
