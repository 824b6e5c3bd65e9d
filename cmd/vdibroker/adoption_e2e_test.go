package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// The security review's findings on adopted sessions (R-S2, R-C1), through
// the real broker on loopback: a host's report is a fact, never a route.

// servedPool is a pool on a real broker with an admin client.
type servedPool struct {
	tb    testing.TB
	m     *Main
	admin *vhttp.Client
	pool  string
}

// newServedPool starts a broker and creates pool with body.
func newServedPool(tb testing.TB, pool string, body map[string]any) *servedPool {
	tb.Helper()
	tb.Setenv("VDIBROKER_ADMIN_TOKEN", "")
	m := openMain(tb)
	sp := &servedPool{tb: tb, m: m, admin: vhttp.NewClient(m.URL(), m.AdminToken), pool: pool}
	if _, err := sp.admin.PutHostPool(context.Background(), pool, body); err != nil {
		tb.Fatal(err)
	}
	return sp
}

// host registers an agent for name with a registration token of the pool,
// sends its first heartbeat and returns its credential.
func (sp *servedPool) host(name string) string {
	sp.tb.Helper()
	ctx := context.Background()
	rt, err := sp.admin.CreateRegistrationToken(ctx, sp.pool, vhttp.RegistrationTokenRequest{ExpiresInSeconds: 3600})
	if err != nil {
		sp.tb.Fatal(err)
	}
	reg, err := sp.admin.Register(ctx, &vdibroker.RegisterRequest{Token: rt.Token, HostName: name, Address: name + ".example.test:3389"})
	if err != nil {
		sp.tb.Fatal(err)
	}
	sp.beat(reg.Credential)
	return reg.Credential
}

// beat sends one heartbeat reporting sessions.
func (sp *servedPool) beat(cred string, sessions ...vdibroker.AgentSession) {
	sp.tb.Helper()
	if _, err := sp.admin.Heartbeat(context.Background(), cred, &vdibroker.HeartbeatRequest{Sessions: sessions}); err != nil {
		sp.tb.Fatal(err)
	}
}

// reported is n sessions of users prefix1..prefixN, Active.
func reported(prefix string, n int) []vdibroker.AgentSession {
	out := make([]vdibroker.AgentSession, n)
	for i := range out {
		out[i] = vdibroker.AgentSession{ID: fmt.Sprint(i + 1), User: fmt.Sprintf("%s%d", prefix, i+1), State: vdibroker.StateActive}
	}
	return out
}

// TestAdoptedSessionNeverRoutesPooled_RS2: a pooled host drained for new
// sessions with a limit of 1 reports five users it was never given. They
// stay facts of that host, but none of them is sent there by a connect
// (R-C1 answers an adopted session only where placement would put the
// user: not on a drained host, not over the limit); each is placed as
// placement decides: the first on the one good host, the others refused
// NoCapacity (its limit is 1).
func TestAdoptedSessionNeverRoutesPooled_RS2(t *testing.T) {
	sp := newServedPool(t, "pooled", map[string]any{"loadBalancerType": "BreadthFirst", "maxSessionLimit": 1})
	ctx := context.Background()
	sp.host("good")
	rogue := sp.host("rogue")
	if _, err := sp.admin.PatchSessionHost(ctx, "pooled", "rogue", map[string]any{"allowNewSession": false}); err != nil {
		t.Fatal(err)
	}
	sp.beat(rogue, reported("u", 5)...)
	facts, err := sp.admin.ListUserSessions(ctx, "pooled", vhttp.SessionQuery{SessionHost: "rogue"})
	if err != nil {
		t.Fatal(err)
	}
	if len(facts) == 0 {
		t.Fatal("the rogue host's report left no session: a host's report is a fact the admin sees (R-S2)")
	}
	placed := 0
	for i := 1; i <= 5; i++ {
		user := fmt.Sprintf("u%d", i)
		res, err := sp.admin.Connect(ctx, "pooled", vhttp.ConnectRequest{User: user})
		switch {
		case err == nil && res.SessionHost == "rogue":
			t.Errorf("connect %s answered the rogue host's report (reconnect %v)", user, res.Reconnect)
		case err == nil:
			placed++
			if res.Reconnect || res.SessionHost != "good" {
				t.Errorf("connect %s = %s reconnect %v, want a new session on good", user, res.SessionHost, res.Reconnect)
			}
		case vdibroker.ErrorCode(err) != vdibroker.ENoCapacity:
			t.Errorf("connect %s: %v, want a placement or NoCapacity", user, err)
		}
	}
	if placed != 1 {
		t.Errorf("%d users placed on good (limit 1), want 1", placed)
	}
}

