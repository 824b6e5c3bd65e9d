package store_test

import (
	"slices"
	"strings"
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
		if _, err := s.PutHostPool(actx, pool("aud", vdibroker.Pooled), vdibroker.Precondition{Absent: true}); err != nil {
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
		_, err := s.PutHostPool(vdibroker.WithAudit(ctx, ev2), pool("aud", vdibroker.Pooled), vdibroker.Precondition{Absent: true})
		wantCode(t, err, vdibroker.EPreconditionFailed)
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

// TestAudit_ByPrincipal_RE5: ?principal= matches a token id or OIDC
// subject exactly, and a token's subject exactly or in any case of its
// ASCII letters (R-E5), each entry once, newest first or oldest first, a
// page at a time: what its indexes (migration 00070) must answer alike.
func TestAudit_ByPrincipal_RE5(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		var seqs []int64
		for i, p := range []vdibroker.AuditPrincipal{
			{Kind: "token", ID: "t1", Name: "Carol.Ops@Contoso.com"}, // 0
			{Kind: "oidc", ID: "Carol.Ops@Contoso.com"},              // 1: a subject, exactly
			{Kind: "token", ID: "t2", Name: "carol.ops@contoso.com"}, // 2
			{Kind: "token", ID: "t3", Name: "bob"},                   // 3
			{Kind: "oidc", ID: "CAROL.OPS@CONTOSO.COM", Name: "x"},   // 4: an id in another case
			{Kind: "token", ID: "t4", Name: "Ärne"},                  // 5: a non-ASCII capital
			{Kind: "token", ID: "dup", Name: "dup"},                  // 6: id and name alike
			{Kind: "token", ID: "t5", Name: "ÖSTEN"},                 // 7: non-ASCII capital first
		} {
			e := &vdibroker.AuditEntry{Time: t0.Add(time.Duration(i) * time.Second), Principal: p, Action: "hostpool.put", Target: "hostpools/p"}
			if err := s.AppendAudit(ctx, e); err != nil {
				t.Fatal(err)
			}
			seqs = append(seqs, e.Seq)
		}
		for _, tc := range []struct {
			name string
			f    vdibroker.AuditFilter
			want []int // indexes into seqs, in the order listed
		}{
			{"subject in its case, and an id", vdibroker.AuditFilter{Principal: "Carol.Ops@Contoso.com"}, []int{0, 1, 2}},
			{"subject in another case; ids exactly", vdibroker.AuditFilter{Principal: "CAROL.ops@contoso.COM"}, []int{0, 2}},
			{"newest first", vdibroker.AuditFilter{Principal: "Carol.Ops@Contoso.com", Newest: true}, []int{2, 1, 0}},
			{"newest, a page", vdibroker.AuditFilter{Principal: "Carol.Ops@Contoso.com", Newest: true, Limit: 2}, []int{2, 1}},
			{"newest, the next page", vdibroker.AuditFilter{Principal: "Carol.Ops@Contoso.com", Newest: true, Limit: 2, After: seqs[1]}, []int{0}},
			{"oldest, a page", vdibroker.AuditFilter{Principal: "carol.ops@contoso.com", Limit: 1}, []int{0}},
			{"oldest, the next page", vdibroker.AuditFilter{Principal: "carol.ops@contoso.com", Limit: 1, After: seqs[0]}, []int{2}},
			{"a token id", vdibroker.AuditFilter{Principal: "t3"}, []int{3}},
			{"a token id in another case", vdibroker.AuditFilter{Principal: "T3"}, nil},
			{"a non-ASCII subject as written", vdibroker.AuditFilter{Principal: "Ärne"}, []int{5}},
			// Only ASCII letters are folded, on both engines (PostgreSQL's
			// lower() of a UTF-8 database folds Ö to ö).
			{"a non-ASCII capital in the other case", vdibroker.AuditFilter{Principal: "östen"}, nil},
			{"ASCII letters in the other case, the non-ASCII one as written", vdibroker.AuditFilter{Principal: "Östen"}, []int{7}},
			{"id and subject alike: once", vdibroker.AuditFilter{Principal: "dup"}, []int{6}},
			{"with another filter", vdibroker.AuditFilter{Principal: "carol.ops@contoso.com", Since: t0.Add(time.Second)}, []int{2}},
		} {
			list, err := s.ListAudit(ctx, tc.f)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			var got []int
			for _, e := range list {
				got = append(got, slices.Index(seqs, e.Seq))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s: entries %v, want %v", tc.name, got, tc.want)
			}
		}
	})
}

// TestAuditByPrincipalUsesIndexes_PostgreSQL is
// TestAuditByPrincipalUsesIndexes on PostgreSQL: each listing by
// principal reads audit_log_by_principal_id (migration 00070) and
// audit_log_by_principal_ascii (00072), and never the whole trail.
func TestAuditByPrincipalUsesIndexes_PostgreSQL(t *testing.T) {
	s := postgresOpener(t)(t, store.Options{})
	plans, err := s.PostgresAuditPlans(t.Context(), store.AuditByPrincipalFilters)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range plans {
		t.Logf("%+v:\n%s", store.AuditByPrincipalFilters[i], p)
		if !strings.Contains(p, "audit_log_by_principal_id") || !strings.Contains(p, "audit_log_by_principal_ascii") ||
			strings.Contains(p, "Seq Scan on audit_log") {
			t.Errorf("%+v: a principal's entries are not ranges of its indexes:\n%s", store.AuditByPrincipalFilters[i], p)
		}
	}
}
