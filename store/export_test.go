package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/vdibroker/vdibroker"
)

// CommitBatch commits cs as one group-commit batch (one transaction; as in
// CommitPlacement, a savepoint for each that is not a simpleCommit), so
// tests can check a batch with mixed outcomes without depending on timing.
func (s *DB) CommitBatch(cs []*vdibroker.PlacementCommit) []error {
	reqs := make([]*commitReq, len(cs))
	for i, c := range cs {
		reqs[i] = placementReq(c, nil, s.now)
		reqs[i].done = make(chan error, 1)
	}
	s.runBatch(testCommitter(), reqs)
	errs := make([]error, len(cs))
	for i, r := range reqs {
		errs[i] = <-r.done
	}
	return errs
}

// CommitBatchWithNonces is CommitBatch with call nonces (nil: none), as
// CommitPlacement records a pod-to-pod connect's (vdibroker.WithCallNonce).
func (s *DB) CommitBatchWithNonces(cs []*vdibroker.PlacementCommit, nonces []*vdibroker.CallNonce) []error {
	reqs := make([]*commitReq, len(cs))
	for i, c := range cs {
		reqs[i] = placementReq(c, nonces[i], s.now)
		reqs[i].done = make(chan error, 1)
	}
	s.runBatch(testCommitter(), reqs)
	errs := make([]error, len(cs))
	for i, r := range reqs {
		errs[i] = <-r.done
		if errs[i] == nil && nonces[i] != nil {
			nonces[i].MarkRecorded()
		}
	}
	return errs
}

// Write is one write of CommitMixedBatch: a heartbeat of Pool/Host
// (Beat set) or a placement.
type Write struct {
	Pool, Host string
	Beat       *vdibroker.HeartbeatRequest
	Placement  *vdibroker.PlacementCommit
}

// CommitMixedBatch commits ws as one group-commit batch, as queued in that
// order, at now; it returns each write's outcome and each heartbeat's
// result (nil for placements).
func (s *DB) CommitMixedBatch(ws []Write, now time.Time) ([]error, []*vdibroker.HeartbeatResult) {
	reqs, res := writeReqs(ws, now)
	s.runBatch(testCommitter(), reqs)
	errs := make([]error, len(ws))
	results := make([]*vdibroker.HeartbeatResult, len(ws))
	for i, r := range reqs {
		if errs[i] = <-r.done; errs[i] == nil && res[i] != nil {
			results[i] = *res[i]
		}
	}
	return errs, results
}

// writeReqs are the group-commit requests of ws at now, and where each
// heartbeat's result will be (nil for placements).
func writeReqs(ws []Write, now time.Time) ([]*commitReq, []**vdibroker.HeartbeatResult) {
	reqs := make([]*commitReq, len(ws))
	res := make([]**vdibroker.HeartbeatResult, len(ws))
	for i, w := range ws {
		if w.Beat != nil {
			reqs[i], res[i] = heartbeatReq(w.Pool, w.Host, w.Beat, now)
		} else {
			reqs[i] = placementReq(w.Placement, nil, time.Now)
		}
		reqs[i].done = make(chan error, 1)
	}
	return reqs, res
}

// Command reads a command's state and result.
func (s *DB) Command(ctx context.Context, id string) (state, result string, err error) {
	err = s.read(ctx, func(t *tx) error {
		return t.row(ctx, `SELECT state, result FROM commands WHERE id = ?`, id).Scan(&state, &result)
	})
	return state, result, err
}

