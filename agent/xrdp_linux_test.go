package agent

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestNewSessionProviderXrdp(t *testing.T) {
	p, err := NewSessionProvider("xrdp")
	if err != nil {
		t.Fatal(err)
	}
	x, ok := p.(*XrdpProvider)
	if !ok || x.Proc != "/proc" || x.Signal == nil || x.SendDatagram == nil || x.LookupUser == nil || x.LookupUID == nil || x.KernelSocket == nil || x.Self != os.Getpid() {
		t.Fatalf("NewSessionProvider(xrdp) = %#v", p)
	}
}

// TestXrdpSignalStarted signals real processes: only the one that started
// when the caller saw it, so a pid reused since is left alone.
func TestXrdpSignalStarted(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	p, _ := newXrdp()
	x := p.(*XrdpProvider)
	pr, err := x.readProc(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Signal(pr.PID, pr.Start+1, syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("signal with another start time = %v, want ErrProcessDone", err)
	}
	if !x.alive(pr) {
		t.Fatal("a process of another start time was signalled")
	}
	if err := x.Signal(pr.PID, pr.Start, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("sleep ended with %v, want SIGTERM", cmd.ProcessState)
	}
	if err := x.Signal(pr.PID, pr.Start, syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("signal to an ended process = %v, want ErrProcessDone", err)
	}
}

// TestXrdpSendDatagram sends what Disconnect sends to a real datagram
// socket, as xorgxrdp's xrdp_disconnect_display_<N> is. The path comes
// from the X server's environment, which its user may change (R-S2): only
// a socket, not a link to one, of the session's user gets it, so that
// she cannot have the root agent send it to another user's display
// (dropping that user's client) or any other socket.
func TestXrdpSendDatagram(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "xrdp_disconnect_display_10")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	me := os.Geteuid()
	if err := sendDatagram(path, me, []byte("sig")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 8)
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "sig" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	if err := sendDatagram(path+".gone", me, []byte("sig")); err == nil {
		t.Error("datagram to no socket: no error")
	}
	link := filepath.Join(dir, "xrdp_disconnect_display_11")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if err := sendDatagram(link, me, []byte("link")); err == nil {
		t.Error("datagram through a link: no error")
	}
	if err := sendDatagram(path, me+1, []byte("other")); err == nil {
		t.Error("datagram to another user's socket: no error")
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := sendDatagram(plain, me, []byte("file")); err == nil {
		t.Error("datagram to a file: no error")
	}
	// Nothing else arrived: the next datagram is the next one sent.
	if err := sendDatagram(path, me, []byte("last")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "last" {
		t.Errorf("read %q, %v; want last", buf[:n], err)
	}
}

// TestXrdpKernelSocket runs kernelConnected and displayConnected on this process's own
// sockets, with the kernel's table and its sock_diag answers: a client
// accepted on xrdp_display_77 connects the display, and a line that a
// user's socket path adds to the table (R-S2: any local user can bind
// such a socket) does not.
func TestXrdpKernelSocket(t *testing.T) {
	dir, err := os.MkdirTemp("/tmp", "xk") // short: a socket path has at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := dir + "/xrdp_display_77"
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	accepted, err := ln.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	defer accepted.Close()
	lnIno, accIno := socketInode(t, ln), socketInode(t, accepted)

	kernel := func(inode uint64) (UnixSocket, error) { return kernelSocket(os.Getpid(), inode) }
	got, err := kernel(accIno)
	if want := (UnixSocket{Type: 1, State: 3, Inode: accIno, Path: path}); err != nil || got != want {
		t.Errorf("kernel: accepted socket %+v, %v; want %+v", got, err, want)
	}
	got, err = kernel(lnIno)
	if want := (UnixSocket{Flags: 0x10000, Type: 1, State: 1, Inode: lnIno, Path: path}); err != nil || got != want {
		t.Errorf("kernel: listening socket %+v, %v; want %+v", got, err, want)
	}
	if _, err := kernel(1); !errors.Is(err, errNoSocket) {
		t.Errorf("kernel: inode 1: %v, want errNoSocket", err)
	}

	// A user binds a socket whose path adds a line saying the listening
	// socket is a connected one on xrdp_display_77.
	// The path's slashes are directories she makes.
	fake := fmt.Sprintf("%s/a\n0: 2 0 0 1 3 %d %s", dir, lnIno, path)
	if err := os.MkdirAll(filepath.Dir(fake), 0o700); err != nil {
		t.Fatal(err)
	}
	fl, err := net.ListenUnix("unix", &net.UnixAddr{Name: fake, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer fl.Close()
	data, err := os.ReadFile("/proc/self/net/unix")
	if err != nil {
		t.Fatal(err)
	}
	table, err := ParseNetUnix(data)
	if err != nil {
		t.Fatal(err)
	}
	held := map[uint64]bool{lnIno: true, socketInode(t, fl): true}
	if !displayConnected(table, held, path) {
		t.Fatal("the table is not fooled by the added line: this kernel escapes newlines, the test shows nothing")
	}
	if ok, err := kernelConnected(held, path, kernel); ok || err != nil {
		t.Errorf("kernelConnected = %v, %v: a line a user's socket path added connects the display", ok, err)
	}
	held[accIno] = true
	if ok, err := kernelConnected(held, path, kernel); !ok || err != nil {
		t.Errorf("kernelConnected = %v, %v: the accepted client does not connect the display", ok, err)
	}
}

func socketInode(tb testing.TB, c syscall.Conn) uint64 {
	tb.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		tb.Fatal(err)
	}
	var st syscall.Stat_t
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = syscall.Fstat(int(fd), &st) }); err != nil {
		tb.Fatal(err)
	}
	if serr != nil {
		tb.Fatal(serr)
	}
	return st.Ino
}

// Every user's processes are in /proc, with environments and command lines
// as large as she likes (megabytes each, thousands of processes): the
// provider reads a process's environment only when it is an X server
// sesman started or, at a logoff, a process of the session's user, and
// reads at most a bound of any, so that the heartbeat's session list
// (R-S2) costs no user's size. A FIFO stands for an environment no read
// should touch: reading it would never end.
func TestXrdpReadsOnlyTheEnvironmentsItNeeds(t *testing.T) {
	proc := copyTree(t, twoSessions)
	addProc(t, proc, 4000, "bash", 1, 1003, []string{"bash"}, nil)
	if err := syscall.Mkfifo(filepath.Join(proc, "4000/environ"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &XrdpProvider{Proc: proc, LookupUID: labUIDs}
	got, err := p.Sessions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Errorf("Sessions = %+v, want the two sessions", got)
	}
	// An X server's environment is read up to a bound.
	big := strings.Repeat("X=", 1<<20) + "\x00USER=rdplabbob\x00"
	if err := os.WriteFile(filepath.Join(proc, "2987/environ"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	if env := p.environ(2987); len(strings.Join(env, "")) > maxEnviron {
		t.Errorf("read %d bytes of an environment", len(strings.Join(env, "")))
	}
}

// A signal to the agent (a child's SIGCHLD) interrupts the wait for the
// kernel's answer about an xrdp session's socket (R-S2), which SO_RCVTIMEO
// keeps the kernel from restarting: the call is made again, not taken as
// a kernel that cannot be asked.
func TestIgnoringEINTR(t *testing.T) {
	calls := 0
	err := ignoringEINTR(func() error {
		calls++
		if calls < 3 {
			return unix.EINTR
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Errorf("ignoringEINTR = %v after %d calls, want nil after 3", err, calls)
	}
	if err := ignoringEINTR(func() error { return unix.EAGAIN }); err != unix.EAGAIN {
		t.Errorf("ignoringEINTR = %v, want EAGAIN as it came", err)
	}
}
