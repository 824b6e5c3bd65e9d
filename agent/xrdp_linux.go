package agent

import (
	"net"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

func newXrdp() (SessionProvider, error) {
	p := &XrdpProvider{Proc: DefaultProcDir, SockDir: DefaultXrdpSockDir, LookupUser: lookupUID, LookupUID: lookupName, SendDatagram: sendDatagram, Self: os.Getpid()}
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

// sendDatagram sends msg to the Unix datagram socket at path.
func sendDatagram(path string, msg []byte) error {
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write(msg)
	return err
}
