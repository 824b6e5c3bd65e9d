package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// TestAdoptionBudgetCountsByAdoptionTime_RS2_RSEC: a host adopts at most
// vdibroker.MaxAdoptions sessions per vdibroker.AdoptionWindow (R-S2), by
// when the broker adopted them. Counted by their create time, the logon
// time the host reports, a host's credential reporting 200 new users a
// heartbeat, each logged on two hours ago, adopted all of them: 600 rows
// in three heartbeats, and as many more at each one after (R-SEC). The
// window then passes and the host adopts again.
func TestAdoptionBudgetCountsByAdoptionTime_RS2_RSEC(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("ad", vdibroker.Pooled))
		mustHost(t, s, "ad", "h1")
		max := vdibroker.MaxAdoptions(vdibroker.NoSessionLimit)
		var reported []vdibroker.AgentSession
		beat := func(at time.Time, batch, want int) {
			t.Helper()
			logon := at.Add(-2 * time.Hour)
			for j := range max {
				reported = append(reported, vdibroker.AgentSession{ID: fmt.Sprintf("a%d-%d", batch, j), User: fmt.Sprintf("u%d-%d", batch, j),
					State: vdibroker.StateActive, LogonTime: &logon})
			}
			if _, err := s.ApplyHeartbeat(ctx, "ad", "h1", &vdibroker.HeartbeatRequest{Sessions: reported}, at); err != nil {
				t.Fatal(err)
			}
			h, err := s.GetSessionHost(ctx, "ad", "h1")
			if err != nil {
				t.Fatal(err)
			}
			if h.Sessions != want {
				t.Errorf("heartbeat %d at %s: %d sessions adopted, want %d (at most %d an hour)", batch, at.Sub(t0), h.Sessions, want, max)
			}
		}
		beat(t0, 0, max)
		beat(t0.Add(10*time.Second), 1, max)
		beat(t0.Add(20*time.Second), 2, max)
		// An hour after the first adoptions, the window holds none.
		beat(t0.Add(vdibroker.AdoptionWindow+time.Minute), 3, 2*max)
	})
}

// TestAdoptTimeMigrationKeepsTheBudget_RS2: migration 00079 gives the
// sessions adopted before it their create time as adopt_time, so a host
// that used its hour's adoptions just before the upgrade does not adopt
// as many again just after it.
func TestAdoptTimeMigrationKeepsTheBudget_RS2(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		ctx := t.Context()
		s := tg.open(t, store.Options{})
		mustPool(t, s, pool("mg", vdibroker.Pooled))
		mustHost(t, s, "mg", "h1")
		max := vdibroker.MaxAdoptions(vdibroker.NoSessionLimit)
		var reported []vdibroker.AgentSession
		beat := func(s *store.DB, at time.Time, batch, want int) {
			t.Helper()
			for j := range max {
				reported = append(reported, vdibroker.AgentSession{ID: fmt.Sprintf("m%d-%d", batch, j), User: fmt.Sprintf("m%d-%d", batch, j),
					State: vdibroker.StateActive})
			}
			if _, err := s.ApplyHeartbeat(ctx, "mg", "h1", &vdibroker.HeartbeatRequest{Sessions: reported}, at); err != nil {
				t.Fatal(err)
			}
			h, err := s.GetSessionHost(ctx, "mg", "h1")
			if err != nil {
				t.Fatal(err)
			}
			if h.Sessions != want {
				t.Errorf("heartbeat %d: %d sessions adopted, want %d (at most %d an hour)", batch, h.Sessions, want, max)
			}
		}
		beat(s, t0, 0, max)
		// The store taken back before 00079 and opened again: the
		// migration runs on a store with adopted sessions.
		if err := s.MigrateDownTo(ctx, 78); err != nil {
			t.Fatal(err)
		}
		s.Close()
		s = tg.open(t, store.Options{})
		beat(s, t0.Add(time.Minute), 1, max)
	})
}
