//go:build unix

package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The agent runs as root: whoever may change its --log-level-file would
// choose what it logs, silencing its warnings or filling the journal
// (R-SEC). The file is read only when the custom load script would run
// (agent.CheckFileTrusted, sshd's StrictModes); otherwise the level
// running stays (--log-level's at start), and one line says why, at start
// and at each SIGHUP, which is when the file is read.
func TestAgentLogLevelFileOthersMayChange(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "etc")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "log-level")
	write := func(level string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(file, []byte(level+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(file, mode); err != nil {
			t.Fatal(err)
		}
	}
	flags := func() *agentFlags {
		o := &agentFlags{provider: "none", protocols: []string{"RDP"}}
		o.cfg.Server, o.cfg.HostName = "http://127.0.0.1:1", "host-01"
		o.logs = logFlags{level: "warn", levelFile: file}
		return o
	}

	// Only root may write it: its level counts.
	write("debug", 0o644)
	o := flags()
	if _, level, err := o.config(); err != nil || level != slog.LevelDebug || o.levelRefused != nil {
		t.Fatalf("config = %s, %v (refused: %v); want DEBUG from the file", level, err, o.levelRefused)
	}

	// Others may write it: --log-level's, and why, once.
	write("debug", 0o666)
	o = flags()
	_, level, err := o.config()
	if err != nil || level != slog.LevelWarn {
		t.Fatalf("config = %s, %v; want WARN from --log-level", level, err)
	}
	var buf bytes.Buffer
	log := o.logger(&buf, level)
	if n := strings.Count(buf.String(), "not read"); n != 1 || !strings.Contains(buf.String(), file+" may be written by its group or others") {
		t.Errorf("start logged %d refusals:\n%s", n, buf.String())
	}
	log.Info("hidden")
	if strings.Contains(buf.String(), "hidden") {
		t.Error("an info line was written at warn level")
	}

	// SIGHUP: still refused, the level stays and one line says why.
	buf.Reset()
	o.reloadLevel(log)
	if got := o.logs.lv.Level(); got != slog.LevelWarn {
		t.Errorf("after SIGHUP: %s, want WARN kept", got)
	}
	if n := strings.Count(buf.String(), "not read"); n != 1 || !strings.Contains(buf.String(), "SIGHUP: log level kept") {
		t.Errorf("SIGHUP logged %d refusals:\n%s", n, buf.String())
	}

	// A directory others may write: refused too.
	write("error", 0o644)
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	o.reloadLevel(log)
	if got := o.logs.lv.Level(); got != slog.LevelWarn {
		t.Errorf("in a directory others may write: %s, want WARN kept", got)
	}

	// Made root's alone again: the next SIGHUP reads it.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	o.reloadLevel(log)
	if got := o.logs.lv.Level(); got != slog.LevelError {
		t.Errorf("after SIGHUP with a file root alone may write: %s, want ERROR", got)
	}
}
