//go:build unix

package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

// TestRestoreUnderRunningBroker: restore into a data dir a broker holds is
// refused, exit 1, saying to stop the broker first. serve's way out
// ("give this one its own --data-dir") would be wrong here: a restore
// into another dir leaves the running broker's store as it is.
func TestRestoreUnderRunningBroker(t *testing.T) {
	dir := t.TempDir()
	unlock, err := lockDataDir(dir) // the running broker's lock
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	r := runBackupCLI(t, "restore", "--data-dir", dir, "--input", filepath.Join(t.TempDir(), "b.db"))
	if r.code != 1 || !strings.Contains(r.stderr, "a broker is running on data dir "+dir) || !strings.Contains(r.stderr, "stop it first") ||
		strings.Contains(r.stderr, "its own --data-dir") {
		t.Errorf("restore under a running broker: exit %d, %q", r.code, r.stderr)
	}
}

// TestReadsFrom_RG5: a pod on SQLite starts its server in the second
// after the one it took its data dir in, however late in it, so that a
// read the process before took (before it let go of the data dir) is
// signed in an earlier second than the server started in.
func TestReadsFrom_RG5(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		locked time.Duration // from t0
		want   time.Duration
	}{
		{"at the second's start", 0, time.Second},
		{"within it", 400 * time.Millisecond, time.Second},
		{"at its end", time.Second - time.Nanosecond, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := readsFrom(t0.Add(tc.locked)); !got.Equal(t0.Add(tc.want)) {
				t.Errorf("readsFrom(t0+%s) = t0+%s, want t0+%s", tc.locked, got.Sub(t0), tc.want)
			}
		})
	}
}
