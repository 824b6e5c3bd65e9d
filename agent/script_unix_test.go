//go:build unix

package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The file the agent runs as root is the file it checked (R-IDX3,
// R-SEC). A script named without a directory is looked up in PATH; had
// the agent checked the file found and then started the name, which
// looks it up again, a file put meanwhile in a PATH directory others may
// write, before the checked one or where none was found, would run.
func TestCustomScriptRunsTheFileChecked(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open") // a PATH directory others may write
	bin := filepath.Join(dir, "bin")
	for _, d := range []string{open, bin} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	chmod(t, open, 0o777)
	ran := filepath.Join(dir, "ran")
	put := func(d, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(d, "vdi-load"), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { testHookFileChecked = func() {} })

	t.Run("another file put before the one checked", func(t *testing.T) {
		t.Setenv("PATH", open+string(os.PathListSeparator)+bin)
		put(bin, "echo 7")
		testHookFileChecked = func() { put(open, "touch "+ran+"; echo 99") }
		t.Cleanup(func() { os.Remove(filepath.Join(open, "vdi-load")); os.Remove(ran) })
		v, err := RunCustomScript(t.Context(), "vdi-load", 10*time.Second)
		if err != nil || v == nil || *v != 7 {
			t.Errorf("RunCustomScript = %v, %v; want 7, from the script checked", v, err)
		}
		if fileExists(ran) {
			t.Error("the file put after the check ran")
		}
	})
	t.Run("a file put where none was found", func(t *testing.T) {
		t.Setenv("PATH", open)
		testHookFileChecked = func() { put(open, "touch "+ran+"; echo 99") }
		t.Cleanup(func() { os.Remove(filepath.Join(open, "vdi-load")); os.Remove(ran) })
		v, err := RunCustomScript(t.Context(), "vdi-load", 10*time.Second)
		if err == nil || v != nil || !strings.Contains(err.Error(), "not found") {
			t.Errorf("RunCustomScript = %v, %v; want no value and not found", v, err)
		}
		if fileExists(ran) {
			t.Error("the file put after the check ran")
		}
	})
}
