package store_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// TestPutSessionHostAuditStatus_RH1: the audit entry of a session host's
// PUT, a create or a replace, has the host's status (R-H1) in after, and
// a replace in before too, the status a read gives (a replace keeps the
// host's heartbeat and power): it was empty.
func TestPutSessionHostAuditStatus_RH1(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		p := pool("hpa", vdibroker.Pooled)
		mustPool(t, s, p)
		put := func(action string) *vdibroker.AuditEntry {
			t.Helper()
			ev := &vdibroker.AuditEntry{Time: time.Now().UTC(), Principal: vdibroker.AuditPrincipal{Kind: "token", ID: "t1"},
				Action: action, Target: "hostpools/hpa/sessionhosts/h1", HostPool: "hpa"}
			h := &vdibroker.SessionHost{HostPool: "hpa", Name: "h1", Address: "h1:3389", Protocols: []string{"RDP"},
				StandardFeatures: true, AllowNewSession: true, CreateTime: t0}
			if _, err := s.PutSessionHost(vdibroker.WithAudit(ctx, ev), h); err != nil {
				t.Fatal(err)
			}
			list, err := s.ListAudit(ctx, vdibroker.AuditFilter{After: ev.Seq - 1, Limit: 1})
			if err != nil || len(list) != 1 {
				t.Fatalf("audit entries %v, %v", list, err)
			}
			return list[0]
		}
		status := func(raw json.RawMessage) string {
			var h struct{ Status string }
			if err := json.Unmarshal(raw, &h); err != nil {
				t.Fatalf("%s: %v", raw, err)
			}
			return h.Status
		}
		created := put("sessionhost.put")
		h, err := s.GetSessionHost(ctx, "hpa", "h1")
		if err != nil {
			t.Fatal(err)
		}
		want := vdibroker.HostStatus(h, p.HeartbeatTimeout(), time.Now())
		if got := status(created.After); want == "" || got != want {
			t.Errorf("a create's entry: after.status %q, want %q", got, want)
		}
		replaced := put("sessionhost.put")
		if b, a := status(replaced.Before), status(replaced.After); b != want || a != want {
			t.Errorf("a replace's entry: before.status %q, after.status %q, want %q", b, a, want)
		}
	})
}
