package outage

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"runtime"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// TestGuardRefusesEveryCallDuringAnOutage: during an outage every method
// of vdibroker.Store fails at once with StoreUnavailable, without reaching
// the store (here nil: reaching it would panic), except Ping, which asks
// the store (that is how the outage ends), and Close.
func TestGuardRefusesEveryCallDuringAnOutage(t *testing.T) {
	// Down, without a prober: nothing here may end the outage.
	h := &Health{log: slog.New(slog.DiscardHandler), now: time.Now, down: true, since: time.Now(), reason: "test outage"}
	var pinged bool
	inner := &pingStore{ping: func(context.Context) error { pinged = true; return nil }}
	g := reflect.ValueOf(guardedStore(inner, time.Second, h))
	iface := reflect.TypeFor[vdibroker.Store]()
	ctxType := reflect.TypeFor[context.Context]()
	for i := range iface.NumMethod() {
		m := iface.Method(i)
		var args []reflect.Value
		for j := range m.Type.NumIn() {
			if m.Type.IsVariadic() && j == m.Type.NumIn()-1 {
				break
			}
			if m.Type.In(j) == ctxType {
				args = append(args, reflect.ValueOf(t.Context()))
			} else {
				args = append(args, reflect.Zero(m.Type.In(j)))
			}
		}
		out := g.MethodByName(m.Name).Call(args)
		err, _ := out[len(out)-1].Interface().(error)
		switch m.Name {
		case "Ping":
			if err != nil || !pinged {
				t.Errorf("Ping during an outage: %v, reached the store %v; want it asked", err, pinged)
			}
			continue
		case "Close":
			if err != nil || !inner.closed {
				t.Errorf("Close during an outage: %v, reached the store %v; want it closed", err, inner.closed)
			}
			continue
		}
		if vdibroker.ErrorCode(err) != vdibroker.EStoreUnavailable {
			t.Errorf("%s during an outage: %v, want StoreUnavailable at once", m.Name, err)
		}
	}
}

// TestGuardBoundsAHungStore: a store call that would hang returns
// StoreUnavailable, its deadline the store timeout from the call, and the
// failed ping that follows starts an outage (R-OUT1). The deadline the
// store was given is checked, not how long the call took: on a loaded
// machine the call and its ping may take seconds past their deadlines.
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
	const timeout = 200 * time.Millisecond
	h := NewHealth(HealthConfig{Ping: hung.Ping, Timeout: timeout, Stop: stop})
	guarded := Guard(hung, timeout, h)
	t0 := time.Now()
	done := make(chan error, 1)
	go func() {
		_, err := guarded.GetHostPool(t.Context(), "p")
		done <- err
	}()
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatal("a hung store call is not bounded: no answer in a minute")
	}
	// The guard set the deadline between t0 and the store's seeing the
	// call: at most the store timeout after either.
	hung.mu.Lock()
	deadline, hasDeadline, seen := hung.deadline, hung.hasDeadline, hung.seen
	hung.mu.Unlock()
	if !hasDeadline || deadline.Before(t0.Add(timeout)) || deadline.After(seen.Add(timeout)) {
		t.Errorf("the hung store call's deadline: %v (set %v), want the store timeout %v after the call (%v after t0 at most)",
			deadline.Sub(t0), hasDeadline, timeout, seen.Sub(t0)+timeout)
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

	mu          sync.Mutex
	seen        time.Time // when GetHostPool was called
	deadline    time.Time // the deadline of its ctx
	hasDeadline bool
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
	h.mu.Lock()
	h.seen = time.Now()
	h.deadline, h.hasDeadline = ctx.Deadline()
	h.mu.Unlock()
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
	g := guardedStore(&pingStore{ping: ping}, time.Second, h)
	g.Ping(t.Context())
	if h.Down() {
		t.Errorf("one failed ping started an outage")
	}
	// The store is down for the pings that would confirm a failure: a
	// canceled ping is no failure, and confirms nothing.
	refused := func(context.Context) error { return errors.New("connection refused") }
	h2 := NewHealth(HealthConfig{Ping: refused, Timeout: time.Second, Interval: time.Hour, Stop: make(chan struct{})})
	cctx, cancel := context.WithCancel(t.Context())
	cancel()
	g2 := guardedStore(&pingStore{ping: func(ctx context.Context) error { return ctx.Err() }}, time.Second, h2)
	if err := g2.Ping(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("a canceled ping: %v, want the cancellation", err)
	}
	if h2.Down() {
		t.Errorf("a caller that hung up started an outage")
	}
}

// TestGuardTimeouts: a call runs under the store timeout, PruneHistory
// under its caller's deadline alone (it deletes in many short batches).
func TestGuardTimeouts(t *testing.T) {
	h := &Health{log: slog.New(slog.DiscardHandler), now: time.Now}
	inner := &deadlineStore{}
	g := guardedStore(inner, time.Minute, h)
	if _, err := g.GetHostPool(t.Context(), "p"); err != nil {
		t.Fatal(err)
	}
	if d, ok := inner.deadline(); !ok || time.Until(d) > time.Minute {
		t.Errorf("GetHostPool ran with deadline %v (set %v), want within the store timeout of 1m", d, ok)
	}
	if _, err := g.PruneHistory(t.Context(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if d, ok := inner.deadline(); ok {
		t.Errorf("PruneHistory ran with deadline %v, want its caller's (none)", d)
	}
}

// deadlineStore records the context of its last call.
type deadlineStore struct {
	vdibroker.Store
	ctx context.Context
}

func (d *deadlineStore) deadline() (time.Time, bool) { return d.ctx.Deadline() }

func (d *deadlineStore) GetHostPool(ctx context.Context, name string) (*vdibroker.HostPool, error) {
	d.ctx = ctx
	return &vdibroker.HostPool{Name: name}, nil
}

func (d *deadlineStore) PruneHistory(ctx context.Context, before time.Time) (int, error) {
	d.ctx = ctx
	return 0, nil
}

type pingStore struct {
	vdibroker.Store
	ping   func(context.Context) error
	closed bool
}

func (p *pingStore) Ping(ctx context.Context) error { return p.ping(ctx) }

func (p *pingStore) Close() error { p.closed = true; return nil }
