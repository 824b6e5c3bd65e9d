package poolview

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/intercept"
	"github.com/vdibroker/vdibroker/placement"
	"github.com/vdibroker/vdibroker/store"
)

// TestStaleReadKeepsNewerHeartbeat (R-S1, R-C3): a host read that began
// before a heartbeat and a placement committed, and is applied after the
// placement landed, must not make the view drop that heartbeat's result.
// Here the heartbeat says the host is shutting down: had the view dropped
// it, this server would go on placing sessions there until the next
// heartbeat, and count one session too few. The steps are the ones
// RefreshHost and the heartbeat handler take, run in the racy order.
func TestStaleReadKeepsNewerHeartbeat(t *testing.T) {
	ctx := t.Context()
	st, vs, v, now := viewFixture(t)
	// refreshHost's read begins (outside the view's lock)...
	mark := vs.LandedMark("p")
	stale, err := st.GetSessionHost(ctx, "p", "h1")
	if err != nil {
		t.Fatal(err)
	}
	// ...the host reports it is shutting down; its handler has not yet
	// applied the result...
	res, err := st.ApplyHeartbeat(ctx, "p", "h1", &vdibroker.HeartbeatRequest{ShuttingDown: true}, now.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// ...a connect of this server lands on the host...
	v.lock()
	v.inflight["h1"]++
	v.mu.Unlock()
	c := &vdibroker.PlacementCommit{Session: &vdibroker.UserSession{ID: vdibroker.NewID(), User: "u", HostPool: "p", SessionHost: "h1",
		State: vdibroker.StatePending, CreateTime: now, StateTime: now}, MaxSessionLimit: 100, Pooled: true,
		OnCommitted: func(seq int64) { v.Land("h1", seq) }}
	if err := st.CommitPlacement(ctx, c); err != nil {
		t.Fatal(err)
	}
	// ...then the stale read is applied, then the heartbeat's result.
	vs.UpsertHost(stale, mark)
	vs.UpsertHeartbeat(res)
	v.lock()
	got, _ := v.placer.Host("h1")
	v.mu.Unlock()
	if !got.ShuttingDown || got.Sessions != 1 {
		t.Errorf("view of h1: shuttingDown=%v sessions=%d; the store has true and 1", got.ShuttingDown, got.Sessions)
	}
}

// TestLandDoesNotWaitForTheViewLock: Land runs on the store's single
// committer (OnCommitted) before any write of its batch is answered. While
// a reload of a large pool holds the view's lock for milliseconds, it must
// not wait for it, or every write of every pool would. The landing is
// applied by whoever takes the lock next, before they read the view.
func TestLandDoesNotWaitForTheViewLock(t *testing.T) {
	_, _, v, _ := viewFixture(t)
	v.lock()
	v.inflight["h1"]++ // a connect reserved h1
	// ...and a reload holds the lock while its commit lands.
	landed := make(chan struct{})
	go func() {
		v.Land("h1", 7)
		close(landed)
	}()
	select {
	case <-landed:
	case <-time.After(10 * time.Second):
		v.mu.Unlock()
		t.Fatal("land waited for the view's lock: the committer would stall every write while a pool reloads")
	}
	v.mu.Unlock()

	v.lock()
	defer v.mu.Unlock()
	if v.inflight["h1"] != 0 || v.lastLanded != 7 || len(v.landed["h1"]) != 1 || v.landed["h1"][0] != 7 {
		t.Errorf("after the next lock: inflight %d, lastLanded %d, landed %v; want 0, 7, [7]",
			v.inflight["h1"], v.lastLanded, v.landed["h1"])
	}
}

// TestReadersApplyLandingsFirst (R-S1): whoever reads the view applies
// the placements landed since it last did (land only queues them). A
// heartbeat result counted after a placement must then count it once, not
// once as stored and once more as in flight; and a landed mark taken after
// a placement must cover it.
func TestReadersApplyLandingsFirst(t *testing.T) {
	ctx := t.Context()
	st, vs, v, now := viewFixture(t)
	// place reserves h1 and commits a session there, as connect does.
	place := func(user string) (seq int64) {
		t.Helper()
		v.lock()
		v.inflight["h1"]++
		v.mu.Unlock()
		c := &vdibroker.PlacementCommit{Session: &vdibroker.UserSession{ID: vdibroker.NewID(), User: user, HostPool: "p", SessionHost: "h1",
			State: vdibroker.StatePending, CreateTime: now, StateTime: now}, MaxSessionLimit: 100, Pooled: true,
			OnCommitted: func(s int64) { seq = s; v.Land("h1", s) }}
		if err := st.CommitPlacement(ctx, c); err != nil {
			t.Fatal(err)
		}
		return seq
	}

	place("alice")
	res, err := st.ApplyHeartbeat(ctx, "p", "h1", &vdibroker.HeartbeatRequest{}, now.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	vs.UpsertHeartbeat(res) // counted after alice's placement: 1 session
	v.lock()
	got, _ := v.placer.Host("h1")
	v.mu.Unlock()
	if got.Sessions != 1 {
		t.Errorf("view of h1 after a heartbeat that counted alice's session: %d sessions, want 1", got.Sessions)
	}

	seq := place("bob")
	if mark := vs.LandedMark("p"); mark != seq {
		t.Errorf("landed mark after bob's placement landed: %d, want its seq %d", mark, seq)
	}
}

// viewFixture opens a SQLite store with pool "p" (BreadthFirst, limit 100)
// and its host h1, Available since now, and views on it whose view of "p"
// is loaded; the store closes with the test.
func viewFixture(t *testing.T) (st *store.DB, vs *Views, v *View, now time.Time) {
	t.Helper()
	ctx := t.Context()
	st, err := store.OpenWith(ctx, "", t.TempDir(), nil, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now = time.Now().UTC()
	p := &vdibroker.HostPool{Name: "p", HostPoolType: vdibroker.Pooled, LoadBalancerType: vdibroker.BreadthFirst, MaxSessionLimit: 100,
		LoadBalancing: vdibroker.DefaultLoadBalancing(), HeartbeatTimeoutSeconds: 90, PendingTimeoutSeconds: 300, CreateTime: now, UpdateTime: now}
	if _, err := st.PutHostPool(ctx, p, vdibroker.Precondition{}); err != nil {
		t.Fatal(err)
	}
	h := &vdibroker.SessionHost{HostPool: "p", Name: "h1", Address: "h1:3389", Protocols: []string{"RDP"}, StandardFeatures: true, AllowNewSession: true, CreateTime: now}
	if _, err := st.PutSessionHost(ctx, h); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ApplyHeartbeat(ctx, "p", "h1", &vdibroker.HeartbeatRequest{}, now); err != nil {
		t.Fatal(err)
	}
	vs = New(Config{Store: st, Now: func() time.Time { return now }})
	v = vs.Get("p")
	if err := vs.Ensure(ctx, v); err != nil {
		t.Fatal(err)
	}
	return st, vs, v, now
}

// TestSameHost: a reload skips a host whose stored values are the view's,
// whatever the pointers; any difference that placement reads is applied.
func TestSameHost(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	seven, eight := 7, 8
	base := func() placement.Host {
		at2 := at
		return placement.Host{Name: "h1", AllowNewSession: true, StandardFeatures: true, LastHeartBeat: &at2,
			Sessions: 3, Connecting: 1, MetricsSessions: 2,
			Metrics:       &vdibroker.Metrics{CPUPercent: 40, SampledAt: at, CustomLoadValue: &seven},
			Policy:        vdibroker.HostPolicy{HostLoadIndexThreshold: &seven},
			AssignedUsers: []string{"alice"}}
	}
	a, b := base(), base()
	if !sameHost(&a, &b) {
		t.Fatal("equal values with other pointers are not the same host")
	}
	for name, change := range map[string]func(h *placement.Host){
		"drain":      func(h *placement.Host) { h.AllowNewSession = false },
		"sessions":   func(h *placement.Host) { h.Sessions++ },
		"connecting": func(h *placement.Host) { h.Connecting++ },
		"heartbeat":  func(h *placement.Host) { later := at.Add(time.Second); h.LastHeartBeat = &later },
		"no metrics": func(h *placement.Host) { h.Metrics = nil },
		"cpu":        func(h *placement.Host) { m := *h.Metrics; m.CPUPercent = 41; h.Metrics = &m },
		"custom":     func(h *placement.Host) { m := *h.Metrics; m.CustomLoadValue = &eight; h.Metrics = &m },
		"sampledAt":  func(h *placement.Host) { m := *h.Metrics; m.SampledAt = at.Add(time.Second); h.Metrics = &m },
		"policy":     func(h *placement.Host) { h.Policy.HostLoadIndexThreshold = &eight },
		"assigned":   func(h *placement.Host) { h.AssignedUsers = []string{"bob"} },
		"shutdown":   func(h *placement.Host) { h.ShuttingDown = true },
		"health":     func(h *placement.Host) { h.HealthError = "disk full" },
	} {
		b := base()
		change(&b)
		if sameHost(&a, &b) {
			t.Errorf("%s changed, yet the host counts as the same", name)
		}
	}
}

// TestIdleViewReadInBackgroundIsExact: a view the maintenance tick found
// idle is decided on as it is and read again in the background; once that
// read is done it holds exactly what a view read afresh from the store
// holds, whatever another replica changed meanwhile: a session placed, a
// host drained, a host added, a host deleted.
func TestIdleViewReadInBackgroundIsExact(t *testing.T) {
	ctx := t.Context()
	st, vs, v, now := viewFixture(t)
	for _, name := range []string{"h2", "h4"} {
		h := &vdibroker.SessionHost{HostPool: "p", Name: name, Address: name + ":3389", Protocols: []string{"RDP"}, StandardFeatures: true, AllowNewSession: true, CreateTime: now}
		if _, err := st.PutSessionHost(ctx, h); err != nil {
			t.Fatal(err)
		}
		if _, err := st.ApplyHeartbeat(ctx, "p", name, &vdibroker.HeartbeatRequest{}, now); err != nil {
			t.Fatal(err)
		}
	}
	v.MarkStale()
	if err := vs.Ensure(ctx, v); err != nil { // used: h1, h2, h4
		t.Fatal(err)
	}
	vs.RefreshAll(ctx) // used since the last tick: read
	vs.RefreshAll(ctx) // unused since: idle, not read
	v.lock()
	idle, stale := v.idle, v.stale
	v.mu.Unlock()
	if !idle || stale {
		t.Fatalf("after a tick without connects: idle=%v stale=%v; want idle and not stale", idle, stale)
	}

	// Another replica writes meanwhile.
	c := &vdibroker.PlacementCommit{Session: &vdibroker.UserSession{ID: vdibroker.NewID(), User: "elsewhere", HostPool: "p", SessionHost: "h1",
		State: vdibroker.StatePending, CreateTime: now, StateTime: now}, MaxSessionLimit: 100, Pooled: true}
	if err := st.CommitPlacement(ctx, c); err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpdateSessionHost(ctx, "p", "h2", func(h *vdibroker.SessionHost) error { h.AllowNewSession = false; return nil }); err != nil {
		t.Fatal(err)
	}
	h3 := &vdibroker.SessionHost{HostPool: "p", Name: "h3", Address: "h3:3389", Protocols: []string{"RDP"}, StandardFeatures: true, AllowNewSession: true, CreateTime: now}
	if _, err := st.PutSessionHost(ctx, h3); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteSessionHost(ctx, "p", "h4", true); err != nil {
		t.Fatal(err)
	}

	// The next connect decides on the view as it is, then has it read.
	if err := vs.Ensure(ctx, v); err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.Decide(placement.Request{User: "next"}, false); err != nil {
		t.Fatal(err)
	}
	vs.Wait()

	fresh := New(Config{Store: st, Now: func() time.Time { return now }})
	fv := fresh.Get("p")
	if err := fresh.Ensure(ctx, fv); err != nil {
		t.Fatal(err)
	}
	byName := func(a, b placement.Host) int { return strings.Compare(a.Name, b.Name) }
	got, want := v.Hosts(), fv.Hosts()
	slices.SortFunc(got, byName)
	slices.SortFunc(want, byName)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the idle view after its background read (-read afresh +view):\n%s", diff)
	}
	if len(want) != 3 || want[0].Sessions != 1 || want[1].AllowNewSession {
		t.Fatalf("the store's hosts are not what the other replica wrote: %+v", want)
	}
	v.lock()
	defer v.mu.Unlock()
	if v.idle || v.stale {
		t.Errorf("after the background read: idle=%v stale=%v; want neither", v.idle, v.stale)
	}
}

// TestIdleViewTakesTheSharedCursor (R-LI4): a LoadIndex view that a tick
// found idle is decided on as it is, but first takes the round-robin
// cursor another replica moved meanwhile, so bucket 1's turn goes on from
// that replica's choice and not from this one's last.
func TestIdleViewTakesTheSharedCursor(t *testing.T) {
	ctx := t.Context()
	st, vs, v, now := viewFixture(t)
	p, err := st.GetHostPool(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	p.LoadBalancerType = vdibroker.LoadIndex
	if _, err := st.PutHostPool(ctx, p, vdibroker.Precondition{}); err != nil {
		t.Fatal(err)
	}
	v.MarkStale()
	if err := vs.Ensure(ctx, v); err != nil {
		t.Fatal(err)
	}
	// Another replica's bucket-1 placement on h1 moves the pool's cursor.
	c := &vdibroker.PlacementCommit{Session: &vdibroker.UserSession{ID: vdibroker.NewID(), User: "u", HostPool: "p", SessionHost: "h1",
		State: vdibroker.StatePending, CreateTime: now, StateTime: now}, MaxSessionLimit: 100, Pooled: true, RoundRobinHost: "h1"}
	if err := st.CommitPlacement(ctx, c); err != nil {
		t.Fatal(err)
	}
	v.markIdle()
	if err := vs.Ensure(ctx, v); err != nil {
		t.Fatal(err)
	}
	v.lock()
	got := v.placer.RoundRobin()
	v.mu.Unlock()
	if got != "h1" {
		t.Errorf("the idle view's cursor is %q, want h1, the pool's", got)
	}
	vs.background.Wait()
}

// TestHostsReadBegunBeforeTheStoreRead (R-SEC, R-OUT1): a reload tells
// Config.HostsRead of the hosts it read with the time taken before it
// asked the store, so a heartbeat taken while the read was under way (a
// host the read may have missed) counts as since the read began and its
// report is kept (outage.Mode.HostsRead); a pool gone is told with no
// hosts, at the time taken before the read that found it gone.
func TestHostsReadBegunBeforeTheStoreRead(t *testing.T) {
	st, _, _, t0 := viewFixture(t)
	var mu sync.Mutex
	now := t0
	clk := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	// Each read of the store takes a second of the clock.
	slow := intercept.NewStore(st, func(ctx context.Context, op string, call func(context.Context) error) error {
		mu.Lock()
		now = now.Add(time.Second)
		mu.Unlock()
		return call(ctx)
	})
	type told struct {
		pool  string
		hosts []string
		begun time.Time
	}
	var got []told
	vs := New(Config{Store: slow, Now: clk, HostsRead: func(pool string, hosts []*vdibroker.SessionHost, begun time.Time) {
		var names []string
		for _, h := range hosts {
			names = append(names, h.Name)
		}
		got = append(got, told{pool, names, begun})
	}})
	if err := vs.Ensure(t.Context(), vs.Get("p")); err != nil {
		t.Fatal(err)
	}
	if err := vs.Ensure(t.Context(), vs.Get("nopool")); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
		t.Fatalf("read of a pool that does not exist: %v, want NotFound", err)
	}
	want := []told{{"p", []string{"h1"}, t0}, {"nopool", nil, clk().Add(-time.Second)}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(told{})); diff != "" {
		t.Errorf("HostsRead was told (-want +got):\n%s", diff)
	}
}
