package store_test

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// TestSessionListingsUseIndexes: a dry run reads the user's open sessions in
// the pool (R-C1, R-C8), and so do ?user= listings; ?sessionHost= reads a
// host's. In a pool with a long LoggedOff history each must be one range of
// an index, never a walk of every session the pool ever had
// (user_sessions_by_pool): in a pool of 10,000 hosts that made dry runs
// answer 5-10 per second. The store holds 20,000 ended sessions
// (a week of history for 500 users) and some open ones.
func TestSessionListingsUseIndexes(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("big", vdibroker.Pooled))
		for i := range 4 {
			mustHost(t, s, "big", fmt.Sprintf("host%02d", i))
		}
		for i := range 40 {
			mustCommit(t, s, placement("big", fmt.Sprintf("host%02d", i%4), fmt.Sprintf("user%04d", i), vdibroker.NoSessionLimit))
		}
		if err := s.AddHistory(ctx, "big", 4, 500, 20000); err != nil {
			t.Fatal(err)
		}
		// A user's pooled sessions are one key of the R-C6 unique index, of
		// the user search's (00046), both on (host_pool, user_key), or of
		// the index of a user's open sessions (00050, on (user_key,
		// host_pool)): each is a lookup of the user, not a walk.
		byUser, pooledByUser := []string{"user_sessions_open_unpooled_by_user"},
			[]string{"user_sessions_one_per_pooled_user", "user_sessions_open_by_user_key", "user_sessions_open_by_user"}
		const after = "0000000000000000000000000000100"
		tests := []struct {
			name  string
			f     vdibroker.SessionFilter
			index []string // every one must be in the plan
			anyOf []string // one of them must be
		}{
			{"user's open sessions (dry run, R-C1)", vdibroker.SessionFilter{User: "user0007"}, byUser, pooledByUser},
			{"?user=&state=Active", vdibroker.SessionFilter{User: "user0007", State: vdibroker.StateActive}, byUser, pooledByUser},
			{"?user=&state=Pending, paged", vdibroker.SessionFilter{User: "user0007", State: vdibroker.StatePending, After: after, Limit: 101}, byUser, pooledByUser},
			{"?user=&sessionHost= (R-PE3)", vdibroker.SessionFilter{User: "user0007", SessionHost: "host03"}, byUser, pooledByUser},
			{"?user=&state=LoggedOff", vdibroker.SessionFilter{User: "user0007", State: vdibroker.StateLoggedOff}, []string{"user_sessions_ended_by_user"}, nil},
			{"?user=&state=LoggedOff, paged", vdibroker.SessionFilter{User: "user0007", State: vdibroker.StateLoggedOff, After: after, Limit: 101}, []string{"user_sessions_ended_by_user"}, nil},
			{"?sessionHost=", vdibroker.SessionFilter{SessionHost: "host01"}, []string{"user_sessions_open_by_host_covering"}, nil},
			// The pool's Disconnected sessions (migration 00008) do as well.
			{"?sessionHost=&state=Disconnected", vdibroker.SessionFilter{SessionHost: "host01", State: vdibroker.StateDisconnected}, nil,
				[]string{"user_sessions_open_by_host_covering", "user_sessions_disconnected"}},
			{"?sessionHost=&state=LoggedOff, paged", vdibroker.SessionFilter{SessionHost: "host01", State: vdibroker.StateLoggedOff, After: after, Limit: 101}, []string{"user_sessions_ended_by_host"}, nil},
			// The views' catch-up (broker catchUpUsers: after a restart
			// it read the whole history on every tick) and the pool's
			// paged listing of open sessions: migration 00019.
			{"the views' catch-up: open sessions after a cursor", vdibroker.SessionFilter{After: after, Limit: 20000}, []string{"user_sessions_open_by_pool"}, nil},
			{"?state=Pending, paged", vdibroker.SessionFilter{State: vdibroker.StatePending, After: after, Limit: 101}, []string{"user_sessions_open_by_pool"}, nil},
			// The console's user search (migration 00046): one range of
			// the folded names, open or ended, its pages too (PostgreSQL
			// may read the open ones' range in 00050's index, by user_key
			// first, the pool in the index condition).
			{"?userPrefix=", vdibroker.SessionFilter{UserPrefix: "User00", Limit: 51}, nil, []string{"user_sessions_open_by_user_key", "user_sessions_open_by_user"}},
			{"?userPrefix=, paged", vdibroker.SessionFilter{UserPrefix: "user00", After: after, Limit: 51}, nil, []string{"user_sessions_open_by_user_key", "user_sessions_open_by_user"}},
			{"?userPrefix=&state=LoggedOff, paged", vdibroker.SessionFilter{UserPrefix: "user00", State: vdibroker.StateLoggedOff, After: after, Limit: 51},
				[]string{"user_sessions_ended_by_user"}, nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				tt.f.HostPool = "big"
				p, err := s.ListSessionsPlan(ctx, tt.f)
				if err != nil {
					t.Fatal(err)
				}
				for _, index := range tt.index {
					if !strings.Contains(p, index) {
						t.Errorf("the plan does not use %s:\n%s", index, p)
					}
				}
				if tt.anyOf != nil && !slices.ContainsFunc(tt.anyOf, func(index string) bool { return strings.Contains(p, index) }) {
					t.Errorf("the plan uses none of %v:\n%s", tt.anyOf, p)
				}
				// SQLite says SCAN for a walk of a table or a whole index,
				// PostgreSQL Seq Scan; user_sessions_by_pool holds every
				// session of the pool, ended ones included.
				if strings.Contains(p, "SCAN user_sessions") || strings.Contains(p, "Seq Scan") || strings.Contains(p, "user_sessions_by_pool") {
					t.Errorf("the plan reads the pool's sessions:\n%s", p)
				}
			})
		}

		// The answers are what the filters say (the query shape changed).
		got := func(f vdibroker.SessionFilter) int {
			t.Helper()
			f.HostPool = "big"
			l, err := s.ListUserSessions(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i < len(l); i++ {
				if l[i-1].ID >= l[i].ID {
					t.Fatalf("%+v: not in id order: %s before %s", f, l[i-1].ID, l[i].ID)
				}
			}
			return len(l)
		}
		for _, c := range []struct {
			f    vdibroker.SessionFilter
			want int
		}{
			{vdibroker.SessionFilter{User: "user0007"}, 1},
			{vdibroker.SessionFilter{User: "user0007", State: vdibroker.StateActive}, 0},
			{vdibroker.SessionFilter{User: "user0007", State: vdibroker.StateLoggedOff}, 40},                        // 20,000 / 500
			{vdibroker.SessionFilter{User: "user0007", State: vdibroker.StateLoggedOff, Limit: 7}, 7},               // paged
			{vdibroker.SessionFilter{SessionHost: "host01", State: vdibroker.StateLoggedOff}, 5000},                 // 20,000 / 4
			{vdibroker.SessionFilter{SessionHost: "host01"}, 10},                                                    // 40 / 4
			{vdibroker.SessionFilter{User: "user0007", SessionHost: "host03"}, 1},                                   // user 7 is on host 7 mod 4
			{vdibroker.SessionFilter{User: "user0007", SessionHost: "host02"}, 0},                                   // not there
			{vdibroker.SessionFilter{User: "user0007", State: vdibroker.StateLoggedOff, SessionHost: "host03"}, 40}, // 7 mod 4 = 3 = 7 + 500k mod 4
			{vdibroker.SessionFilter{}, 40},                                                                         // the pool's open sessions
			{vdibroker.SessionFilter{Limit: 15}, 15},                                                                // paged
			{vdibroker.SessionFilter{State: vdibroker.StatePending}, 40},                                            // all still Pending
		} {
			if n := got(c.f); n != c.want {
				t.Errorf("%+v: %d sessions, want %d", c.f, n, c.want)
			}
		}
	})
}

