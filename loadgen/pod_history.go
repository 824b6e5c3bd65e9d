package loadgen

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"path/filepath"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	_ "modernc.org/sqlite"             // database/sql driver "sqlite"
)

// historyReason is the end reason of a session its agent stopped
// reporting (the user logged off): vdibroker.EndNotReported.
const historyReason = "NotReported"

// historyChunk is how many history rows one INSERT writes: one transaction
// each, so SQLite's WAL and PostgreSQL's transaction stay small.
const historyChunk = 100_000

// historySpec is one pool's LoggedOff history: rows sessions, spread
// evenly over the days before now, each on host (r×7919 mod hosts)+1 for
// user (r mod users)+1, lasting 4 h to 9 h, with the decision record of
// one of the pool's real placements (so rows are as wide as real ones).
type historySpec struct {
	pool       string
	hostPrefix string
	hosts      int
	userPrefix string
	users      int
	rows       int
	days       int
	tag        int64 // high bits of the ids' random part: keeps pools' ids apart
}

// The history INSERTs, one per engine, writing every column of
// user_sessions whose default an ended session does not have: those of
// migration 00001, the user's key, a placement record, and ended (00060,
// whose default FALSE is an open session's). Parameters, in
// order: pool, host prefix, host name width, hosts, user prefix, user name
// width, users, first create time (ns), step between rows (ns), id tag,
// first row, rows in this chunk. The user's key (R-E5) is the name
// lower-cased, which is vdibroker.FoldUser of the ASCII names the pod
// bench makes. An id is 12 hex digits of the create
// time's Unix milliseconds and 20 of tag+row, the shape of vdibroker.NewID.
const (
	sqliteHistorySQL = `INSERT INTO user_sessions
  (id, host_pool, session_host, user_name, user_key, state, create_time, state_time,
   agent_session_id, end_reason, pooled, logoff_queued, placement, ended)
WITH RECURSIVE seq(r) AS (SELECT ?10 UNION ALL SELECT r + 1 FROM seq WHERE r + 1 < ?10 + ?11)
SELECT printf('%012x%020x', (?8 + r * ?9) / 1000000, ?12 + r),
       ?1,
       printf('%s%0*d', ?2, ?3, (r * 7919) % ?4 + 1),
       printf('%s%0*d', ?5, ?6, r % ?7 + 1),
       lower(printf('%s%0*d', ?5, ?6, r % ?7 + 1)),
       'LoggedOff',
       ?8 + r * ?9,
       ?8 + r * ?9 + 14400000000000 + (r * 37 % 300) * 60000000000,
       CAST(r % 25 + 1 AS TEXT),
       '` + historyReason + `',
       TRUE, FALSE,
       (SELECT placement FROM user_sessions WHERE host_pool = ?1 AND placement IS NOT NULL LIMIT 1),
       TRUE
FROM seq`

	postgresHistorySQL = `INSERT INTO user_sessions
  (id, host_pool, session_host, user_name, user_key, state, create_time, state_time,
   agent_session_id, end_reason, pooled, logoff_queued, placement, ended)
SELECT lpad(to_hex(($8::bigint + r * $9::bigint) / 1000000), 12, '0') || lpad(to_hex($12::bigint + r), 20, '0'),
       $1::text,
       $2::text || lpad(((r * 7919) % $4::bigint + 1)::text, $3::int, '0'),
       $5::text || lpad((r % $7::bigint + 1)::text, $6::int, '0'),
       lower($5::text || lpad((r % $7::bigint + 1)::text, $6::int, '0')),
       'LoggedOff',
       $8::bigint + r * $9::bigint,
       $8::bigint + r * $9::bigint + 14400000000000 + (r * 37 % 300) * 60000000000,
       (r % 25 + 1)::text,
       '` + historyReason + `',
       TRUE, FALSE,
       (SELECT placement FROM user_sessions WHERE host_pool = $1::text AND placement IS NOT NULL LIMIT 1),
       TRUE
FROM generate_series($10::bigint, $10::bigint + $11::bigint - 1) AS r`
)

