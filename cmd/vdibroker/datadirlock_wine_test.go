package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker/internal/syncbuf"
)

// TestDataDirLockWine: the data dir lock on Windows (LockFileEx), for
// real under Wine, as TestAgentWine runs the agent (VDIBROKER_TEST_WINE=1,
// wine64 and gcc-mingw-w64-x86-64; VDIBROKER_TEST_WINE_PREFIX a prefix to
// reuse). The embedded store, its credential cache and a pod's pod-to-pod
// read nonces belong to one process (R-D1, R-G5): lockDataDir's Windows
// tests, compiled for Windows (TestDataDirLockWindows: a second lock, in
// the holder or another process, is refused naming the holder's pid, and
// is free once the holder exits or is killed), then `vdibroker.exe serve`
// twice on one data dir: the second is refused with the message, and a
// serve starts once the first is killed. No VDIBROKER_ADMIN_TOKEN: the
// first makes admin.token with a DACL of its account, SYSTEM and
// Administrators (Wine 8 keeps a DACL given at creation, as the Unix mode
// 0750), which the starts after a kill and after Ctrl+C accept, and its
// token is the admin's (R-SEC). The data dir serve makes, and the store in
// it, get such DACLs too (winacl's Windows tests, compiled for Windows:
// TestWindowsPrivate), which every later start accepts without a word; an
// existing data dir that lets Everyone read the files made in it is
// refused for a new store and warned about for an existing one.
func TestDataDirLockWine(t *testing.T) {
	if os.Getenv("VDIBROKER_TEST_WINE") != "1" {
		t.Skip("the data dir lock of the Windows build under Wine: set VDIBROKER_TEST_WINE=1 (needs wine64 and gcc-mingw-w64-x86-64)")
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("Wine runs the amd64 Windows build on linux/amd64")
	}
	w := newWine(t)
	dir := t.TempDir()
	t.Run("lockDataDir", func(t *testing.T) {
		out := w.runWindowsTest(t, filepath.Join(dir, "vdibroker.test.exe"), ".", "TestDataDirLockWindows",
			"VDIBROKER_TEST_LOCK_DIR="+winPath(t.TempDir()))
		for _, sub := range []string{"exited", "was_killed"} {
			if !strings.Contains(string(out), "--- PASS: TestDataDirLockWindows/"+sub+" ") {
				t.Errorf("TestDataDirLockWindows/%s did not pass under Wine:\n%s", sub, out)
			}
		}
	})
	t.Run("writeFileAtomic", func(t *testing.T) {
		w.runWindowsTest(t, filepath.Join(dir, "vdibroker.test.exe"), ".", "TestWriteFileAtomicPrivateWindows",
			"VDIBROKER_TEST_ATOMIC_DIR="+winPath(t.TempDir()))
	})
	t.Run("winacl", func(t *testing.T) {
		w.runWindowsTest(t, filepath.Join(dir, "winacl.test.exe"), "../../internal/winacl", "TestWindowsPrivate",
			"VDIBROKER_TEST_WINACL_DIR="+winPath(t.TempDir()))
	})
	exe := filepath.Join(dir, "vdibroker.exe")
	goBuildWindows(t, exe, "build", ".")
	t.Run("serve", func(t *testing.T) {
		// A data dir that does not exist: serve makes it (R-SEC).
		data := filepath.Join(t.TempDir(), "data")
		first := wineServe(t, w, exe, data)
		if !first.listening() {
			t.Fatalf("serve under Wine did not start:\n%s", first.out.String())
		}
		// The data dir with a DACL of the account, SYSTEM and
		// Administrators that its files inherit, the store with
		// PrivateSDDL: Wine keeps them as the mode 0750, where
		// os.MkdirAll and SQLite's own file had 0755 and 0644.
		for _, name := range []string{"", "vdibroker.db", "admin.token"} {
			fi, err := os.Stat(filepath.Join(data, name))
			if err != nil || fi.Mode().Perm()&0o007 != 0 {
				t.Errorf("%s: %v, %v; want nothing for others", filepath.Join(data, name), fi.Mode(), err)
			}
		}
		// Without VDIBROKER_ADMIN_TOKEN: the first start makes admin.token,
		// with the DACL every later start accepts (R-SEC).
		tokenFile := filepath.Join(data, "admin.token")
		made := "created the admin token in " + winPath(tokenFile) + " (readable by this account, SYSTEM and Administrators only)"
		if !strings.Contains(first.out.String(), made) {
			t.Errorf("first serve did not say %q:\n%s", made, first.out.String())
		}
		token, err := os.ReadFile(tokenFile)
		if err != nil {
			t.Fatal(err)
		}
		second := wineServe(t, w, exe, data)
		if second.listening() {
			t.Fatalf("a second serve started on the data dir:\n%s", second.out.String())
		}
		pid, err := os.ReadFile(filepath.Join(data, "vdibroker.lock"))
		if err != nil {
			t.Fatal(err)
		}
		want := "data dir " + winPath(data) + " is in use by another vdibroker process (pid " + strings.TrimSpace(string(pid)) + "): stop it"
		if code := second.cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(second.out.String(), want) {
			t.Errorf("second serve on the data dir: exit %d, want 1 and %q:\n%s", code, want, second.out.String())
		}
		// Killed (SIGKILL to the Wine process): the next serve starts,
		// with the admin.token the first made.
		first.kill()
		third := wineServe(t, w, exe, data)
		if !third.listening() {
			t.Fatalf("serve after the first was killed did not start:\n%s", third.out.String())
		}
		third.adminAPI(t, strings.TrimSpace(string(token)))
		// Stopped (Ctrl+C, which Wine turns SIGINT into): the next serve
		// starts on the same admin.token, and that token is the admin's.
		third.stop(t)
		fourth := wineServe(t, w, exe, data)
		if !fourth.listening() {
			t.Fatalf("serve after a clean stop did not start on its admin.token:\n%s", fourth.out.String())
		}
		fourth.adminAPI(t, strings.TrimSpace(string(token)))
		if again, _ := os.ReadFile(tokenFile); string(again) != string(token) {
			t.Errorf("admin.token changed across starts: %q, then %q", token, again)
		}
		// Every start took the data dir and the store as private.
		for i, s := range []*wineServer{first, third, fourth} {
			if out := s.out.String(); strings.Contains(out, "level=WARN") {
				t.Errorf("start %d warned:\n%s", i+1, out)
			}
		}
		fourth.stop(t)

		// The store an earlier release made in a data dir that lets
		// Everyone read its files (0755 and 0644 under Wine): it keeps
		// running, and each start says so and how to fix it.
		if err := os.Chmod(data, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(data, "vdibroker.db"), 0o644); err != nil {
			t.Fatal(err)
		}
		older := wineServe(t, w, exe, data)
		if !older.listening() {
			t.Fatalf("serve on an existing store in an open data dir did not start:\n%s", older.out.String())
		}
		for _, want := range []string{
			`the data dir lets other accounts read the store's files`,
			winPath(data) + ` lets Everyone (S-1-1-0) read or replace the files made in it (FILE_READ_DATA, FILE_EXECUTE): run icacls "` + winPath(data) + `" /inheritance:r /remove:g *S-1-1-0 /grant:r "*`,
			`the store can be read by other accounts than this one, SYSTEM and Administrators`,
			winPath(filepath.Join(data, "vdibroker.db")) + ` lets Everyone (S-1-1-0) read it`,
		} {
			// As the log's text handler quotes it.
			if quoted := strings.Trim(strconv.Quote(want), `"`); !strings.Contains(older.out.String(), quoted) {
				t.Errorf("serve on an open store did not say %q:\n%s", want, older.out.String())
			}
		}
		older.kill()
	})
	t.Run("empty open data dir", func(t *testing.T) {
		// An empty data dir that lets Everyone read the files made in it
		// (0755 under Wine: Everyone RX, inherited), as one an
		// administrator makes in Explorer: serve makes it private for its
		// new store, as on Unix it takes a 0755 one (R-SEC).
		data := t.TempDir()
		s := wineServe(t, w, exe, data)
		if !s.listening() {
			t.Fatalf("serve did not start on an empty open data dir:\n%s", s.out.String())
		}
		s.kill()
		if fi, err := os.Stat(data); err != nil || fi.Mode().Perm()&0o007 != 0 {
			t.Errorf("the data dir after serve: %v, %v; want nothing for others", fi.Mode(), err)
		}
		want := `msg="made the empty data dir readable by this account, SYSTEM and Administrators only, for a new store`
		if out := s.out.String(); !strings.Contains(out, want) || !strings.Contains(out, "lets Everyone (S-1-1-0) read or replace the files made in it") {
			t.Errorf("serve did not say it made the data dir private (%q):\n%s", want, out)
		}
	})
	t.Run("open data dir", func(t *testing.T) {
		// An existing data dir that lets Everyone read the files made in
		// it, holding a file of someone's: its DACL is not serve's to
		// change, and no new store is made in it.
		data := t.TempDir()
		if err := os.WriteFile(filepath.Join(data, "notes.txt"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		s := wineServe(t, w, exe, data)
		if s.listening() {
			t.Fatalf("serve made a new store in a data dir Everyone may read:\n%s", s.out.String())
		}
		want := "data dir " + winPath(data) + " lets Everyone (S-1-1-0) read or replace the files made in it (FILE_READ_DATA, FILE_EXECUTE): run icacls"
		if code := s.cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(s.out.String(), want) ||
			!strings.Contains(s.out.String(), "or give --data-dir a directory that does not exist yet or is empty") {
			t.Errorf("serve on an open data dir: exit %d, want 1 and %q:\n%s", code, want, s.out.String())
		}
		if _, err := os.Stat(filepath.Join(data, "vdibroker.db")); err == nil {
			t.Error("the store was made in the open data dir")
		}
		if fi, err := os.Stat(data); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("the data dir after serve: %v, %v; want it as it was (0755)", fi.Mode(), err)
		}
	})
}

// wineServer is `vdibroker.exe serve` running under Wine.
type wineServer struct {
	cmd  *exec.Cmd
	out  *syncbuf.Buffer
	done chan struct{} // closed once it has exited
}

// kill ends it as SIGKILL does, with no shutdown of its own.
func (s *wineServer) kill() {
	s.cmd.Process.Kill()
	<-s.done
}

// wineServe starts `vdibroker.exe serve` on data under Wine and returns
// once it listens or has exited.
func wineServe(t *testing.T, w *wineEnv, exe, data string) *wineServer {
	t.Helper()
	s := &wineServer{out: &syncbuf.Buffer{}, done: make(chan struct{})}
	s.cmd = w.command(context.Background(), "wine", exe, "serve", "--listen", "127.0.0.1:0", "--data-dir", winPath(data))
	// No VDIBROKER_ADMIN_TOKEN: the data dir's admin.token.
	s.cmd.Env = slices.DeleteFunc(s.cmd.Env, func(kv string) bool { return strings.HasPrefix(kv, "VDIBROKER_ADMIN_TOKEN=") })
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		s.kill()
		if t.Failed() {
			t.Logf("serve under Wine:\n%s", s.out.String())
		}
	})
	e2eEventually(t, "serve under Wine to listen or exit", time.Minute, func() bool {
		select {
		case <-s.done:
			return true
		default:
			return s.listening()
		}
	})
	return s
}

// listening reports whether it said it listens.
func (s *wineServer) listening() bool {
	return strings.Contains(s.out.String(), "vdibroker listening on ")
}

// stop ends it as Ctrl+C does, and waits for its clean exit.
func (s *wineServer) stop(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.done:
	case <-time.After(time.Minute):
		t.Fatalf("serve under Wine did not stop on Ctrl+C:\n%s", s.out.String())
	}
	if code := s.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("serve under Wine exited %d on Ctrl+C, want 0:\n%s", code, s.out.String())
	}
}

// adminAPI checks that it takes token as the admin's: a host pool list.
func (s *wineServer) adminAPI(t *testing.T, token string) {
	t.Helper()
	_, rest, _ := strings.Cut(s.out.String(), "vdibroker listening on ")
	base, _, _ := strings.Cut(rest, "\n")
	e2eAPI{tb: t, base: strings.TrimSpace(base), token: token}.call("GET", "/hostpools", nil, 200, nil)
}