// TestCountOpenSessions: /metrics counts every pool's open sessions by
// state on each scrape; with 250,000 open sessions and a week of history it
// must not read them one by one nor walk the history: the hosts'
// counts and the small index of Disconnected sessions.
func TestCountOpenSessions(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		got, err := s.CountOpenSessions(ctx)
		if err != nil || len(got) != 0 {
			t.Fatalf("empty store: %v, %v; want no pools", got, err)
		}
		mustPool(t, s, pool("pa", vdibroker.Pooled))
		mustPool(t, s, pool("pb", vdibroker.Pooled))
		mustPool(t, s, pool("idle", vdibroker.Pooled))
		mustHost(t, s, "pa", "host00")
		mustHost(t, s, "pb", "host00")
		for i := range 5 {
			mustCommit(t, s, placement("pa", "host00", fmt.Sprintf("user%04d", i), vdibroker.NoSessionLimit))
		}
		mustCommit(t, s, placement("pb", "host00", "alice", vdibroker.NoSessionLimit))
		// pa's agent: user0000 and user0001 logged on, user0002 then
		// disconnected; user0003 and user0004 still Pending.
		if _, err := s.ApplyHeartbeat(ctx, "pa", "host00", &vdibroker.HeartbeatRequest{Sessions: []vdibroker.AgentSession{
			{ID: "1", User: "user0000", State: vdibroker.StateActive},
			{ID: "2", User: "user0001", State: vdibroker.StateActive},
			{ID: "3", User: "user0002", State: vdibroker.StateDisconnected},
		}}, t0.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		if err := s.AddHistory(ctx, "pa", 1, 50, 20000); err != nil {
			t.Fatal(err)
		}
		got, err = s.CountOpenSessions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]vdibroker.OpenSessionCounts{
			"pa": {Pending: 2, Active: 2, Disconnected: 1},
			"pb": {Pending: 1},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("open session counts (-want +got):\n%s", diff)
		}
		p, err := s.OpenCountsPlan(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("plan:\n%s", p)
		// host_counts is read whole (one row a host); of user_sessions,
		// only the partial index of Disconnected sessions.
		if !strings.Contains(p, "user_sessions_disconnected") || strings.Contains(p, "Seq Scan on user_sessions") ||
			strings.Contains(p, "user_sessions_open_by_host_covering") || strings.Contains(p, "user_sessions_by_pool") ||
			regexp.MustCompile(`SCAN user_sessions($|\n)`).MatchString(p) {
			t.Errorf("the counts read more of user_sessions than its Disconnected sessions:\n%s", p)
		}
	})
}

