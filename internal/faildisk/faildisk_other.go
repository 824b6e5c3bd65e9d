//go:build !linux

package faildisk

import "testing"

// Disk is a file system the test can make fail; there is none on this
// system (ext4's error trigger and loop devices are Linux's).
type Disk struct {
	// Dir is the mount point.
	Dir string
}

// New skips the test: a failing disk needs Linux.
func New(t testing.TB) *Disk {
	t.Helper()
	t.Skip("failing disk: needs Linux (loop devices and ext4's error trigger)")
	return nil
}

// Fail is never reached: New skipped.
func (d *Disk) Fail() {}

// Repair is never reached: New skipped.
func (d *Disk) Repair() {}