// openStoreDB opens the broker's database directly, for the history bulk
// load while the broker is stopped: the SQLite file in dataDir, or the
// PostgreSQL DSN.
func openStoreDB(database, dataDir string) (*sql.DB, bool, error) {
	if database != "" {
		db, err := sql.Open("pgx", database)
		return db, true, err
	}
	path := filepath.Join(dataDir, "vdibroker.db")
	// synchronous=NORMAL: a bulk load with the broker stopped; a crash
	// means running the bench again, not a lost connect.
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, false, err
	}
	db.SetMaxOpenConns(1)
	return db, false, nil
}

// loadHistory inserts every spec's rows in chunks and returns how many it
// wrote. On PostgreSQL it then runs VACUUM (ANALYZE) on the tables the
// seeding and the history wrote, as autovacuum would have done many times
// over in the week a real pod took to gather that history: right after
// millions of inserts autovacuum would otherwise start on them during the
// measured phases, and until it has, the index-only reads every heartbeat
// makes (its host's open sessions) visit the table for each row. The
// SQLite store never runs ANALYZE, so neither does this.
func loadHistory(ctx context.Context, database, dataDir string, specs []historySpec, now time.Time) (int, error) {
	db, pg, err := openStoreDB(database, dataDir)
	if err != nil {
		return 0, fmt.Errorf("open database for the history: %w", err)
	}
	defer db.Close()
	query := sqliteHistorySQL
	if pg {
		query = postgresHistorySQL
	}
	written := 0
	for _, h := range specs {
		if h.rows <= 0 {
			continue
		}
		// Sessions start from days ago until 9 h ago, so every one has
		// ended by now (the longest lasts 4 h + 299 min).
		span := time.Duration(h.days)*24*time.Hour - 9*time.Hour
		first := now.Add(-time.Duration(h.days) * 24 * time.Hour).UnixNano()
		step := int64(span) / int64(h.rows)
		hostWidth, userWidth := len(fmt.Sprint(h.hosts)), len(fmt.Sprint(h.users))
		for from := 0; from < h.rows; from += historyChunk {
			n := min(historyChunk, h.rows-from)
			res, err := db.ExecContext(ctx, query, h.pool, h.hostPrefix, hostWidth, h.hosts,
				h.userPrefix, userWidth, h.users, first, step, from, n, h.tag)
			if err != nil {
				return written, fmt.Errorf("history of pool %q, rows %d..%d: %w", h.pool, from, from+n, err)
			}
			if got, err := res.RowsAffected(); err == nil && got != int64(n) {
				return written, fmt.Errorf("history of pool %q, rows %d..%d: %d inserted", h.pool, from, from+n, got)
			}
			written += n
		}
	}
	if pg {
		for _, table := range []string{"user_sessions", "session_hosts", "host_counts", "commands"} {
			if _, err := db.ExecContext(ctx, "VACUUM (ANALYZE) "+table); err != nil {
				return written, fmt.Errorf("vacuum %s: %w", table, err)
			}
		}
	} else if _, err := db.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		return written, fmt.Errorf("checkpoint: %w", err)
	}
	return written, nil
}

// PostgresSchema creates a schema of its own (vdibroker_pod_<random>) in
// the database of base and returns a DSN whose search_path is it, and a
// function that drops it with everything in it. Other users' schemas in
// the same database are never touched.
func PostgresSchema(ctx context.Context, base string) (dsn string, drop func(context.Context) error, err error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", nil, fmt.Errorf("database: want a postgres:// URL, got %q", base)
	}
	schema := fmt.Sprintf("vdibroker_pod_%x", time.Now().UnixNano())
	admin, err := sql.Open("pgx", base)
	if err != nil {
		return "", nil, err
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		return "", nil, fmt.Errorf("create schema %s: %w", schema, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	q.Set("application_name", schema)
	u.RawQuery = q.Encode()
	drop = func(ctx context.Context) error {
		db, err := sql.Open("pgx", base)
		if err != nil {
			return err
		}
		defer db.Close()
		if _, err := db.ExecContext(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			return fmt.Errorf("drop schema %s: %w", schema, err)
		}
		return nil
	}
	return u.String(), drop, nil
}
