package store_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// ListHostStates, which the pool summary reads, gives every host the status
// and counts the full read gives it (R-H1, R-S1): a host heartbeating, one
// with a health error, one shutting down, one stopped by its power driver,
// one drained by an admin, one by the autoscaler, one never seen.
func TestListHostStatesMatchesTheFullRead(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("st", vdibroker.Pooled))
		for _, h := range []string{"beating", "sick", "leaving", "stopped", "drained", "scaled", "unseen"} {
			mustHost(t, s, "st", h)
		}
		mustCommit(t, s, placement("st", "beating", "alice", 10))
		mustCommit(t, s, placement("st", "drained", "bob", 10))
		for h, hb := range map[string]*vdibroker.HeartbeatRequest{
			"beating": {Sessions: []vdibroker.AgentSession{{ID: "1", User: "alice", State: vdibroker.StateActive}}},
			"sick":    {HealthError: "disk full"},
			"leaving": {ShuttingDown: true},
			"stopped": {}, "drained": {}, "scaled": {},
		} {
			if _, err := s.ApplyHeartbeat(ctx, "st", h, hb, t0); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := s.SetPowerState(ctx, "st", "stopped", vdibroker.PowerStopped, t0); err != nil {
			t.Fatal(err)
		}
		if _, err := s.UpdateSessionHost(ctx, "st", "drained", func(h *vdibroker.SessionHost) error {
			h.AllowNewSession = false
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SetAutoscaleDrain(ctx, "st", "scaled", true); err != nil {
			t.Fatal(err)
		}
		full, err := s.ListSessionHosts(ctx, "st")
		if err != nil {
			t.Fatal(err)
		}
		states, err := s.ListHostStates(ctx, "st")
		if err != nil {
			t.Fatal(err)
		}
		type row struct {
			Name, Status, Power, Health string
			Sessions, Connecting        int
			Allow, Autoscale, ShutDown  bool
		}
		rows := func(hs []*vdibroker.SessionHost) []row {
			var out []row
			for _, h := range hs {
				out = append(out, row{h.Name, vdibroker.HostStatus(h, 90e9, t0.Add(10e9)), h.PowerState, h.HealthError,
					h.Sessions, h.ConnectingSessions, h.AllowNewSession, h.AutoscaleDrain, h.ShuttingDown})
			}
			return out
		}
		want, got := rows(full), rows(states)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("host states differ from the full read (-full +states):\n%s", diff)
		}
		statuses := map[string]bool{}
		for _, r := range got {
			statuses[r.Status] = true
		}
		if len(statuses) != 4 || len(got) != 7 {
			t.Errorf("want 7 hosts in all four statuses, got %+v", got)
		}
		if _, err := s.ListHostStates(ctx, "no-such-pool"); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
			t.Errorf("states of a missing pool: %v, want NotFound", err)
		}
	})
}
