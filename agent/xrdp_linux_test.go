package agent

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestNewSessionProviderXrdp(t *testing.T) {
	p, err := NewSessionProvider("xrdp")
	if err != nil {
		t.Fatal(err)
	}
	x, ok := p.(*XrdpProvider)
	if !ok || x.Proc != "/proc" || x.Signal == nil || x.SendDatagram == nil || x.LookupUser == nil || x.LookupUID == nil || x.Self != os.Getpid() {
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
// socket, as xorgxrdp's xrdp_disconnect_display_<N> is.
func TestXrdpSendDatagram(t *testing.T) {
	path := filepath.Join(t.TempDir(), "xrdp_disconnect_display_10")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := sendDatagram(path, []byte("sig")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 8)
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "sig" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	if err := sendDatagram(path+".gone", []byte("sig")); err == nil {
		t.Error("datagram to no socket: no error")
	}
}
