package store

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
