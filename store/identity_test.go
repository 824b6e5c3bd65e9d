package store_test

import (
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// TestHostIdentity (R-SEC), on both engines: a registration token does
// not take over a registered host; the host itself re-keys with its
// current credential; an admin's reset lets a new machine take the name;
// a deleted host does not come back with a token issued before the
// delete; a token limited to N hosts registers N; tokens are listed
// without secrets and revoked.
func TestHostIdentity(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("pool1", vdibroker.Pooled))
		registerHosts(t, s, "pool1", "h1")
		at := t0.Add(time.Minute)

		// Takeover refused; the real agent keeps working.
		_, err := s.RegisterHost(ctx, "rt-pool1", &vdibroker.RegisterRequest{HostName: "h1", Address: "rogue:3389"}, "cred-rogue", at)
		wantCode(t, err, vdibroker.EConflict)
		_, err = s.RegisterHost(ctx, "rt-pool1", &vdibroker.RegisterRequest{HostName: "h1", CurrentCredentialHash: "cred-wrong"}, "cred-rogue", at)
		wantCode(t, err, vdibroker.EConflict)
		if h, err := s.HostByCredential(ctx, "cred-h1"); err != nil || h.Address == "rogue:3389" {
			t.Fatalf("after a refused takeover the real agent's credential gives %+v, %v", h, err)
		}
		// The host itself re-keys.
		if _, err := s.RegisterHost(ctx, "rt-pool1", &vdibroker.RegisterRequest{HostName: "h1", CurrentCredentialHash: "cred-h1"}, "cred-h1b", at); err != nil {
			t.Fatalf("re-key with the current credential: %v", err)
		}
		// An admin's reset: the old credential stops, a new machine takes it.
		if err := s.ResetRegistration(ctx, "pool1", "h1"); err != nil {
			t.Fatal(err)
		}
		_, err = s.HostByCredential(ctx, "cred-h1b")
		wantCode(t, err, vdibroker.EUnauthenticated)
		if _, err := s.RegisterHost(ctx, "rt-pool1", &vdibroker.RegisterRequest{HostName: "h1"}, "cred-new-machine", at); err != nil {
			t.Fatalf("register after a reset: %v", err)
		}
		wantCode(t, s.ResetRegistration(ctx, "pool1", "nope"), vdibroker.ENotFound)

		// Deleted: not back with the old token, back with a newer one.
		if err := s.DeleteSessionHost(ctx, "pool1", "h1", false); err != nil {
			t.Fatal(err)
		}
		_, err = s.RegisterHost(ctx, "rt-pool1", &vdibroker.RegisterRequest{HostName: "h1"}, "cred-again", at.Add(time.Minute))
		wantCode(t, err, vdibroker.EConflict)
		// (A delete is stamped with the store's clock, the real one here.)
		later := &vdibroker.RegistrationToken{HostPool: "pool1", Hash: "rt-later", CreateTime: time.Now().Add(time.Second),
			ExpireTime: at.Add(3 * time.Hour), MaxHosts: 2}
		if err := s.CreateRegistrationToken(ctx, later); err != nil {
			t.Fatal(err)
		}
		if _, err := s.RegisterHost(ctx, "rt-later", &vdibroker.RegisterRequest{HostName: "h1"}, "cred-again", at.Add(2*time.Hour)); err != nil {
			t.Fatalf("register a deleted host with a token issued after the delete: %v", err)
		}
		// maxHosts 2: one more new host, then refused; a re-key is no use.
		if _, err := s.RegisterHost(ctx, "rt-later", &vdibroker.RegisterRequest{HostName: "h2"}, "cred-h2", at.Add(2*time.Hour)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.RegisterHost(ctx, "rt-later", &vdibroker.RegisterRequest{HostName: "h2", CurrentCredentialHash: "cred-h2"}, "cred-h2b", at.Add(2*time.Hour)); err != nil {
			t.Fatalf("re-key with a token at its maxHosts: %v", err)
		}
		_, err = s.RegisterHost(ctx, "rt-later", &vdibroker.RegisterRequest{HostName: "h3"}, "cred-h3", at.Add(2*time.Hour))
		wantCode(t, err, vdibroker.EPermission)

		// Listed without secrets, revoked.
		list, err := s.ListRegistrationTokens(ctx, "pool1")
		if err != nil || len(list) != 2 {
			t.Fatalf("list: %+v, %v; want 2 tokens", list, err)
		}
		if l := list[1]; l.ID != later.ID || l.Hash != "" || l.MaxHosts != 2 || l.Hosts != 2 {
			t.Errorf("listed token %+v, want id %s, no hash, maxHosts 2, hosts 2", l, later.ID)
		}
		if err := s.DeleteRegistrationToken(ctx, "pool1", later.ID); err != nil {
			t.Fatal(err)
		}
		_, err = s.RegisterHost(ctx, "rt-later", &vdibroker.RegisterRequest{HostName: "h4"}, "cred-h4", at.Add(2*time.Hour))
		wantCode(t, err, vdibroker.EUnauthenticated)
		wantCode(t, s.DeleteRegistrationToken(ctx, "pool1", later.ID), vdibroker.ENotFound)
	})
}