// CheckCounts compares every host's stored counts with its sessions (R-S1)
// and returns a description of each mismatch.
func (s *DB) CheckCounts(ctx context.Context) ([]string, error) {
	var bad []string
	err := s.read(ctx, func(t *tx) error {
		rows, err := t.query(ctx, `SELECT h.host_pool, h.name, h.sessions, h.connecting_sessions,
			(SELECT count(*) FROM user_sessions u WHERE u.host_pool = h.host_pool AND u.session_host = h.name AND NOT u.ended AND u.state <> 'LoggedOff'),
			(SELECT count(*) FROM user_sessions u WHERE u.host_pool = h.host_pool AND u.session_host = h.name AND u.state = 'Pending')
			FROM host_counts h ORDER BY h.host_pool, h.name`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var pool, name string
			var s, c, ws, wc int
			if err := rows.Scan(&pool, &name, &s, &c, &ws, &wc); err != nil {
				return err
			}
			if s != ws || c != wc {
				bad = append(bad, fmt.Sprintf("%s/%s: stored %d/%d, actual %d/%d", pool, name, s, c, ws, wc))
			}
		}
		return rows.Err()
	})
	return bad, err
}

// ExpirePendingPlan returns SQLite's EXPLAIN QUERY PLAN details for the query
// ExpirePending runs.
func (s *DB) ExpirePendingPlan(ctx context.Context) ([]string, error) {
	return s.plan(ctx, expirePendingQuery, int64(0))
}

// OpenSessionsPlan is ExpirePendingPlan for reconcile's read of a host's
// open sessions.
func (s *DB) OpenSessionsPlan(ctx context.Context) ([]string, error) {
	return s.plan(ctx, openSessionsQuery, "pool", "host")
}

// RecentAdoptionsPlan is ExpirePendingPlan for the adoption budget's count
// of a host's recent adoptions (recentAdoptions).
func (s *DB) RecentAdoptionsPlan(ctx context.Context) ([]string, error) {
	return s.plan(ctx, recentAdoptionsQuery, "pool", "host", int64(0))
}

// BeatHostsPlan, BeatSessionsPlan, BeatsUpdatePlan and DeliverPlan are
// ExpirePendingPlan for the batch's reads, writes and deliveries for its
// heartbeats (readAhead, flushBeats, deliverBatch), of two hosts.
func (s *DB) BeatHostsPlan(ctx context.Context) ([]string, error) {
	return s.plan(ctx, beatHostsQuery(s.d, 2), "pool", "h1", "h2", "h1", "h2")
}

func (s *DB) BeatSessionsPlan(ctx context.Context) ([]string, error) {
	return s.plan(ctx, beatSessionsQuery(s.d, 2), "pool", "h1", "h2")
}

func (s *DB) BeatsUpdatePlan(ctx context.Context) ([]string, error) {
	return s.plan(ctx, beatsUpdateQuery(s.d, 2), "pool", "h1", 1, nil, 0, "{}", false, "", "Unknown", "pool", "h2", 1, nil, 0, "{}", false, "", "Unknown")
}

// LogonsPlan is ExpirePendingPlan for a heartbeat's logons (tx.logons),
// two of them.
func (s *DB) LogonsPlan(ctx context.Context) ([]string, error) {
	return s.plan(ctx, logonsQuery(s.d, 2), int64(1), false, "s1", "a1", "Active", "Pending", "s2", "a2", "Active", "Pending")
}

func (s *DB) DeliverPlan(ctx context.Context) ([]string, error) {
	return s.plan(ctx, deliverQuery(s.d, 2), "Delivered", "pool", "h1", "h2", "Queued")
}

// OpenUserSessionsPlan is ExpirePendingPlan for the R-C6 question every
// pooled connect asks.
func (s *DB) OpenUserSessionsPlan(ctx context.Context) ([]string, error) {
	return s.plan(ctx, openUserSessionsQuery, "pool", "user", "pool", "user", false)
}

// LoggedOffPlan is ExpirePendingPlan for a heartbeat's question whether
// a session it ends was logged off by a command (HostReport.LoggedOff).
func (s *DB) LoggedOffPlan(ctx context.Context) ([]string, error) {
	return s.plan(ctx, loggedOffQuery, "s1", vdibroker.CommandLogoff, vdibroker.CommandDelivered, vdibroker.CommandSucceeded)
}

// TakeSlotPlan is ExpirePendingPlan for the conditional UPDATE every
// connect runs.
func (s *DB) TakeSlotPlan(ctx context.Context) ([]string, error) {
	return s.plan(ctx, takeSlotQuery, 1, 1, "pool", "host", 10, 0, 0, true, true, "pool", "user", "pool", "user", false)
}

