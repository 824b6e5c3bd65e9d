package agent

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeScript writes an executable shell script into a temp dir.
func writeScript(tb testing.TB, body string) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "load.sh")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		tb.Fatal(err)
	}
	return path
}

func intp(v int) *int { return &v }

// TestParseCustomLoad covers the R-IDX3 output rules.
func TestParseCustomLoad(t *testing.T) {
	tests := []struct {
		out  string
		want *int
	}{
		{"0", intp(0)},
		{"42\n", intp(42)},
		{"  100 \n", intp(100)},
		{"101", intp(100)}, // over 100 is capped
		{"99999999", intp(100)},
		{"-1", nil}, // negative: no value
		{"", nil},
		{"42.5", nil},
		{"high", nil},
		{"42 43", nil},
		{"0x10", nil},
		{"99999999999999999999999", nil},
	}
	for _, tt := range tests {
		got, err := ParseCustomLoad([]byte(tt.out))
		switch {
		case tt.want == nil && (got != nil || err == nil):
			t.Errorf("ParseCustomLoad(%q) = %v, %v; want no value and an error", tt.out, got, err)
		case tt.want != nil && (got == nil || *got != *tt.want || err != nil):
			t.Errorf("ParseCustomLoad(%q) = %v, %v; want %d", tt.out, got, err, *tt.want)
		}
	}
}

// TestRunCustomScript runs real scripts (R-IDX3).
func TestRunCustomScript(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    *int
		timeout bool
	}{
		{"value", "echo 37", intp(37), false},
		{"over 100 capped", "echo 250", intp(100), false},
		{"garbage", "echo busy", nil, false},
		{"negative", "echo -5", nil, false},
		{"failing script", "echo 50; exit 3", nil, false},
		// The child sleep holds stdout open: the process group is killed.
		{"timeout", "sleep 30; echo 10", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Only the timeout case waits for the timeout; the others get
			// a margin a loaded CI machine needs to start a shell.
			timeout := 20 * time.Second
			if tt.timeout {
				timeout = 200 * time.Millisecond
			}
			got, err := RunCustomScript(t.Context(), writeScript(t, tt.body), timeout)
			if tt.timeout != errors.Is(err, ErrScriptTimeout) {
				t.Fatalf("err = %v, timeout wanted: %v", err, tt.timeout)
			}
			if (got == nil) != (tt.want == nil) || (got != nil && *got != *tt.want) {
				t.Fatalf("value = %v (err %v), want %v", got, err, tt.want)
			}
			if tt.want == nil && err == nil {
				t.Fatal("no value without an error saying why")
			}
		})
	}
	t.Run("missing", func(t *testing.T) {
		if v, err := RunCustomScript(t.Context(), filepath.Join(t.TempDir(), "nope"), time.Second); v != nil || err == nil {
			t.Fatalf("missing script = %v, %v; want no value and an error", v, err)
		}
	})
	t.Run("not executable", func(t *testing.T) {
		path := writeScript(t, "echo 1")
		if err := os.Chmod(path, 0o644); err != nil {
			t.Fatal(err)
		}
		if v, err := RunCustomScript(t.Context(), path, time.Second); v != nil || err == nil {
			t.Fatalf("unexecutable script = %v, %v; want no value and an error", v, err)
		}
	})
}