// TestRogueHostCannotCaptureUsers (R-S2): a host that reports a
// user the broker placed on another host does not get that user adopted;
// a user the broker never placed is adopted and marked so.
func TestRogueHostCannotCaptureUsers(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("pool1", vdibroker.Pooled))
		registerHosts(t, s, "pool1", "good", "rogue")
		mustCommit(t, s, placement("pool1", "good", "alice", 10))
		at := t0.Add(time.Minute)
		if _, err := s.ApplyHeartbeat(ctx, "pool1", "rogue", &vdibroker.HeartbeatRequest{Sessions: []vdibroker.AgentSession{
			{ID: "1", User: "alice", State: vdibroker.StateActive},
			{ID: "2", User: "walkin", State: vdibroker.StateActive},
		}}, at); err != nil {
			t.Fatal(err)
		}
		alice, err := s.ListUserSessions(ctx, vdibroker.SessionFilter{HostPool: "pool1", User: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		if len(alice) != 1 || alice[0].SessionHost != "good" || alice[0].Adopted {
			t.Errorf("alice's open sessions after the rogue's report: %+v; want only the placed one on good", alice)
		}
		walkin, err := s.ListUserSessions(ctx, vdibroker.SessionFilter{HostPool: "pool1", User: "walkin"})
		if err != nil {
			t.Fatal(err)
		}
		if len(walkin) != 1 || !walkin[0].Adopted || walkin[0].SessionHost != "rogue" {
			t.Errorf("a user who logged on directly: %+v, want one adopted session on rogue", walkin)
		}
	})
}

// TestRogueHostCannotCapturePersonalUsers (R-S2): in a personal pool the
// user's session is not pooled, so only the rule's own look-up (placed, not
// adopted, on another host of the pool) keeps a host that reports her from
// adopting her.
func TestRogueHostCannotCapturePersonalUsers(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("desk", vdibroker.Personal))
		registerHosts(t, s, "desk", "hers", "rogue")
		mustCommit(t, s, assignment("desk", "hers", "alice"))
		if _, err := s.ApplyHeartbeat(ctx, "desk", "rogue", &vdibroker.HeartbeatRequest{Sessions: []vdibroker.AgentSession{
			{ID: "1", User: "alice", State: vdibroker.StateActive},
			{ID: "2", User: "walkin", State: vdibroker.StateActive},
		}}, t0.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		onRogue, err := s.ListUserSessions(ctx, vdibroker.SessionFilter{HostPool: "desk", SessionHost: "rogue"})
		if err != nil {
			t.Fatal(err)
		}
		if len(onRogue) != 1 || onRogue[0].User != "walkin" || !onRogue[0].Adopted {
			t.Errorf("sessions on the rogue host: %+v; want walkin's alone, adopted", onRogue)
		}
		wantCounts(t, s, "desk", "rogue", 1, 0)
	})
}

