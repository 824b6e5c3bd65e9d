package store

import (
	"strings"
	"testing"
)

// TestExpirePendingUsesPendingIndex: the maintenance loop runs
// ExpirePending (R-S3) every few seconds; it must read only the expired
// range of each pool in the partial index of Pending sessions (migration
// 00005), not every open or every Pending session.
func TestExpirePendingUsesPendingIndex(t *testing.T) {
	s, err := OpenWith(t.Context(), "", t.TempDir(), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	plan, err := s.ExpirePendingPlan(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("plan:\n%s", strings.Join(plan, "\n"))
	p := strings.Join(plan, "\n")
	if !strings.Contains(p, "INDEX user_sessions_pending_by_time (host_pool=? AND state_time<?)") || strings.Contains(p, "SCAN u") {
		t.Errorf("ExpirePending does not read only the expired range of user_sessions_pending_by_time:\n%s", p)
	}
}

// TestOpenSessionsUsesCoveringIndex: every heartbeat reads its host's open
// sessions (R-S2); that read must stay within one index, unsorted.
func TestOpenSessionsUsesCoveringIndex(t *testing.T) {
	s, err := OpenWith(t.Context(), "", t.TempDir(), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	plan, err := s.OpenSessionsPlan(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	p := strings.Join(plan, "\n")
	t.Logf("plan:\n%s", p)
	if !strings.Contains(p, "COVERING INDEX user_sessions_open_by_host_covering") || strings.Contains(p, "TEMP B-TREE") {
		t.Errorf("reconcile's read of open sessions is not one covering index range:\n%s", p)
	}
}

// TestOpenUserSessionsUsesIndex: every pooled connect counts the user's
// open sessions in the pool (R-C6, adopted sessions included). Without an
// index on (host_pool, user_name) that reads every session of the pool, and
// durable connects slow down as the pool fills (it once cost 8x).
func TestOpenUserSessionsUsesIndex(t *testing.T) {
	s, err := OpenWith(t.Context(), "", t.TempDir(), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	plan, err := s.OpenUserSessionsPlan(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	p := strings.Join(plan, "\n")
	t.Logf("plan:\n%s", p)
	for _, index := range []string{"user_sessions_one_per_pooled_user", "user_sessions_open_unpooled_by_user"} {
		if !strings.Contains(p, "INDEX "+index+" (host_pool=? AND user_name=?)") {
			t.Errorf("the R-C6 question does not read %s by (host_pool, user_name):\n%s", index, p)
		}
	}
	if strings.Contains(p, "SCAN user_sessions") {
		t.Errorf("the R-C6 question scans:\n%s", p)
	}
}

// TestTakeSlotUsesIndexes: the conditional UPDATE every connect runs (R-C4,
// R-C2, R-C6 in one statement) finds the host by its key and answers R-C6
// from the two partial indexes by user, whatever the pool's size.
func TestTakeSlotUsesIndexes(t *testing.T) {
	s, err := OpenWith(t.Context(), "", t.TempDir(), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	plan, err := s.TakeSlotPlan(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	p := strings.Join(plan, "\n")
	t.Logf("plan:\n%s", p)
	for _, index := range []string{"user_sessions_one_per_pooled_user", "user_sessions_open_unpooled_by_user"} {
		if !strings.Contains(p, "INDEX "+index+" (host_pool=? AND user_name=?)") {
			t.Errorf("the slot UPDATE does not read %s by (host_pool, user_name):\n%s", index, p)
		}
	}
	if !strings.Contains(p, "session_hosts USING INDEX sqlite_autoindex_session_hosts_2 (host_pool=? AND name=?)") ||
		strings.Contains(p, "SCAN session_hosts") || strings.Contains(p, "SCAN user_sessions") {
		t.Errorf("the slot UPDATE does not find its host by key, or scans:\n%s", p)
	}
}
