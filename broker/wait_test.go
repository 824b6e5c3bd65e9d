package broker

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/power"
	"github.com/vdibroker/vdibroker/store"
)

// waitFixture is powerFixture on a fake clock: a pool "pwr" whose hosts
// h1..hn are Stopped, start VM on connect through a simulated driver,
// connects held at most maxWait, at most maxWaiters at once. The
// maintenance tick comes when the test steps the clock by tick.
func waitFixture(t *testing.T, limit, n int, maxWait time.Duration, maxWaiters int, tick time.Duration) (*Service, *store.DB, *clocktesting.FakeClock, chan struct{}) {
	t.Helper()
	return waitFixtureOn(t, nil, limit, n, maxWait, maxWaiters, tick)
}

// waitFixtureOn is waitFixture with the service's store wrapped by wrap
// (nil: the store itself).
func waitFixtureOn(t *testing.T, wrap func(*store.DB) vdibroker.Store, limit, n int, maxWait time.Duration, maxWaiters int, tick time.Duration) (*Service, *store.DB, *clocktesting.FakeClock, chan struct{}) {
	t.Helper()
	ctx := t.Context()
	st, err := store.OpenWith(ctx, "", t.TempDir(), nil, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var svcStore vdibroker.Store = st
	if wrap != nil {
		svcStore = wrap(st)
	}
	fc := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
	ticks := make(chan struct{}, 16)
	sim := &power.Simulated{}
	svc := New(Config{Store: svcStore, Clock: fc, PowerDrivers: power.Set{"sim": sim}, MaintenanceInterval: tick,
		PowerPollInterval: 1000 * time.Hour, MaxConnectWait: maxWait, MaxConnectWaiters: maxWaiters,
		AfterTick: func() { ticks <- struct{}{} }})
	t.Cleanup(func() { svc.Close() })
	fixtureSims.Store(svc, sim)
	t.Cleanup(func() { fixtureSims.Delete(svc) })
	p := vdibroker.NewHostPool("pwr")
	p.MaxSessionLimit, p.PowerDriver, p.StartVMOnConnect = limit, "sim", true
	if _, _, err := svc.StorePool(ctx, "pwr", nil, p, false); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		name := "h" + string(rune('0'+i))
		if _, err := st.PutSessionHost(ctx, &vdibroker.SessionHost{HostPool: "pwr", Name: name, Address: name + ":3389",
			Protocols: []string{"RDP"}, StandardFeatures: true, AllowNewSession: true, CreateTime: fc.Now()}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.SetPowerState(ctx, "pwr", name, vdibroker.PowerStopped, fc.Now()); err != nil {
			t.Fatal(err)
		}
	}
	return svc, st, fc, ticks
}

// fixtureSims is the simulated power driver of each waitFixture's
// service, for a test that waits for its driver calls.
var fixtureSims sync.Map // *Service -> *power.Simulated

type connectResult struct {
	a   *vdibroker.ConnectAnswer
	err error
}

// heldConnect connects user with a wait in the background and returns
// once the connect is held (the service counts it).
func heldConnect(t *testing.T, ctx context.Context, svc *Service, user string, wait time.Duration, held int) <-chan connectResult {
	t.Helper()
	out := make(chan connectResult, 1)
	go func() {
		a, err := svc.Connect(ctx, "pwr", vdibroker.ConnectRequest{User: user, Wait: wait}, "")
		out <- connectResult{a, err}
	}()
	for deadline := time.Now().Add(10 * time.Second); svc.waits.held() < held; {
		select {
		case r := <-out:
			t.Fatalf("%s's connect was answered without being held: %+v, %v", user, r.a, r.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's connect was not held within 10 s", user)
		}
		time.Sleep(time.Millisecond) // a goroutine to be scheduled, not a clock
	}
	return out
}

// notYet fails when r has an answer.
func notYet(t *testing.T, r <-chan connectResult, what string) {
	t.Helper()
	select {
	case got := <-r:
		t.Fatalf("%s: answered %+v, %v; want it still held", what, got.a, got.err)
	default:
	}
}

func answer(t *testing.T, r <-chan connectResult) connectResult {
	t.Helper()
	select {
	case got := <-r:
		return got
	case <-time.After(10 * time.Second):
		t.Fatal("the held connect was not answered within 10 s")
	}
	return connectResult{}
}

// TestHeldConnectAnsweredOnHeartbeat (R-U4): a connect with a wait that
// starts a host is held, not answered 503; the host's first heartbeat is
// the event that answers it with a session on that host. The clock does
// not move: nothing waited on a timer.
func TestHeldConnectAnsweredOnHeartbeat(t *testing.T) {
	svc, st, fc, _ := waitFixture(t, 10, 2, time.Minute, 0, 10000*time.Hour)
	var events []vdibroker.WaitEvent
	ctx := vdibroker.WithWaitObserver(t.Context(), func(e vdibroker.WaitEvent) { events = append(events, e) })
	r := heldConnect(t, ctx, svc, "alice", 90*time.Second, 1)
	if powerOf(t, st, "pwr", "h1") != vdibroker.PowerStarting {
		t.Fatal("the held connect started no host")
	}
	heartbeat(t, svc, "pwr", "h1")
	got := answer(t, r)
	if got.err != nil || got.a.SessionHost != "h1" || !got.a.Created || got.a.SessionID == "" {
		t.Fatalf("held connect after h1's heartbeat: %+v, %v; want a new session on h1", got.a, got.err)
	}
	if svc.waits.held() != 0 {
		t.Errorf("%d connects still held", svc.waits.held())
	}
	if len(events) < 1 || !events[0].Waiting || events[0].Host != "h1" || !events[0].Until.Equal(fc.Now().Add(time.Minute)) {
		t.Errorf("wait events %+v; want the first to say it waits for h1 until the server's 1m bound", events)
	}
}

// TestHeldConnectBounded (R-U4): a held connect is answered 503
// HostStarting, with its Retry-After, once the smallest of its wait and
// the server's maximum has passed on the clock, not a moment before.
func TestHeldConnectBounded(t *testing.T) {
	svc, _, fc, _ := waitFixture(t, 10, 1, time.Minute, 0, 10000*time.Hour)
	r := heldConnect(t, t.Context(), svc, "alice", 90*time.Second, 1)
	for !fc.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	fc.Step(59 * time.Second)
	notYet(t, r, "59 s into a wait bounded by the server's 1m")
	fc.Step(time.Second)
	got := answer(t, r)
	if vdibroker.ErrorCode(got.err) != vdibroker.EHostStarting || vdibroker.ErrorRetryAfter(got.err) != power.StartRetryAfter ||
		!strings.Contains(got.err.Error(), "waited 1m0s") {
		t.Fatalf("after the wait: %+v, %v; want 503 HostStarting saying it waited 1m0s, with Retry-After", got.a, got.err)
	}
}

// TestHeldConnectsBounded (R-U4): one held connect per user (in any
// spelling, R-E5), and at most the server's number at once; a connect
// past either is answered at once with the 503, saying why; a held
// connect whose caller goes away lets go of its place.
func TestHeldConnectsBounded(t *testing.T) {
	svc, _, _, _ := waitFixture(t, 10, 2, time.Minute, 2, 10000*time.Hour)
	ctx, cancel := context.WithCancel(t.Context())
	alice := heldConnect(t, ctx, svc, "alice", time.Minute, 1)
	_, err := svc.Connect(t.Context(), "pwr", vdibroker.ConnectRequest{User: "ALICE", Wait: time.Minute}, "")
	if vdibroker.ErrorCode(err) != vdibroker.EHostStarting || !strings.Contains(err.Error(), "held already") {
		t.Fatalf("alice's second held connect: %v; want 503 at once, one per user", err)
	}
	bob := heldConnect(t, t.Context(), svc, "bob", time.Minute, 2)
	_, err = svc.Connect(t.Context(), "pwr", vdibroker.ConnectRequest{User: "carol", Wait: time.Minute}, "")
	if vdibroker.ErrorCode(err) != vdibroker.EHostStarting || !strings.Contains(err.Error(), "holds 2 connects already") {
		t.Fatalf("a third held connect past the cap of 2: %v; want 503 at once", err)
	}
	cancel()
	if got := answer(t, alice); got.err == nil {
		t.Fatalf("alice's connect after her caller left: %+v", got.a)
	}
	notYet(t, bob, "bob after alice left")
	if n := svc.waits.held(); n != 1 {
		t.Fatalf("%d held after alice left, want bob's alone", n)
	}
	carol := heldConnect(t, t.Context(), svc, "carol", time.Minute, 2)
	notYet(t, carol, "carol in alice's place")
}

// TestHeldConnectSeesOtherReplicas (R-U4): the host's heartbeat reaches
// another replica (written to the store, not through this service); the
// maintenance tick reads the pool again, as its view has a held connect,
// and that reading is the event that answers it.
func TestHeldConnectSeesOtherReplicas(t *testing.T) {
	svc, st, fc, ticks := waitFixture(t, 10, 1, time.Minute, 0, 5*time.Second)
	r := heldConnect(t, t.Context(), svc, "alice", time.Minute, 1)
	// A tick first: the connect's own use of the view counts for one
	// tick; the ticks after read the pool because a connect is held.
	fc.Step(5 * time.Second)
	<-ticks
	if _, err := st.ApplyHeartbeat(t.Context(), "pwr", "h1", &vdibroker.HeartbeatRequest{}, fc.Now()); err != nil {
		t.Fatal(err)
	}
	// The first tick's reading wakes the held connect too, and may do so
	// as the heartbeat lands: then it reads h1 again
	// (TestHeldConnectReadsItsHostAgain) and has its session already.
	select {
	case got := <-r:
		if got.err != nil || got.a.SessionHost != "h1" {
			t.Fatalf("answered before the second tick: %+v, %v; want a session on h1, or none yet", got.a, got.err)
		}
		return
	case <-time.After(50 * time.Millisecond):
	}
	fc.Step(5 * time.Second)
	<-ticks
	got := answer(t, r)
	if got.err != nil || got.a.SessionHost != "h1" {
		t.Fatalf("after the tick: %+v, %v; want a session on h1", got.a, got.err)
	}
}

// heartbeatAfterRead is a store whose next ListSessionHosts, once armed,
// answers what it read and then lets h1 heartbeat: a view read just
// before another replica takes the host's first heartbeat.
type heartbeatAfterRead struct {
	vdibroker.Store
	st    *store.DB
	now   func() time.Time
	armed atomic.Bool
	fired atomic.Bool
	// later counts the pool's reads after the armed one.
	later atomic.Int32
}

func (s *heartbeatAfterRead) ListSessionHosts(ctx context.Context, pool string) ([]*vdibroker.SessionHost, error) {
	if s.fired.Load() {
		s.later.Add(1)
	}
	hosts, err := s.Store.ListSessionHosts(ctx, pool)
	if s.armed.CompareAndSwap(true, false) {
		s.fired.Store(true)
		if _, herr := s.st.ApplyHeartbeat(ctx, "pwr", "h1", &vdibroker.HeartbeatRequest{}, s.now()); herr != nil {
			return nil, herr
		}
	}
	return hosts, err
}

// TestHeldConnectReadsItsHostAgain (R-U4): a held connect is woken and
// reads the pool just before the host it waits for takes its first
// heartbeat through another replica; the power service, reading the
// store after it, finds that host no longer starting, and the view alone
// would answer NoCapacity as the host comes up. The connect reads that
// host again, not the whole pool, and gets its session on it.
func TestHeldConnectReadsItsHostAgain(t *testing.T) {
	var hb *heartbeatAfterRead
	svc, _, fc, _ := waitFixtureOn(t, func(st *store.DB) vdibroker.Store {
		hb = &heartbeatAfterRead{Store: st, st: st}
		return hb
	}, 10, 1, time.Minute, 0, 10000*time.Hour)
	hb.now = fc.Now
	r := heldConnect(t, t.Context(), svc, "alice", time.Minute, 1)
	fc.Step(time.Second)
	// The wake-up's first decision, on the view as it is, finds no host;
	// the retry rule reads the pool again (the armed read) and decides on
	// it; then the power service reads the store.
	hb.armed.Store(true)
	svc.waits.signal("pwr")
	got := answer(t, r)
	if got.err != nil || got.a.SessionHost != "h1" {
		t.Fatalf("the held connect as h1 came up: %+v, %v; want a session on h1", got.a, got.err)
	}
	if hb.armed.Load() {
		t.Fatal("the pool was not read after the wake-up")
	}
	// Reading that one host is enough: after the armed read only the
	// power service reads the pool (whether a host is starting), the view
	// does not read it again.
	if n := hb.later.Load(); n > 1 {
		t.Errorf("the pool was read %d more times after the armed read; want once at most (the power service's), the host alone read again", n)
	}
}
