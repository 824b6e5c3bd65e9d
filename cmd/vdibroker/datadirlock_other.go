//go:build !unix && !windows

package main

// lockDataDir does nothing where neither flock(2) nor LockFileEx is
// available: there, running two brokers on one data dir is not detected.
func lockDataDir(string) (func(), error) { return func() {}, nil }
