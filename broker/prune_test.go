package broker

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// TestMaintenancePrunesHistory: the maintenance loop deletes
// sessions that ended longer ago than the retention, and keeps the rest.
// Before, PruneHistory ran only in tests and history grew forever.
func TestMaintenancePrunesHistory(t *testing.T) {
	ctx := t.Context()
	st, err := store.Open(ctx, "", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now().UTC()
	p := vdibroker.NewHostPool("prune")
	p.CreateTime, p.UpdateTime = now, now
	if _, err := st.PutHostPool(ctx, p, vdibroker.Precondition{}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutSessionHost(ctx, &vdibroker.SessionHost{HostPool: "prune", Name: "h1", Address: "h1:3389",
		Protocols: []string{"RDP"}, StandardFeatures: true, AllowNewSession: true, CreateTime: now}); err != nil {
		t.Fatal(err)
	}
	ids := map[string]time.Duration{"old": 3 * time.Hour, "recent": 10 * time.Minute}
	for user, ago := range ids {
		id := vdibroker.NewID()
		c := &vdibroker.PlacementCommit{Session: &vdibroker.UserSession{ID: id, User: user, HostPool: "prune", SessionHost: "h1",
			State: vdibroker.StatePending, CreateTime: now.Add(-ago), StateTime: now.Add(-ago)}, MaxSessionLimit: 10, Pooled: true}
		if err := st.CommitPlacement(ctx, c); err != nil {
			t.Fatal(err)
		}
		if err := st.EndSession(ctx, "prune", id, vdibroker.EndLoggedOffByAdmin, now.Add(-ago)); err != nil {
			t.Fatal(err)
		}
	}
	// The fake clock starts at now; the first tick prunes (R-S3's
	// ExpirePending tells a tick began, and one ends before the next).
	ticks := &tickStore{Store: st, ticks: make(chan struct{}, 1)}
	fc := clocktesting.NewFakeClock(now)
	s := New(Config{Store: ticks, Retention: time.Hour, MaintenanceInterval: time.Minute, Clock: fc})
	t.Cleanup(func() { s.Close() })
	for range 2 { // tick 1, then tick 2 begins once tick 1 ended
		fc.Step(time.Minute)
		select {
		case <-ticks.ticks:
		case <-time.After(10 * time.Second):
			t.Fatal("the clock stepped a maintenance interval, yet no tick began")
		}
	}
	list, err := st.ListUserSessions(ctx, vdibroker.SessionFilter{HostPool: "prune", State: vdibroker.StateLoggedOff})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].User != "recent" {
		t.Fatalf("after a tick %d ended sessions remain (%v), want only the one that ended 10 minutes ago (the retention is 1h)", len(list), list)
	}
}

// tickStore is a real store that signals each maintenance tick's start:
// the tick's ExpirePending (R-S3).
type tickStore struct {
	vdibroker.Store
	ticks chan struct{}
}

func (s *tickStore) ExpirePending(ctx context.Context, now time.Time) (int, error) {
	s.ticks <- struct{}{}
	return s.Store.ExpirePending(ctx, now)
}
