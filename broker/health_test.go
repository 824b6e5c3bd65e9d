package broker

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker/intercept"
	"github.com/vdibroker/vdibroker/internal/stacks"
	"github.com/vdibroker/vdibroker/store"
)

// TestHealthPingsShared_RSEC: /healthz needs no credential, so the
// health checks that overlap share one store ping: 20 at once while a
// ping is held make one ping, and every one of them is answered its
// result; a check after them pings anew. A caller that hangs up is
// answered at once, and the others still get the ping's result.
func TestHealthPingsShared_RSEC(t *testing.T) {
	ctx := t.Context()
	st, err := store.OpenWith(ctx, "", t.TempDir(), nil, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var pings atomic.Int32
	held := make(chan struct{}, 100)
	release := make(chan struct{})
	wrapped := intercept.NewStore(st, func(ctx context.Context, op string, call func(context.Context) error) error {
		if op == intercept.OpPing {
			pings.Add(1)
			held <- struct{}{}
			<-release
		}
		return call(ctx)
	})
	svc := New(Config{Store: wrapped, MaintenanceInterval: 10000 * time.Hour})
	t.Cleanup(func() { svc.Close() })
	pings.Store(0) // New's own reads, if any, are not the checks'

	var wg sync.WaitGroup
	up := make(chan bool, 20)
	wg.Add(1)
	go func() { defer wg.Done(); up <- svc.Health(ctx).Up }()
	<-held
	for range 19 {
		wg.Add(1)
		go func() { defer wg.Done(); up <- svc.Health(ctx).Up }()
	}
	// Every check waits for the held ping (has joined it) before it is
	// let go.
	waitForCallers(t, "broker.(*Service).Health(", 20)
	// One that hangs up is not held by the ping.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	svc.Health(gone)
	close(release)
	wg.Wait()
	close(up)
	for u := range up {
		if !u {
			t.Error("a shared check answered the store down")
		}
	}
	if n := pings.Load(); n != 1 {
		t.Errorf("20 overlapping checks pinged %d times, want once", n)
	}
	svc.Health(ctx)
	if n := pings.Load(); n != 2 {
		t.Errorf("a later check: %d pings in all, want 2", n)
	}
}

// waitForCallers returns once n goroutines wait in a select inside fn (a
// frame of runtime.Stack, "pkg.(*T).Method("): Health's callers wait so
// for the shared ping only once they joined it, while one merely inside
// Health may not have asked yet and would ping anew after the release.
func waitForCallers(t *testing.T, frame string, n int) {
	t.Helper()
	if !stacks.WaitParked(n, "[select", frame) {
		t.Fatalf("%d goroutines wait in %s, want %d", stacks.CountParked(make([]byte, 1<<20), "[select", frame), frame, n)
	}
}
