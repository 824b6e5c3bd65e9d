package broker

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// slowHostsStore is a real store whose ListSessionHosts number holdAt
// (2: the first reads the view when it is first used) waits until
// released: a large pool's read on a loaded database. It signals each
// tick's start, as tickStore does.
type slowHostsStore struct {
	*tickStore
	calls   atomic.Int32
	mu      sync.Mutex
	holdAt  int32
	entered chan struct{}
	release chan struct{}
}

// hold makes read number n wait until release is closed; entered is
// closed when it begins.
func (s *slowHostsStore) hold(n int32) (entered, release chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holdAt, s.entered, s.release = n, make(chan struct{}), make(chan struct{})
	return s.entered, s.release
}

func (s *slowHostsStore) ListSessionHosts(ctx context.Context, pool string) ([]*vdibroker.SessionHost, error) {
	n := s.calls.Add(1)
	s.mu.Lock()
	held, entered, release := n == s.holdAt, s.entered, s.release
	s.mu.Unlock()
	if held {
		close(entered)
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.Store.ListSessionHosts(ctx, pool)
}

// TestTickRefreshesViewsBesideConnects: the maintenance tick reads a
// loaded pool view again itself, and connects meanwhile go on with the
// view they have instead of waiting for the read (at a full pod's load, a
// 10,000-host pool's read on PostgreSQL took a quarter of a second, and
// held up every connect of the pool each tick). A pool nobody used since
// the last tick is not read at all: its next connect reads it. The test
// steps a fake clock tick by tick; a tick has ended when the next one
// begins (the loop runs them one at a time).
func TestTickRefreshesViewsBesideConnects(t *testing.T) {
	ctx := t.Context()
	st, err := store.OpenWith(ctx, "", t.TempDir(), nil, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	slow := &slowHostsStore{tickStore: &tickStore{Store: st, ticks: make(chan struct{}, 1)}}
	entered, release := slow.hold(2)
	const interval = 5 * time.Second
	fc := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	ended := make(chan struct{}, 16) // the loop never waits on it
	svc := New(Config{Store: slow, MaintenanceInterval: interval, Clock: fc, AfterTick: func() { ended <- struct{}{} }})
	t.Cleanup(func() { svc.Close() })
	begun := 0
	tick := func() {
		t.Helper()
		begun++
		fc.Step(interval)
		select {
		case <-slow.ticks:
		case <-time.After(10 * time.Second):
			t.Fatal("the clock stepped a maintenance interval, yet no tick began")
		}
	}
	p := vdibroker.NewHostPool("refresh")
	p.MaxSessionLimit = 10
	if _, _, err := svc.StorePool(ctx, "refresh", nil, p, false); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"h1", "h2"} {
		if _, err := st.PutSessionHost(ctx, &vdibroker.SessionHost{HostPool: "refresh", Name: name, Address: name + ":3389",
			Protocols: []string{"RDP"}, StandardFeatures: true, AllowNewSession: true, CreateTime: fc.Now().UTC()}); err != nil {
			t.Fatal(err)
		}
		heartbeat(t, svc, "refresh", name)
	}
	if _, err := svc.Connect(ctx, "refresh", vdibroker.ConnectRequest{User: "alice"}, ""); err != nil {
		t.Fatal(err) // loads the view: the first read
	}
	if n := slow.calls.Load(); n != 1 {
		t.Fatalf("%d reads of the pool's hosts after its first connect, want 1", n)
	}

	tick() // tick 1: the view was used, so the tick reads it again (read 2, held)
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the maintenance tick never read the loaded pool's hosts again")
	}
	// The tick's read is held: a connect answers from the view it has.
	// One that waited for the read would wait until release, below: a
	// minute bounds that hang, and no more (2 s, as it was, is a bound a
	// connect's own commit may pass under -race on a loaded machine).
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	a, err := svc.Connect(cctx, "refresh", vdibroker.ConnectRequest{User: "bob"}, "")
	if err != nil {
		t.Fatalf("a connect while the tick re-read the pool: %v; want it answered from the view", err)
	}
	if a.SessionHost != "h1" && a.SessionHost != "h2" {
		t.Errorf("bob placed on %q", a.SessionHost)
	}
	close(release)

	tick() // tick 2 begins once tick 1 ended; bob used the view: read 3
	tick() // tick 3 begins: tick 2 ended
	if n := slow.calls.Load(); n != 3 {
		t.Fatalf("%d reads after the ticks that followed alice's and bob's connects, want 3", n)
	}
	// Idle from here on: ticks 3 to 6 read nothing (the next connect will).
	tick()
	tick()
	tick()
	// The last tick has begun; carol connects once every tick has ended,
	// so that her connect, not a tick's refresh, makes the read counted
	// below.
	for range begun {
		select {
		case <-ended:
		case <-time.After(10 * time.Second):
			t.Fatal("a maintenance tick never ended")
		}
	}
	if n := slow.calls.Load(); n != 3 {
		t.Errorf("an idle pool's hosts were read %d times in 4 ticks; want none", n-3)
	}
	// The first connect after the idle ticks decides on the view as it is
	// and has it read in the background (read 4, held): carol is answered
	// while the read waits.
	entered, release = slow.hold(4)
	cctx2, cancel2 := context.WithTimeout(ctx, time.Minute) // as cctx
	defer cancel2()
	if _, err := svc.Connect(cctx2, "refresh", vdibroker.ConnectRequest{User: "carol"}, ""); err != nil {
		t.Fatalf("the first connect after idle ticks: %v; want it answered from the view, not after its read", err)
	}
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the first connect after idle ticks did not have the view read again")
	}
	// dave, beside the read, is answered too, and starts no second read.
	if _, err := svc.Connect(cctx2, "refresh", vdibroker.ConnectRequest{User: "dave"}, ""); err != nil {
		t.Fatalf("a connect beside the idle view's read: %v", err)
	}
	close(release)
	svc.views.Wait()
	if n := slow.calls.Load(); n != 4 {
		t.Errorf("the connects after idle ticks read the pool %d times, want once (read 4)", n-3)
	}
}
