package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestStartCPUProfile: serve --cpu-profile and bench heartbeat --cpu-profile
// write a Go CPU profile (gzip-compressed protobuf) that is complete once
// stopped, and a path that cannot be created is an error, not a silent
// run without a profile.
func TestStartCPUProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.prof")
	stop, err := startCPUProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		t.Fatalf("profile is not gzip data: % x", b[:min(len(b), 8)])
	}
	if _, err := startCPUProfile(filepath.Join(t.TempDir(), "missing", "cpu.prof")); err == nil {
		t.Error("a profile in a missing directory: want an error")
	}
}
