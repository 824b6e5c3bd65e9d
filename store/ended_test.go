package store_test

import (
	"slices"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// TestEndedFollowsState_RD3: ended (00060) is state = 'LoggedOff' after
// every way a session starts, changes and ends: placed, logged on,
// disconnected, ended by an administrator, by R-S3's Pending timeout and
// by a forced host deletion. An ended user connects again: R-C6's unique
// index, which R-D3 has the database enforce, is on open sessions. A
// store taken back before 00060 and opened again has the column filled
// from state. PostgreSQL checks the rule itself (a constraint); this test
// is SQLite's check.
func TestEndedFollowsState_RD3(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		ctx := t.Context()
		s := tg.open(t, store.Options{})
		mustPool(t, s, pool("p", vdibroker.Pooled))
		mustHost(t, s, "p", "h1")
		mustHost(t, s, "p", "h2")
		alice := mustCommit(t, s, placement("p", "h1", "alice", 10))
		mustCommit(t, s, placement("p", "h1", "bob", 10))
		mustCommit(t, s, placement("p", "h1", "carol", 10))
		mustCommit(t, s, placement("p", "h2", "dave", 10))
		if _, err := s.ApplyHeartbeat(ctx, "p", "h1", &vdibroker.HeartbeatRequest{Sessions: []vdibroker.AgentSession{
			{ID: "1", User: "alice", State: vdibroker.StateActive},
			{ID: "2", User: "bob", State: vdibroker.StateDisconnected},
		}}, t0.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		// dave logs on, so the forced deletion, not R-S3, ends his session.
		if _, err := s.ApplyHeartbeat(ctx, "p", "h2", &vdibroker.HeartbeatRequest{Sessions: []vdibroker.AgentSession{
			{ID: "1", User: "dave", State: vdibroker.StateActive},
		}}, t0.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		if err := s.EndSession(ctx, "p", alice, vdibroker.EndLoggedOffByAdmin, t0.Add(2*time.Second)); err != nil {
			t.Fatal(err)
		}
		// carol never logs on: R-S3 ends her session.
		if _, err := s.ExpirePending(ctx, t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteSessionHost(ctx, "p", "h2", true); err != nil {
			t.Fatal(err)
		}
		check := func(when string) {
			t.Helper()
			if n, err := s.EndedMismatches(ctx); err != nil || n != 0 {
				t.Errorf("%s: %d sessions whose ended is not state = LoggedOff (%v)", when, n, err)
			}
			open, err := s.ListUserSessions(ctx, vdibroker.SessionFilter{HostPool: "p"})
			if err != nil {
				t.Fatal(err)
			}
			ended, err := s.ListUserSessions(ctx, vdibroker.SessionFilter{HostPool: "p", State: vdibroker.StateLoggedOff})
			if err != nil {
				t.Fatal(err)
			}
			users := func(l []*vdibroker.UserSession) []string {
				var u []string
				for _, x := range l {
					u = append(u, x.User)
				}
				slices.Sort(u)
				return u
			}
			if got := users(open); !slices.Equal(got, []string{"bob"}) {
				t.Errorf("%s: open sessions of %v, want bob's", when, got)
			}
			if got := users(ended); !slices.Equal(got, []string{"alice", "carol", "dave"}) {
				t.Errorf("%s: ended sessions of %v, want alice's, carol's, dave's", when, got)
			}
			for _, x := range ended {
				if x.User == "dave" && x.EndReason != vdibroker.EndHostDeleted {
					t.Errorf("%s: dave's session ended by %q, want %q", when, x.EndReason, vdibroker.EndHostDeleted)
				}
			}
		}
		check("after the sessions' lives")
		if err := s.MigrateDownTo(ctx, 55); err != nil {
			t.Fatal(err)
		}
		s.Close()
		s = tg.open(t, store.Options{})
		check("after 00060 ran again")
		mustCommit(t, s, placement("p", "h1", "alice", 10)) // her ended session takes no slot of R-C6
		if err := s.CommitPlacement(ctx, placement("p", "h1", "bob", 10)); err == nil {
			t.Errorf("bob, whose session is open, got a second one")
		}
		if n, err := s.EndedMismatches(ctx); err != nil || n != 0 {
			t.Errorf("after alice's new session: %d mismatches (%v)", n, err)
		}
	})
}

// TestLogonLeavesOpenIndexesAlone: on SQLite a logon (Pending ->
// Active) opens for writing the table and only the indexes with a column
// or a condition it sets: not the open and ended indexes by pool and by
// user, conditioned on ended since 00060 (before, it rewrote the entries
// of all of them). user_sessions_ended_by_time is opened for its column,
// state_time, but its condition is false before and after a logon, so no
// entry of it is touched.
func TestLogonLeavesOpenIndexesAlone(t *testing.T) {
	s, err := store.OpenWith(t.Context(), "", t.TempDir(), nil, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.LogonIndexes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"user_sessions_disconnected", "user_sessions_ended_by_time", "user_sessions_open_by_host_covering", "user_sessions_pending_by_time"}
	if !slices.Equal(got, want) {
		t.Errorf("a logon writes the indexes %v, want %v", got, want)
	}
}
