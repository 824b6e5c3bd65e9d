package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/windows"
)

// lockOffset is where the byte lockDataDir locks lies: past the pid the
// file holds, because Windows' locks are mandatory (a locked byte cannot
// be read by another process) and the second broker reads the pid to name
// the holder. A lock may lie past the end of the file.
const lockOffset = 1 << 20

// lockDataDir takes an exclusive lock (LockFileEx) on <dir>/vdibroker.lock
// for as long as this process runs: Windows drops it when the handle is
// closed, which it does for every handle of a process that ends, killed
// (TerminateProcess) included. As with flock(2) on unix, the lock belongs
// to the handle: a second lockDataDir in the same process is refused too.
// The embedded store belongs to one broker process (its write batching,
// its in-memory credential cache and a pod's pod-to-pod read nonces, R-G5);
// a second serve or demo on the same data dir fails here with a message,
// instead of running beside the first.
func lockDataDir(dir string) (unlock func(), err error) {
	path := filepath.Join(dir, "vdibroker.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock data dir: %w", err)
	}
	ol := &windows.Overlapped{Offset: lockOffset}
	if err := windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, ol); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
			return nil, &dataDirBusyError{dir: dir, pid: strings.TrimSpace(string(holder))}
		}
		return nil, fmt.Errorf("lock data dir: %w", err)
	}
	if err := f.Truncate(0); err == nil {
		fmt.Fprintf(f, "%d\n", os.Getpid())
	}
	return func() { f.Close() }, nil // closing the handle drops the lock
}
