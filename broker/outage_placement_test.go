package broker

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// switchStore is a real store whose Ping fails while down is set: the
// service's health then keeps the outage it was told of.
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
	ctx := t.Context()
	db, err := store.OpenWith(ctx, "", t.TempDir(), nil, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st := &switchStore{Store: db}
	svc := New(Config{Store: st, MaintenanceInterval: time.Hour,
		OutagePlacement: OutagePlacement{Enabled: true, Share: 100, MaxPerHost: 2, Replica: "r1"}})
	t.Cleanup(func() { st.down.Store(false); svc.Close() })
	p := vdibroker.NewHostPool("out")
	p.MaxSessionLimit = 10
	if _, _, err := svc.StorePool(ctx, "out", nil, p, false); err != nil {
		t.Fatal(err)
	}
	hosts := []string{"a-stopped", "b-stopping", "c-drained", "d-autoscale", "z-open"}
	for _, name := range hosts {
		if _, err := db.PutSessionHost(ctx, &vdibroker.SessionHost{HostPool: "out", Name: name, Address: name + ":3389",
			Protocols: []string{"RDP"}, StandardFeatures: true, AllowNewSession: true, CreateTime: time.Now().UTC()}); err != nil {
			t.Fatal(err)
		}
		heartbeat(t, svc, "out", name) // fresh: every host is alive
	}
	// Escrow is taken while every host is open: two renewals, as a grant
	// is used once a second one confirms it.
	svc.escrow.renewOnce()
	svc.escrow.renewOnce()
	for _, name := range hosts {
		if got := svc.escrow.left(hostKey{"out", name}, time.Now()); got != 2 {
			t.Fatalf("escrow left on %s = %d, want 2 (share 100%%, at most 2)", name, got)
		}
	}
	// Then, before the next renewal, hosts close to new sessions; the
	// view sees each change (recorded after the heartbeats, so they do not
	// undo a power state).
	for host, state := range map[string]string{"a-stopped": vdibroker.PowerStopped, "b-stopping": vdibroker.PowerStopping} {
		if _, _, err := svc.Store().SetPowerState(ctx, "out", host, state, time.Now().UTC()); err != nil {
			t.Fatal(err)
		}
		svc.views.RefreshHost(ctx, "out", host)
	}
	if _, err := svc.updateHost(ctx, "out", "c-drained", func(h *vdibroker.SessionHost) error {
		h.AllowNewSession = false
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := svc.Power().SetAutoscaleDrain(ctx, "out", "d-autoscale", true); err != nil {
		t.Fatal(err)
	}

	st.down.Store(true)
	svc.health.fail("test outage")
	placed := map[string]int{}
	for i := range 10 {
		user := fmt.Sprintf("u%d", i)
		a, err := svc.Connect(ctx, "out", vdibroker.ConnectRequest{User: user}, "")
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
}