// TestSampleKeepsValueOnTimeout: a script that times out keeps the previous
// value (R-IDX3); garbage afterwards clears it.
func TestSampleKeepsValueOnTimeout(t *testing.T) {
	dir := t.TempDir()
	mode := filepath.Join(dir, "mode")
	script := writeScript(t, `case "$(cat `+mode+`)" in slow) sleep 30;; garbage) echo lots;; *) cat `+mode+`;; esac`)
	// A generous timeout for the runs that must finish (a loaded CI machine
	// can take seconds to start a shell), a short one for the slow run.
	a := newTestAgent(t, Config{Server: "http://127.0.0.1:1", CustomScript: script, CustomScriptTimeout: 20 * time.Second})
	set := func(s string) {
		if err := os.WriteFile(mode, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	custom := func() *int {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.metrics.CustomLoadValue
	}
	set("60")
	a.sample(t.Context())
	if v := custom(); v == nil || *v != 60 {
		t.Fatalf("after value 60: %v", v)
	}
	set("slow")
	a.cfg.CustomScriptTimeout = 300 * time.Millisecond
	a.sample(t.Context())
	a.cfg.CustomScriptTimeout = 20 * time.Second
	if v := custom(); v == nil || *v != 60 {
		t.Fatalf("after timeout: %v, want the previous 60 kept", v)
	}
	if a.customErr == "" {
		t.Error("timeout not reported as a health error")
	}
	set("garbage")
	a.sample(t.Context())
	if v := custom(); v != nil {
		t.Fatalf("after garbage: %v, want no value", *v)
	}
}

// The script runs as the agent's user, root (R-IDX3): one that another
// user may change, or replace through a directory she may write, would
// run her program as root. Such a script is not run; that is a health
// error, as a missing script is.
func TestCustomScriptOthersMayChange(t *testing.T) {
	ran := filepath.Join(t.TempDir(), "ran")
	body := "touch " + ran + "\necho 7"
	tests := []struct {
		name   string
		change func(tb testing.TB, script string)
		root   bool // needs root: giving a file to another user
	}{{
		name:   "script writable by others",
		change: func(tb testing.TB, script string) { chmod(tb, script, 0o757) },
	}, {
		name:   "script writable by its group",
		change: func(tb testing.TB, script string) { chmod(tb, script, 0o775) },
	}, {
		name:   "directory writable by others",
		change: func(tb testing.TB, script string) { chmod(tb, filepath.Dir(script), 0o777) },
	}, {
		name: "a link to the script in a directory others may write",
		change: func(tb testing.TB, script string) {
			dir := filepath.Join(filepath.Dir(script), "open")
			if err := os.Mkdir(dir, 0o777); err != nil {
				tb.Fatal(err)
			}
			chmod(tb, dir, 0o777)
			if err := os.Symlink(script, filepath.Join(dir, "load.sh")); err != nil {
				tb.Fatal(err)
			}
		},
	}, {
		name: "script of another user",
		root: true,
		change: func(tb testing.TB, script string) {
			if err := os.Chown(script, 12345, 12345); err != nil {
				tb.Fatal(err)
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root && os.Geteuid() != 0 {
				t.Skip("needs root")
			}
			os.Remove(ran)
			script := writeScript(t, body)
			if v, err := RunCustomScript(t.Context(), script, 10*time.Second); err != nil || v == nil || *v != 7 {
				t.Fatalf("before the change: %v, %v; want 7", v, err)
			}
			os.Remove(ran)
			tt.change(t, script)
			if link := filepath.Join(filepath.Dir(script), "open", "load.sh"); fileExists(link) {
				script = link
			}
			v, err := RunCustomScript(t.Context(), script, 10*time.Second)
			if err == nil || v != nil {
				t.Errorf("RunCustomScript = %v, %v; want no value and an error", v, err)
			}
			if fileExists(ran) {
				t.Error("the script ran")
			}
			if err := RunLoadScript(t.Context(), script, 10*time.Second); err == nil || fileExists(ran) {
				t.Errorf("RunLoadScript = %v; want it not run", err)
			}
		})
	}
}

func chmod(tb testing.TB, path string, mode os.FileMode) {
	tb.Helper()
	if err := os.Chmod(path, mode); err != nil {
		tb.Fatal(err)
	}
}

func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// TestLoadTextReasonShort_RIDX3: the reason a custom load value that is
// not a number gives stays short whatever it holds: 40 runes at most, and
// at most maxQuoted bytes once quoted, runes that quote as \u1717 or
// \U0010ffff too (a registry value of 28 U+1717 gave a reason of 201
// bytes).
func TestLoadTextReasonShort_RIDX3(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"abc", `"abc"`},
		{strings.Repeat("x", 40), `"` + strings.Repeat("x", 40) + `"`},
		{strings.Repeat("x", 41), `"` + strings.Repeat("x", 40) + `…"`},
		{strings.Repeat("\u1717", 28), `"` + strings.Repeat(`\u1717`, 9) + `…"`},
		{strings.Repeat("\U0010ffff", 3), `"\U0010ffff\U0010ffff\U0010ffff"`},
		{strings.Repeat("\U0010ffff", 40), `"` + strings.Repeat(`\U0010ffff`, 5) + `…"`},
	} {
		_, err := parseLoadText(tc.in)
		if err == nil {
			t.Fatalf("parseLoadText(%q) took it for a number", tc.in)
		}
		want := tc.want + ", want an integer 0..100"
		if err.Error() != want {
			t.Errorf("parseLoadText(%q) = %q, want %q", tc.in, err, want)
		}
		if q := quoteShort(tc.in); len(q) > maxQuoted {
			t.Errorf("quoteShort(%q) is %d bytes, over %d", tc.in, len(q), maxQuoted)
		}
	}
}
