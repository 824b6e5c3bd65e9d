package store_test

import (
	"database/sql"
	"fmt"
	"net/url"
	"testing"

	"github.com/vdibroker/vdibroker"
)

// TestCountTriggersKeepToTheirSchema (R-SEC, "Web sessions"; R-U7;
// PostgreSQL): the triggers of migrations 00067 and 00068 keep the
// counts of the schema their table is in, whoever's session fires them.
// Their functions named web_session_counts and portal_launch_count
// without a schema, which PostgreSQL looks up on the search_path of the
// session that fires them: a DBA's session whose search_path is another
// schema (here one holding a second install's counts, as a shared
// database's public schema may) that signs users out of ours
// (DELETE FROM ours.web_sessions) or puts rows back changed that other
// install's counts and left ours off for good, so our bounds let in too
// many or too few; with no such table there it failed the DBA's
// statement. The functions now look in their own schema only (00073).
func TestCountTriggersKeepToTheirSchema(t *testing.T) {
	ctx := t.Context()
	s, dsn := postgresStore(t)
	ours := searchPath(t, dsn)
	otherDSN := postgresSchemaDSN(t)
	other := searchPath(t, otherDSN)

	for _, ws := range []*vdibroker.WebSession{webSession("c1", "token:a", t0), webSession("c2", "token:b", t0)} {
		if err := s.CreateWebSession(ctx, ws, vdibroker.WebSessionLimits{}, t0); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"l1", "l2", "l3"} {
		if err := s.CreatePortalLaunch(ctx, portalLaunch(id, "alice", t0), 10, 100, t0); err != nil {
			t.Fatal(err)
		}
	}

	// The other install's counts, and the DBA's session on its schema.
	db, err := sql.Open("pgx", otherDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // the temporary table below is the one session's
	for _, q := range []string{
		`CREATE TABLE web_session_counts (area TEXT PRIMARY KEY, n BIGINT NOT NULL)`,
		`INSERT INTO web_session_counts VALUES ('console', 100)`,
		`CREATE TABLE portal_launch_count (id INTEGER PRIMARY KEY, n BIGINT NOT NULL)`,
		`INSERT INTO portal_launch_count VALUES (1, 100)`,
		// Sign one user out, put the rows of the other back, take one
		// launch away: each fires our triggers from a session whose
		// search_path is the other schema.
		fmt.Sprintf(`DELETE FROM %s.web_sessions WHERE id_hash = 'c1'`, ours),
		fmt.Sprintf(`CREATE TEMPORARY TABLE saved AS SELECT * FROM %s.web_sessions`, ours),
		fmt.Sprintf(`DELETE FROM %s.web_sessions`, ours),
		fmt.Sprintf(`INSERT INTO %s.web_sessions SELECT * FROM saved`, ours),
		fmt.Sprintf(`DELETE FROM %s.portal_launches WHERE id_hash = 'l1'`, ours),
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	kept, counted, err := s.WebSessionCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(kept) != fmt.Sprint(counted) || fmt.Sprint(counted) != "map[console:1]" {
		t.Errorf("our web session counts %v, rows %v; want console:1 both", kept, counted)
	}
	if n, err := s.QueryInt(ctx, `SELECT n FROM portal_launch_count WHERE id = 1`); err != nil || n != 2 {
		t.Errorf("our portal launch count %d, %v; want 2, the rows left", n, err)
	}
	for q, want := range map[string]int{
		`SELECT n FROM web_session_counts WHERE area = 'console'`: 100,
		`SELECT n FROM portal_launch_count WHERE id = 1`:          100,
	} {
		var n int
		if err := db.QueryRowContext(ctx, q).Scan(&n); err != nil || n != want {
			t.Errorf("the other schema (%s), %s: %d, %v; want it untouched, %d", other, q, n, err, want)
		}
	}
}

// searchPath is the schema a DSN of postgresSchemaDSN names.
func searchPath(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query().Get("search_path")
}