// TestAdoptionNotOverTheUsersPooledSession_RS2: a report that changes the
// host's id of a user's placed (pooled) session ends that session
// (NotReported) and adopts the new one only on the next heartbeat: the
// database checks the adoption against the user's open pooled sessions as
// they were before the report's other steps (R-C6 holds at every commit).
// The refused adoption is not in the R-LI6 base either: an undated sample
// (sampled now) counts no session.
func TestAdoptionNotOverTheUsersPooledSession_RS2(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("pool1", vdibroker.Pooled))
		mustHost(t, s, "pool1", "h1")
		placed := mustCommit(t, s, placement("pool1", "h1", "alice", vdibroker.NoSessionLimit))
		beat := func(at time.Duration, agentID string) []*vdibroker.UserSession {
			t.Helper()
			res, err := s.ApplyHeartbeat(ctx, "pool1", "h1", &vdibroker.HeartbeatRequest{Sessions: []vdibroker.AgentSession{
				{ID: agentID, User: "alice", State: vdibroker.StateActive}}, Metrics: &vdibroker.Metrics{CPUPercent: 10}}, t0.Add(at))
			if err != nil {
				t.Fatal(err)
			}
			if want := res.Host.Sessions; res.Host.MetricsSessions != want {
				t.Errorf("heartbeat at %v: R-LI6 base %d, want %d (the open sessions, as of an undated sample)", at, res.Host.MetricsSessions, want)
			}
			open, err := s.ListUserSessions(ctx, vdibroker.SessionFilter{HostPool: "pool1", User: "alice"})
			if err != nil {
				t.Fatal(err)
			}
			return open
		}
		if open := beat(10*time.Second, "3"); len(open) != 1 || open[0].ID != placed || open[0].AgentSessionID != "3" {
			t.Fatalf("after the logon: %+v; want the placed %s with agent id 3", open, placed)
		}
		if open := beat(20*time.Second, "5"); len(open) != 0 {
			t.Fatalf("after the report of id 5: %+v; want none open (the placed one ended, no adoption yet)", open)
		}
		wantCounts(t, s, "pool1", "h1", 0, 0)
		if open := beat(30*time.Second, "5"); len(open) != 1 || !open[0].Adopted || open[0].AgentSessionID != "5" {
			t.Fatalf("a heartbeat later: %+v; want one adopted session with agent id 5", open)
		}
		wantCounts(t, s, "pool1", "h1", 1, 0)
	})
}

// TestPostgresDefaults: a URL DSN gets connect_timeout unless it sets one;
// other forms are left as given.
func TestPostgresDefaults(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:p@db:5432/vdi?sslmode=disable": "connect_timeout=5",
		"postgresql://u@db/vdi":                      "connect_timeout=5",
		"postgres://u@db/vdi?connect_timeout=30":     "connect_timeout=30",
		"host=db user=u dbname=vdi":                  "host=db user=u dbname=vdi",
	} {
		if got := store.PostgresDefaults(in); !strings.Contains(got, want) {
			t.Errorf("PostgresDefaults(%q) = %q, want it to contain %q", in, got, want)
		}
	}
}

// TestListSessionHostsPage: a page of a pool's hosts after a name, in
// query order (byte-wise, R-query order), on both engines.
func TestListSessionHostsPage(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("pool1", vdibroker.Pooled))
		for _, h := range []string{"h-b", "h-a", "H-z", "h-c"} {
			mustHost(t, s, "pool1", h)
		}
		var got []string
		after := ""
		for {
			page, err := s.ListSessionHostsPage(ctx, "pool1", after, 2)
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range page {
				got = append(got, h.Name)
			}
			if len(page) < 2 {
				break
			}
			after = page[len(page)-1].Name
		}
		if want := []string{"H-z", "h-a", "h-b", "h-c"}; strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("pages gave %v, want %v", got, want)
		}
		_, err := s.ListSessionHostsPage(ctx, "nope", "", 2)
		wantCode(t, err, vdibroker.ENotFound)
	})
}

// TestPostgresStatementTimeout: the store's own PostgreSQL
// connections carry a statement_timeout, as a backstop behind the store
// deadline of each call.
func TestPostgresStatementTimeout(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		if !s.IsPostgres() {
			t.Skip("PostgreSQL only")
		}
		got, err := s.PostgresSetting(t.Context(), "statement_timeout")
		if err != nil || got != "30s" {
			t.Errorf("statement_timeout = %q, %v; want 30s", got, err)
		}
	})
}

// TestAdoptedSessionKeepsItsLogonTime_RS2: an adopted session is recorded
// as created when its host says its user logged on, on both engines; its
// state's time is when the broker heard of it.
func TestAdoptedSessionKeepsItsLogonTime_RS2(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("pool1", vdibroker.Pooled))
		mustHost(t, s, "pool1", "h1")
		logon := t0.Add(-90 * time.Minute)
		if _, err := s.ApplyHeartbeat(ctx, "pool1", "h1", &vdibroker.HeartbeatRequest{Sessions: []vdibroker.AgentSession{
			{ID: "2", User: "alice", State: vdibroker.StateActive, LogonTime: &logon}}, Metrics: &vdibroker.Metrics{CPUPercent: 10}}, t0); err != nil {
			t.Fatal(err)
		}
		open, err := s.ListUserSessions(ctx, vdibroker.SessionFilter{HostPool: "pool1", User: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		if len(open) != 1 || !open[0].Adopted || !open[0].CreateTime.Equal(logon) || !open[0].StateTime.Equal(t0) {
			t.Fatalf("adopted: %+v; want created at the logon %v, its state at %v", open, logon, t0)
		}
	})
}
