package store_test

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker/store"
)

// newestMigration is the version of the newest embedded migration of the
// dialect (the files are numbered 00001_...).
func newestMigration(t *testing.T, dialect string) int {
	t.Helper()
	files, err := fs.Glob(store.Migrations, "migrations/"+dialect+"/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("migrations of %s: %v", dialect, err)
	}
	var n int
	if _, err := fmt.Sscanf(files[len(files)-1][len("migrations/"+dialect+"/"):], "%05d_", &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRefuseNewerSchema: a database a newer vdibroker migrated (its
// goose_db_version holds a version above the newest embedded migration)
// is refused at open, on both engines, with an error naming both versions
// and saying to upgrade; the database is left as it was.
func TestRefuseNewerSchema(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) (dsn, dir string){
		"sqlite":   func(t *testing.T) (string, string) { return "", t.TempDir() },
		"postgres": func(t *testing.T) (string, string) { return postgresSchemaDSN(t), "" },
	} {
		t.Run(name, func(t *testing.T) {
			dsn, dir := open(t)
			known := newestMigration(t, name)
			s, err := store.Open(t.Context(), dsn, dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			// What a release with one more migration leaves behind.
			db := s.(*store.DB)
			if err := db.ExecRaw(t.Context(), fmt.Sprintf(`INSERT INTO goose_db_version (version_id, is_applied) VALUES (%d, true)`, known+1)); err != nil {
				t.Fatal(err)
			}
			s.Close()

			s, err = store.Open(t.Context(), dsn, dir, nil)
			if err == nil {
				s.Close()
				t.Fatal("opened a database of a newer schema")
			}
			msg := err.Error()
			if !errors.Is(err, store.ErrSchemaTooNew) || !strings.Contains(msg, fmt.Sprintf("schema version %d", known+1)) ||
				!strings.Contains(msg, fmt.Sprintf("up to %d", known)) || !strings.Contains(msg, "upgrade vdibroker") {
				t.Errorf("error %q: want ErrSchemaTooNew naming versions %d and %d and saying upgrade vdibroker", msg, known+1, known)
			}
		})
	}
}

// TestFailedMigrationSaysWhere: a migration that fails stops the open
// with the migration named, the version the database stays at, and what
// to do; its transaction left nothing, so the database is at the version
// before it. Here 00065 meets a table of its name already there.
func TestFailedMigrationSaysWhere(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s, err := store.OpenWith(ctx, "", dir, nil, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.MigrateDownTo(ctx, 64); err != nil {
		t.Fatal(err)
	}
	if err := s.ExecRaw(ctx, `CREATE TABLE federation_nonce_budgets (x INTEGER)`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err = store.OpenWith(ctx, "", dir, nil, store.Options{})
	for _, want := range []string{
		"migrate sqlite: migration 65 (00065_federation_nonce_budgets.sql) failed: ",
		"already exists",
		"the database stays at schema version 64: fix the cause and start this release again",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("open: %v; want it to say %q", err, want)
		}
	}
}
