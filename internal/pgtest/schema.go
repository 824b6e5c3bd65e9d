package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"
)

// Env names the shared PostgreSQL test server's DSN; tests that need
// PostgreSQL skip without it.
const Env = "VDIBROKER_TEST_POSTGRES_DSN"

// SchemaDSN is Schema on the shared test server of Env; without Env the
// test is skipped with a message saying what was skipped (what, e.g.
// "PostgreSQL contract tests") and how to turn it on.
func SchemaDSN(t testing.TB, prefix, what string) string {
	t.Helper()
	base := os.Getenv(Env)
	if base == "" {
		t.Skipf("%s skipped: set %s (for example postgres://vdibroker:vdibroker@127.0.0.1:5432/vdibroker?sslmode=disable)", what, Env)
	}
	return Schema(t, base, prefix)
}

// dropTimeout bounds the DROP SCHEMA of a test's schema.
const dropTimeout = time.Minute

// Schema creates a schema of the test's own on the database of base,
// named prefix and a random suffix, dropped when the test ends, and
// returns base with search_path set to it. application_name is the
// schema's name too, so a test that watches pg_stat_activity sees only
// its own connections.
func Schema(t testing.TB, base, prefix string) string {
	t.Helper()
	b := make([]byte, 6)
	rand.Read(b)
	schema := prefix + hex.EncodeToString(b)
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.ExecContext(t.Context(), `CREATE SCHEMA `+schema); err != nil {
		admin.Close()
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		// Bounded: a server that does not answer (stopped or paused by a
		// test that failed) fails the drop instead of hanging the package.
		ctx, cancel := context.WithTimeout(context.Background(), dropTimeout)
		defer cancel()
		if _, err := admin.ExecContext(ctx, `DROP SCHEMA `+schema+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
		admin.Close()
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	q.Set("application_name", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
