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

// Every link followed on the way to the script is on its way (R-SEC): a
// link in a directory others may write, or one another user owns in a
// sticky directory (where she may replace her own entries), may be
// pointed at her program, even when the file it leads to now is root's.
func TestCustomScriptLinksOnTheWay(t *testing.T) {
	mkdir := func(tb testing.TB, path string, mode os.FileMode) string {
		tb.Helper()
		if err := os.Mkdir(path, 0o755); err != nil {
			tb.Fatal(err)
		}
		chmod(tb, path, mode)
		return path
	}
	link := func(tb testing.TB, target, name string) string {
		tb.Helper()
		if err := os.Symlink(target, name); err != nil {
			tb.Fatal(err)
		}
		return name
	}
	tests := []struct {
		name string
		root bool // needs root: a link of another user
		// want is in the refusal: the kernel too refuses to follow
		// another's link in a sticky directory others may write
		// (fs.protected_symlinks), but not everywhere, nor on every Unix.
		want string
		// way makes the links from dir to script and returns the name to run.
		way func(tb testing.TB, dir, script string) string
	}{{
		name: "a link to a link in a directory others may write",
		want: "may be written by its group or others",
		way: func(tb testing.TB, dir, script string) string {
			open := mkdir(tb, filepath.Join(dir, "open"), 0o777)
			etc := mkdir(tb, filepath.Join(dir, "etc"), 0o755)
			return link(tb, link(tb, script, filepath.Join(open, "load2")), filepath.Join(etc, "load.sh"))
		},
	}, {
		name: "a link of another user in a sticky directory",
		root: true,
		want: "belongs to uid 12345",
		way: func(tb testing.TB, dir, script string) string {
			shared := mkdir(tb, filepath.Join(dir, "shared"), 0o777|os.ModeSticky)
			l := link(tb, script, filepath.Join(shared, "load.sh"))
			if err := os.Lchown(l, 12345, 12345); err != nil {
				tb.Fatal(err)
			}
			return l
		},
	}, {
		name: "a directory link of another user in a sticky directory",
		root: true,
		want: "belongs to uid 12345",
		way: func(tb testing.TB, dir, script string) string {
			shared := mkdir(tb, filepath.Join(dir, "shared"), 0o777|os.ModeSticky)
			l := link(tb, filepath.Dir(script), filepath.Join(shared, "scripts"))
			if err := os.Lchown(l, 12345, 12345); err != nil {
				tb.Fatal(err)
			}
			return filepath.Join(l, filepath.Base(script))
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root && os.Geteuid() != 0 {
				t.Skip("needs root")
			}
			dir := t.TempDir()
			ran := filepath.Join(dir, "ran")
			script := writeScript(t, "touch "+ran+"\necho 7")
			if v, err := RunCustomScript(t.Context(), script, 10*time.Second); err != nil || v == nil || *v != 7 {
				t.Fatalf("the script itself: %v, %v; want 7", v, err)
			}
			os.Remove(ran)
			name := tt.way(t, dir, script)
			if v, err := RunCustomScript(t.Context(), name, 10*time.Second); err == nil || v != nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("RunCustomScript(%s) = %v, %v; want no value and an error saying %q", name, v, err, tt.want)
			}
			if fileExists(ran) {
				t.Error("the script ran")
			}
		})
	}
	t.Run("links root made in root's directories", func(t *testing.T) {
		dir := t.TempDir()
		etc := mkdir(t, filepath.Join(dir, "etc"), 0o755)
		opt := mkdir(t, filepath.Join(dir, "opt"), 0o755)
		script := writeScript(t, "echo 7")
		link(t, filepath.Dir(script), filepath.Join(opt, "current"))
		name := link(t, "../opt/current/"+filepath.Base(script), filepath.Join(etc, "load.sh"))
		if v, err := RunCustomScript(t.Context(), name, 10*time.Second); err != nil || v == nil || *v != 7 {
			t.Errorf("RunCustomScript(%s) = %v, %v; want 7", name, v, err)
		}
	})
}
