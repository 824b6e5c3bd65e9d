// Package store is the broker's durable state (SPEC §10): one implementation
// of vdibroker.Store over database/sql with two dialects, embedded SQLite
// (modernc.org/sqlite, WAL) and PostgreSQL (pgx v5).
//
// The Go logic is shared: queries are written once in portable SQL with "?"
// placeholders, rebound to $n for PostgreSQL, and each dialect supplies only
// what differs (row locks, error classification, connection setup). Each
// dialect has its own versioned migrations, embedded and applied with goose
// at Open.
//
// The database is the authority for session counts (R-D3): CommitPlacement
// increments a host's count with a conditional update that fails when the
// host is at maxSessionLimit (R-C4), and a unique partial index allows one
// open session per user in a pooled pool (R-C6). Every transaction that
// changes a session's state changes its host's counts in the same
// transaction, conditional on the state it read, so counts stay exact with
// any number of broker replicas on one PostgreSQL database.
//
// Concurrent CommitPlacement and ApplyHeartbeat calls are batched into
// shared transactions (group commit, commit.go): one fsync serves many
// connects and heartbeats, each in its own SAVEPOINT so a failing one does
// not fail the others.
//
// On SQLite, which one broker process owns, HostByCredential answers from
// an in-memory cache that every write changing a host keeps current
// (hostcache.go); PostgreSQL, shared by replicas, has no such cache.
package store
