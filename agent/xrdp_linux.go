package agent

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

func newXrdp() (SessionProvider, error) {
	p := &XrdpProvider{Proc: DefaultProcDir, SockDir: DefaultXrdpSockDir, LookupUser: lookupUID, LookupUID: lookupName, SendDatagram: sendDatagram, KernelSocket: kernelSocket, Self: os.Getpid()}
	p.Signal = func(pid int, start uint64, sig syscall.Signal) error { return signalStarted(p, pid, start, sig) }
	return p, nil
}

// lookupName returns the uid of a user name (through NSS: directory users
// too).
func lookupName(name string) (int, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(u.Uid)
}

func lookupUID(uid int) (string, error) {
	u, err := user.LookupId(strconv.Itoa(uid))
	if err != nil {
		return "", err
	}
	return u.Username, nil
}

// signalStarted signals pid only if it is still the process that started
// at start. os.FindProcess holds the process by a pidfd (Linux 5.3+), so
// once the start time is checked through it the pid cannot be reused
// before the signal lands.
func signalStarted(p *XrdpProvider, pid int, start uint64, sig syscall.Signal) error {
	proc, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	defer proc.Release()
	now, err := p.readProc(pid)
	if err != nil || now.Start != start {
		return os.ErrProcessDone
	}
	return proc.Signal(sig)
}

// sendDatagram sends msg to the Unix datagram socket at path, if that is a
// socket of uid owner and not a link: the path comes from the X server's
// environment, which its user may change, and a link in her directory
// would have the root agent write to another user's display's socket, or
// any other. The socket is opened without following a link (O_PATH), its
// owner checked on what was opened, and the datagram sent to that very
// socket through /proc/self/fd, so it cannot be swapped in between.
func sendDatagram(path string, owner int, msg []byte) error {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return fmt.Errorf("%s is no socket (a link?): not sent", path)
	}
	if int(st.Uid) != owner {
		return fmt.Errorf("%s belongs to uid %d, not to the session's %d: not sent", path, st.Uid, owner)
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: "/proc/self/fd/" + strconv.Itoa(fd), Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer c.Close()
	_, err = c.Write(msg)
	return err
}

// errOtherNetns: the process is in another network namespace than the
// agent, whose sock_diag cannot see its sockets.
var errOtherNetns = errors.New("another network namespace")

// kernelSocket asks the kernel (sock_diag) about the Unix socket of inode,
// which pid holds: its type, state and path. Only in the agent's own
// network namespace: another's error is errOtherNetns.
func kernelSocket(pid int, inode uint64) (UnixSocket, error) {
	theirs, err1 := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/net")
	ours, err2 := os.Readlink("/proc/self/ns/net")
	if err := errors.Join(err1, err2); err != nil {
		return UnixSocket{}, err
	}
	if theirs != ours {
		return UnixSocket{}, errOtherNetns
	}
	if inode == 0 || inode > 0xffffffff {
		return UnixSocket{}, fmt.Errorf("sock_diag: inode %d is no 32-bit inode", inode)
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return UnixSocket{}, fmt.Errorf("sock_diag: %w", err)
	}
	defer unix.Close(fd)
	tv := unix.Timeval{Sec: 5}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return UnixSocket{}, fmt.Errorf("sock_diag: %w", err)
	}
	err = ignoringEINTR(func() error {
		return unix.Sendto(fd, unixDiagRequest(uint32(inode), 1), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
	})
	if err != nil {
		return UnixSocket{}, fmt.Errorf("sock_diag: %w", err)
	}
	buf := make([]byte, 8192)
	var n int
	err = ignoringEINTR(func() (err error) {
		n, _, err = unix.Recvfrom(fd, buf, 0)
		return err
	})
	if err != nil {
		return UnixSocket{}, fmt.Errorf("sock_diag: %w", err)
	}
	return ParseUnixDiag(buf[:n])
}

// ignoringEINTR calls f again while a signal interrupts it: a socket with
// SO_RCVTIMEO is not restarted after one (signal(7)), and the agent gets
// signals (SIGCHLD of the commands it runs).
func ignoringEINTR(f func() error) error {
	for {
		if err := f(); err != unix.EINTR {
			return err
		}
	}
}