// AssignPlan is ExpirePendingPlan for a new automatic assignment (R-PE1).
func (s *DB) AssignPlan(ctx context.Context) ([]string, error) {
	return s.plan(ctx, assignQuery, `["alice"]`, "pool", "host", "pool", `["alice"]`)
}

func (s *DB) plan(ctx context.Context, query string, args ...any) ([]string, error) {
	var plan []string
	err := s.read(ctx, func(t *tx) error {
		rows, err := t.c.QueryContext(ctx, `EXPLAIN QUERY PLAN `+query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id, parent, notused int
			var detail string
			if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
				return err
			}
			plan = append(plan, detail)
		}
		return rows.Err()
	})
	return plan, err
}

// ExecRaw runs a statement outside any transaction on the writer's
// connection pool (tests that set up what a failed migration leaves).
func (s *DB) ExecRaw(ctx context.Context, query string) error {
	_, err := s.w.ExecContext(ctx, query)
	return err
}

// MigrateDownTo runs the Down migrations of the store's dialect until
// version is the latest applied (tests of upgrades and failed migrations).
func (s *DB) MigrateDownTo(ctx context.Context, version int64) error {
	d, dir := goose.DialectSQLite3, "migrations/sqlite"
	if s.d == postgresDialect {
		d, dir = goose.DialectPostgres, "migrations/postgres"
	}
	p, err := s.provider(d, dir)
	if err != nil {
		return err
	}
	_, err = p.DownTo(ctx, version)
	return err
}

// PostgresHostReadPlans returns PostgreSQL's EXPLAIN of every read of hosts
// with their counts, with sequential scans disabled: a scan left in a plan
// then means no index can serve the query.
func (s *DB) PostgresHostReadPlans(ctx context.Context) (map[string]string, error) {
	plans := map[string]string{}
	for name, q := range map[string]struct {
		query string
		args  []any
	}{
		"by key":        {hostByKeyQuery + s.d.forUpdate + " OF host_counts", []any{"pool", "host"}},
		"by key, cred":  {hostByKeyCredQuery, []any{"pool", "host"}},
		"of pool":       {hostsOfPoolQuery, []any{"pool"}},
		"shared":        {fmt.Sprintf(sharedHostsQuery, s.d.assignedCount), []any{"pool"}},
		"by credential": {hostByCredentialQuery, []any{"hash"}},
		"take slot":     {takeSlotQuery, []any{1, 1, "pool", "host", 10, 0, 0, true, true, "pool", "user", "pool", "user", false}},
	} {
		plan, err := s.postgresExplain(ctx, q.query, q.args)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		plans[name] = plan
	}
	return plans, nil
}

// postgresExplain returns PostgreSQL's EXPLAIN of query with args, with
// sequential scans disabled: a plan without an index then means no index
// can serve it.
func (s *DB) postgresExplain(ctx context.Context, query string, args []any) (string, error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return "", err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
		return "", err
	}
	return planLines(tx.QueryContext(ctx, `EXPLAIN `+s.d.q(query), args...))
}

// planLines reads PostgreSQL's EXPLAIN answer, a line a row.
func planLines(rows *sql.Rows, err error) (string, error) {
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return "", err
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n"), rows.Err()
}

// PostgresAuditPlans returns PostgreSQL's EXPLAIN of ListAudit's query
// for each filter, with sequential scans disabled as in
// PostgresHostReadPlans.
func (s *DB) PostgresAuditPlans(ctx context.Context, filters []vdibroker.AuditFilter) ([]string, error) {
	var plans []string
	for _, f := range filters {
		q, args := listAuditQuery(s.d, f)
		plan, err := s.postgresExplain(ctx, q, args)
		if err != nil {
			return nil, fmt.Errorf("%+v: %w", f, err)
		}
		plans = append(plans, plan)
	}
	return plans, nil
}

// AuditByPrincipalFilters are the listings TestAuditByPrincipalUsesIndexes
// explains, for its PostgreSQL twin.
var AuditByPrincipalFilters = auditByPrincipalFilters

