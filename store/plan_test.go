package store

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
)

// planOf opens an empty SQLite store and returns SQLite's EXPLAIN QUERY
// PLAN, one detail a line, of the query that get explains.
func planOf(t *testing.T, get func(*DB, context.Context) ([]string, error)) string {
	t.Helper()
	s, err := OpenWith(t.Context(), "", t.TempDir(), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	plan, err := get(s, t.Context())
	if err != nil {
		t.Fatal(err)
	}
	p := strings.Join(plan, "\n")
	t.Logf("plan:\n%s", p)
	return p
}

// byUserIndexes are the partial indexes that answer R-C6 (pooled and
// unpooled open sessions by pool and user, migrations 00001 and 00004, on
// the user's key since 00030, R-E5), each half with the indexes that do it
// as well: the unpooled half may be read in the user search's index of
// every open session (00046), which seeks the same (host_pool, user_key),
// or in the index of a user's open sessions in every pool (00050, R-U3),
// which seeks (user_key, host_pool).
var byUserIndexes = [][]string{{"user_sessions_one_per_pooled_user"},
	{"user_sessions_open_unpooled_by_user", "user_sessions_open_by_user_key", "user_sessions_open_by_user"}}

// wantByUser checks that plan p reads each half of byUserIndexes by
// (host_pool, user_key); what names the statement in the error.
func wantByUser(t *testing.T, p, what string) {
	t.Helper()
	for _, half := range byUserIndexes {
		if !slices.ContainsFunc(half, func(index string) bool {
			return strings.Contains(p, "INDEX "+index+" (host_pool=? AND user_key=?)") ||
				strings.Contains(p, "INDEX "+index+" (user_key=? AND host_pool=?)")
		}) {
			t.Errorf("%s does not read any of %v by (host_pool, user_key):\n%s", what, half, p)
		}
	}
}

// TestExpirePendingUsesPendingIndex: the maintenance loop runs
// ExpirePending (R-S3) every few seconds; it must read only the expired
// range of each pool in the partial index of Pending sessions (migration
// 00005), not every open or every Pending session.
func TestExpirePendingUsesPendingIndex(t *testing.T) {
	p := planOf(t, (*DB).ExpirePendingPlan)
	if !strings.Contains(p, "INDEX user_sessions_pending_by_time (host_pool=? AND state_time<?)") || strings.Contains(p, "SCAN u") {
		t.Errorf("ExpirePending does not read only the expired range of user_sessions_pending_by_time:\n%s", p)
	}
}

// TestOpenSessionsUsesCoveringIndex: every heartbeat reads its host's open
// sessions (R-S2); that read must stay within one index, unsorted.
func TestOpenSessionsUsesCoveringIndex(t *testing.T) {
	p := planOf(t, (*DB).OpenSessionsPlan)
	if !strings.Contains(p, "COVERING INDEX user_sessions_open_by_host_covering") || strings.Contains(p, "TEMP B-TREE") {
		t.Errorf("reconcile's read of open sessions is not one covering index range:\n%s", p)
	}
}

// TestRecentAdoptionsUsesIndex: a heartbeat reporting a session the broker
// does not know counts its host's adoptions of the last hour (R-S2), by
// adopt_time (00079); it must read only that range of the host's entries
// in the partial index of adopted sessions, not the host's history.
func TestRecentAdoptionsUsesIndex(t *testing.T) {
	p := planOf(t, (*DB).RecentAdoptionsPlan)
	if !strings.Contains(p, "INDEX user_sessions_adopted_by_host_time (host_pool=? AND session_host=? AND adopt_time>?)") {
		t.Errorf("the adoption budget's count does not read only the window's range of user_sessions_adopted_by_host_time:\n%s", p)
	}
}

// TestOpenUserSessionsUsesIndex: a refused connect asks whether the user
// has an open session in the pool (R-C6, adopted sessions included).
// Without an index on (host_pool, user_name) that reads every session of
// the pool (it once cost 8x on every connect).
func TestOpenUserSessionsUsesIndex(t *testing.T) {
	p := planOf(t, (*DB).OpenUserSessionsPlan)
	wantByUser(t, p, "the R-C6 question")
	if strings.Contains(p, "SCAN user_sessions") {
		t.Errorf("the R-C6 question scans:\n%s", p)
	}
}

// TestLoggedOffUsesIndex (R-S4, R-S5): a session a heartbeat no longer
// reports asks whether its agent was given a logoff; that is a range of
// commands_by_session (migration 00045), not a walk of every command.
func TestLoggedOffUsesIndex(t *testing.T) {
	p := planOf(t, (*DB).LoggedOffPlan)
	if !strings.Contains(p, "COVERING INDEX commands_by_session (session_id=? AND type=? AND state=?)") || strings.Contains(p, "SCAN") {
		t.Errorf("the logoff question does not read commands_by_session:\n%s", p)
	}
}

// TestTakeSlotUsesIndexes: the conditional UPDATE every connect runs (R-C4,
// R-C2, R-C6 in one statement) finds the host's counts by key and answers
// R-C6 from the two partial indexes by user, whatever the pool's size.
func TestTakeSlotUsesIndexes(t *testing.T) {
	p := planOf(t, (*DB).TakeSlotPlan)
	wantByUser(t, p, "the slot UPDATE")
	if !strings.Contains(p, "SEARCH host_counts USING PRIMARY KEY (host_pool=? AND name=?)") ||
		strings.Contains(p, "SCAN host_counts") || strings.Contains(p, "SCAN user_sessions") {
		t.Errorf("the slot UPDATE does not find its host by key, or scans:\n%s", p)
	}
}

// TestAssignUsesIndexes: a new automatic assignment (R-PE1) finds its host
// by key and asks whether the user already has one from the partial index
// of assigned hosts (migration 00006), not by reading every host of a
// personal pool of thousands.
func TestAssignUsesIndexes(t *testing.T) {
	p := planOf(t, (*DB).AssignPlan)
	if !strings.Contains(p, "session_hosts USING INDEX sqlite_autoindex_session_hosts_2 (host_pool=? AND name=?)") ||
		!strings.Contains(p, "INDEX session_hosts_assigned (host_pool=? AND assigned_users=?)") || strings.Contains(p, "SCAN") {
		t.Errorf("the assignment does not read by key and session_hosts_assigned:\n%s", p)
	}
}

// TestBatchReadsUseIndexes (R-S2, R-S4): a batch's heartbeats read their hosts and
// their open sessions, write their rows and get their commands in one
// statement each (readAhead, flushBeats, deliverBatch); each host must stay one range of an index, whatever the
// number of hosts, sessions and commands.
func TestBatchReadsUseIndexes(t *testing.T) {
	for name, c := range map[string]struct {
		get  func(*DB, context.Context) ([]string, error)
		want []string
	}{
		"hosts":         {(*DB).BeatHostsPlan, []string{"SEARCH session_hosts USING INDEX sqlite_autoindex_session_hosts_2 (host_pool=? AND name=?)", "SEARCH host_counts USING PRIMARY KEY (host_pool=? AND name=?)"}},
		"open sessions": {(*DB).BeatSessionsPlan, []string{"SEARCH user_sessions USING COVERING INDEX user_sessions_open_by_host_covering (host_pool=? AND session_host=?)"}},
		"rows":          {(*DB).BeatsUpdatePlan, []string{"SEARCH session_hosts USING COVERING INDEX sqlite_autoindex_session_hosts_2 (host_pool=? AND name=?)"}},
		"logons":        {(*DB).LogonsPlan, []string{"SEARCH user_sessions USING INDEX sqlite_autoindex_user_sessions_1 (id=?)"}},
		"commands":      {(*DB).DeliverPlan, []string{"SEARCH commands USING COVERING INDEX commands_by_host (host_pool=? AND session_host=? AND state=?)"}},
	} {
		t.Run(name, func(t *testing.T) {
			p := planOf(t, c.get)
			for _, w := range c.want {
				if !strings.Contains(p, w) {
					t.Errorf("the plan does not read %s:\n%s", w, p)
				}
			}
			for _, table := range []string{"session_hosts", "host_counts", "user_sessions", "commands"} {
				if strings.Contains(p, "SCAN "+table) {
					t.Errorf("the plan scans %s:\n%s", table, p)
				}
			}
		})
	}
}

// TestAuditByRequestUsesIndex (R-U7): a helpdesk given the reference a
// portal user reads out asks for the entries of that request id, one or
// two among the month of entries a pod keeps (each portal sign-in and
// launch is one): they are a range of audit_log_by_request (migration
// 00069), not a walk of the whole trail, whatever else the listing asks
// (the newest first, a page after an entry, a scoped Contributor's pools).
func TestAuditByRequestUsesIndex(t *testing.T) {
	for _, f := range []vdibroker.AuditFilter{
		{RequestID: "eb8550fc8fe40ca4", Limit: 101},
		{RequestID: "eb8550fc8fe40ca4", Newest: true, Limit: 51},
		{RequestID: "eb8550fc8fe40ca4", Newest: true, After: 1000, Limit: 51, HostPools: []string{"pool-a"}},
		{RequestID: "eb8550fc8fe40ca4", Action: "portal.launch", Since: time.Unix(1, 0), Limit: 101},
	} {
		p := planOf(t, func(s *DB, ctx context.Context) ([]string, error) {
			q, args := listAuditQuery(s.d, f)
			return s.plan(ctx, q, args...)
		})
		if !strings.Contains(p, "INDEX audit_log_by_request (request_id=?") || strings.Contains(p, "SCAN") {
			t.Errorf("%+v: the entries of a request id are not a range of audit_log_by_request:\n%s", f, p)
		}
	}
}

// TestAuditByPrincipalUsesIndexes (R-E5): `audit list --principal`
// (?principal=) asks for one principal's entries among the month of them
// a pod keeps: a token id or OIDC subject exactly, or a token's subject
// in any ASCII case. Each is a range of an index of migration 00070,
// audit_log_by_principal_id or audit_log_by_principal_name (on
// lower(principal_name)), read in seq order up to the page, not a walk of
// the whole trail, whatever else the listing asks.
func TestAuditByPrincipalUsesIndexes(t *testing.T) {
	for _, f := range auditByPrincipalFilters {
		p := planOf(t, func(s *DB, ctx context.Context) ([]string, error) {
			q, args := listAuditQuery(s.d, f)
			return s.plan(ctx, q, args...)
		})
		if !strings.Contains(p, "INDEX audit_log_by_principal_id (principal_id=?") ||
			!strings.Contains(p, "INDEX audit_log_by_principal_name (<expr>=?") ||
			strings.Contains(p, "SCAN audit_log") {
			t.Errorf("%+v: a principal's entries are not ranges of its indexes:\n%s", f, p)
		}
	}
}

// auditByPrincipalFilters are the listings by principal that the plan
// tests explain: the newest first, a page after an entry, a scoped
// Contributor's pools, another filter beside it, no limit.
var auditByPrincipalFilters = []vdibroker.AuditFilter{
	{Principal: "Carol.Ops@Contoso.com", Limit: 101},
	{Principal: "carol.ops@contoso.com", Newest: true, Limit: 51},
	{Principal: "t-8f2c", Newest: true, After: 1000, Limit: 51, HostPools: []string{"pool-a"}},
	{Principal: "Carol.Ops@Contoso.com", Action: "hostpool.update", Since: time.Unix(1, 0), Limit: 101},
	{Principal: "Carol.Ops@Contoso.com"},
}