// TestAdoptedSessionNeverRoutesPersonal_RS2: in a Personal pool with
// Direct assignment, vip is assigned to desk-victim; desk-rogue (assigned
// to nobody) reports her. Her connect goes to her own desktop.
func TestAdoptedSessionNeverRoutesPersonal_RS2(t *testing.T) {
	sp := newServedPool(t, "desks", map[string]any{"hostPoolType": "Personal", "loadBalancerType": "Persistent",
		"personalDesktopAssignmentType": "Direct"})
	ctx := context.Background()
	sp.host("desk-victim")
	rogue := sp.host("desk-rogue")
	if _, err := sp.admin.PatchSessionHost(ctx, "desks", "desk-victim", map[string]any{"assignedUsers": []string{"vip"}}); err != nil {
		t.Fatal(err)
	}
	sp.beat(rogue, vdibroker.AgentSession{ID: "7", User: "vip", State: vdibroker.StateActive})
	res, err := sp.admin.Connect(ctx, "desks", vhttp.ConnectRequest{User: "vip"})
	if err != nil {
		t.Fatal(err)
	}
	if res.SessionHost != "desk-victim" || res.Reconnect {
		t.Errorf("vip connects to %s (reconnect %v), want a new session on her desk-victim", res.SessionHost, res.Reconnect)
	}
	// The report stays a fact: the admin sees vip's session on desk-rogue.
	facts, err := sp.admin.ListUserSessions(ctx, "desks", vhttp.SessionQuery{SessionHost: "desk-rogue"})
	if err != nil || len(facts) != 1 || !facts[0].Adopted {
		t.Errorf("desk-rogue's sessions = %+v, %v; want vip's adopted session", facts, err)
	}
}

// storeBytes is the size of a broker's SQLite files (database and WAL).
func storeBytes(tb testing.TB, m *Main) int64 {
	tb.Helper()
	var n int64
	for _, f := range []string{"vdibroker.db", "vdibroker.db-wal"} {
		if fi, err := os.Stat(filepath.Join(m.DataDir, f)); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// auditCount counts the audit entries of action.
func auditCount(tb testing.TB, c *vhttp.Client, action string) int {
	tb.Helper()
	list, err := c.ListAudit(context.Background(), vhttp.AuditQuery{Action: action})
	if err != nil {
		tb.Fatal(err)
	}
	return len(list)
}

// TestAdoptionFloodIsBounded_RS2: one host's credential reports 2,000
// new users in each of 100 heartbeats. The host adopts at most
// MaxAdoptions sessions in the window (default limit: 200), the audit
// has one entry for the heartbeat that adopted them, and the store grows
// by a bounded amount: at most 200 session rows, not 200,000, and not
// 200,000 audit rows.
func TestAdoptionFloodIsBounded_RS2(t *testing.T) {
	sp := newServedPool(t, "flood", map[string]any{"loadBalancerType": "BreadthFirst"})
	ctx := context.Background()
	cred := sp.host("flooder")
	before := storeBytes(t, sp.m)
	for round := range 100 {
		sp.beat(cred, reported(fmt.Sprintf("r%03du", round), 2000)...)
	}
	var all int
	for _, state := range []string{"", vdibroker.StateLoggedOff} {
		list, err := sp.admin.ListUserSessions(ctx, "flood", vhttp.SessionQuery{State: state})
		if err != nil {
			t.Fatal(err)
		}
		all += len(list)
	}
	const maxAdoptions = 200 // vdibroker.MaxAdoptions(no limit) per window
	if all > maxAdoptions {
		t.Errorf("%d sessions stored after 100 heartbeats of 2,000 strangers, want at most %d", all, maxAdoptions)
	}
	if all == 0 {
		t.Error("nothing adopted: the first reports are facts the admin sees (R-S2)")
	}
	if n := auditCount(t, sp.admin, "usersession.adopt"); n != 1 {
		t.Errorf("%d usersession.adopt audit entries, want 1 (one per heartbeat that adopted)", n)
	}
	// 200 sessions and one audit entry; the rest is the host's row and
	// the WAL of 100 heartbeats.
	grew := storeBytes(t, sp.m) - before
	t.Logf("%d sessions, the store grew by %d bytes", all, grew)
	if grew > 8<<20 {
		t.Errorf("the store grew by %d bytes, want at most 8 MiB", grew)
	}
}
