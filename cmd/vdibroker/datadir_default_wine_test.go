package main

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker/internal/syncbuf"
	"github.com/vdibroker/vdibroker/store"
)

// TestDataDirDefaultWine: the Windows build's data dir default and the
// files it writes with secrets, for real under Wine, as TestDataDirLockWine
// runs it (VDIBROKER_TEST_WINE=1, wine64 and gcc-mingw-w64-x86-64;
// VDIBROKER_TEST_WINE_PREFIX a prefix to reuse). Wine sets ProgramData
// from its registry, whatever the Unix environment says: each command runs
// in a cmd.exe that sets it first. Wine answers a DACL as the Unix mode
// (a protected DACL of the account, SYSTEM and Administrators is 0750; a
// file made with its folder's entries 0644), so "private" below is
// nothing for others in the mode.
//   - Without --data-dir, serve, restore and backup take %ProgramData%\vdibroker-data,
//     not the working directory's vdibroker-data (R-D1); a store only
//     the old default holds is used, with a warning naming both; one
//     both hold is the new default's, the old one named as ignored.
//   - backup's copy and gateway keygen's key are private in a folder
//     that lets everyone read what is made in it (R-SEC).
//   - restore into an empty folder that lets everyone read the files made
//     in it makes it private and says so, as serve does (R-SEC).
func TestDataDirDefaultWine(t *testing.T) {
	if os.Getenv("VDIBROKER_TEST_WINE") != "1" {
		t.Skip("the Windows build's data dir default under Wine: set VDIBROKER_TEST_WINE=1 (needs wine64 and gcc-mingw-w64-x86-64)")
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("Wine runs the amd64 Windows build on linux/amd64")
	}
	w := newWine(t)
	exe := filepath.Join(t.TempDir(), "vdibroker.exe")
	goBuildWindows(t, exe, "build", ".")

	// A backup to restore, made here from a new store.
	src := t.TempDir()
	st, err := store.Open(t.Context(), "", src, nil)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	backup := filepath.Join(t.TempDir(), "backup.db")
	if _, err := store.BackupSQLite(t.Context(), src, backup); err != nil {
		t.Fatal(err)
	}

	// run runs vdibroker.exe args in the directory cwd, with ProgramData
	// programData, and returns its output (stdout and stderr) and exit code.
	run := func(t *testing.T, cwd, programData string, args ...string) (string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		line := "cd /d " + winPath(cwd) + "&& set ProgramData=" + winPath(programData) + "&& " + winPath(exe) + " " + strings.Join(args, " ")
		cmd := w.command(ctx, "wine", "cmd", "/c", line)
		out, _ := cmd.CombinedOutput()
		return string(out), cmd.ProcessState.ExitCode()
	}
	// serve starts vdibroker.exe serve as run does, without
	// VDIBROKER_ADMIN_TOKEN, waits until it listens or has exited, ends
	// it by the pid its data dir's lock holds (cmd.exe's end would leave
	// it running), and returns its output.
	serve := func(t *testing.T, cwd, programData, data string) string {
		t.Helper()
		out := &syncbuf.Buffer{}
		line := "cd /d " + winPath(cwd) + "&& set ProgramData=" + winPath(programData) + "&& " + winPath(exe) + " serve --listen 127.0.0.1:0"
		cmd := w.command(context.Background(), "wine", "cmd", "/c", line)
		cmd.Env = slices.DeleteFunc(cmd.Env, func(kv string) bool {
			return strings.HasPrefix(kv, "VDIBROKER_ADMIN_TOKEN=") || strings.HasPrefix(kv, "VDIBROKER_DATA_DIR=")
		})
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			cmd.Wait()
			close(done)
		}()
		e2eEventually(t, "serve under Wine to listen or exit", time.Minute, func() bool {
			select {
			case <-done:
				return true
			default:
				return strings.Contains(out.String(), "vdibroker listening on ")
			}
		})
		if pid, err := os.ReadFile(filepath.Join(data, "vdibroker.lock")); err == nil && strings.TrimSpace(string(pid)) != "" {
			w.wine(t, "taskkill", "/F", "/PID", strings.TrimSpace(string(pid)))
		}
		select {
		case <-done:
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			t.Fatalf("serve under Wine did not end:\n%s", out.String())
		}
		if !strings.Contains(out.String(), "vdibroker listening on ") {
			t.Fatalf("serve under Wine did not start:\n%s", out.String())
		}
		return out.String()
	}
	private := func(t *testing.T, path string) {
		t.Helper()
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm()&0o007 != 0 {
			t.Errorf("%s: %v, %v; want nothing for others", path, fi.Mode(), err)
		}
	}
	// An open folder: Everyone may read what is made in it (0755 under
	// Wine, as t.TempDir makes it).
	open := func(t *testing.T) string {
		t.Helper()
		d := t.TempDir()
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}

	cwd, pd := t.TempDir(), open(t)
	data := filepath.Join(pd, "vdibroker-data")
	t.Run("restore into the default", func(t *testing.T) {
		out, code := run(t, cwd, pd, "restore", "--input", winPath(backup))
		if code != 0 || !strings.Contains(out, "into "+winPath(data)+":") {
			t.Fatalf("restore without --data-dir: exit %d, want 0 and a restore into %s:\n%s", code, winPath(data), out)
		}
		if _, err := os.Stat(filepath.Join(cwd, "vdibroker-data")); err == nil {
			t.Error("restore made vdibroker-data in the working directory")
		}
		private(t, data)
		private(t, filepath.Join(data, "vdibroker.db"))
		if strings.Contains(out, "warning") || strings.Contains(out, "WARN") {
			t.Errorf("restore into a new data dir warned:\n%s", out)
		}
	})
	t.Run("backup from the default", func(t *testing.T) {
		dst := open(t)
		output := filepath.Join(dst, "copy.db")
		out, code := run(t, cwd, pd, "backup", "--output", winPath(output))
		if code != 0 || !strings.Contains(out, "backup of "+winPath(data)+" written to "+winPath(output)) {
			t.Fatalf("backup without --data-dir: exit %d, want 0 and a backup of %s:\n%s", code, winPath(data), out)
		}
		// Not its folder's entries, which let Everyone read it.
		private(t, output)
	})
	t.Run("old default holds the store", func(t *testing.T) {
		// An install made before the default moved: the working
		// directory's vdibroker-data holds the store, ProgramData none.
		cwd, pd := t.TempDir(), open(t)
		old, err := store.Open(t.Context(), "", filepath.Join(cwd, "vdibroker-data"), nil)
		if err != nil {
			t.Fatal(err)
		}
		old.Close()
		output := filepath.Join(t.TempDir(), "copy.db")
		out, code := run(t, cwd, pd, "backup", "--output", winPath(output))
		if code != 0 || !strings.Contains(out, "backup of ./vdibroker-data written to") {
			t.Fatalf("backup without --data-dir beside an old store: exit %d, want 0 and a backup of ./vdibroker-data:\n%s", code, out)
		}
		want := "warning: using the store in " + winPath(filepath.Join(cwd, "vdibroker-data")) +
			", the data dir's default before this release: the default is now " + winPath(filepath.Join(pd, "vdibroker-data"))
		if !strings.Contains(out, want) {
			t.Errorf("backup did not warn %q:\n%s", want, out)
		}
		if _, err := os.Stat(filepath.Join(pd, "vdibroker-data")); err == nil {
			t.Error("backup made the new default's data dir")
		}
	})
	t.Run("old store, new default exists", func(t *testing.T) {
		// %ProgramData%\vdibroker-data exists without a store (an admin
		// made it): the warning moves the files, not the
		// directory, which move would put inside it.
		cwd, pd := t.TempDir(), open(t)
		legacy := filepath.Join(cwd, "vdibroker-data")
		old, err := store.Open(t.Context(), "", legacy, nil)
		if err != nil {
			t.Fatal(err)
		}
		old.Close()
		if err := os.Mkdir(filepath.Join(pd, "vdibroker-data"), 0o700); err != nil {
			t.Fatal(err)
		}
		out, code := run(t, cwd, pd, "backup", "--output", winPath(filepath.Join(t.TempDir(), "copy.db")))
		if code != 0 || !strings.Contains(out, "backup of ./vdibroker-data written to") {
			t.Fatalf("backup without --data-dir beside an old store: exit %d, want 0 and a backup of ./vdibroker-data:\n%s", code, out)
		}
		want := `(move "` + winPath(legacy) + `\*" "` + winPath(filepath.Join(pd, "vdibroker-data")) + `")`
		if !strings.Contains(out, want) {
			t.Errorf("backup did not warn %q:\n%s", want, out)
		}
	})
	t.Run("both defaults hold a store", func(t *testing.T) {
		// The new default's is used, and the old one is named as
		// ignored: it may be the store the broker served from.
		cwd, pd := t.TempDir(), open(t)
		legacy, data := filepath.Join(cwd, "vdibroker-data"), filepath.Join(pd, "vdibroker-data")
		for _, dir := range []string{legacy, data} {
			st, err := store.Open(t.Context(), "", dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			st.Close()
		}
		output := filepath.Join(t.TempDir(), "copy.db")
		out, code := run(t, cwd, pd, "backup", "--output", winPath(output))
		if code != 0 || !strings.Contains(out, "backup of "+winPath(data)+" written to") {
			t.Fatalf("backup without --data-dir, both defaults holding a store: exit %d, want 0 and a backup of %s:\n%s", code, winPath(data), out)
		}
		want := "warning: using the store in " + winPath(data) + ", the data dir's default now; the store in " + winPath(legacy) +
			", the default before this release, is ignored"
		if !strings.Contains(out, want) {
			t.Errorf("backup did not warn %q:\n%s", want, out)
		}
	})
	t.Run("serve on the default", func(t *testing.T) {
		cwd, pd := t.TempDir(), open(t)
		data := filepath.Join(pd, "vdibroker-data")
		out := serve(t, cwd, pd, data)
		if want := "created the admin token in " + winPath(filepath.Join(data, "admin.token")); !strings.Contains(out, want) {
			t.Errorf("serve without --data-dir did not say %q:\n%s", want, out)
		}
		for _, name := range []string{"", "vdibroker.db", "admin.token"} {
			private(t, filepath.Join(data, name))
		}
		if _, err := os.Stat(filepath.Join(cwd, "vdibroker-data")); err == nil {
			t.Error("serve made vdibroker-data in the working directory")
		}
		if strings.Contains(out, "level=WARN") {
			t.Errorf("serve on a new default data dir warned:\n%s", out)
		}
	})
	t.Run("serve beside an old store", func(t *testing.T) {
		cwd, pd := t.TempDir(), open(t)
		legacy := filepath.Join(cwd, "vdibroker-data")
		old, err := store.Open(t.Context(), "", legacy, nil)
		if err != nil {
			t.Fatal(err)
		}
		old.Close()
		out := serve(t, cwd, pd, legacy)
		want := "using the store in " + winPath(legacy) + ", the data dir's default before this release: the default is now " + winPath(filepath.Join(pd, "vdibroker-data"))
		// As the log's text handler quotes it.
		if quoted := strings.Trim(strconv.Quote(want), `"`); !strings.Contains(out, `level=WARN msg="`+quoted) {
			t.Errorf("serve beside an old store did not warn %q:\n%s", want, out)
		}
		if _, err := os.Stat(filepath.Join(legacy, "admin.token")); err != nil {
			t.Errorf("serve did not use the old data dir: %v\n%s", err, out)
		}
		if _, err := os.Stat(filepath.Join(pd, "vdibroker-data")); err == nil {
			t.Error("serve made the new default's data dir")
		}
	})
	t.Run("restore into an empty open dir", func(t *testing.T) {
		// As an administrator makes one by hand: restore makes it
		// private for the store, as serve does, and says so.
		dir := open(t)
		out, code := run(t, cwd, pd, "restore", "--data-dir", winPath(dir), "--input", winPath(backup))
		if code != 0 {
			t.Fatalf("restore into an empty open dir: exit %d:\n%s", code, out)
		}
		private(t, dir)
		private(t, filepath.Join(dir, "vdibroker.db"))
		if want := `msg="made the empty data dir readable by this account, SYSTEM and Administrators only, for a new store`; !strings.Contains(out, want) {
			t.Errorf("restore did not say it made the data dir private (%q):\n%s", want, out)
		}
	})
	t.Run("gateway keygen", func(t *testing.T) {
		dir := open(t)
		key := filepath.Join(dir, "signing.pem")
		out, code := run(t, cwd, pd, "gateway", "keygen", "--key-id", "k1", "--private-key", winPath(key), "--jwks", winPath(filepath.Join(dir, "keys.json")))
		if code != 0 {
			t.Fatalf("gateway keygen: exit %d:\n%s", code, out)
		}
		private(t, key)
		// Again onto the same file: refused, naming it, as on Unix
		// (CreateFile's ERROR_FILE_EXISTS read as os.ErrExist).
		before, _ := os.ReadFile(key)
		out, code = run(t, cwd, pd, "gateway", "keygen", "--key-id", "k2", "--private-key", winPath(key), "--jwks", winPath(filepath.Join(dir, "keys2.json")))
		if want := "--private-key " + winPath(key) + " exists: give a new file"; code == 0 || !strings.Contains(out, want) {
			t.Errorf("gateway keygen onto its key: exit %d, want a refusal saying %q:\n%s", code, want, out)
		}
		if after, _ := os.ReadFile(key); string(after) != string(before) {
			t.Error("gateway keygen rewrote the existing key")
		}
	})
}
