package broker

import (
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// TestMaintenancePrunesHistory (issue 14): the maintenance loop deletes
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
	if _, err := st.PutHostPool(ctx, p); err != nil {
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
	s := New(Config{Store: st, Retention: time.Hour, MaintenanceInterval: 20 * time.Millisecond})
	t.Cleanup(func() { s.Close() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		list, err := st.ListUserSessions(ctx, vdibroker.SessionFilter{HostPool: "prune", State: vdibroker.StateLoggedOff})
		if err != nil {
			t.Fatal(err)
		}
		if len(list) == 1 {
			if list[0].User != "recent" {
				t.Fatalf("kept %s, want the session that ended 10 minutes ago", list[0].User)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s %d ended sessions remain, want 1 (the retention is 1h)", len(list))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
