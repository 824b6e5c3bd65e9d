package agent

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// fakeKernel hands pids to processes and pidfds to whoever asks: enough
// to take a pid from an ended process and give it to the next, between a
// check and a signal, which no real kernel lets a test do on demand.
type fakeKernel struct {
	owner     map[int]int // pid → process
	ended     map[int]bool
	fds       map[int]int // pidfd → process
	signalled []int       // processes, in order
	noPidfd   bool
}

func (k *fakeKernel) signaller() *pidSignaller {
	return &pidSignaller{
		open: func(pid int) (int, error) {
			if k.noPidfd {
				return -1, unix.ENOSYS
			}
			fd := 100 + len(k.fds)
			k.fds[fd] = k.owner[pid]
			return fd, nil
		},
		send: func(fd int, sig syscall.Signal) error {
			if k.ended[k.fds[fd]] {
				return unix.ESRCH
			}
			k.signalled = append(k.signalled, k.fds[fd])
			return nil
		},
		close: func(fd int) error { return nil },
		kill: func(pid int, sig syscall.Signal) error {
			if k.ended[k.owner[pid]] {
				return unix.ESRCH
			}
			k.signalled = append(k.signalled, k.owner[pid])
			return nil
		},
	}
}

// reuse ends the process of pid and gives pid to process next.
func (k *fakeKernel) reuse(pid, next int) {
	k.ended[k.owner[pid]] = true
	k.owner[pid] = next
}

// A logoff hangs up the session's process (R-S2). If that process ends
// after the agent checked it, and its pid goes to another user's process
// before the signal, that process must not get it: the signal goes
// through a pidfd taken before the check.
func TestPidSignallerPIDReusedAfterTheCheck(t *testing.T) {
	k := &fakeKernel{owner: map[int]int{4242: 1}, ended: map[int]bool{}, fds: map[int]int{}}
	s := k.signaller()
	same := func() bool {
		ok := k.owner[4242] == 1 // the check: still the session's process
		k.reuse(4242, 2)         // then it ends, and process 2 takes its pid
		return ok
	}
	err := s.signal(slog.New(slog.DiscardHandler), 4242, syscall.SIGHUP, same)
	if !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("signal = %v, want ErrProcessDone", err)
	}
	if len(k.signalled) != 0 {
		t.Errorf("signalled processes %v, want none (process 2 took the pid after the check)", k.signalled)
	}

	// Not reused: the process checked gets it.
	k = &fakeKernel{owner: map[int]int{4242: 1}, ended: map[int]bool{}, fds: map[int]int{}}
	if err := k.signaller().signal(slog.New(slog.DiscardHandler), 4242, syscall.SIGHUP, func() bool { return true }); err != nil || len(k.signalled) != 1 || k.signalled[0] != 1 {
		t.Errorf("signal = %v, signalled %v; want process 1", err, k.signalled)
	}
}

// Without pidfds (a kernel before 5.3) the agent checks and kills by pid,
// as it did before them, and says once that it does.
func TestPidSignallerWithoutPidfd(t *testing.T) {
	k := &fakeKernel{owner: map[int]int{4242: 1, 4343: 3}, ended: map[int]bool{}, fds: map[int]int{}, noPidfd: true}
	s := k.signaller()
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	if err := s.signal(log, 4242, syscall.SIGHUP, func() bool { return true }); err != nil {
		t.Fatal(err)
	}
	if err := s.signal(log, 4343, syscall.SIGHUP, func() bool { return false }); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("a process that failed the check: %v, want ErrProcessDone", err)
	}
	if err := s.signal(log, 4343, syscall.SIGHUP, func() bool { return true }); err != nil {
		t.Fatal(err)
	}
	if len(k.signalled) != 2 || k.signalled[0] != 1 || k.signalled[1] != 3 {
		t.Errorf("signalled %v, want processes 1 and 3", k.signalled)
	}
	// Ended after the check, its pid not taken yet: a session already
	// ended, as through a pidfd (R-S4).
	k.ended[3] = true
	if err := s.signal(log, 4343, syscall.SIGHUP, func() bool { return true }); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("a process ended after the check: %v, want ErrProcessDone", err)
	}
	if n := strings.Count(buf.String(), "no pidfd"); n != 1 {
		t.Errorf("%d lines about pidfds, want 1:\n%s", n, buf.String())
	}
}

// TestPidSignallerLive signals real processes through pidfds: one that
// fails the check, or has ended, is not signalled.
func TestPidSignallerLive(t *testing.T) {
	if _, err := unix.PidfdOpen(os.Getpid(), 0); err != nil {
		t.Skipf("no pidfd here (%v): the fallback is TestPidSignallerWithoutPidfd's", err)
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	s := newPidSignaller()
	log := slog.New(slog.DiscardHandler)
	pid := cmd.Process.Pid
	if err := s.signal(log, pid, syscall.SIGTERM, func() bool { return false }); !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("signal after a failed check = %v, want ErrProcessDone", err)
	}
	if !processAlive(pid) {
		t.Fatal("a process that failed the check was signalled")
	}
	if err := s.signal(log, pid, syscall.SIGTERM, func() bool { return true }); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("sleep ended with %v, want SIGTERM", cmd.ProcessState)
	}
	if err := s.signal(log, pid, syscall.SIGTERM, func() bool { return true }); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("signal to an ended process = %v, want ErrProcessDone", err)
	}
}
