package http_test

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// rawStore is a store and a second, raw handle on its database: a test
// makes the store fail through its own write path (a trigger that
// refuses a row, as a full disk would) or holds a row in a transaction of
// its own, as a concurrent writer would.
type rawStore struct {
	vdibroker.Store
	raw *sql.DB
	t   testing.TB
}

// openRawStore opens a store on SQLite in a directory of the test's
// (dsn "") or on PostgreSQL (dsn, the server's) in a schema of the
// test's own, and a raw handle on the same database; both are closed
// when the test ends.
func openRawStore(t testing.TB, dsn string) *rawStore {
	t.Helper()
	dir := t.TempDir()
	driver, rawDSN := "sqlite", "file:"+filepath.Join(dir, "vdibroker.db")+"?_pragma=busy_timeout(10000)"
	if dsn != "" {
		dsn = schemaDSN(t, dsn)
		driver, rawDSN = "pgx", dsn
	}
	st, err := store.Open(t.Context(), dsn, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	raw, err := sql.Open(driver, rawDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	return &rawStore{Store: st, raw: raw, t: t}
}

// exec runs q on the raw handle, failing the test on an error.
func (s *rawStore) exec(q string, args ...any) {
	s.t.Helper()
	if _, err := s.raw.ExecContext(s.t.Context(), q, args...); err != nil {
		s.t.Fatal(err)
	}
}
