package outage

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/broker/poolview"
	"github.com/vdibroker/vdibroker/store"
)

// switchStore is a real store whose Ping fails while down is set: the
// health then keeps the outage it was told of.
type switchStore struct {
	vdibroker.Store
	down atomic.Bool
}

func (s *switchStore) Ping(ctx context.Context) error {
	if s.down.Load() {
		return errors.New("connection refused")
	}
	return s.Store.Ping(ctx)
}

// TestOutagePlacementTakesOnlyOpenHosts (R-OUT3, R-H1, R-C2, R-A3):
// during a store outage a replica places new users only on hosts that
// placement itself would give a new session, whatever escrow it holds:
// never on a host its power driver stopped or is stopping, nor on one an
// admin or the autoscaler drains, though each heartbeats and had free
// slots when the escrow was taken.
func TestOutagePlacementTakesOnlyOpenHosts(t *testing.T) {
	ctx, now := t.Context(), time.Now().UTC()
	raw, health, st, views, m := newPlacingMode(t, now)
	hosts := []string{"a-stopped", "b-stopping", "c-drained", "d-autoscale", "z-open"}
	for _, name := range hosts {
		if _, err := st.PutSessionHost(ctx, &vdibroker.SessionHost{HostPool: "out", Name: name, Address: name + ":3389",
			Protocols: []string{"RDP"}, StandardFeatures: true, AllowNewSession: true, CreateTime: now}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.ApplyHeartbeat(ctx, "out", name, &vdibroker.HeartbeatRequest{}, now); err != nil {
			t.Fatal(err) // fresh: every host is alive
		}
	}
	// Escrow is taken while every host is open: two renewals, as a grant
	// is used once a second one confirms it (renewOnce loads the view).
	m.escrow.renewOnce()
	m.escrow.renewOnce()
	for _, name := range hosts {
		if got := m.escrow.left(hostKey{"out", name}, time.Now()); got != 2 {
			t.Fatalf("escrow left on %s = %d, want 2 (share 100%%, at most 2)", name, got)
		}
	}
	// Then, before the next renewal, hosts close to new sessions; the
	// view sees each change.
	for host, state := range map[string]string{"a-stopped": vdibroker.PowerStopped, "b-stopping": vdibroker.PowerStopping} {
		if _, _, err := st.SetPowerState(ctx, "out", host, state, time.Now().UTC()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.UpdateSessionHost(ctx, "out", "c-drained", func(h *vdibroker.SessionHost) error {
		h.AllowNewSession = false
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetAutoscaleDrain(ctx, "out", "d-autoscale", true); err != nil {
		t.Fatal(err)
	}
	for _, name := range hosts {
		views.RefreshHost(ctx, "out", name)
	}

	raw.down.Store(true)
	health.fail("test outage")
	v := views.Get("out")
	placed := map[string]int{}
	for i := range 10 {
		user := fmt.Sprintf("u%d", i)
		a, err := m.Connect(ctx, v, vdibroker.ConnectRequest{User: user}, nil)
		if err != nil {
			if code := vdibroker.ErrorCode(err); code != vdibroker.EStoreUnavailable {
				t.Fatalf("connect %s: %v; want placed or StoreUnavailable", user, err)
			}
			continue
		}
		placed[a.SessionHost]++
	}
	// z-open's escrow holds 2: two users there, the other eight refused.
	if len(placed) != 1 || placed["z-open"] != 2 {
		t.Errorf("placed during the outage: %v; want 2 on z-open and none on a stopped, stopping or drained host", placed)
	}
	// A reader of sessions by id (the session directory, R-G1) is told
	// they wait; once written, the store counts them in their
	// transactions, for every replica to read.
	if !m.OutagePlacementsWaiting() {
		t.Error("outage placements before they are written: not waiting")
	}
	raw.down.Store(false)
	health.recovered()
	m.WriteOutagePlacements()
	if m.OutagePlacementsWaiting() {
		t.Error("outage placements once written: still waiting")
	}
	if n, err := raw.Store.LateSessionWrites(ctx); err != nil || n != 2 {
		t.Errorf("the store's count of outage placements written: %d, %v; want 2", n, err)
	}
	if list, err := raw.Store.ListUserSessions(ctx, vdibroker.SessionFilter{HostPool: "out"}); err != nil || len(list) != 2 {
		t.Errorf("sessions written: %d, %v; want the 2 placed during the outage", len(list), err)
	}
}

// slowPoolStore is a real store whose GetHostPool of a pool named in
// hold waits until that channel is closed, telling entered first.
type slowPoolStore struct {
	vdibroker.Store
	entered chan string
	hold    map[string]chan struct{}
}

func (s *slowPoolStore) GetHostPool(ctx context.Context, name string) (*vdibroker.HostPool, error) {
	if c, ok := s.hold[name]; ok {
		s.entered <- name
		<-c
	}
	return s.Store.GetHostPool(ctx, name)
}

// TestOutagePlacementsWaitingOverlappingRuns (R-OUT3, R-G1): the store
// flaps while the sessions placed during an outage are written, so a
// second recovery's run writes beside the first. A reader of sessions by
// id (the session directory) is told they wait while either still writes,
// not only while an odd number of runs has started or ended.
func TestOutagePlacementsWaitingOverlappingRuns(t *testing.T) {
	ctx := t.Context()
	db, err := store.OpenWith(ctx, "", t.TempDir(), nil, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st := &slowPoolStore{Store: db, entered: make(chan string, 2),
		hold: map[string]chan struct{}{"first": make(chan struct{}), "second": make(chan struct{})}}
	m := New(Config{Store: st, Placement: Placement{Enabled: true, Replica: "r1"}})
	placed := func(pool string) {
		m.escrow.mu.Lock()
		defer m.escrow.mu.Unlock()
		m.escrow.pending = append(m.escrow.pending, &outagePlacement{sess: &vdibroker.UserSession{ID: vdibroker.NewID(),
			HostPool: pool, User: "u-" + pool, SessionHost: "h", State: vdibroker.StatePending}})
	}
	ends := make(chan struct{}, 2)
	run := func(pool string) {
		placed(pool)
		go func() { m.WriteOutagePlacements(); ends <- struct{}{} }()
		if got := <-st.entered; got != pool {
			t.Fatalf("run writing %s, want %s", got, pool)
		}
	}
	run("first")  // the first recovery's run, its write slow
	run("second") // down and up again: the second's, beside it
	if !m.OutagePlacementsWaiting() {
		t.Errorf("two runs writing: waiting false; want true")
	}
	close(st.hold["second"])
	<-ends
	if !m.OutagePlacementsWaiting() {
		t.Errorf("the first run still writing: waiting false; want true")
	}
	close(st.hold["first"])
	<-ends
	if m.OutagePlacementsWaiting() {
		t.Errorf("both runs ended: waiting true; want false")
	}
}

// newPlacingMode is a SQLite store that can be switched off (raw), its
// health and guard, a pool view and an outage mode placing within its
// escrow (all of a host's share, at most 2 a host), with the pool "out"
// (maxSessionLimit 10) made at now.
func newPlacingMode(t *testing.T, now time.Time) (*switchStore, *Health, vdibroker.Store, *poolview.Views, *Mode) {
	t.Helper()
	ctx := t.Context()
	db, err := store.OpenWith(ctx, "", t.TempDir(), nil, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	raw := &switchStore{Store: db}
	stop := make(chan struct{})
	t.Cleanup(func() { raw.down.Store(false); close(stop) })
	health := NewHealth(HealthConfig{Ping: raw.Ping, Timeout: time.Second, Stop: stop})
	st := Guard(raw, time.Second, health)
	var m *Mode
	views := poolview.New(poolview.Config{Store: st, Credit: health.Credit,
		HeldByOthers: func(ctx context.Context, pool string) (map[string]int, error) { return m.HeldByOthers(ctx, pool) },
		Unwritten:    func(pool, host string) int { return m.Unwritten(pool, host) }})
	m = New(Config{Health: health, Store: st, Views: views, MaintenanceInterval: time.Hour,
		Placement: Placement{Enabled: true, Share: 100, MaxPerHost: 2, Replica: "r1"},
		Answer: func(pool *vdibroker.HostPool, req vdibroker.ConnectRequest, host, addr string) vdibroker.ConnectResponse {
			return vdibroker.ConnectResponse{User: req.User, HostPool: pool.Name, SessionHost: host, Address: addr}
		}})
	p := vdibroker.NewHostPool("out")
	p.MaxSessionLimit = 10
	p.CreateTime, p.UpdateTime = now, now
	if _, err := st.PutHostPool(ctx, p, vdibroker.Precondition{}); err != nil {
		t.Fatal(err)
	}
	return raw, health, st, views, m
}
