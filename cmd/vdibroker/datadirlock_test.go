//go:build unix

package main

import (
	"context"
	"strings"
	"testing"
)

// TestDataDirOneBroker: the embedded store belongs to one broker process
// (its group commit and credential cache assume every write passes
// through it), so a second broker on the same data dir is refused with a
// message that names the dir and the way out, and starts once the first
// has stopped. flock(2) locks per open file, so two brokers in this one
// test process conflict as two processes would.
func TestDataDirOneBroker(t *testing.T) {
	dir := t.TempDir()
	first := &Main{Listen: "127.0.0.1:0", DataDir: dir}
	if err := first.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	second := &Main{Listen: "127.0.0.1:0", DataDir: dir}
	err := second.Open(context.Background())
	if err == nil {
		second.Close()
		first.Close()
		t.Fatal("a second broker opened the same data dir")
	}
	if msg := err.Error(); !strings.Contains(msg, dir) || !strings.Contains(msg, "in use by another vdibroker process") || !strings.Contains(msg, "--data-dir") {
		t.Errorf("refusal: %q", msg)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again := &Main{Listen: "127.0.0.1:0", DataDir: dir}
	if err := again.Open(context.Background()); err != nil {
		t.Fatalf("after the first stopped: %v", err)
	}
	again.Close()
}
