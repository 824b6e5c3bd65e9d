package store_test

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/internal/syncbuf"
	"github.com/vdibroker/vdibroker/store"
)

func openSQLite(t *testing.T, dir string) *store.DB {
	t.Helper()
	s, err := store.OpenWith(t.Context(), "", dir, nil, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func countPools(t *testing.T, s *store.DB) int {
	t.Helper()
	ps, err := s.ListHostPools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return len(ps)
}

// TestBackupSQLiteWhileWriting: a backup taken while pools are being
// created is one snapshot: opened as a store, it holds exactly the pools
// its description counted, at least those created before it began.
func TestBackupSQLiteWhileWriting(t *testing.T) {
	dir := t.TempDir()
	s := openSQLite(t, dir)
	defer s.Close()
	for i := range 5 {
		mustPool(t, s, pool(fmt.Sprintf("before-%d", i), vdibroker.Pooled))
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 200 {
			if _, err := s.PutHostPool(t.Context(), pool(fmt.Sprintf("during-%03d", i), vdibroker.Pooled), vdibroker.Precondition{}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	out := filepath.Join(t.TempDir(), "backup.db")
	info, err := store.BackupSQLite(t.Context(), dir, out)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if info.Pools < 5 || info.Pools > 205 {
		t.Fatalf("backup holds %d pools, want 5..205", info.Pools)
	}
	restored := t.TempDir()
	if _, _, err := store.RestoreSQLite(t.Context(), restored, out, t0); err != nil {
		t.Fatal(err)
	}
	r := openSQLite(t, restored)
	defer r.Close()
	if got := countPools(t, r); got != info.Pools {
		t.Errorf("the restored store holds %d pools, the backup said %d", got, info.Pools)
	}
	if _, err := store.BackupSQLite(t.Context(), dir, out); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("a backup over an existing file: %v", err)
	}
	if _, err := store.BackupSQLite(t.Context(), t.TempDir(), filepath.Join(t.TempDir(), "x.db")); err == nil {
		t.Error("a backup of a data dir without a store succeeded")
	}
}

// copyTo copies files of dir (those that exist) into dst: the image a
// process killed at this instant leaves on disk.
func copyTo(t *testing.T, dir, dst string, names ...string) {
	t.Helper()
	for _, n := range names {
		in, err := os.Open(filepath.Join(dir, n))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dst, n))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(out, in)
		in.Close()
		out.Close()
	}
}

// crashImage is a backup of a store holding the pool "kept", and the
// data dir a broker that crashed after it left: the database, its -wal
// (with the pool "after-backup" made since the backup) and -shm.
func crashImage(t *testing.T) (backup, crashed string) {
	t.Helper()
	dir := t.TempDir()
	s := openSQLite(t, dir)
	defer s.Close()
	mustPool(t, s, pool("kept", vdibroker.Pooled))
	backup = filepath.Join(t.TempDir(), "backup.db")
	if _, err := store.BackupSQLite(t.Context(), dir, backup); err != nil {
		t.Fatal(err)
	}
	mustPool(t, s, pool("after-backup", vdibroker.Pooled))
	crashed = t.TempDir()
	copyTo(t, dir, crashed, store.SQLiteFile, store.SQLiteFile+"-wal", store.SQLiteFile+"-shm")
	return backup, crashed
}

// TestRestoreSQLiteMovesWALAside: restoring over a data dir a crashed
// broker left (database, -wal, -shm) moves all three aside: the old WAL
// is not replayed onto the restored file, whose pools are the backup's.
func TestRestoreSQLiteMovesWALAside(t *testing.T) {
	backup, crashed := crashImage(t)
	if _, err := os.Stat(filepath.Join(crashed, store.SQLiteFile+"-wal")); err != nil {
		t.Fatalf("the crash image has no WAL: %v", err)
	}
	info, moved, err := store.RestoreSQLite(t.Context(), crashed, backup, t0)
	if err != nil {
		t.Fatal(err)
	}
	if info.Pools != 1 || len(moved) < 2 {
		t.Errorf("restore: %v, moved aside %v", info, moved)
	}
	for _, m := range moved {
		if !strings.Contains(m, ".before-restore-20261129T120000Z") {
			t.Errorf("moved aside to %s", m)
		}
	}
	r := openSQLite(t, crashed)
	defer r.Close()
	if _, err := r.GetHostPool(t.Context(), "after-backup"); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
		t.Errorf("a pool created after the backup is in the restored store (%v): the old WAL was replayed", err)
	}
	if _, err := r.GetHostPool(t.Context(), "kept"); err != nil {
		t.Errorf("the backup's pool: %v", err)
	}
}

// TestFailedRestoreKeepsTheStore: a restore that fails after it moved the
// database aside (here its -wal cannot be moved: a directory holds the
// name) puts the database back beside its WAL, so the data dir's store is
// the one it was, with the commits in its WAL, and serve does not start
// on an empty store.
func TestFailedRestoreKeepsTheStore(t *testing.T) {
	backup, crashed := crashImage(t)
	blocked := filepath.Join(crashed, store.SQLiteFile+"-wal.before-restore-20261129T120000Z")
	if err := os.MkdirAll(filepath.Join(blocked, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, moved, err := store.RestoreSQLite(t.Context(), crashed, backup, t0)
	if err == nil || !strings.Contains(err.Error(), "move "+filepath.Join(crashed, store.SQLiteFile+"-wal")+" aside") {
		t.Fatalf("restore with its -wal's new name taken: %v; want the move refused", err)
	}
	if len(moved) != 0 {
		t.Errorf("left aside %q; want everything put back", moved)
	}
	if _, err := os.Stat(filepath.Join(crashed, store.SQLiteFile+".before-restore-20261129T120000Z")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the database is still moved aside: %v", err)
	}
	os.RemoveAll(blocked)
	r := openSQLite(t, crashed)
	defer r.Close()
	if _, err := r.GetHostPool(t.Context(), "after-backup"); err != nil {
		t.Errorf("the store after a failed restore lacks a pool of its WAL: %v", err)
	}
}

// TestRestoreSQLiteRefusesNewerSchema: a backup a newer vdibroker wrote
// is refused before anything in the data dir changes.
func TestRestoreSQLiteRefusesNewerSchema(t *testing.T) {
	dir := t.TempDir()
	s := openSQLite(t, dir)
	mustPool(t, s, pool("mine", vdibroker.Pooled))
	s.Close()
	backup := filepath.Join(t.TempDir(), "backup.db")
	if _, err := store.BackupSQLite(t.Context(), dir, backup); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", backup)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO goose_db_version (version_id, is_applied) VALUES (?, true)`, newestMigration(t, "sqlite")+1); err != nil {
		t.Fatal(err)
	}
	db.Close()
	before, _ := os.ReadDir(dir)
	_, _, err = store.RestoreSQLite(t.Context(), dir, backup, time.Now())
	if !errors.Is(err, store.ErrSchemaTooNew) || !strings.Contains(err.Error(), "upgrade vdibroker") {
		t.Fatalf("restore of a newer backup: %v", err)
	}
	after, _ := os.ReadDir(dir)
	if len(after) != len(before) {
		t.Errorf("the data dir changed: %d files, then %d", len(before), len(after))
	}
	r := openSQLite(t, dir)
	defer r.Close()
	if countPools(t, r) != 1 {
		t.Error("the store is not as it was")
	}
}

// TestRestoreSQLiteOlderSchema: a backup an older vdibroker wrote (here a
// store taken back to 00055, before the sessions' ended column) is
// inspected and restored, its open sessions counted, and the broker that
// opens it migrates it: the sessions are as they were.
func TestRestoreSQLiteOlderSchema(t *testing.T) {
	dir := t.TempDir()
	s := openSQLite(t, dir)
	mustPool(t, s, pool("p", vdibroker.Pooled))
	mustHost(t, s, "p", "h1")
	mustCommit(t, s, placement("p", "h1", "alice", 10))
	bob := mustCommit(t, s, placement("p", "h1", "bob", 10))
	if err := s.EndSession(t.Context(), "p", bob, vdibroker.EndLoggedOffByAdmin, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.MigrateDownTo(t.Context(), 55); err != nil {
		t.Fatal(err)
	}
	s.Close()
	backup := filepath.Join(t.TempDir(), "backup.db")
	if _, err := store.BackupSQLite(t.Context(), dir, backup); err != nil {
		t.Fatal(err)
	}
	restored := t.TempDir()
	info, _, err := store.RestoreSQLite(t.Context(), restored, backup, t0)
	if err != nil {
		t.Fatal(err)
	}
	if info.SchemaVersion != 55 || info.OpenSessions != 1 {
		t.Errorf("the older backup: %v; want schema 55 and 1 open session", info)
	}
	r := openSQLite(t, restored)
	defer r.Close()
	open, err := r.ListUserSessions(t.Context(), vdibroker.SessionFilter{HostPool: "p"})
	if err != nil || len(open) != 1 || open[0].User != "alice" {
		t.Errorf("open sessions after the restore: %v, %v; want alice's", open, err)
	}
	if n, err := r.EndedMismatches(t.Context()); err != nil || n != 0 {
		t.Errorf("%d sessions whose ended is not their state after the migration (%v)", n, err)
	}
}

// TestBackupInfoString: one of a thing is said in the singular.
func TestBackupInfoString(t *testing.T) {
	b := &store.BackupInfo{SchemaVersion: 65, Pools: 1, Hosts: 2, OpenSessions: 0, Tokens: 1, Bytes: 4096}
	if got, want := b.String(), "schema version 65, 1 host pool, 2 session hosts, 0 open sessions, 1 token, 4096 bytes"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}

// TestBackupRestoreNamePathMistakes: an --output in a directory that does
// not exist, and an --input that is a directory, are refused naming what
// is wrong, not a temporary file or SQLite's "disk I/O error".
func TestBackupRestoreNamePathMistakes(t *testing.T) {
	dir := t.TempDir()
	s := openSQLite(t, dir)
	s.Close()
	missing := filepath.Join(t.TempDir(), "nodir")
	_, err := store.BackupSQLite(t.Context(), dir, filepath.Join(missing, "b.db"))
	if err == nil || !strings.Contains(err.Error(), "its directory "+missing+" does not exist") || strings.Contains(err.Error(), "partial") {
		t.Errorf("backup into a missing directory: %v", err)
	}
	_, _, err = store.RestoreSQLite(t.Context(), t.TempDir(), dir, t0)
	if err == nil || !strings.Contains(err.Error(), dir+" is a directory, not a backup file") {
		t.Errorf("restore of a directory: %v", err)
	}
}

// TestRestoreIsAudited: the audit trail is append-only (R-SEC), and a
// restore takes the entries written since the backup out of it. The
// restored store's trail says so: its newest entry is the restore
// (store.restore, by the machine's user, with the last seq of the store
// replaced and of the backup), numbered after every entry the replaced
// store had given, so no seq names two different entries; the next
// entry follows it.
func TestRestoreIsAudited(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := openSQLite(t, dir)
	audit := func(action string) int64 {
		t.Helper()
		e := &vdibroker.AuditEntry{Principal: vdibroker.AuditPrincipal{Kind: vdibroker.PrincipalAdmin}, Action: action, Target: "tokens", Time: t0}
		if err := s.AppendAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
		return e.Seq
	}
	audit("token.create")
	inBackup := audit("token.create")
	backup := filepath.Join(t.TempDir(), "backup.db")
	if _, err := store.BackupSQLite(ctx, dir, backup); err != nil {
		t.Fatal(err)
	}
	audit("token.delete")
	lost := audit("token.delete")
	s.Close()

	changes, err := store.CompareCredentials(ctx, dir, backup, t0)
	if err != nil || !changes.Empty() {
		t.Fatalf("credential changes: %+v, %v; want none", changes, err)
	}
	_, moved, err := store.RestoreSQLite(ctx, dir, backup, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	// Reading the store that a broker closed cleanly made no -wal or -shm
	// beside it: only the database is moved aside.
	if len(moved) != 1 {
		t.Errorf("moved aside %q; want the database alone", moved)
	}
	r := openSQLite(t, dir)
	defer r.Close()
	es, err := r.ListAudit(ctx, vdibroker.AuditFilter{Newest: true, Limit: 10})
	if err != nil || len(es) != 3 {
		t.Fatalf("audit after the restore: %d entries, %v; want the backup's 2 and the restore", len(es), err)
	}
	e := es[0]
	if e.Action != store.ActionStoreRestore || e.Principal.Kind != vdibroker.PrincipalLocal || e.Principal.ID == "" || !e.Time.Equal(t0.Add(time.Hour)) {
		t.Errorf("newest entry %+v, want the restore, by a local user", e)
	}
	if e.Seq != lost+1 {
		t.Errorf("the restore is entry %d; want %d, after the replaced store's last (%d), so no seq is given twice", e.Seq, lost+1, lost)
	}
	var before, after struct {
		Store        string
		LastAuditSeq int64
	}
	if json.Unmarshal(e.Before, &before) != nil || json.Unmarshal(e.After, &after) != nil ||
		before.LastAuditSeq != lost || !strings.Contains(before.Store, ".before-restore-") ||
		after.LastAuditSeq != inBackup || after.Store != backup {
		t.Errorf("restore entry before %s after %s; want the replaced store (moved aside, last seq %d) and the backup (%s, last seq %d)",
			e.Before, e.After, lost, backup, inBackup)
	}
	next := &vdibroker.AuditEntry{Principal: vdibroker.AuditPrincipal{Kind: vdibroker.PrincipalAdmin}, Action: "token.create", Target: "tokens", Time: t0}
	if err := r.AppendAudit(ctx, next); err != nil || next.Seq != e.Seq+1 {
		t.Errorf("the next entry: seq %d, %v; want %d", next.Seq, err, e.Seq+1)
	}
}

// TestNewStoreIsOwnersOnly: a new store's database, WAL and shared memory
// files are mode 0600 (they hold credential hashes and the RD gateway's
// signing seeds), as a backup is, even in a data dir others may enter.
func TestNewStoreIsOwnersOnly(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := openSQLite(t, dir)
	defer s.Close()
	mustPool(t, s, pool("p", vdibroker.Pooled))
	for _, name := range []string{store.SQLiteFile, store.SQLiteFile + "-wal", store.SQLiteFile + "-shm"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != 0o600 {
			t.Errorf("%s: mode %v, want 0600", name, got)
		}
	}
}

// TestOlderStoreReadableByOthersWarned: a store an earlier release made
// readable by others (0644) keeps its mode, which may be on purpose, but
// each start says in the log that it holds credential hashes and the RD
// gateway's signing seeds, and how to make it the owner's alone.
func TestOlderStoreReadableByOthersWarned(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix modes")
	}
	dir := t.TempDir()
	openSQLite(t, dir).Close()
	path := filepath.Join(dir, store.SQLiteFile)
	open := func() string {
		t.Helper()
		var logs syncbuf.Buffer
		s, err := store.OpenWith(t.Context(), "", dir, slog.New(slog.NewTextHandler(&logs, nil)), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		return logs.String()
	}
	if got := open(); strings.Contains(got, "read by other users") {
		t.Errorf("a 0600 store warned:\n%s", got)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := open(); !strings.Contains(got, "level=WARN") || !strings.Contains(got, "can be read by other users") || !strings.Contains(got, "mode=0644") {
		t.Errorf("a 0644 store: log %q; want the warning", got)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("the store's mode was changed: %v, %v", fi.Mode(), err)
	}
}

// TestRestoreEndsSignIns (R-SEC, web sessions): a backup holds the
// console and portal sign-ins of its time; one signed out after the backup
// must not come back with the restore (its cookie, perhaps stolen, would
// work again). The restore ends every sign-in the backup held, says how
// many, and records it in its audit entry.
func TestRestoreEndsSignIns(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := openSQLite(t, dir)
	for _, id := range []string{"kept", "signed-out"} {
		if err := s.CreateWebSession(ctx, webSession(id, "token:"+id, t0), vdibroker.WebSessionLimits{}, t0); err != nil {
			t.Fatal(err)
		}
	}
	backup := filepath.Join(t.TempDir(), "backup.db")
	if _, err := store.BackupSQLite(ctx, dir, backup); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteWebSession(ctx, "signed-out"); err != nil { // signed out after the backup
		t.Fatal(err)
	}
	s.Close()

	info, _, err := store.RestoreSQLite(ctx, dir, backup, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if info.SignInsEnded != 2 {
		t.Errorf("the restore ended %d sign-ins; want the backup's 2", info.SignInsEnded)
	}
	r := openSQLite(t, dir)
	defer r.Close()
	for _, id := range []string{"kept", "signed-out"} {
		if ws, err := r.WebSession(ctx, id, t0.Add(2*time.Minute)); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
			t.Errorf("sign-in %s after the restore: %+v, %v; want NotFound (everyone signs in again)", id, ws, err)
		}
	}
	// The areas' counts (migration 00067) went with them: a count kept
	// would refuse sign-ins as if the area were full.
	if kept, counted, err := r.WebSessionCounts(ctx); err != nil || len(kept) != 0 || len(counted) != 0 {
		t.Errorf("after the restore: counts kept %v, rows %v, %v; want none", kept, counted, err)
	}
	es, err := r.ListAudit(ctx, vdibroker.AuditFilter{Action: store.ActionStoreRestore, Limit: 1})
	if err != nil || len(es) != 1 {
		t.Fatalf("restore entry: %v, %v", es, err)
	}
	var after struct{ SignInsEnded int }
	if json.Unmarshal(es[0].After, &after) != nil || after.SignInsEnded != 2 {
		t.Errorf("restore entry after %s; want signInsEnded 2", es[0].After)
	}
}

// TestRestoreCarriesETagClockForward_RE13: update times are ETags, issued
// past the last one the store issued (etag_clock). The store replaced by
// a restore issued times ahead of the wall clock (here a replica whose
// clock ran an hour ahead wrote the pool after the backup), and a client
// holds one. A write after the restore is issued a time past every time
// the replaced store issued, whatever its own clock says, so the tag held
// matches no state of the restored store: an If-Match with it is refused.
// (Left at the backup's clock, the write at the wall clock was issued a
// time before the held one, and the write at the held time the held tag
// itself, which the stale If-Match then matched.)
func TestRestoreCarriesETagClockForward_RE13(t *testing.T) {
	ahead := t0.Add(time.Hour)
	for _, c := range []struct {
		name string
		now  time.Time // the write's clock after the restore
	}{
		{"the wall clock, behind the replaced store's", t0.Add(3 * time.Minute)},
		{"the time the replaced store issued last", ahead},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			dir := t.TempDir()
			s := openSQLite(t, dir)
			backup, held := backupThenWriteAhead(t, s, dir, ahead)
			if held.Before(ahead) {
				t.Fatalf("the write ahead was issued %v; want at least %v", held, ahead)
			}
			s.Close()

			if _, _, err := store.RestoreSQLite(ctx, dir, backup, t0.Add(2*time.Minute)); err != nil {
				t.Fatal(err)
			}
			r := openSQLite(t, dir)
			defer r.Close()
			got, err := r.UpdateHostPool(ctx, "p", func(p *vdibroker.HostPool) error {
				p.Description, p.UpdateTime = "after the restore", c.now
				return nil
			}, vdibroker.Precondition{})
			if err != nil {
				t.Fatal(err)
			}
			if !got.UpdateTime.After(held) {
				t.Errorf("the write after the restore was issued %v; want after %v, the replaced store's last", got.UpdateTime, held)
			}
			_, err = r.UpdateHostPool(ctx, "p", func(p *vdibroker.HostPool) error {
				p.Description, p.UpdateTime = "stale", c.now
				return nil
			}, vdibroker.Precondition{Exists: true, Versions: []time.Time{held}})
			if vdibroker.ErrorCode(err) != vdibroker.EPreconditionFailed {
				t.Errorf("a write with If-Match %s, the replaced store's: %v; want PreconditionFailed", vdibroker.ETag(held), err)
			}
		})
	}
}

// TestRestoreETagClockOlderStores_RE13: a backup from before the ETag
// clock (00075) is restored over a store that has one, and a backup with
// one over a store from before it: neither has a clock to carry, and the
// restore goes on (the migration starts the older one's clock at its
// newest update time).
func TestRestoreETagClockOlderStores_RE13(t *testing.T) {
	ctx := t.Context()
	older := func(t *testing.T) string {
		t.Helper()
		dir := t.TempDir()
		s := openSQLite(t, dir)
		mustPool(t, s, pool("old", vdibroker.Pooled))
		if err := s.MigrateDownTo(ctx, 74); err != nil {
			t.Fatal(err)
		}
		s.Close()
		return dir
	}
	newer := func(t *testing.T) string {
		t.Helper()
		dir := t.TempDir()
		s := openSQLite(t, dir)
		mustPool(t, s, pool("new", vdibroker.Pooled))
		s.Close()
		return dir
	}
	for _, c := range []struct {
		name         string
		backup, over func(*testing.T) string
		pool         string
	}{
		{"a backup from before 00075", older, newer, "old"},
		{"over a store from before 00075", newer, older, "new"},
	} {
		t.Run(c.name, func(t *testing.T) {
			backup := filepath.Join(t.TempDir(), "backup.db")
			if _, err := store.BackupSQLite(ctx, c.backup(t), backup); err != nil {
				t.Fatal(err)
			}
			dir := c.over(t)
			if _, _, err := store.RestoreSQLite(ctx, dir, backup, t0.Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
			r := openSQLite(t, dir)
			defer r.Close()
			p, err := r.UpdateHostPool(ctx, c.pool, func(p *vdibroker.HostPool) error { p.UpdateTime = t0.Add(2 * time.Minute); return nil }, vdibroker.Precondition{})
			if err != nil || !p.UpdateTime.Equal(t0.Add(2*time.Minute)) {
				t.Errorf("a write after the restore: %v, %v; want issued at its clock", p, err)
			}
		})
	}
}

// TestRestoreCarriesETagClockFromWAL_RE13: the replaced store is the one
// a broker killed left (serve stopped by a crash, not a clean close): its
// last update time issued, ahead of the wall clock, is only in its -wal,
// not yet checkpointed into the database file. The restore reads it
// there, as a start would, and carries the clock past it, with the -shm
// left beside it or without (a data dir copied without it). (Read from
// the database file alone, the clock is the backup's: a write after the
// restore at the held time would be issued the held tag itself.)
func TestRestoreCarriesETagClockFromWAL_RE13(t *testing.T) {
	ahead := t0.Add(time.Hour)
	for _, c := range []struct {
		name  string
		files []string // what the crash left in the data dir
	}{
		{"database, -wal and -shm", []string{store.SQLiteFile, store.SQLiteFile + "-wal", store.SQLiteFile + "-shm"}},
		{"database and -wal", []string{store.SQLiteFile, store.SQLiteFile + "-wal"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			dir := t.TempDir()
			// No checkpoint but SQLite's automatic one, 10,000 pages away:
			// the write below stays in the WAL.
			s, err := store.OpenWith(ctx, "", dir, nil, store.Options{CheckpointInterval: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			backup, held := backupThenWriteAhead(t, s, dir, ahead)
			crashed := t.TempDir()
			copyTo(t, dir, crashed, c.files...)
			if got := fileClock(t, filepath.Join(crashed, store.SQLiteFile)); !got.Before(held) {
				t.Fatalf("the crashed store's database file holds the clock %v: the write ahead was checkpointed, the WAL is not what is read", got)
			}

			if _, _, err := store.RestoreSQLite(ctx, crashed, backup, t0.Add(2*time.Minute)); err != nil {
				t.Fatal(err)
			}
			r := openSQLite(t, crashed)
			defer r.Close()
			got, err := r.UpdateHostPool(ctx, "p", func(p *vdibroker.HostPool) error {
				p.Description, p.UpdateTime = "after the restore", ahead
				return nil
			}, vdibroker.Precondition{})
			if err != nil {
				t.Fatal(err)
			}
			if !got.UpdateTime.After(held) {
				t.Errorf("the write after the restore was issued %v; want after %v, the replaced store's last (in its WAL)", got.UpdateTime, held)
			}
		})
	}
}

// fileClock reads the ETag clock of the database file at path alone, as
// if it had no -wal (a copy of the file, opened immutable): the zero time
// when the file has no etag_clock yet (its schema is still in the WAL).
func fileClock(t *testing.T, path string) time.Time {
	t.Helper()
	only := filepath.Join(t.TempDir(), "only.db")
	copyTo(t, filepath.Dir(path), filepath.Dir(only), filepath.Base(path))
	if err := os.Rename(filepath.Join(filepath.Dir(only), filepath.Base(path)), only); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+only+"?mode=ro&immutable=1")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var tables int
	if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM sqlite_master WHERE name = 'etag_clock'`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables == 0 {
		return time.Time{}
	}
	var last int64
	if err := db.QueryRowContext(t.Context(), `SELECT last FROM etag_clock WHERE id = 1`).Scan(&last); err != nil {
		t.Fatal(err)
	}
	return time.Unix(0, last)
}

// backupThenWriteAhead makes pool p in s (the store of dir), backs dir up,
// then writes p as a replica whose clock is at ahead would: it returns
// the backup and the update time (ETag) that write was issued, which a
// client then holds.
func backupThenWriteAhead(t *testing.T, s *store.DB, dir string, ahead time.Time) (backup string, held time.Time) {
	t.Helper()
	ctx := t.Context()
	mustPool(t, s, pool("p", vdibroker.Pooled))
	backup = filepath.Join(t.TempDir(), "backup.db")
	if _, err := store.BackupSQLite(ctx, dir, backup); err != nil {
		t.Fatal(err)
	}
	p, err := s.UpdateHostPool(ctx, "p", func(p *vdibroker.HostPool) error {
		p.Description, p.UpdateTime = "written by a replica an hour ahead", ahead
		return nil
	}, vdibroker.Precondition{})
	if err != nil {
		t.Fatal(err)
	}
	return backup, p.UpdateTime
}

// TestRestoreTwiceInOneSecondKeepsWhatItMovedAside: the files a restore
// moves aside are never deleted, so a second restore in the same second,
// whose names for them would be the first's (.before-restore-<second>),
// must not move the first restore's store onto them: the store the first
// one replaced (here with a pool in its WAL) would be gone. The second
// moves the store it replaces to the next free name, -2.
func TestRestoreTwiceInOneSecondKeepsWhatItMovedAside(t *testing.T) {
	backup, crashed := crashImage(t)
	if _, _, err := store.RestoreSQLite(t.Context(), crashed, backup, t0); err != nil {
		t.Fatal(err)
	}
	const suffix = ".before-restore-20261129T120000Z"
	aside := filepath.Join(crashed, store.SQLiteFile+suffix)
	first, err := os.ReadFile(aside)
	if err != nil {
		t.Fatal(err)
	}
	restored, err := os.ReadFile(filepath.Join(crashed, store.SQLiteFile))
	if err != nil {
		t.Fatal(err)
	}
	_, moved, err := store.RestoreSQLite(t.Context(), crashed, backup, t0.Add(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{aside + "-2"}; fmt.Sprint(moved) != fmt.Sprint(want) {
		t.Errorf("moved aside %q; want %q", moved, want)
	}
	if got, err := os.ReadFile(aside); err != nil || string(got) != string(first) {
		t.Errorf("the store the first restore moved aside was replaced (%v): its pools are lost", err)
	}
	if got, err := os.ReadFile(aside + "-2"); err != nil || string(got) != string(restored) {
		t.Errorf("the second restore did not move the first one's store to %s-2 (%v)", aside, err)
	}
	// The store the first restore replaced, put back together from what
	// it moved aside, still holds the pool of its WAL.
	back := t.TempDir()
	for _, name := range []string{store.SQLiteFile, store.SQLiteFile + "-wal", store.SQLiteFile + "-shm"} {
		data, err := os.ReadFile(filepath.Join(crashed, name+suffix))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(back, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := openSQLite(t, back)
	defer r.Close()
	if _, err := r.GetHostPool(t.Context(), "after-backup"); err != nil {
		t.Errorf("the store moved aside lacks the pool of its WAL: %v", err)
	}
}
