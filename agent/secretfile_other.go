//go:build !windows

package agent

import "os"

// createSecretTemp is os.CreateTemp, which makes the file 0600.
func createSecretTemp(dir, pattern string) (*os.File, error) { return os.CreateTemp(dir, pattern) }

// CheckSecretFile checks nothing on Unix, where the agent has always taken
// the files it is given as they are: the state directory is made 0700 and
// its files 0600.
func CheckSecretFile(string) error { return nil }

// CheckStateDirAccess checks nothing on Unix: the state directory is the
// agent's user's (secureDir), whoever that is.
func CheckStateDirAccess(string) error { return nil }
