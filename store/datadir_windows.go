package store

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

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

// checkStoreAccess says what the data dir's and the store's DACLs let
// others do, as the mode check does on Unix (R-SEC). The files SQLite
// makes (the -wal and -shm) inherit the data dir's entries: a data dir
// that lets others read the files made in it (winacl.CheckPrivate) is
// refused for a new store (existed false), whose files it would give
// away from their first byte; a store an earlier release made (in a data
// dir that inherited C:\ProgramData's entries, say) keeps running, with a
// warning at every start that says the icacls commands that fix it, as a
// store of mode 0644 does on Unix. A descriptor that cannot be read is
// said as such.
func checkStoreAccess(dir, path string, existed bool, log *slog.Logger) error {
	dirErr := winacl.CheckPrivateDir(dir)
	if dirErr != nil && !existed {
		return fmt.Errorf("data dir %w; or give --data-dir a directory that does not exist yet, which serve makes readable by this account, SYSTEM and Administrators only", dirErr)
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