// TestUserSearch: ?userPrefix= finds the users whose name starts with the
// prefix in any case (the database's lower(): ASCII on SQLite), listed by
// the folded name then id, and pages through them with the last row's id
// as the cursor, each session once; open and ended sessions apart; the
// other filters still apply.
func TestUserSearch(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("p", vdibroker.Pooled))
		mustPool(t, s, pool("other", vdibroker.Pooled))
		mustHost(t, s, "p", "h1")
		mustHost(t, s, "p", "h2")
		mustHost(t, s, "other", "h1")
		for i, u := range []string{"Alice", "alice2", "ALIX", "al_x", "bob", "Alfred", "xal"} {
			mustCommit(t, s, placement("p", fmt.Sprintf("h%d", i%2+1), u, vdibroker.NoSessionLimit))
		}
		mustCommit(t, s, placement("other", "h1", "alien", vdibroker.NoSessionLimit))
		ended := mustCommit(t, s, placement("p", "h1", "Alma", vdibroker.NoSessionLimit))
		if err := s.EndSession(ctx, "p", ended, vdibroker.EndNotReported, t0); err != nil {
			t.Fatal(err)
		}
		search := func(f vdibroker.SessionFilter) []string {
			t.Helper()
			f.HostPool = "p"
			l, err := s.ListUserSessions(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			var users []string
			for _, u := range l {
				users = append(users, u.User)
			}
			return users
		}
		// Folded: al_x (0x5f) < alfred < alice < alice2 < alix, byte order.
		want := []string{"al_x", "Alfred", "Alice", "alice2", "ALIX"}
		for _, prefix := range []string{"al", "AL", "aL"} {
			if diff := cmp.Diff(want, search(vdibroker.SessionFilter{UserPrefix: prefix})); diff != "" {
				t.Errorf("prefix %q (-want +got):\n%s", prefix, diff)
			}
		}
		// Pages of 2: the cursor is the last row's id, as the API's nextLink.
		var paged []string
		f := vdibroker.SessionFilter{HostPool: "p", UserPrefix: "AL", Limit: 2}
		for range 10 {
			l, err := s.ListUserSessions(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range l {
				paged = append(paged, u.User)
			}
			if len(l) < 2 {
				break
			}
			f.After = l[len(l)-1].ID
		}
		if diff := cmp.Diff(want, paged); diff != "" {
			t.Errorf("paged by 2 (-want +got):\n%s", diff)
		}
		for _, c := range []struct {
			f    vdibroker.SessionFilter
			want []string
		}{
			{vdibroker.SessionFilter{UserPrefix: "alic"}, []string{"Alice", "alice2"}},
			{vdibroker.SessionFilter{UserPrefix: "ALICE2"}, []string{"alice2"}},
			{vdibroker.SessionFilter{UserPrefix: "al", SessionHost: "h2"}, []string{"al_x", "Alfred", "alice2"}}, // every other user on h2
			{vdibroker.SessionFilter{UserPrefix: "al", State: vdibroker.StateLoggedOff}, []string{"Alma"}},
			{vdibroker.SessionFilter{UserPrefix: "z"}, nil},
			{vdibroker.SessionFilter{UserPrefix: "al", After: "no-such-session"}, nil},
		} {
			if diff := cmp.Diff(c.want, search(c.f)); diff != "" {
				t.Errorf("%+v (-want +got):\n%s", c.f, diff)
			}
		}
	})
}

// TestPrefixEnd: the least string past every string with a prefix, in
// byte order, which a search's range ends before.
func TestPrefixEnd(t *testing.T) {
	for p, want := range map[string]string{
		"al":                     "am",
		"a":                      "b",
		"a\U0010FFFF":            "b",
		"\U0010FFFF":             "",
		"x\uD7FF":                "x\uE000",
		"jö":                     "j÷",
		"":                       "",
		"al\U0010FFFF\U0010FFFF": "am",
	} {
		if got := store.PrefixEnd(p); got != want {
			t.Errorf("prefixEnd(%q) = %q, want %q", p, got, want)
		}
	}
}
