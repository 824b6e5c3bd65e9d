package store_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// TestHostCountsMigrationKeepsCounts: migration 00007 moves every host's
// R-S1 counts from its row into host_counts. A store with open sessions,
// taken back to 00006 (whose Down puts the counts back on the host rows)
// and opened again, must count exactly what it did before, and go on
// counting. One session is Active, so sessions and connecting differ.
func TestHostCountsMigrationKeepsCounts(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		s := tg.open(t, store.Options{})
		mustPool(t, s, pool("p", vdibroker.Pooled))
		mustHost(t, s, "p", "h1")
		mustHost(t, s, "p", "h2")
		mustCommit(t, s, placement("p", "h1", "alice", 10))
		mustCommit(t, s, placement("p", "h1", "bob", 10))
		mustCommit(t, s, placement("p", "h2", "carol", 10))
		// R-S1: alice logs on, so h1 counts 2 sessions, 1 connecting.
		if _, err := s.ApplyHeartbeat(t.Context(), "p", "h1", &vdibroker.HeartbeatRequest{Sessions: []vdibroker.AgentSession{
			{ID: "s1", User: "alice", State: vdibroker.StateActive},
		}}, t0.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		drain(t, s, "p", "h2")
		wantCounts(t, s, "p", "h1", 2, 1)
		if err := s.MigrateDownTo(t.Context(), 6); err != nil {
			t.Fatal(err)
		}
		s.Close()

		s = tg.open(t, store.Options{})
		wantCounts(t, s, "p", "h1", 2, 1)
		wantCounts(t, s, "p", "h2", 1, 1)
		mustCommit(t, s, placement("p", "h1", "dave", 10))
		wantCounts(t, s, "p", "h1", 3, 2)
		// h2's drain mode came through the migration too (R-C2).
		if err := s.CommitPlacement(t.Context(), placement("p", "h2", "erin", 10)); !errors.Is(err, vdibroker.ErrHostFull) {
			t.Errorf("a connect on the drained h2 after the migration: %v, want ErrHostFull", err)
		}
		bad, err := s.CheckCounts(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(bad) > 0 {
			t.Errorf("counts differ from the sessions after the migration: %v", bad)
		}
	})
}

func drain(t testing.TB, s *store.DB, pool, host string) {
	t.Helper()
	setAllowNew(t, s, pool, host, false)
}

func setAllowNew(t testing.TB, s *store.DB, pool, host string, allow bool) {
	t.Helper()
	if _, err := s.UpdateSessionHost(t.Context(), pool, host, func(h *vdibroker.SessionHost) error {
		h.AllowNewSession = allow
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestDrainModeReachesTheSlotUpdate_RC2: the connect's slot UPDATE checks
// drain mode on the host's counts row (a copy of allowNewSession), so every
// way of setting allowNewSession must reach that copy: a host created
// drained, one replaced drained, one drained and undrained by update, and a
// new host whose counts row an older version left behind.
func TestDrainModeReachesTheSlotUpdate_RC2(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("p", vdibroker.Pooled))
		put := func(name string, allow bool) {
			t.Helper()
			h := &vdibroker.SessionHost{HostPool: "p", Name: name, Address: name + ":3389", Protocols: []string{"RDP"},
				StandardFeatures: true, AllowNewSession: allow, CreateTime: t0}
			if _, err := s.PutSessionHost(ctx, h); err != nil {
				t.Fatal(err)
			}
		}
		refused := func(host, user string) {
			t.Helper()
			if err := s.CommitPlacement(ctx, placement("p", host, user, 10)); !errors.Is(err, vdibroker.ErrHostFull) {
				t.Errorf("connect of %s on drained %s: %v, want ErrHostFull", user, host, err)
			}
			wantCounts(t, s, "p", host, 0, 0)
		}
		put("created-drained", false)
		refused("created-drained", "u1")
		put("replaced", true)
		put("replaced", false)
		refused("replaced", "u2")
		mustHost(t, s, "p", "updated")
		drain(t, s, "p", "updated")
		refused("updated", "u3")
		setAllowNew(t, s, "p", "updated", true)
		mustCommit(t, s, placement("p", "updated", "u4", 10))

		// A counts row left by an older version's pool delete: the new
		// host starts from zero, not drained.
		if err := s.ExecRaw(ctx, `INSERT INTO host_counts (host_pool, name, sessions, connecting_sessions, new_sessions_allowed)
			VALUES ('p', 'orphan', 5, 2, FALSE)`); err != nil {
			t.Fatal(err)
		}
		mustHost(t, s, "p", "orphan")
		wantCounts(t, s, "p", "orphan", 0, 0)
		mustCommit(t, s, placement("p", "orphan", "u5", 10))
		wantCounts(t, s, "p", "orphan", 1, 1)
	})
}