// PostgresBatchReadPlans returns PostgreSQL's EXPLAIN of a batch's reads
// and deliveries for its heartbeats (readAhead, deliverBatch) of the given
// hosts of pool.
func (s *DB) PostgresBatchReadPlans(ctx context.Context, pool string, hosts ...string) (map[string]string, error) {
	g := &poolHosts{pool: pool, hosts: hosts}
	args := g.args(s.d, 1)
	n := len(hosts)
	pools, at, sessions, metrics, down := make([]string, n), make([]int64, n), make([]int64, n), make([]*string, n), make([]bool, n)
	for i := range hosts {
		pools[i], at[i] = pool, 1
	}
	plans := map[string]string{}
	for name, q := range map[string]struct {
		query string
		args  []any
	}{
		"beats' hosts":         {beatHostsQuery(s.d, n), g.args(s.d, 2)},
		"beats' open sessions": {beatSessionsQuery(s.d, n), args},
		"beats' commands":      {deliverQuery(s.d, n), append(append([]any{"Delivered"}, args...), "Queued")},
		"beats' rows":          {beatsUpdateQuery(s.d, n), []any{pools, hosts, at, metrics, sessions, pools, down, pools, pools}},
		"beats' logons":        {logonsQuery(s.d, n), []any{int64(1), false, hosts, hosts, pools, pools}},
	} {
		p, err := s.explain(ctx, q.query, q.args...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		plans[name] = p
	}
	return plans, nil
}

// QueryInt runs a query that returns one integer on the writer's
// connection pool, outside any transaction.
func (s *DB) QueryInt(ctx context.Context, query string) (int, error) {
	var n int
	err := s.w.QueryRowContext(ctx, query).Scan(&n)
	return n, err
}

// IndexState reports whether a PostgreSQL index of the current schema is
// valid and unique.
func (s *DB) IndexState(ctx context.Context, name string) (valid, unique bool, err error) {
	err = s.w.QueryRowContext(ctx, `SELECT i.indisvalid, i.indisunique FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE c.relname = $1 AND c.relnamespace = current_schema()::regnamespace`, name).Scan(&valid, &unique)
	return valid, unique, err
}

// ListSessionsPlan returns the plan of the query ListUserSessions runs for
// f: SQLite's EXPLAIN QUERY PLAN details or PostgreSQL's EXPLAIN, one line
// each.
func (s *DB) ListSessionsPlan(ctx context.Context, f vdibroker.SessionFilter) (string, error) {
	var us *userSearch
	if f.UserPrefix != "" {
		// Folded here as the database would fold these ASCII names.
		from := strings.ToLower(f.UserPrefix)
		us = &userSearch{from: from, to: prefixEnd(from), afterKey: from + "zz"}
	}
	q, args := listSessionsQuery(s.d, f, us)
	return s.explain(ctx, q, args...)
}

// PrefixEnd is prefixEnd, for its table test.
func PrefixEnd(p string) string { return prefixEnd(p) }

// OpenCountsPlan is ListSessionsPlan for CountOpenSessions' query.
func (s *DB) OpenCountsPlan(ctx context.Context) (string, error) {
	return s.explain(ctx, openCountsQuery)
}

// explain returns the engine's plan of query, one line each.
func (s *DB) explain(ctx context.Context, query string, args ...any) (string, error) {
	if s.d == sqliteDialect {
		plan, err := s.plan(ctx, query, args...)
		return strings.Join(plan, "\n"), err
	}
	return planLines(s.r.QueryContext(ctx, `EXPLAIN `+s.d.q(query), args...))
}

// AddHistory inserts n LoggedOff sessions into pool, the i-th on host
// host%02d (i mod hosts) of user user%04d (i mod users), with ids that sort
// before every NewID, in one statement; on PostgreSQL it then analyzes the
// table, as autovacuum would after such a week.
func (s *DB) AddHistory(ctx context.Context, pool string, hosts, users, n int) error {
	q := `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?)
		INSERT INTO user_sessions (id, host_pool, session_host, user_name, user_key, state, ended, create_time, state_time, end_reason, pooled)
		SELECT printf('0000%028d', i), ?, printf('host%02d', i % ?), printf('user%04d', i % ?), printf('user%04d', i % ?), 'LoggedOff', TRUE, i, i + 1, 'NotReported', TRUE FROM n`
	if s.d == postgresDialect {
		q = `INSERT INTO user_sessions (id, host_pool, session_host, user_name, user_key, state, ended, create_time, state_time, end_reason, pooled)
		SELECT '0000' || lpad(i::text, 28, '0'), ?, 'host' || lpad((i % ?)::text, 2, '0'), 'user' || lpad((i % ?)::text, 4, '0'),
			'user' || lpad((i % ?)::text, 4, '0'), 'LoggedOff', TRUE, i, i + 1, 'NotReported', TRUE FROM generate_series(0, ? - 1) AS i`
	}
	args := []any{n, pool, hosts, users, users}
	if s.d == postgresDialect {
		args = []any{pool, hosts, users, users, n}
	}
	if _, err := s.w.ExecContext(ctx, s.d.q(q), args...); err != nil {
		return err
	}
	if s.d == postgresDialect {
		_, err := s.w.ExecContext(ctx, `ANALYZE user_sessions`)
		return err
	}
	return nil
}

// PostgresDefaults is postgresDefaults, for the tests.
var PostgresDefaults = postgresDefaults

// PostgresSetting is SHOW name on one of the store's own connections.
func (s *DB) PostgresSetting(ctx context.Context, name string) (string, error) {
	var v string
	err := s.r.QueryRowContext(ctx, "SHOW "+name).Scan(&v)
	return v, err
}

// IsPostgres reports whether the store is on PostgreSQL.
func (s *DB) IsPostgres() bool { return s.d == postgresDialect }

// SetEvaluationTrim makes a pool keep keep evaluations, trimmed on one
// append in every (1: each), until the test ends.
func SetEvaluationTrim(t testing.TB, keep, every int) {
	oldKeep, oldEvery := keepEvaluations, trimEvery
	keepEvaluations, trimEvery = keep, every
	t.Cleanup(func() { keepEvaluations, trimEvery = oldKeep, oldEvery })
}

// CommitterOf is the group committer that writes the host's connects
// (see shard), and Committers how many the store runs for them; on
// PostgreSQL as many more write the heartbeats, BeatCommitterOf's.
func (s *DB) CommitterOf(pool, host string) int { return shard(hostKey(pool, host), len(s.commits)) }

func (s *DB) Committers() int { return len(s.commits) }

func (s *DB) BeatCommitterOf(pool, host string) int {
	return shard(hostKey(pool, host), len(s.beatCommits))
}

// CommitBatchWithFailure commits cs as one batch, as CommitBatch, with one
// more atomic request among them whose statement fails with a database
// error (not a *vdibroker.Error); it returns the placements' outcomes and
// that request's.
func (s *DB) CommitBatchWithFailure(cs []*vdibroker.PlacementCommit) (errs []error, failed error) {
	reqs := make([]*commitReq, 0, len(cs)+1)
	for _, c := range cs {
		reqs = append(reqs, placementReq(c, nil, s.now))
	}
	bad := &commitReq{key: hostKey(cs[0].Session.HostPool, cs[0].Session.SessionHost), atomic: true,
		fn: func(ctx context.Context, t *tx) error {
			_, err := t.exec(ctx, `SELECT no_such_column FROM host_pools`)
			return err
		}}
	reqs = append(reqs[:1], append([]*commitReq{bad}, reqs[1:]...)...)
	for _, r := range reqs {
		r.done = make(chan error, 1)
	}
	s.runBatch(testCommitter(), reqs)
	for _, r := range reqs {
		if r == bad {
			failed = <-r.done
			continue
		}
		errs = append(errs, <-r.done)
	}
	return errs, failed
}

// Queued is how many heartbeats wait for heartbeat committer c
// (PostgreSQL), and how many other writes for committer c.
func (s *DB) Queued(c int) (beats, first int) {
	return len(s.beatCommits[c].beats), len(s.commits[c].first)
}

// FillFromFullQueues queues n connects and m heartbeats on a committer of
// its own and returns how many of each the first batch takes (fill).
func (s *DB) FillFromFullQueues(n, m int) (beats, first int) {
	c := &committer{first: make(chan *commitReq, n), beats: make(chan *commitReq, m)}
	for range n {
		c.first <- &commitReq{}
	}
	for range m {
		c.beats <- &commitReq{beat: true}
	}
	batch := s.fill(c, []*commitReq{<-c.first}, true)
	for _, r := range batch {
		if r.beat {
			beats++
		} else {
			first++
		}
	}
	return beats, first
}

// Migrations is the embedded migrations (tests that need the newest
// version).
var Migrations = migrations

// SetNoncesPerMinute lowers the bound of UseNonce for a test; the result
// restores it.
func SetNoncesPerMinute(n int) (restore func()) {
	old := noncesPerMinute
	noncesPerMinute = n
	return func() { noncesPerMinute = old }
}

// BatchSynced commits ws as one group-commit batch (CommitMixedBatch)
// with one more heartbeat-like write last, which reads inside the batch's
// transaction whether its commit will be synced: SQLite's synchronous
// pragma is FULL, PostgreSQL's synchronous_commit is not off. It returns
// that and the writes' outcomes.
func (s *DB) BatchSynced(ws []Write, now time.Time) (bool, []error) {
	var synced bool
	probe := &commitReq{key: "\xff", beat: true, resync: true, atomic: true, done: make(chan error, 1),
		fn: func(ctx context.Context, t *tx) (err error) { synced, err = s.syncedIn(ctx, t.c); return err }}
	reqs, _ := writeReqs(ws, now)
	s.runBatch(testCommitter(), append(reqs, probe))
	errs := make([]error, len(ws))
	for i, r := range reqs {
		errs[i] = <-r.done
	}
	if err := <-probe.done; err != nil {
		errs = append(errs, err)
	}
	return synced, errs
}

// WriterSynced reads whether a write outside any batch commits synced.
func (s *DB) WriterSynced(ctx context.Context) (bool, error) {
	return s.syncedIn(ctx, s.w)
}

// syncedIn reads the sync setting through c, not through the statement
// cache: a prepared PRAGMA answers the value it was prepared with.
func (s *DB) syncedIn(ctx context.Context, c interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (bool, error) {
	if s.d == postgresDialect {
		var v string
		err := c.QueryRowContext(ctx, `SELECT current_setting('synchronous_commit')`).Scan(&v)
		return v != "off", err
	}
	var mode int
	err := c.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&mode)
	return mode == 2, err // FULL
}

// EndedMismatches counts the sessions whose ended column is not their
// state = 'LoggedOff' (00060).
func (s *DB) EndedMismatches(ctx context.Context) (int, error) {
	var n int
	err := s.w.QueryRowContext(ctx, `SELECT count(*) FROM user_sessions WHERE ended <> (state = 'LoggedOff')`).Scan(&n)
	return n, err
}

// LogonIndexes returns, on SQLite, the indexes of user_sessions that a
// logon's statement (logonsQuery) writes: those its program opens for
// writing.
func (s *DB) LogonIndexes(ctx context.Context) ([]string, error) {
	rows, err := s.w.QueryContext(ctx, `EXPLAIN `+logonsQuery(sqliteDialect, 1), ns(time.Now()), false, "id", "agent", "Active", "Pending")
	if err != nil {
		return nil, err
	}
	var roots []int64
	for rows.Next() {
		var addr, p1, p2, p3 int64
		var op string
		var p4, p5, comment any
		if err := rows.Scan(&addr, &op, &p1, &p2, &p3, &p4, &p5, &comment); err != nil {
			rows.Close()
			return nil, err
		}
		if op == "OpenWrite" {
			roots = append(roots, p2)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var names []string
	for _, root := range roots {
		var name string
		err := s.w.QueryRowContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'user_sessions' AND rootpage = ?`, root).Scan(&name)
		if errors.Is(err, sql.ErrNoRows) {
			continue // the table itself
		}
		if err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// SetMaxDirectoryEntries lowers vdibroker.MaxDirectoryEntriesPerPod for a
// test; the returned func restores it.
func SetMaxDirectoryEntries(n int64) func() {
	old := maxDirectoryEntries
	maxDirectoryEntries = n
	return func() { maxDirectoryEntries = old }
}

// SetDropChunk sets how many directory entries one transaction of
// DropDirectoryPods deletes, for a test; the returned func restores it.
func SetDropChunk(n int) func() {
	old := dropChunk
	dropChunk = n
	return func() { dropChunk = old }
}

// testCommitter is a committer of its own for a batch a test runs on its
// goroutine (CommitBatch and the like): its row of late_session_writes is
// its own, as a committer's is.
func testCommitter() *committer { return &committer{late: lateKey() + "-test"} }

// WriterCommits is how many transactions the store's writes committed.
func (s *DB) WriterCommits() int64 { return s.committed.Load() }

// FoldLateWrites is foldLateWrites: the rows of late_session_writes last
// bumped before before go into row 1.
func (s *DB) FoldLateWrites(ctx context.Context, before time.Time) (int, error) {
	return s.foldLateWrites(ctx, before)
}

// HoldLateCount bumps committer c's count of late writes (its row of
// late_session_writes; CommitterOf) by one in a transaction it leaves
// open, as c's batch holds it from its bump to its commit; release
// commits it.
func (s *DB) HoldLateCount(ctx context.Context, c int) (release func() error, err error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, s.d.q(bumpLateWritesQuery), s.commits[c].late, 1, ns(s.now())); err != nil {
		tx.Rollback()
		return nil, err
	}
	return tx.Commit, nil
}

// WebSessionCounts are each area's rows as the triggers of migration 00067
// count them, and as count(*) does (R-SEC, "Web sessions").
func (s *DB) WebSessionCounts(ctx context.Context) (kept, counted map[string]int, err error) {
	scan := func(query string) (map[string]int, error) {
		rows, err := s.w.QueryContext(ctx, query)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		m := map[string]int{}
		for rows.Next() {
			var area string
			var n int
			if err := rows.Scan(&area, &n); err != nil {
				return nil, err
			}
			if n != 0 {
				m[area] = n
			}
		}
		return m, rows.Err()
	}
	if kept, err = scan(`SELECT area, n FROM web_session_counts`); err != nil {
		return nil, nil, err
	}
	counted, err = scan(`SELECT area, count(*) FROM web_sessions GROUP BY area`)
	return kept, counted, err
}

// SweepWebSessionsPlan is ListSessionsPlan for DeleteExpiredWebSessions'
// query.
func (s *DB) SweepWebSessionsPlan(ctx context.Context) (string, error) {
	return s.explain(ctx, sweepWebSessionsQuery, int64(0))
}

// SetPruneBatch sets how many rows one write of PruneHistory deletes, for
// a test; the returned func restores it.
func SetPruneBatch(n int) func() {
	old := pruneBatch
	pruneBatch = n
	return func() { pruneBatch = old }
}

// PruneTokensPlans returns the plan of each batch of PruneHistory's
// expired-token deletes, by table: SQLite's EXPLAIN QUERY PLAN, or
// PostgreSQL's EXPLAIN with sequential scans disabled (as
// PostgresHostReadPlans).
func (s *DB) PruneTokensPlans(ctx context.Context) (map[string]string, error) {
	plans := map[string]string{}
	for table, q := range map[string]string{"tokens": pruneTokensQuery, "registration_tokens": pruneRegistrationTokensQuery} {
		args := []any{int64(0), pruneBatch}
		var plan string
		var err error
		if s.d == sqliteDialect {
			plan, err = s.explain(ctx, q, args...)
		} else {
			plan, err = s.postgresExplain(ctx, q, args)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", table, err)
		}
		plans[table] = plan
	}
	return plans, nil
}

// FillHosts puts n hosts in pool, named <pool>-<i>, each saying
// remoteApps (RemoteAppsYes, RemoteAppsNo, RemoteAppsUnknown), in one
// statement: a realistic pool for a plan, without n registrations.
func (s *DB) FillHosts(ctx context.Context, pool string, n int, remoteApps string) error {
	series, pad := `WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < ?) SELECT i FROM g`, `printf('%05d', i)`
	if s.d == postgresDialect {
		series, pad = `SELECT generate_series(1, ?) AS i`, `lpad(CAST(i AS TEXT), 5, '0')`
	}
	_, err := s.w.ExecContext(ctx, s.d.q(`INSERT INTO session_hosts (host_pool, name, address, protocols, standard_features, allow_new_session,
		assigned_users, policy, create_time, remote_apps)
		SELECT ?, ? || '-' || `+pad+`, 'a:3389', '["RDP"]', TRUE, TRUE, '[]', '{}', 0, ? FROM (`+series+`) AS g`),
		pool, pool, remoteApps, n)
	return err
}

// PoolsWithoutRemoteAppsPlan returns the plan of PoolsWithoutRemoteApps'
// statement for pools: SQLite's EXPLAIN QUERY PLAN, one detail a line,
// or PostgreSQL's EXPLAIN (ANALYZE, with the rows each node read), after
// the engine's ANALYZE of the store as it is.
func (s *DB) PoolsWithoutRemoteAppsPlan(ctx context.Context, pools []string) (string, error) {
	if _, err := s.w.ExecContext(ctx, `ANALYZE`); err != nil {
		return "", err
	}
	q := fmt.Sprintf(poolsWithoutRemoteAppsQuery, s.d.jsonStrings)
	if s.d == postgresDialect {
		return planLines(s.w.QueryContext(ctx, `EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) `+s.d.q(q), string(list(pools))))
	}
	plan, err := s.plan(ctx, q, string(list(pools)))
	return strings.Join(plan, "\n"), err
}

// SetAfterBackupCopy makes BackupSQLite call f with its copy's path once
// VACUUM INTO has written it, until the test ends.
func SetAfterBackupCopy(t testing.TB, f func(path string)) {
	afterBackupCopy = f
	t.Cleanup(func() { afterBackupCopy = nil })
}

// SameNamePlan returns the plan of the look-up of a host's twins by its
// name ignoring case and a trailing dot (sameNameQuery): SQLite's EXPLAIN
// QUERY PLAN, or PostgreSQL's EXPLAIN with sequential scans disabled.
func (s *DB) SameNamePlan(ctx context.Context) (string, error) {
	args := []any{"pool", "office-01", "OFFICE-01"}
	if s.d == sqliteDialect {
		return s.explain(ctx, sameNameQuery, args...)
	}
	return s.postgresExplain(ctx, sameNameQuery, args)
}

// DeletedNamePlan is SameNamePlan for the look-up of a deleted host by
// its name's key at a registration (deletedHostQuery).
func (s *DB) DeletedNamePlan(ctx context.Context) (string, error) {
	args := []any{"pool", "office-01"}
	if s.d == sqliteDialect {
		return s.explain(ctx, deletedHostQuery, args...)
	}
	return s.postgresExplain(ctx, deletedHostQuery, args)
}

// StoredNameKeys maps each host of pool to the key the unique index
// session_hosts_name_key holds for it (hostNameKeySQL), as the engine
// computes it.
func (s *DB) StoredNameKeys(ctx context.Context, pool string) (map[string]string, error) {
	rows, err := s.r.QueryContext(ctx, s.d.q(`SELECT name, `+hostNameKeySQL+` FROM session_hosts WHERE host_pool = ?`), pool)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	keys := map[string]string{}
	for rows.Next() {
		var name, key string
		if err := rows.Scan(&name, &key); err != nil {
			return nil, err
		}
		keys[name] = key
	}
	return keys, rows.Err()
}
