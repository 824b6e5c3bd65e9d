package outage

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"runtime"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// TestGuardCoversEveryStoreMethod: every Store method that takes a context
// is declared in guard.go on guardedStore itself, so none reaches the store
// without the store timeout (a method only promoted from the embedded
// Store would).
func TestGuardCoversEveryStoreMethod(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "guard.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	own := map[string]bool{}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Recv == nil {
			continue
		}
		if star, ok := fd.Recv.List[0].Type.(*ast.StarExpr); ok {
			if id, ok := star.X.(*ast.Ident); ok && id.Name == "guardedStore" {
				own[fd.Name.Name] = true
			}
		}
	}
	iface := reflect.TypeFor[vdibroker.Store]()
	ctxType := reflect.TypeFor[context.Context]()
	for i := range iface.NumMethod() {
		m := iface.Method(i)
		if m.Type.NumIn() > 0 && m.Type.In(0) == ctxType && !own[m.Name] {
			t.Errorf("guardedStore does not declare %s: it would run without the store timeout", m.Name)
		}
	}
}

// TestGuardBoundsAHungStore: a store call that would hang returns
// StoreUnavailable within the store timeout, and the failed ping that
// follows starts an outage (issue 19).
func TestGuardBoundsAHungStore(t *testing.T) {
	st, err := store.Open(t.Context(), "", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	hung := &hungStore{Store: st, release: make(chan struct{})}
	t.Cleanup(func() { close(hung.release) })
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	h := NewHealth(HealthConfig{Ping: hung.Ping, Timeout: 200 * time.Millisecond, Stop: stop})
	guarded := Guard(hung, 200*time.Millisecond, h)
	t0 := time.Now()
	_, err = guarded.GetHostPool(t.Context(), "p")
	if took := time.Since(t0); took > 2*time.Second {
		t.Errorf("a hung store call took %v; the store timeout is 200ms (and a 200ms ping)", took)
	}
	if vdibroker.ErrorCode(err) != vdibroker.EStoreUnavailable || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("hung call: %v, want StoreUnavailable caused by the deadline", err)
	}
	if vdibroker.ErrorRetryAfter(err) <= 0 {
		t.Errorf("StoreUnavailable without RetryAfter: %v", err)
	}
	if st := h.Status(); st.Up || st.Reason == "" {
		t.Errorf("health after a hung store: %+v, want down with a reason", st)
	}
}

// hungStore is a store whose reads and pings wait for release or the
// caller's deadline, as a paused database does.
type hungStore struct {
	vdibroker.Store
	release chan struct{}
}

func (h *hungStore) wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-h.release:
		return nil
	}
}

func (h *hungStore) Ping(ctx context.Context) error { return h.wait(ctx) }

func (h *hungStore) GetHostPool(ctx context.Context, name string) (*vdibroker.HostPool, error) {
	if err := h.wait(ctx); err != nil {
		return nil, err
	}
	return h.Store.GetHostPool(ctx, name)
}

// TestHealthRecoversAfterAFlap (review): the store fails again while the
// recovery hooks run (a flapping failover); once it answers for good, the
// broker must leave outage mode by itself. Before, the prober still
// counted as running when that second outage began, so none was started
// and the broker stayed down until restarted.
func TestHealthRecoversAfterAFlap(t *testing.T) {
	var mu sync.Mutex
	up := false
	ping := func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if up {
			return nil
		}
		return errors.New("connection refused")
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	fc := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	h := NewHealth(HealthConfig{Ping: ping, Timeout: 20 * time.Millisecond, Interval: 20 * time.Millisecond, Clock: fc, Stop: stop})
	flapped, again := make(chan struct{}), make(chan struct{})
	recoveries := 0
	h.OnUp(func() {
		recoveries++ // the probes run one at a time
		switch recoveries {
		case 1:
			mu.Lock()
			up = false // down again while recovering
			mu.Unlock()
			h.check(errors.New("write failed"))
			if !h.Down() {
				t.Error("a failed write during recovery, its pings failing, did not start an outage")
			}
			mu.Lock()
			up = true // and back for good
			mu.Unlock()
			close(flapped)
		case 2:
			close(again)
		}
	})
	h.fail("connection refused") // its prober's ticker is set by now
	mu.Lock()
	up = true
	mu.Unlock()
	fc.Step(20 * time.Millisecond) // the prober's ping answers: the hooks run
	// The hook's failed write is confirmed by a second ping 200 ms after
	// the first: once that wait is set (the prober's ticker and it), step.
	waitWaiters(t, fc, 2)
	fc.Step(confirmPause)
	wait(t, flapped, "the recovery hook never saw its flap confirmed")
	// The flap's outage has a prober of its own: its first tick recovers.
	fc.Step(20 * time.Millisecond)
	wait(t, again, "still down after the store came back for good: no prober after the flap")
	if h.Down() {
		t.Fatal("the second recovery left the store down")
	}
}

// waitWaiters waits (bounded) until fc has at least n timers and tickers
// set: a goroutine reached its wait.
func waitWaiters(t *testing.T, fc *clocktesting.FakeClock, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for fc.Waiters() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters on the fake clock after 10 s, want %d", fc.Waiters(), n)
		}
		runtime.Gosched()
	}
}

// wait waits (bounded) for ch to close.
func wait(t *testing.T, ch <-chan struct{}, msg string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal(msg)
	}
}

// TestPingFailureIsConfirmed (review): one failed or abandoned ping (a
// /healthz caller that hung up) does not start an outage.
func TestPingFailureIsConfirmed(t *testing.T) {
	calls := 0
	ping := func(ctx context.Context) error {
		calls++
		if calls == 1 {
			return errors.New("timeout")
		}
		return nil
	}
	h := NewHealth(HealthConfig{Ping: ping, Timeout: time.Second, Interval: time.Hour, Stop: make(chan struct{})})
	g := &guardedStore{Store: &pingStore{ping: ping}, timeout: time.Second, health: h}
	g.Ping(t.Context())
	if h.Down() {
		t.Errorf("one failed ping started an outage")
	}
	cctx, cancel := context.WithCancel(t.Context())
	cancel()
	g2 := &guardedStore{Store: &pingStore{ping: func(ctx context.Context) error { return ctx.Err() }}, timeout: time.Second, health: h}
	g2.Ping(cctx)
	if h.Down() {
		t.Errorf("a caller that hung up started an outage")
	}
}

type pingStore struct {
	vdibroker.Store
	ping func(context.Context) error
}

func (p *pingStore) Ping(ctx context.Context) error { return p.ping(ctx) }
