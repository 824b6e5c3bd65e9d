//go:build unix

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// lockDataDir takes an exclusive lock on <dir>/vdibroker.lock for as long as
// this process runs (the kernel drops it when the process ends, SIGKILL
// included). The embedded store belongs to one broker process: its write
// batching and its in-memory credential cache are coherent only when every
// write to the file goes through that process. A second serve or demo on
// the same data dir fails here with a message, instead of running beside
// the first. PostgreSQL replicas need no lock: they share nothing in memory.
func lockDataDir(dir string) (unlock func(), err error) {
	path := filepath.Join(dir, "vdibroker.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock data dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &dataDirBusyError{dir: dir, pid: strings.TrimSpace(string(holder))}
		}
		return nil, fmt.Errorf("lock data dir: %w", err)
	}
	if err := f.Truncate(0); err == nil {
		fmt.Fprintf(f, "%d\n", os.Getpid())
	}
	return func() { f.Close() }, nil // closing the file drops the lock
}
