//go:build unix

package store_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// TestBackupCopyIsOwnersOnlyWhileWritten (R-SEC): a backup holds the
// credential hashes and the RD gateway's signing seeds. Written into a
// directory other users may enter (mode 0755, as /var/backups is) under
// the usual umask 022, the copy under way is mode 0600 from the moment
// VACUUM INTO has written it, not only once renamed: made by VACUUM INTO
// itself it was 0644 until then, and another user who opened it meanwhile
// kept reading it. Not parallel: it sets the process's umask.
func TestBackupCopyIsOwnersOnlyWhileWritten(t *testing.T) {
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
	dir := t.TempDir()
	s := openSQLite(t, dir)
	mustPool(t, s, pool("p", vdibroker.Pooled))
	s.Close()
	out := t.TempDir()
	if err := os.Chmod(out, 0o755); err != nil {
		t.Fatal(err)
	}
	var seen []string
	store.SetAfterBackupCopy(t, func(path string) {
		fi, err := os.Stat(path)
		if err != nil {
			t.Errorf("the copy under way: %v", err)
			return
		}
		if got := fi.Mode().Perm(); got != 0o600 {
			t.Errorf("the copy under way %s: mode %v, want 0600 (another user of %s could open it)", filepath.Base(path), got, out)
		}
		seen = append(seen, path)
	})
	output := filepath.Join(out, "b.db")
	if _, err := store.BackupSQLite(t.Context(), dir, output); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || filepath.Dir(seen[0]) != out || !strings.HasPrefix(filepath.Base(seen[0]), ".b.db.partial-") {
		t.Errorf("copies seen: %q; want one .b.db.partial-* in %s", seen, out)
	}
	if fi, err := os.Stat(output); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the backup: %v, %v; want mode 0600", fi.Mode(), err)
	}
	left, err := filepath.Glob(filepath.Join(out, ".b.db.partial-*"))
	if err != nil || len(left) != 0 {
		t.Errorf("left in %s: %q, %v", out, left, err)
	}
	if _, err := store.InspectSQLite(t.Context(), output); err != nil {
		t.Errorf("the backup does not check: %v", err)
	}
}
