package store

import (
	"errors"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// dialect is what differs between the engines; everything else is shared.
type dialect struct {
	name string
	// dollar rebinds "?" placeholders to $1, $2... (PostgreSQL).
	dollar bool
	// jsonStrings is a subquery of the strings of a JSON list given as
	// its one argument: "x IN (" + jsonStrings + ")" asks for any of a
	// list of any length with one statement (the statement caches keep
	// one per query text).
	jsonStrings string
	// assignedCount is the number of entries of session_hosts'
	// assigned_users, a JSON list of strings kept as text. It must not
	// fail for any list the store writes, whatever order the engine
	// evaluates a WHERE's terms in: on PostgreSQL a cast to json, not
	// jsonb, whose text cannot hold the "\u0000" of a name with a NUL.
	assignedCount string
	// insertDirectory adds the session directory entries of a pod ($1)
	// seen at a time ($2) for the users of a JSON list ($3) that it has
	// none for (RegisterDirectory); RowsAffected counts those added.
	insertDirectory string
	// forUpdate is appended to a SELECT that must lock the rows it reads.
	// SQLite needs none: its write transactions are serialised
	// (BEGIN IMMEDIATE on one writer connection).
	forUpdate string
	// principalNameLower is audit_log's principal_name with its ASCII
	// letters folded, as asciiLower folds an argument, and as the
	// expression index audit_log_by_principal_name holds it (R-E5).
	// SQLite's lower() folds ASCII only; PostgreSQL's folds by the
	// database's ctype (Ö to ö in a UTF-8 one) except in the "C"
	// collation.
	principalNameLower string
	// isUnique reports a unique constraint violation.
	isUnique func(error) bool
	// isRetryable reports an error after which the whole transaction can
	// be run again (serialization failure, deadlock, busy).
	isRetryable func(error) bool

	rebound sync.Map // query -> rebound query
}

var sqliteDialect = &dialect{
	name:               "sqlite",
	principalNameLower: `lower(principal_name)`,
	jsonStrings:        `SELECT value FROM json_each(?)`,
	assignedCount:      `json_array_length(assigned_users)`,
	// "WHERE true" tells SQLite's parser that ON CONFLICT is the
	// upsert's, not the join's.
	insertDirectory: `INSERT INTO session_directory (user_key, pod, seen_time)
		SELECT value, ?, ? FROM json_each(?) WHERE true ON CONFLICT DO NOTHING`,
	isUnique: func(err error) bool {
		var e *sqlite.Error
		if !errors.As(err, &e) {
			return false
		}
		return e.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || e.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
	},
	isRetryable: func(err error) bool {
		var e *sqlite.Error
		if !errors.As(err, &e) {
			return false
		}
		// The primary code is the low byte of an extended code.
		switch e.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return true
		}
		return false
	},
}

var postgresDialect = &dialect{
	name:          "postgres",
	dollar:        true,
	jsonStrings:   `SELECT jsonb_array_elements_text(CAST(? AS jsonb))`,
	assignedCount: `json_array_length(CAST(assigned_users AS json))`,
	insertDirectory: `INSERT INTO session_directory (user_key, pod, seen_time)
		SELECT u, ?, ? FROM jsonb_array_elements_text(CAST(? AS jsonb)) AS u ON CONFLICT DO NOTHING`,
	forUpdate:          " FOR UPDATE",
	principalNameLower: `lower(principal_name COLLATE "C")`,
	isUnique: func(err error) bool {
		var e *pgconn.PgError
		return errors.As(err, &e) && e.Code == "23505"
	},
	isRetryable: func(err error) bool {
		var e *pgconn.PgError
		if !errors.As(err, &e) {
			return false
		}
		// serialization_failure, deadlock_detected
		return e.Code == "40001" || e.Code == "40P01"
	},
}

// onState rewrites, for PostgreSQL, the conditions of an open and an ended
// session (openSQL, endedSQL) to their state terms alone: its partial
// indexes are conditioned on state, and its covering index of a host's
// open sessions has no ended, so a query that also named ended would read
// every row's heap tuple to check it (an index scan instead of an
// index-only scan).
var onState = strings.NewReplacer(openSQL, `state <> 'LoggedOff'`, endedSQL, `state = 'LoggedOff'`)

// q returns query in the dialect's placeholder style (on PostgreSQL, its
// session conditions rewritten by onState). Queries never contain a
// literal "?" other than placeholders.
func (d *dialect) q(query string) string {
	if !d.dollar {
		return query
	}
	if v, ok := d.rebound.Load(query); ok {
		return v.(string)
	}
	var b strings.Builder
	n := 0
	for _, r := range onState.Replace(query) {
		if r == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	s := b.String()
	d.rebound.Store(query, s)
	return s
}
