package store_test

import (
	"testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// TestFailedConcurrentIndexBuildIsRebuilt (PostgreSQL): migrations 00004 to
// 00006 build their indexes CONCURRENTLY, and a build that fails leaves an
// INVALID index of that name, which CREATE INDEX IF NOT EXISTS would keep
// for ever, unused. Here migration 00006 "failed" that way (the store
// migrated back to 00005, then an invalid index session_hosts_assigned);
// the next open runs 00006 and 00007 again, and at last 00076 replaces
// it with session_hosts_assigned_hash, which the R-PE1 check uses: valid.
func TestFailedConcurrentIndexBuildIsRebuilt(t *testing.T) {
	open := postgresOpener(t)
	s := open(t, store.Options{})
	mustPool(t, s, pool("pers", vdibroker.Personal))
	mustHost(t, s, "pers", "pd1")
	mustHost(t, s, "pers", "pd2")
	ctx := t.Context()
	if err := s.MigrateDownTo(ctx, 5); err != nil {
		t.Fatal(err)
	}
	// A unique build over two rows of one pool fails and leaves the index
	// INVALID, as an interrupted build of 00006 would.
	if err := s.ExecRaw(ctx, `CREATE UNIQUE INDEX CONCURRENTLY session_hosts_assigned ON session_hosts (host_pool)`); err == nil {
		t.Fatal("the failing build succeeded")
	}
	if valid, _ := indexValid(t, s); valid {
		t.Fatal("setup: the index is not INVALID")
	}
	s.Close()

	s = open(t, store.Options{})
	valid, unique, err := s.IndexState(ctx, "session_hosts_assigned_hash")
	if err != nil || !valid || unique {
		t.Errorf("after the migrations ran again: session_hosts_assigned_hash valid=%v unique=%v (%v), want a valid, non-unique index", valid, unique, err)
	}
	if _, _, err := s.IndexState(ctx, "session_hosts_assigned"); err == nil {
		t.Error("the B-tree session_hosts_assigned is still there after 00076")
	}
	mustCommit(t, s, assignment("pers", "pd1", "alice"))
	if err := s.CommitPlacement(ctx, assignment("pers", "pd2", "alice")); err == nil {
		t.Error("alice was assigned a second host")
	}
}

func indexValid(t *testing.T, s *store.DB) (valid, unique bool) {
	t.Helper()
	valid, unique, err := s.IndexState(t.Context(), "session_hosts_assigned")
	if err != nil {
		t.Fatal(err)
	}
	return valid, unique
}

// TestFailedHistoryIndexBuildIsRebuilt (PostgreSQL): migration 00008 builds
// user_sessions_ended_by_user, user_sessions_ended_by_host and
// user_sessions_disconnected CONCURRENTLY; a failed build of any leaves an
// INVALID index that the next start must drop and build again, or
// ?user=&state=LoggedOff listings walk the pool's history again.
func TestFailedHistoryIndexBuildIsRebuilt(t *testing.T) {
	open := postgresOpener(t)
	s := open(t, store.Options{})
	mustPool(t, s, pool("hist", vdibroker.Pooled))
	ctx := t.Context()
	if err := s.AddHistory(ctx, "hist", 2, 2, 10); err != nil {
		t.Fatal(err)
	}
	if err := s.MigrateDownTo(ctx, 7); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"user_sessions_ended_by_user", "user_sessions_ended_by_host", "user_sessions_disconnected"} {
		if err := s.ExecRaw(ctx, `CREATE UNIQUE INDEX CONCURRENTLY `+name+` ON user_sessions (host_pool)`); err == nil {
			t.Fatalf("the failing build of %s succeeded", name)
		}
	}
	s.Close()

	s = open(t, store.Options{})
	for _, name := range []string{"user_sessions_ended_by_user", "user_sessions_ended_by_host", "user_sessions_disconnected"} {
		valid, unique, err := s.IndexState(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if !valid || unique {
			t.Errorf("after the migration ran again: %s valid=%v unique=%v, want a valid, non-unique index", name, valid, unique)
		}
	}
}
