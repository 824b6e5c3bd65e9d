package agent

import (
	"errors"
	"log/slog"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// pidSignaller signals a process only while it is the one its caller
// checked (R-S2): between the check (its start time in /proc/<pid>) and
// kill(2), the process may end and its pid go to another, of any user,
// who would get the signal. It holds the process with a pidfd
// (pidfd_open, Linux 5.3) first, then checks, then signals the pidfd
// (pidfd_send_signal), which reaches the process held, or none once it
// ended: so what the check read of /proc/<pid> was that process's, or
// nothing is signalled. Without
// pidfds (ENOSYS: an older kernel; EPERM: a seccomp filter that forbids
// the call) it checks and kills by pid, as before, and says so once.
type pidSignaller struct {
	open  func(pid int) (int, error)
	send  func(fd int, sig syscall.Signal) error
	close func(fd int) error
	kill  func(pid int, sig syscall.Signal) error
	once  sync.Once
}

func newPidSignaller() *pidSignaller {
	return &pidSignaller{
		open:  func(pid int) (int, error) { return unix.PidfdOpen(pid, 0) },
		send:  func(fd int, sig syscall.Signal) error { return unix.PidfdSendSignal(fd, sig, nil, 0) },
		close: unix.Close,
		kill:  syscall.Kill,
	}
}

// signal sends sig to pid if same, asked once pid is held, says it is
// still the process meant; os.ErrProcessDone when it is not, or ended.
func (s *pidSignaller) signal(log *slog.Logger, pid int, sig syscall.Signal, same func() bool) error {
	fd, err := s.open(pid)
	switch {
	case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM):
		s.once.Do(func() {
			log.Warn("no pidfd: a logoff signals the pid it checked, which another process may have taken since", "err", err)
		})
		if !same() {
			return os.ErrProcessDone
		}
		if err := s.kill(pid, sig); !errors.Is(err, unix.ESRCH) {
			return err
		}
		return os.ErrProcessDone // ended since the check
	case errors.Is(err, unix.ESRCH):
		return os.ErrProcessDone
	case err != nil:
		return err
	}
	defer s.close(fd)
	if !same() {
		return os.ErrProcessDone
	}
	// Had the held process ended before same read /proc/<pid> (another's
	// then), this fails: the signal reaches the process held or none.
	if err := s.send(fd, sig); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return os.ErrProcessDone
		}
		return err
	}
	return nil
}
