package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/vdibroker/vdibroker"
)

// probeSize is how much the write probe writes to SQLite's data directory:
// a few pages, so a disk with less room than a group commit needs fails it.
const probeSize = 16 << 10

// probeWrite is the write half of Ping (R-OUT1). A read says little of a
// database that cannot write: SQLite reads its pages from the page cache
// and the WAL, and a PostgreSQL standby promoted wrongly, or one whose
// disk is full, answers SELECT 1. So the probe writes, and only a write
// that reached the disk counts:
//
//   - on SQLite, a file in the data directory is written, fsynced and
//     removed: a full disk (ENOSPC), a read-only one (EROFS, as the kernel
//     remounts a failing ext4) or a failing one (EIO, which fsync reports)
//     fails it. The database's own files may not grow when the disk fills
//     (WAL frames are rewritten in place after a checkpoint), so the file
//     is what finds a full disk before a commit does;
//   - then, on both engines, one row of store_probe is updated in a
//     transaction of its own, which on SQLite appends a WAL frame and
//     fsyncs it (synchronous=FULL) through the one writer connection, as
//     every commit does.
//
// A probe that passed less than probeEvery ago is not run again: /healthz
// is public and pings, and each probe is an fsync.
func (s *DB) probeWrite(ctx context.Context) error {
	s.probeMu.Lock()
	defer s.probeMu.Unlock()
	if s.isClosing() {
		return errClosed
	}
	if !s.probed.IsZero() && time.Since(s.probed) < probeEvery {
		return nil
	}
	if err := s.probeOnce(ctx); err != nil {
		return err
	}
	s.probed = time.Now()
	return nil
}

// probeEvery is how long a passed write probe stands for.
const probeEvery = 500 * time.Millisecond

func (s *DB) probeOnce(ctx context.Context) error {
	if s.dir != "" {
		if err := probeFile(filepath.Join(s.dir, "vdibroker.db-probe")); err != nil {
			return fmt.Errorf("%w: write probe: %w", vdibroker.ErrStoreWrite, err)
		}
	}
	err := s.write(ctx, func(t *tx) error {
		_, err := t.exec(ctx, `UPDATE store_probe SET n = n + 1, time = ? WHERE id = 1`, ns(s.now()))
		return err
	})
	if err != nil {
		return fmt.Errorf("write probe: %w", err)
	}
	return nil
}

// probeFile writes probeSize bytes to path, fsyncs and removes it.
func probeFile(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, werr := f.Write(make([]byte, probeSize))
	if werr == nil {
		werr = f.Sync()
	}
	cerr := f.Close()
	rerr := os.Remove(path)
	return errors.Join(werr, cerr, rerr)
}

// markWriteFault marks err with vdibroker.ErrStoreWrite when it says the
// database cannot write (see isWriteFault); other errors are returned as
// they are. On SQLite it also says why, from the data directory: SQLite's
// own error names the operation, not the cause (a commit on a file system
// the kernel turned read-only fails with "disk I/O error (778)",
// SQLITE_IOERR_WRITE, and the EROFS behind it is lost), and the first
// failed write is what /healthz and the log show as the outage's reason
// (R-OUT1). The next Ping probes afresh.
func (s *DB) markWriteFault(err error) error {
	if err == nil || errors.Is(err, vdibroker.ErrStoreWrite) || !isWriteFault(err) {
		return err
	}
	if s.dir != "" && s.probeMu.TryLock() {
		if s.isClosing() {
			s.probeMu.Unlock()
			return fmt.Errorf("%w: %w", vdibroker.ErrStoreWrite, err)
		}
		// One cause is enough: a write that fails while another probes
		// does not wait for it (each probe is an fsync on a failing disk).
		s.probed = time.Time{}
		perr := probeFile(filepath.Join(s.dir, "vdibroker.db-probe"))
		s.probeMu.Unlock()
		if perr != nil {
			return fmt.Errorf("%w: %w (the data directory: %w)", vdibroker.ErrStoreWrite, err, perr)
		}
	}
	return fmt.Errorf("%w: %w", vdibroker.ErrStoreWrite, err)
}

// isWriteFault reports an error of a disk that is full, read-only or
// failing, of either engine, or the system's own.
func isWriteFault(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN:
			return true
		}
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "53100", // disk_full
			"58030", // io_error
			"25006": // read_only_sql_transaction (a standby)
			return true
		}
	}
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.EIO)
}

// isClosing reports whether Close has begun.
func (s *DB) isClosing() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}
