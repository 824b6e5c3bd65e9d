package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
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
// serve starts once the first is killed.
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
		exe := filepath.Join(dir, "vdibroker.test.exe")
		goBuildWindows(t, exe, "test", ".")
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		cmd := w.command(ctx, "wine", exe, "-test.v", "-test.count=1", "-test.run", "^TestDataDirLockWindows$")
		cmd.Env = append(cmd.Env, "VDIBROKER_TEST_LOCK_DIR="+winPath(t.TempDir()))
		out, err := cmd.CombinedOutput()
		if err != nil || !regexp.MustCompile(`(?m)^--- PASS: TestDataDirLockWindows `).Match(out) {
			t.Fatalf("TestDataDirLockWindows under Wine: %v\n%s", err, out)
		}
		for _, sub := range []string{"exited", "was_killed"} {
			if !strings.Contains(string(out), "--- PASS: TestDataDirLockWindows/"+sub+" ") {
				t.Errorf("TestDataDirLockWindows/%s did not pass under Wine:\n%s", sub, out)
			}
		}
	})
	t.Run("serve", func(t *testing.T) {
		exe := filepath.Join(dir, "vdibroker.exe")
		goBuildWindows(t, exe, "build", ".")
		data := t.TempDir()
		first := wineServe(t, w, exe, data)
		if !first.listening() {
			t.Fatalf("serve under Wine did not start:\n%s", first.out.String())
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
		// Killed (SIGKILL to the Wine process): the next serve starts.
		first.kill()
		third := wineServe(t, w, exe, data)
		if !third.listening() {
			t.Fatalf("serve after the first was killed did not start:\n%s", third.out.String())
		}
		third.kill()
	})
}

// wineAdminToken is the admin token of the brokers under Wine.
const wineAdminToken = "vdb_admin_wine_0123456789abcdef0123456789abcdef"

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
	// Not admin.token: serve refuses the file it made once it is there
	// again, its mode being 0666 on Windows.
	s.cmd.Env = append(s.cmd.Env, "VDIBROKER_ADMIN_TOKEN="+wineAdminToken)
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
