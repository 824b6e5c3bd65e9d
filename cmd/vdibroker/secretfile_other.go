//go:build !windows

package main

import (
	"fmt"
	"os"
)

// secretFileAccess says who may read a file createSecretFile made.
const secretFileAccess = "mode 0600"

// createSecretFile creates the file path, which must not exist, for
// writing a secret: mode 0600, its owner's alone.
func createSecretFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
}

// checkSecretFile reports why the file path, holding a secret, may be
// read by others than its owner (R-SEC): its mode lets its group or
// others read it. The error begins with path and says the fix.
func checkSecretFile(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%s has mode %04o: anyone on this machine may read it; run chmod 600 %s", path, perm, path)
	}
	return nil
}

// createSecretTemp creates a new file in dir for writing a secret, named
// pattern with its last "*" a random string: os.CreateTemp's, mode 0600.
func createSecretTemp(dir, pattern string) (*os.File, error) {
	return os.CreateTemp(dir, pattern)
}
