package store_test

import (
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// TestAudit_SameTransaction: an audited write commits its entry with the
// change; a write that fails leaves neither; the entry is written once per
// request; the log is append-only and pruned by time with history.
func TestAudit_SameTransaction(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		now := time.Now().UTC()
		ev := &vdibroker.AuditEntry{Time: now, Principal: vdibroker.AuditPrincipal{Kind: "token", ID: "t1", Role: "Contributor"},
			Action: "hostpool.put", Target: "hostpools/aud", HostPool: "aud"}
		actx := vdibroker.WithAudit(ctx, ev)
		if err := s.CreateHostPool(actx, pool("aud", vdibroker.Pooled)); err != nil {
			t.Fatal(err)
		}
		if ev.Seq == 0 {
			t.Fatal("the entry was not written")
		}
		// A second write of the same request records nothing more.
		mustHost(t, s, "aud", "h1")
		if _, err := s.UpdateSessionHost(actx, "aud", "h1", func(h *vdibroker.SessionHost) error { h.AllowNewSession = false; return nil }); err != nil {
			t.Fatal(err)
		}
		// A failing write: no change, no entry.
		ev2 := &vdibroker.AuditEntry{Time: now, Principal: vdibroker.AuditPrincipal{Kind: "token", ID: "t2"}, Action: "hostpool.put", Target: "hostpools/aud"}
		err := s.CreateHostPool(vdibroker.WithAudit(ctx, ev2), pool("aud", vdibroker.Pooled))
		wantCode(t, err, vdibroker.EConflict)
		if ev2.Seq != 0 {
			t.Errorf("a failed write recorded its entry (seq %d)", ev2.Seq)
		}
		list, err := s.ListAudit(ctx, vdibroker.AuditFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 || list[0].Seq != ev.Seq || list[0].Principal.ID != "t1" || list[0].HostPool != "aud" || string(list[0].Before) != "null" {
			t.Fatalf("entries %+v, want the create's alone", list)
		}
		// Append-only: an update is refused by the database.
		if err := s.ExecRaw(ctx, `UPDATE audit_log SET action = 'nothing'`); err == nil {
			t.Error("audit_log accepted an UPDATE")
		}
		// Filters.
		old := &vdibroker.AuditEntry{Time: now.Add(-48 * time.Hour), Principal: vdibroker.AuditPrincipal{Kind: "anonymous"},
			Action: "signin", Target: "signin", Outcome: vdibroker.AuditRefused, Error: "Unauthenticated: invalid token"}
		if err := s.AppendAudit(ctx, old); err != nil || old.Seq <= ev.Seq {
			t.Fatalf("append: %v, seq %d", err, old.Seq)
		}
		for _, tc := range []struct {
			name string
			f    vdibroker.AuditFilter
			want int
		}{
			{"all", vdibroker.AuditFilter{}, 2},
			{"target", vdibroker.AuditFilter{Target: "hostpools/aud"}, 1},
			{"target prefix", vdibroker.AuditFilter{Target: "hostpools/"}, 1},
			{"principal", vdibroker.AuditFilter{Principal: "t1"}, 1},
			{"action", vdibroker.AuditFilter{Action: "signin"}, 1},
			{"since", vdibroker.AuditFilter{Since: now.Add(-time.Hour)}, 1},
			{"pools", vdibroker.AuditFilter{HostPools: []string{"aud", "x"}}, 1},
			{"after", vdibroker.AuditFilter{After: ev.Seq}, 1},
			{"limit", vdibroker.AuditFilter{Limit: 1}, 1},
		} {
			got, err := s.ListAudit(ctx, tc.f)
			if err != nil || len(got) != tc.want {
				t.Errorf("%s: %d entries, %v; want %d", tc.name, len(got), err, tc.want)
			}
		}
		// Retention: the day-old entry goes, the new one stays.
		if _, err := s.PruneHistory(ctx, now.Add(-24*time.Hour)); err != nil {
			t.Fatal(err)
		}
		list, _ = s.ListAudit(ctx, vdibroker.AuditFilter{})
		if len(list) != 1 || list[0].Seq != ev.Seq {
			t.Errorf("after prune: %+v", list)
		}
	})
}
