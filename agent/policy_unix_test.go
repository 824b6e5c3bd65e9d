//go:build unix

package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker"
)

// The policy file sets this host's thresholds (R-LI5): past them the
// broker places no session here. Whoever may change it, or replace it
// through a directory on the way, could drain the host or keep it loaded,
// so the agent (root) reads it only when the custom load script would run
// (R-SEC, sshd's StrictModes). Refused, it is handled as a bad file: the
// last good policy stays, and the reason is a health error naming it.
func TestPolicyFileOthersMayChange(t *testing.T) {
	tests := []struct {
		name   string
		change func(tb testing.TB, file string)
		root   bool // needs root: giving a file to another user
	}{{
		name:   "file writable by others",
		change: func(tb testing.TB, file string) { chmod(tb, file, 0o666) },
	}, {
		name:   "file writable by its group",
		change: func(tb testing.TB, file string) { chmod(tb, file, 0o664) },
	}, {
		name:   "directory writable by others",
		change: func(tb testing.TB, file string) { chmod(tb, filepath.Dir(file), 0o777) },
	}, {
		name: "file of another user",
		root: true,
		change: func(tb testing.TB, file string) {
			if err := os.Chown(file, 12345, 12345); err != nil {
				tb.Fatal(err)
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root && os.Geteuid() != 0 {
				t.Skip("needs root")
			}
			dir := filepath.Join(t.TempDir(), "etc")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			chmod(t, dir, 0o755)
			file := filepath.Join(dir, "policy.json")
			writeJSON(t, file, map[string]int{"hostLoadIndexThreshold": 80})
			chmod(t, file, 0o644)
			a := newTestAgent(t, Config{Server: "http://127.0.0.1:1", PolicyFile: file})
			if p, err := a.readPolicy(); err != nil || p == nil || *p.HostLoadIndexThreshold != 80 {
				t.Fatalf("before the change: %+v, %v; want threshold 80", p, err)
			}
			writeJSON(t, file, map[string]int{"hostLoadIndexThreshold": 10})
			tt.change(t, file)
			p, err := a.readPolicy()
			if p == nil || *p.HostLoadIndexThreshold != 80 {
				t.Errorf("policy %+v, want the last good one (80) kept", p)
			}
			if err == nil || !strings.Contains(err.Error(), "policy file "+file+": not read") {
				t.Errorf("err = %v, want the file named as not read", err)
			}
			if _, err := ReadPolicyFile(file); err == nil {
				t.Error("ReadPolicyFile read it")
			}
		})
	}
	t.Run("no good policy yet", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "policy.json")
		writeJSON(t, file, map[string]int{"hostLoadIndexThreshold": 10})
		chmod(t, file, 0o666)
		fixed := &vdibroker.HostPolicy{HostLoadIndexThreshold: intp(90)}
		a := newTestAgent(t, Config{Server: "http://127.0.0.1:1", PolicyFile: file, Policy: fixed})
		if p, err := a.readPolicy(); p != fixed || err == nil {
			t.Errorf("readPolicy = %+v, %v; want the built-in policy and an error", p, err)
		}
	})
}

// A policy file missing when it is checked, in a directory others may add
// to (sticky, as /tmp), is not read when one appears before the read:
// the file read is the file opened before the check (R-SEC, R-LI5).
func TestPolicyFileAppearsAfterTheCheck(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	chmod(t, dir, 0o777|os.ModeSticky)
	file := filepath.Join(dir, "policy.json")
	testHookFileChecked = func() {
		writeJSON(t, file, map[string]int{"hostLoadIndexThreshold": 10})
		chmod(t, file, 0o666)
	}
	t.Cleanup(func() { testHookFileChecked = func() {} })
	if p, err := ReadPolicyFile(file); err == nil {
		t.Errorf("ReadPolicyFile = %+v; want no policy from a file others may write", p)
	}
}
