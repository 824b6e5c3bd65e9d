package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestDataDirLockWindows: on Windows (LockFileEx) a data dir is held as on
// unix: a second lockDataDir, in this process or another, is refused with
// dataDirBusyError naming the holder's pid, and the lock is gone once its
// holder let go, exited, or was killed (TerminateProcess). Run under Wine
// by TestDataDirLockWine, in the dir VDIBROKER_TEST_LOCK_DIR names (Wine
// 8 cannot remove a t.TempDir).
func TestDataDirLockWindows(t *testing.T) {
	dir := os.Getenv("VDIBROKER_TEST_LOCK_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	refused := func(pid int) {
		t.Helper()
		unlock, err := lockDataDir(dir)
		var busy *dataDirBusyError
		if !errors.As(err, &busy) {
			if err == nil {
				unlock()
			}
			t.Fatalf("lock held by pid %d: got %v, want dataDirBusyError", pid, err)
		}
		if busy.pid != strconv.Itoa(pid) || !strings.Contains(err.Error(), "data dir "+dir+" is in use by another vdibroker process (pid "+strconv.Itoa(pid)+")") {
			t.Errorf("lock held by pid %d: pid %q, %q", pid, busy.pid, err)
		}
	}
	free := func(after string) {
		t.Helper()
		unlock, err := lockDataDir(dir)
		if err != nil {
			t.Fatalf("after the holder %s: %v", after, err)
		}
		unlock()
	}

	// This process: the lock is the handle's, as flock's is the open
	// file's (TestDataDirOneBroker relies on it).
	unlock, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	refused(os.Getpid())
	unlock()
	free("let go")

	// Another process, which ends without letting go.
	for _, end := range []string{"exited", "was killed"} {
		t.Run(end, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestDataDirLockHolder$", "-test.count=1")
			cmd.Env = append(os.Environ(), "VDIBROKER_TEST_LOCK_HOLD="+dir)
			cmd.Stderr = os.Stderr
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			lines := bufio.NewScanner(stdout)
			for lines.Scan() && !strings.HasPrefix(lines.Text(), "locked ") {
			}
			if want := fmt.Sprintf("locked %d", cmd.Process.Pid); lines.Text() != want {
				t.Fatalf("holder said %q, want %q", lines.Text(), want)
			}
			refused(cmd.Process.Pid)
			if end == "exited" {
				stdin.Close()
				go io.Copy(io.Discard, stdout)
				if err := cmd.Wait(); err != nil {
					t.Fatalf("holder: %v", err)
				}
			} else {
				if err := cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
				cmd.Wait()
			}
			free(end)
		})
	}
}

// TestDataDirLockHolder is TestDataDirLockWindows's other process: it
// locks the dir VDIBROKER_TEST_LOCK_HOLD names, says so, and exits when
// its stdin closes, still holding the lock.
func TestDataDirLockHolder(t *testing.T) {
	dir := os.Getenv("VDIBROKER_TEST_LOCK_HOLD")
	if dir == "" {
		t.Skip("TestDataDirLockWindows's holder process")
	}
	unlock, err := lockDataDir(dir)
	if err != nil {
		fmt.Println("lock:", err)
		os.Exit(2)
	}
	fmt.Printf("locked %d\n", os.Getpid())
	io.Copy(io.Discard, os.Stdin)
	runtime.KeepAlive(unlock) // the file's finalizer would let go
	os.Exit(0)
}
