package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vdibroker/vdibroker"
)

// Backup and restore of the embedded SQLite store (docs/operations.md).
// PostgreSQL is backed up with its own tools (pg_dump, pg_restore).

// SQLiteFile is the embedded store's file in its data directory.
const SQLiteFile = "vdibroker.db"

// BackupInfo describes a backup (or a store file): its schema version and
// what it holds.
type BackupInfo struct {
	SchemaVersion int64
	Pools         int
	Hosts         int
	OpenSessions  int
	Tokens        int
	Bytes         int64
	// SignInsEnded is set by RestoreSQLite: the console and portal
	// sign-ins (web sessions) the backup held, all ended by the restore.
	SignInsEnded int
}

func (b *BackupInfo) String() string {
	return fmt.Sprintf("schema version %d, %s, %s, %s, %s, %s", b.SchemaVersion, plural(int64(b.Pools), "host pool"),
		plural(int64(b.Hosts), "session host"), plural(int64(b.OpenSessions), "open session"), plural(int64(b.Tokens), "token"), plural(b.Bytes, "byte"))
}

// plural is n and what, in the plural unless n is 1.
func plural(n int64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// sqliteURL is the URL modernc's driver opens path with, with pragmas.
func sqliteURL(path string, pragmas ...string) string {
	u := "file:" + (&url.URL{Path: path}).EscapedPath() + "?_pragma=busy_timeout(10000)"
	for _, p := range pragmas {
		u += "&" + p
	}
	return u
}

// BackupSQLite writes a consistent copy of the store in dataDir to output
// while a broker may be serving from it. SQLite's VACUUM INTO reads the
// database in one read transaction, a snapshot that includes every commit
// in the WAL and none that comes later, and writes it out compacted; the
// broker's writes go on meanwhile (WAL readers do not block the writer).
// The copy is written beside output and renamed into place once it is
// complete and checked, so output never holds half a backup; an existing
// output is refused.
func BackupSQLite(ctx context.Context, dataDir, output string) (*BackupInfo, error) {
	src := filepath.Join(dataDir, SQLiteFile)
	if _, err := os.Stat(src); err != nil {
		return nil, fmt.Errorf("backup: no store in %s: %w", dataDir, err)
	}
	if _, err := os.Lstat(output); err == nil {
		return nil, fmt.Errorf("backup: %s exists: give a new file (a backup never replaces one)", output)
	}
	// The copy is made beside output: a missing directory is named as
	// such, not by the temporary file's name.
	if fi, err := os.Stat(filepath.Dir(output)); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("backup: cannot write %s: its directory %s does not exist", output, filepath.Dir(output))
	}
	// The copy holds credential hashes and the RD gateway's signing
	// seeds: it is the owner's alone from its first byte. CreateTemp
	// makes it empty, mode 0600, a name no one else held (O_EXCL), and
	// VACUUM INTO writes into an empty file as it finds it. Left to
	// VACUUM INTO to create, it was made by the umask (0644) and made
	// 0600 only once written, so another user of the directory could
	// open it meanwhile and keep reading; and one who made an empty file
	// of that name first, between its removal and the copy, got the
	// copy in a file of its own.
	// On Windows it has a DACL of its own, the broker's account's,
	// SYSTEM's and Administrators' (createPrivateFile), not the entries
	// of output's folder.
	tmp, err := createPrivateTemp(filepath.Dir(output), "."+filepath.Base(output)+".partial-")
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	tmpPath := tmp.Name()
	defer os.Remove(tmpPath)
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}

	// mode=rw: the source must exist (it is not created empty); no
	// journal_mode pragma, which would write.
	db, err := sql.Open("sqlite", sqliteURL(src, "mode=rw"))
	if err != nil {
		return nil, fmt.Errorf("backup: open %s: %w", src, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, tmpPath); err != nil {
		return nil, fmt.Errorf("backup: copy %s: %w", src, err)
	}
	if afterBackupCopy != nil {
		afterBackupCopy(tmpPath)
	}
	info, err := InspectSQLite(ctx, tmpPath)
	if err != nil {
		return nil, fmt.Errorf("backup: the copy does not check: %w", err)
	}
	if err := syncFile(tmpPath); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	if err := os.Rename(tmpPath, output); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	return info, syncDir(filepath.Dir(output))
}

