//go:build !windows

package store

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
)

func mkdirDataDir(dir string) error { return os.MkdirAll(dir, 0o700) }

// createStoreFile makes the store's file path, unless it exists, as its
// owner's alone: SQLite would create it 0644 (less the umask), and makes
// the -wal and -shm with the database's mode.
func createStoreFile(path string) {
	if f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600); err == nil {
		f.Close()
	}
}

// checkStoreAccess is checkStoreAccess of datadir_windows.go on Unix: a
// store an earlier release made (0644 less the umask) keeps its mode: it
// may be so on purpose (a backup agent's group), so it is not changed,
// but the administrator is told at every start. The data dir's mode is
// not the files' to take: they have theirs.
func checkStoreAccess(_, path string, _ bool, log *slog.Logger) error {
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		log.Warn("the store can be read by other users than its owner: it holds the hashes of tokens and host credentials and the RD gateway's signing seeds; make it its owner's alone (chmod 600 vdibroker.db vdibroker.db-wal vdibroker.db-shm)",
			"path", path, "mode", fmt.Sprintf("%04o", fi.Mode().Perm()))
	}
	return nil
}

// createPrivateFile creates the file path, which must not exist, for
// writing a secret (a backup, a restored store): mode 0600.
func createPrivateFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return err
	}
	return nil
}