// TestConnectWaitingForDrainIsRefused_RC2 (PostgreSQL): a connect whose
// conditional increment waits for a drain's lock on the host must, once
// the drain commits, be checked against the drained host and refused. The
// drain answered with counts that did not include it.
func TestConnectWaitingForDrainIsRefused_RC2(t *testing.T) {
	s := postgresOpener(t)(t, store.Options{})
	ctx := t.Context()
	mustPool(t, s, pool("p", vdibroker.Pooled))
	mustHost(t, s, "p", "h1")

	locked, release := make(chan struct{}), make(chan struct{})
	var lockedOnce sync.Once
	drained := make(chan error, 1)
	go func() {
		_, err := s.UpdateSessionHost(context.WithoutCancel(ctx), "p", "h1", func(h *vdibroker.SessionHost) error {
			// The host's lock is held from here to the commit.
			lockedOnce.Do(func() { close(locked) })
			<-release
			h.AllowNewSession = false
			return nil
		})
		drained <- err
	}()
	<-locked
	placed := make(chan error, 1)
	go func() { placed <- s.CommitPlacement(context.WithoutCancel(ctx), placement("p", "h1", "alice", 10)) }()
	// Wait until the connect waits for the drain's lock (this test's
	// connections only: the DSN names them after the test's schema).
	for deadline := time.Now().Add(10 * time.Second); ; {
		n, err := s.QueryInt(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = current_setting('application_name')
			AND wait_event_type = 'Lock' AND query LIKE '%UPDATE host_counts SET sessions = sessions +%'`)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			close(release)
			t.Fatal("the connect never waited for the drain's lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	if err := <-drained; err != nil {
		t.Fatal(err)
	}
	if err := <-placed; !errors.Is(err, vdibroker.ErrHostFull) {
		t.Errorf("the connect that waited for the drain: %v, want ErrHostFull (refused on the drained host)", err)
	}
	wantCounts(t, s, "p", "h1", 0, 0)
}

// TestHostReadsUseKeys_PostgreSQL: every read of a host with its counts,
// and the connect's conditional increment, find their rows by key in both
// tables; a scan would read every host of every pool on each heartbeat.
func TestHostReadsUseKeys_PostgreSQL(t *testing.T) {
	s := postgresOpener(t)(t, store.Options{})
	plans, err := s.PostgresHostReadPlans(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range plans {
		t.Logf("%s:\n%s", name, p)
		if strings.Contains(p, "Seq Scan on host_counts") || strings.Contains(p, "Seq Scan on session_hosts") ||
			strings.Contains(p, "Seq Scan on user_sessions") || strings.Contains(p, "Seq Scan on commands") {
			t.Errorf("%s scans a table:\n%s", name, p)
		}
	}
}

// TestBatchReadsUseKeys_PostgreSQL: a batch's heartbeats read their hosts,
// their open sessions and their commands one statement per pool (readAhead,
// deliverBatch), and a heartbeat's logons are one statement (tx.logons),
// each session found by key. In a pool of thousands of hosts with open sessions and
// history, PostgreSQL must look up each host of the list in the index, not
// read the whole pool's range and filter it: that would read every session
// of the pool on each batch.
func TestBatchReadsUseKeys_PostgreSQL(t *testing.T) {
	s := postgresOpener(t)(t, store.Options{})
	mustPool(t, s, pool("big", vdibroker.Pooled))
	mustHost(t, s, "big", "h0")
	mustCommit(t, s, placement("big", "h0", "u0", 100))
	for _, q := range []string{
		// 1,000 hosts like h0, 20 open sessions and 30 ended ones each,
		// without the connections' 30 s statement timeout (a backstop for
		// the broker's own statements): beside a full test run on two
		// cores, 50,000 rows and their indexes took longer once.
		`BEGIN; SET LOCAL statement_timeout = '10min';
		INSERT INTO session_hosts SELECT (jsonb_populate_record(NULL::session_hosts, to_jsonb(h) ||
			jsonb_build_object('name', 'h' || g, 'credential_hash', 'c' || g))).*
			FROM session_hosts h, generate_series(1, 1000) g;
		INSERT INTO host_counts SELECT (jsonb_populate_record(NULL::host_counts, to_jsonb(c) ||
			jsonb_build_object('name', 'h' || g))).* FROM host_counts c, generate_series(1, 1000) g;
		INSERT INTO user_sessions SELECT (jsonb_populate_record(NULL::user_sessions, to_jsonb(u) ||
			jsonb_build_object('id', 's' || g || '-' || k, 'session_host', 'h' || g, 'user_name', 'u' || g || '-' || k, 'user_key', 'u' || g || '-' || k,
				'state', CASE WHEN k <= 20 THEN 'Active' ELSE 'LoggedOff' END, 'ended', k > 20))).*
			FROM user_sessions u, generate_series(1, 1000) g, generate_series(1, 50) k;
		-- 10 finished commands a host.
		INSERT INTO commands (id, host_pool, session_host, type, session_id, agent_session_id, user_name, message, state, result, create_time)
			SELECT 'c' || g || '-' || k, 'big', 'h' || g, 'Logoff', '', '', 'u', '', 'Succeeded', '', k FROM generate_series(1, 1000) g, generate_series(1, 10) k;
		COMMIT`,
		// The tables by name: a bare ANALYZE takes every table of the
		// database, other tests' throwaway schemas included, and deadlocked
		// with one being dropped beside it.
		`ANALYZE host_pools, session_hosts, host_counts, user_sessions, commands`,
	} {
		if err := s.ExecRaw(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	plans, err := s.PostgresBatchReadPlans(t.Context(), "big", "h1", "h2", "h3")
	if err != nil {
		t.Fatal(err)
	}
	for name, key := range map[string]string{"beats' hosts": "name = ANY", "beats' open sessions": "session_host = ANY", "beats' commands": "session_host = ANY",
		"beats' rows": "name = (v.name)", "beats' logons": "id = (v.id)"} {
		p := plans[name]
		t.Logf("%s:\n%s", name, p)
		if !regexp.MustCompile(`Index Cond: \(.*` + regexp.QuoteMeta(key)).MatchString(p) {
			t.Errorf("%s does not look its hosts up in an index (%s as an index condition):\n%s", name, key, p)
		}
	}
	// The open sessions come from the covering index alone: a condition
	// on a column it lacks (ended, 00060) would read each row's heap tuple.
	if p := plans["beats' open sessions"]; !strings.Contains(p, "Index Only Scan using user_sessions_open_by_host_covering") {
		t.Errorf("the beats' open sessions are not an index-only scan of user_sessions_open_by_host_covering:\n%s", p)
	}
}