// createPrivateTemp creates a new file in dir, named prefix and a random
// suffix, with createPrivateFile, as os.CreateTemp does with mode 0600.
func createPrivateTemp(dir, prefix string) (*os.File, error) {
	for try := 0; ; try++ {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		f, err := createPrivateFile(filepath.Join(dir, prefix+hex.EncodeToString(b[:])))
		if errors.Is(err, os.ErrExist) && try < 10 {
			continue
		}
		return f, err
	}
}

// afterBackupCopy, when set (by tests), is called with the copy's path
// once VACUUM INTO has written it, before it is checked and renamed.
var afterBackupCopy func(path string)

// InspectSQLite checks a store file (a backup) and tells what it holds:
// SQLite's integrity check must pass, and its schema must be one this
// binary knows (ErrSchemaTooNew otherwise). It opens the file read-only.
func InspectSQLite(ctx context.Context, path string) (*BackupInfo, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() { // SQLite would say "disk I/O error"
		return nil, fmt.Errorf("%s is a directory, not a backup file", path)
	}
	db, err := sql.Open("sqlite", sqliteURL(path, "mode=ro"))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	var check string
	if err := db.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&check); err != nil {
		return nil, fmt.Errorf("%s: not a vdibroker store: %w", path, err)
	}
	if check != "ok" {
		return nil, fmt.Errorf("%s: integrity check: %s", path, check)
	}
	info := &BackupInfo{Bytes: fi.Size()}
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version_id), 0) FROM goose_db_version WHERE is_applied`).Scan(&info.SchemaVersion); err != nil {
		return nil, fmt.Errorf("%s: not a vdibroker store (no schema version): %w", path, err)
	}
	known, err := newestMigration("migrations/sqlite")
	if err != nil {
		return nil, err
	}
	if info.SchemaVersion > known {
		return nil, fmt.Errorf("%w: %s is at schema version %d, this vdibroker knows versions up to %d: upgrade vdibroker to the release that wrote it",
			ErrSchemaTooNew, path, info.SchemaVersion, known)
	}
	for _, c := range []struct {
		n     *int
		query string
	}{
		{&info.Pools, `SELECT count(*) FROM host_pools`},
		{&info.Hosts, `SELECT count(*) FROM session_hosts`},
		// On state alone: a backup taken before 00060 has no ended.
		{&info.OpenSessions, `SELECT count(*) FROM user_sessions WHERE state <> 'LoggedOff'`},
		{&info.Tokens, `SELECT count(*) FROM tokens`},
	} {
		if err := db.QueryRowContext(ctx, c.query).Scan(c.n); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return info, nil
}

// NewestSchemaVersion is the newest schema version this binary migrates
// a database of dialect ("sqlite" or "postgres") to: a database at a later
// version is refused at start (ErrSchemaTooNew).
func NewestSchemaVersion(dialect string) (int64, error) {
	return newestMigration("migrations/" + dialect)
}

// newestMigration is the version of the newest migration in dir of the
// embedded migrations (files are named 00001_...).
func newestMigration(dir string) (int64, error) {
	files, err := fs.Glob(migrations, dir+"/*.sql")
	if err != nil || len(files) == 0 {
		return 0, fmt.Errorf("embedded migrations %s: %v", dir, err)
	}
	name := filepath.Base(files[len(files)-1])
	v, err := strconv.ParseInt(name[:strings.IndexByte(name, '_')], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("embedded migration %s: %w", name, err)
	}
	return v, nil
}

// RestoreSQLite makes the backup at input the store of dataDir. The broker
// must be stopped: the caller holds the data dir's lock. The backup is
// checked first (InspectSQLite); the files it replaces (the database and
// its -wal and -shm, whose pages would otherwise be replayed onto the
// restored file) are moved aside to <name>.before-restore-<now> (with -2,
// -3, ... after it when a restore in the same second took that name),
// never deleted. The restored store's audit trail gets an entry for the restore
// (recordRestore), and every console and portal sign-in in it ends
// (info.SignInsEnded). It returns the backup's description and the files
// moved aside. A restore that fails puts back what it moved aside.
func RestoreSQLite(ctx context.Context, dataDir, input string, now time.Time) (*BackupInfo, []string, error) {
	info, err := InspectSQLite(ctx, input)
	if err != nil {
		return nil, nil, fmt.Errorf("restore: %w", err)
	}
	if err := mkdirDataDir(dataDir); err != nil {
		return nil, nil, fmt.Errorf("restore: %w", err)
	}
	dst := filepath.Join(dataDir, SQLiteFile)
	tmp := dst + ".restoring"
	if err := copyFile(input, tmp); err != nil {
		os.Remove(tmp)
		return nil, nil, fmt.Errorf("restore: %w", err)
	}
	// What is moved aside is never deleted: a restore within the same
	// second as another finds the names it would take held by what that
	// one moved aside (the store it replaced), which a rename would
	// replace, and takes the next free name (-2, -3, ...).
	base := ".before-restore-" + now.UTC().Format("20060102T150405Z")
	suffix := base
	for n := 2; ; n++ {
		if _, err := os.Lstat(dst + suffix); err != nil {
			break
		}
		suffix = base + "-" + strconv.Itoa(n)
	}
	if info.SignInsEnded, err = recordRestore(ctx, tmp, dst, dst+suffix, input, info, now); err != nil {
		removeSQLite(tmp)
		return nil, nil, fmt.Errorf("restore: %w", err)
	}
	var moved []string
	for _, name := range []string{dst, dst + "-wal", dst + "-shm"} {
		if _, err := os.Lstat(name); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if _, err := os.Lstat(name + suffix); err == nil {
			// A -wal or -shm left there alone: not replaced either.
			os.Remove(tmp)
			return nil, putBack(moved, suffix), fmt.Errorf("restore: move %s aside: %s exists", name, name+suffix)
		}
		if err := os.Rename(name, name+suffix); err != nil {
			os.Remove(tmp)
			return nil, putBack(moved, suffix), fmt.Errorf("restore: move %s aside: %w", name, err)
		}
		moved = append(moved, name+suffix)
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return nil, putBack(moved, suffix), fmt.Errorf("restore: %w", err)
	}
	return info, moved, syncDir(dataDir)
}

// putBack moves the files a failed restore moved aside back to their
// names, so the data dir holds the store it held: a database moved aside
// without its -wal would otherwise leave the next serve to create an empty
// store, beside the old store's WAL. It returns the files still aside.
func putBack(moved []string, suffix string) []string {
	var left []string
	for _, m := range moved {
		if err := os.Rename(m, strings.TrimSuffix(m, suffix)); err != nil {
			left = append(left, m)
		}
	}
	return left
}

// ActionStoreRestore is the audit action of a restore (recordRestore).
const ActionStoreRestore = "store.restore"

// recordRestore writes into the restored copy at path, before it replaces
// the store at current, the audit entry of the restore (R-SEC: the audit
// trail is append-only, and a restore takes the entries written since the
// backup out of it): who ran it on this machine, the backup, and the
// entries of the store replaced that the restored one lacks (they stay in
// the file moved aside to movedTo, and in the log). The entry's seq comes
// after the replaced store's last, so no seq names two entries: a log
// collector that keys entries by seq sees a gap, not a rewrite.
//
// In the same transaction it deletes every web session (console and
// portal sign-ins) of the restored copy and returns how many went: the
// backup holds the sign-ins of its time, and one signed out since would
// otherwise be valid again, its cookie (perhaps stolen) with it (R-SEC).
// Everyone signs in again.
//
// In the same transaction it carries the ETag clock (etag_clock, R-E13)
// forward past the replaced store's: the update times that store issued
// are ETags clients may hold, and its clock may have run ahead of this
// machine's (a replica whose clock was ahead, or writes issuing last+1
// faster than the clock ticks). Left at the backup's, a write after the
// restore could be issued one of them, and a stale If-Match would match
// a different state. A backup from before 00075 has no clock to carry
// forward (the migration starts it at the backup's newest update time);
// a replaced store from before 00075, or unreadable, has none to carry.
func recordRestore(ctx context.Context, path, current, movedTo, input string, info *BackupInfo, now time.Time) (int, error) {
	var replacedLast, replacedETag int64
	if _, err := os.Stat(current); err == nil {
		dsn := stoppedStoreURL(current)
		if err := lastAuditSeq(ctx, dsn, &replacedLast); err != nil {
			replacedLast = 0 // an unreadable store: the restore is why
		}
		if err := lastETagTime(ctx, dsn, &replacedETag); err != nil {
			replacedETag = 0 // unreadable, or from before 00075
		}
	} else {
		movedTo = ""
	}
	db, err := sql.Open("sqlite", sqliteURL(path, "mode=rw"))
	if err != nil {
		return 0, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	var backupLast int64
	if err := lastAuditSeq(ctx, sqliteURL(path, "mode=ro"), &backupLast); err != nil {
		return 0, nil // a backup from before the audit trail (00014) and web sessions (00025)
	}
	who := "uid " + strconv.Itoa(os.Getuid())
	if u, err := user.Current(); err == nil {
		who = u.Username
	}
	type side struct {
		Store         string `json:"store,omitempty"`
		SchemaVersion int64  `json:"schemaVersion,omitempty"`
		LastAuditSeq  int64  `json:"lastAuditSeq"`
		SignInsEnded  int64  `json:"signInsEnded,omitempty"`
	}
	before, _ := json.Marshal(side{Store: movedTo, LastAuditSeq: replacedLast})
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	// AUTOINCREMENT takes max(sqlite_sequence, the largest seq) + 1.
	if _, err := tx.ExecContext(ctx, `UPDATE sqlite_sequence SET seq = MAX(seq, ?) WHERE name = 'audit_log'`, replacedLast); err != nil {
		return 0, fmt.Errorf("audit the restore: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO sqlite_sequence (name, seq) SELECT 'audit_log', ? WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'audit_log')`, replacedLast); err != nil {
		return 0, fmt.Errorf("audit the restore: %w", err)
	}
	var signIns int64
	var tables int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'web_sessions'`).Scan(&tables); err != nil {
		return 0, fmt.Errorf("end the backup's sign-ins: %w", err)
	}
	if tables == 1 { // a backup from before 00025 has none
		res, err := tx.ExecContext(ctx, `DELETE FROM web_sessions`)
		if err != nil {
			return 0, fmt.Errorf("end the backup's sign-ins: %w", err)
		}
		if signIns, err = res.RowsAffected(); err != nil {
			return 0, fmt.Errorf("end the backup's sign-ins: %w", err)
		}
	}
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'etag_clock'`).Scan(&tables); err != nil {
		return 0, fmt.Errorf("carry the ETag clock forward: %w", err)
	}
	if tables == 1 { // a backup from before 00075 has none
		if _, err := tx.ExecContext(ctx, `UPDATE etag_clock SET last = MAX(last, ?) WHERE id = 1`, replacedETag); err != nil {
			return 0, fmt.Errorf("carry the ETag clock forward: %w", err)
		}
	}
	after, _ := json.Marshal(side{Store: input, SchemaVersion: info.SchemaVersion, LastAuditSeq: backupLast, SignInsEnded: signIns})
	if _, err := tx.ExecContext(ctx, `INSERT INTO audit_log (time, principal_kind, principal_id, principal_name, principal_role,
		principal_scope, remote_addr, request_id, action, target, host_pool, outcome, error, before, after)
		VALUES (?,?,?,'','','[]','','',?,'store','',?,'',?,?)`,
		ns(now), vdibroker.PrincipalLocal, who, ActionStoreRestore, vdibroker.AuditOK, string(before), string(after)); err != nil {
		return 0, fmt.Errorf("audit the restore: %w", err)
	}
	return int(signIns), tx.Commit()
}

// lastAuditSeq reads the largest seq the audit trail of the store at dsn
// has given (deleted entries, pruned by --retention, count: their seq is
// not given again).
func lastAuditSeq(ctx context.Context, dsn string, seq *int64) error {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	return db.QueryRowContext(ctx, `SELECT MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'audit_log'), 0),
		COALESCE((SELECT MAX(seq) FROM audit_log), 0))`).Scan(seq)
}

// lastETagTime reads the last update time (ETag, R-E13) the store at dsn
// issued, in Unix nanoseconds: its etag_clock (00075).
func lastETagTime(ctx context.Context, dsn string, last *int64) error {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	return db.QueryRowContext(ctx, `SELECT last FROM etag_clock WHERE id = 1`).Scan(last)
}

// removeSQLite removes a database file and its -wal and -shm.
func removeSQLite(path string) {
	for _, n := range []string{path, path + "-wal", path + "-shm", path + "-journal"} {
		os.Remove(n)
	}
}

// copyFile copies src to a new file dst (mode 0600) and fsyncs it.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := createPrivateFile(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
