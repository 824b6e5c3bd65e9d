package store

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/vdibroker/vdibroker/internal/winacl"
)

// On Windows the mode Go reports is 0666 for every file that is not
// read-only: who may read the store is its DACL's to say, and SQLite
// makes the -wal and -shm with the DACL they inherit from the data dir.

// mkdirDataDir makes dir's parents as os.MkdirAll does, then dir with
// winacl.PrivateDirSDDL.
func mkdirDataDir(dir string) error {
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return &os.PathError{Op: "mkdir", Path: dir, Err: errors.New("not a directory")}
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(filepath.Clean(dir)), 0o700); err != nil {
		return err
	}
	if err := winacl.MkdirPrivate(dir); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return nil
}

// createStoreFile makes the store's file path, unless it exists, with
// winacl.PrivateSDDL, what the data dir made by mkdirDataDir would give
// it. (Wine 8 gives a file no inherited entries: it answers a DACL made
// from the file's Unix mode, which CreatePrivateFile's makes 0750.)
func createStoreFile(path string) {
	if f, err := winacl.CreatePrivateFile(path); err == nil {
		f.Close()
	}
}

// createPrivateFile creates the file path, which must not exist, for
// writing a secret (a backup, a restored store): with winacl.PrivateSDDL,
// a protected DACL of the process's account, SYSTEM and Administrators,
// not the entries of its folder (a backup folder may let Users read what
// is made in it).
func createPrivateFile(path string) (*os.File, error) {
	return winacl.CreatePrivateFile(path)
}

// checkStoreAccess says what the data dir's and the store's DACLs let
// others do, as the mode check does on Unix (R-SEC). The files SQLite
// makes (the -wal and -shm) inherit the data dir's entries: a data dir
// that lets others read the files made in it (winacl.CheckPrivate) is
// refused for a new store (existed false), whose files it would give
// away from their first byte, unless it is empty (makePrivate); a store
// an earlier release made (in a data
// dir that inherited C:\ProgramData's entries, say) keeps running, with a
// warning at every start that says the icacls commands that fix it, as a
// store of mode 0644 does on Unix. A descriptor that cannot be read is
// said as such.
func checkStoreAccess(dir, path string, existed bool, log *slog.Logger) error {
	dirErr := winacl.CheckPrivateDir(dir)
	if dirErr != nil && !existed && emptyDataDir(dir) {
		dirErr = makePrivate(dir, dirErr, log)
	}
	if dirErr != nil && !existed {
		return fmt.Errorf("data dir %w; or give --data-dir a directory that does not exist yet or is empty, which serve makes readable by this account, SYSTEM and Administrators only", dirErr)
	}
	if dirErr != nil {
		log.Warn("the data dir lets other accounts read the store's files: it holds the hashes of tokens and host credentials and the RD gateway's signing seeds",
			"problem", dirErr.Error())
	}
	if existed {
		if err := winacl.CheckPrivateFile(path); err != nil {
			log.Warn("the store can be read by other accounts than this one, SYSTEM and Administrators: it holds the hashes of tokens and host credentials and the RD gateway's signing seeds",
				"problem", err.Error())
		}
	}
	return nil
}

// emptyDataDir reports whether dir holds nothing but serve's lock file
// (vdibroker.lock, which holds its pid): a data dir an administrator made
// for the store, say in Explorer, where it took its parent's entries.
func emptyDataDir(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if e.Name() != "vdibroker.lock" {
			return false
		}
	}
	return true
}

// makePrivate gives the empty data dir dir, which problem says others may
// read the files made in it, winacl.PrivateDirSDDL, as serve makes a data
// dir that does not exist, and as serve on Unix takes an existing 0755
// one for a new store (its files 0600): the administrator made it for the
// store, and no file in it has access to lose. It says what it did. It
// answers the problem that stands: problem when the DACL could not be
// set (the process may not change it), a refusal when files appeared in
// dir while it was open to others (one could be a -wal of theirs).
func makePrivate(dir string, problem error, log *slog.Logger) error {
	if err := winacl.SetPrivateDir(dir); err != nil {
		return fmt.Errorf("%w (serve could not make it private: %v)", problem, err)
	}
	if !emptyDataDir(dir) {
		return fmt.Errorf("%s: files were put in it while others could: check who made them, remove them, and start again", dir)
	}
	if err := winacl.CheckPrivateDir(dir); err != nil {
		return err
	}
	log.Info("made the empty data dir readable by this account, SYSTEM and Administrators only, for a new store: its entries from its parent let others read the store's files",
		"dir", dir, "was", strings.SplitN(problem.Error(), ": run icacls", 2)[0])
	return nil
}

// syncDir is a no-op on Windows: a directory opened for reading cannot be
// flushed (FlushFileBuffers needs GENERIC_WRITE: "Access is denied", which
// failed every backup and restore after its rename), and NTFS journals
// the rename itself.
func syncDir(string) error { return nil }
