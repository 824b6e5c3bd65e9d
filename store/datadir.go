package store

import (
	"log/slog"
	"os"
	"path/filepath"
)

// The data dir holds the store (vdibroker.db and SQLite's -wal and -shm
// beside it), admin.token and what a restore moves aside: secrets the
// broker's account alone may read (R-SEC), by the modes 0700 and 0600 on
// Unix (datadir_other.go), by the DACLs on Windows (datadir_windows.go).

// MkdirDataDir creates dir, and its parents, for a data dir: on Unix mode
// 0700; on Windows with a protected DACL of the process's account, SYSTEM
// and Administrators that the files made in it inherit (SQLite's -wal and
// -shm, which it makes itself, among them). An existing dir is left as it
// is: the store says at start what its access lets others do
// (openSQLite).
func MkdirDataDir(dir string) error { return mkdirDataDir(dir) }

// CheckDataDirAccess says what dir's access, and its store's if it holds
// one, lets others do, as serve does at start (R-SEC), for restore: a
// data dir that lets others read the files made in it is made private
// when it is empty (one an administrator made by hand, saying so in log)
// and refused when it holds other files and no store; an existing store's
// is warned of in log.
func CheckDataDirAccess(dir string, log *slog.Logger) error {
	path := filepath.Join(dir, SQLiteFile)
	_, err := os.Stat(path)
	return checkStoreAccess(dir, path, err == nil, log)
}
