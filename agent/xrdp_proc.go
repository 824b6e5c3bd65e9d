package agent

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Parsers of the /proc files the xrdp provider reads. They are pure (bytes
// in, values out) and portable, so they are tested on recorded trees and
// fuzzed on any system.

// PIDStat is the part of /proc/<pid>/stat the xrdp provider uses.
type PIDStat struct {
	PID   int
	Comm  string // the executable's name, at most 15 bytes
	State byte   // R, S, D, Z, T, ...
	PPID  int
	// Start is the process's start time in clock ticks after boot
	// (field 22). With the pid it names one process: a pid is reused only
	// by a later process.
	Start uint64
}

// ParsePIDStat parses /proc/<pid>/stat: "pid (comm) state ppid ...". The
// comm may hold spaces and parentheses, so it ends at the last ')'.
func ParsePIDStat(data []byte) (PIDStat, error) {
	var st PIDStat
	s := strings.TrimSpace(string(data))
	open := strings.IndexByte(s, '(')
	end := strings.LastIndexByte(s, ')')
	if open < 1 || end < open {
		return st, errors.New("proc stat: no (comm)")
	}
	pid, err := strconv.Atoi(strings.TrimSpace(s[:open]))
	if err != nil || pid <= 0 {
		return st, fmt.Errorf("proc stat: pid %q", s[:open])
	}
	st.PID, st.Comm = pid, s[open+1:end]
	// After the comm: field 3 (state) is f[0], field 4 (ppid) f[1], field
	// 22 (starttime) f[19].
	f := strings.Fields(s[end+1:])
	if len(f) < 20 || len(f[0]) != 1 {
		return st, errors.New("proc stat: too few fields")
	}
	st.State = f[0][0]
	if st.PPID, err = strconv.Atoi(f[1]); err != nil || st.PPID < 0 {
		return st, fmt.Errorf("proc stat: ppid %q", f[1])
	}
	if st.Start, err = strconv.ParseUint(f[19], 10, 64); err != nil {
		return st, fmt.Errorf("proc stat: starttime %q", f[19])
	}
	return st, nil
}

// ParseProcStatusUID returns the real uid of /proc/<pid>/status ("Uid:
// real effective saved fs").
func ParseProcStatusUID(data []byte) (int, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "Uid:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			break
		}
		uid, err := strconv.ParseUint(f[0], 10, 32)
		if err != nil {
			return -1, fmt.Errorf("proc status: uid %q", f[0])
		}
		return int(uid), nil
	}
	return -1, errors.New("proc status: no Uid line")
}

// ParseNulList splits /proc/<pid>/cmdline or environ: NUL-terminated
// strings.
func ParseNulList(data []byte) []string {
	data = bytes.TrimRight(data, "\x00")
	if len(data) == 0 {
		return nil
	}
	return strings.Split(string(data), "\x00")
}

// envValue returns the value of key in an environ list.
func envValue(env []string, key string) (string, bool) {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

// displayArg matches an X server's display argument, ":10".
var displayArg = regexp.MustCompile(`^:([0-9]{1,4})$`)

// XrdpDisplay returns the display number of an X server's command line
// when its first argument is ":N", as sesman starts it ("Xorg :10 -auth
// ..."); ok is false for anything else.
func XrdpDisplay(args []string) (n int, ok bool) {
	if len(args) < 2 {
		return 0, false
	}
	m := displayArg.FindStringSubmatch(args[1])
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	return n, err == nil
}

// onDisplay reports whether a DISPLAY value names local display n: ":10"
// or ":10.0" (not "host:10", an X connection forwarded elsewhere).
func onDisplay(value string, n int) bool {
	d, _, _ := strings.Cut(value, ".")
	return d == ":"+strconv.Itoa(n)
}

// Unix socket types and states as /proc/net/unix prints them.
const (
	unixStream    = 1 // SOCK_STREAM
	unixConnected = 3 // SS_CONNECTED
)

// UnixSocket is one line of /proc/net/unix.
type UnixSocket struct {
	Flags uint32 // 0x10000 (__SO_ACCEPTCON) on a listening socket
	Type  int    // 1 stream, 2 datagram, 5 seqpacket
	State int    // 1 unconnected (and listening), 3 connected
	Inode uint64
	Path  string // "" when unbound; "@name" for the abstract namespace
}

// ParseNetUnix parses /proc/net/unix:
//
//	Num       RefCount Protocol Flags    Type St Inode Path
//	0000000027b93221: 00000003 00000000 00000000 0001 03 49707 /run/xrdp/sockdir/xrdp_display_10
//
// A socket accepted from a listening one is listed with the listener's
// path. Lines it cannot read are skipped; a table without its header is an
// error.
func ParseNetUnix(data []byte) ([]UnixSocket, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "Num") {
		return nil, errors.New("net/unix: no header line")
	}
	var list []UnixSocket
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 7 {
			continue
		}
		flags, err1 := strconv.ParseUint(f[3], 16, 32)
		typ, err2 := strconv.ParseUint(f[4], 16, 16)
		st, err3 := strconv.ParseUint(f[5], 16, 8)
		inode, err4 := strconv.ParseUint(f[6], 10, 64)
		if err := errors.Join(err1, err2, err3, err4); err != nil {
			continue
		}
		s := UnixSocket{Flags: uint32(flags), Type: int(typ), State: int(st), Inode: inode}
		if len(f) > 7 {
			s.Path = strings.Join(f[7:], " ")
		}
		list = append(list, s)
	}
	return list, sc.Err()
}

// ParseSocketLink returns the inode of an fd link "socket:[49707]".
func ParseSocketLink(link string) (uint64, bool) {
	s, ok := strings.CutPrefix(link, "socket:[")
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, "]")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// displayPath is the path of display n's listening socket in sockdir,
// which the end xorgxrdp accepted from xrdp's connection process has too.
func displayPath(sockdir string, n int) string {
	return strings.TrimRight(sockdir, "/") + "/xrdp_display_" + strconv.Itoa(n)
}

// acceptedOn reports whether s is a connected stream socket with path.
func acceptedOn(s UnixSocket, path string) bool {
	return s.Path == path && s.Type == unixStream && s.State == unixConnected
}

// kernelConnected reports whether an xrdp client is attached to the
// display whose listening socket has path: one of the X server's sockets
// (held, their inodes) is, by the kernel's word (sock_diag, whose answer
// is binary), a connected stream socket with that path. An error says the
// kernel could not be asked (no sock_diag, another network namespace);
// then displayConnected reads the table instead.
//
// A kernel without unix_diag answers every request as one for a socket it
// does not have (ENOENT, errNoSocket). An X server xrdp started always
// holds a Unix socket, its display's listening one: when the kernel knows
// none of the sockets it holds, it cannot be asked either.
func kernelConnected(held map[uint64]bool, path string, kernel func(inode uint64) (UnixSocket, error)) (bool, error) {
	if len(held) == 0 {
		return false, nil // none to ask about (or its fd links unreadable)
	}
	answered := false
	for inode := range held {
		k, err := kernel(inode)
		switch {
		case errors.Is(err, errNoSocket): // not a Unix socket, or gone
			continue
		case err != nil:
			return false, err
		case k.Inode == inode && acceptedOn(k, path):
			return true, nil
		}
		answered = true
	}
	if !answered {
		return false, errNoUnixDiag
	}
	return false, nil
}

// errNoUnixDiag: the kernel knows none of an X server's sockets.
var errNoUnixDiag = errors.New("sock_diag: the kernel knows none of the X server's sockets (no unix_diag?)")

// displayConnected is kernelConnected from the table of /proc/net/unix,
// when the kernel cannot be asked: the X server holds a connected stream
// socket with the path of its display's listening socket. The kernel
// prints a path there as it is, newlines included, so a user whose
// socket's path holds one can add lines to the table, such as one saying
// that the listening socket the X server holds is a connected one: the
// table is read only when the kernel cannot be asked.
func displayConnected(table []UnixSocket, held map[uint64]bool, path string) bool {
	for _, s := range table {
		if acceptedOn(s, path) && held[s.Inode] {
			return true
		}
	}
	return false
}

// errNoSocket is the kernel's answer for a socket it does not have.
var errNoSocket = errors.New("no such socket")

// The sock_diag request and answer for one Unix socket (linux/sock_diag.h,
// linux/unix_diag.h, linux/netlink.h), encoded here without a build tag so
// that the decoder is tested and fuzzed on any system.
const (
	nlmsgHeaderLen          = 16 // struct nlmsghdr
	nlmsgError              = 2  // NLMSG_ERROR
	nlmFRequest             = 1  // NLM_F_REQUEST
	sockDiagByFamily        = 20 // SOCK_DIAG_BY_FAMILY
	afUnix                  = 1  // AF_UNIX
	udiagShowName           = 1  // UDIAG_SHOW_NAME
	unixDiagName            = 0  // UNIX_DIAG_NAME attribute
	unixDiagReqLen          = 24 // struct unix_diag_req
	unixDiagMsgLen          = 16 // struct unix_diag_msg
	tcpEstablished          = 1  // sk_state of a connected Unix socket
	tcpListen               = 10 // sk_state of a listening one
	diagNoCookie     uint32 = 0xffffffff
	enoent                  = 2
)

// unixDiagRequest asks the kernel for the Unix socket of inode, with its
// name.
func unixDiagRequest(inode uint32, seq uint32) []byte {
	b := make([]byte, nlmsgHeaderLen+unixDiagReqLen)
	le := binary.NativeEndian
	le.PutUint32(b[0:], uint32(len(b)))
	le.PutUint16(b[4:], sockDiagByFamily)
	le.PutUint16(b[6:], nlmFRequest)
	le.PutUint32(b[8:], seq)
	r := b[nlmsgHeaderLen:]
	r[0] = afUnix
	le.PutUint32(r[4:], ^uint32(0)) // every state
	le.PutUint32(r[8:], inode)
	le.PutUint32(r[12:], udiagShowName)
	le.PutUint32(r[16:], diagNoCookie)
	le.PutUint32(r[20:], diagNoCookie)
	return b
}

// ParseUnixDiag decodes the kernel's answer to unixDiagRequest: the
// socket's type, state (unixConnected for a connected socket, 1 for any
// other, as /proc/net/unix shows them), inode and path ("@name" for the
// abstract namespace, "" when unbound), or errNoSocket when the kernel
// has no such socket. Every length is checked before it is used.
func ParseUnixDiag(b []byte) (UnixSocket, error) {
	le := binary.NativeEndian
	if len(b) < nlmsgHeaderLen {
		return UnixSocket{}, fmt.Errorf("sock_diag: answer of %d bytes", len(b))
	}
	n := int(le.Uint32(b[0:]))
	if n < nlmsgHeaderLen || n > len(b) {
		return UnixSocket{}, fmt.Errorf("sock_diag: message length %d of %d bytes", n, len(b))
	}
	body := b[nlmsgHeaderLen:n]
	switch typ := le.Uint16(b[4:]); typ {
	case nlmsgError:
		if len(body) < 4 {
			return UnixSocket{}, errors.New("sock_diag: short error message")
		}
		errno := -int32(le.Uint32(body))
		if errno == enoent {
			return UnixSocket{}, errNoSocket
		}
		return UnixSocket{}, fmt.Errorf("sock_diag: error %d", errno)
	case sockDiagByFamily:
	default:
		return UnixSocket{}, fmt.Errorf("sock_diag: message type %d", typ)
	}
	if len(body) < unixDiagMsgLen || body[0] != afUnix {
		return UnixSocket{}, errors.New("sock_diag: no unix_diag_msg")
	}
	s := UnixSocket{Type: int(body[1]), State: 1, Inode: uint64(le.Uint32(body[4:]))}
	switch body[2] {
	case tcpEstablished:
		s.State = unixConnected
	case tcpListen:
		s.Flags = 0x10000
	}
	for a := body[unixDiagMsgLen:]; len(a) >= 4; {
		alen, atyp := int(le.Uint16(a[0:])), le.Uint16(a[2:])
		if alen < 4 || alen > len(a) {
			return UnixSocket{}, fmt.Errorf("sock_diag: attribute length %d of %d bytes", alen, len(a))
		}
		if atyp == unixDiagName {
			name := a[4:alen]
			if len(name) > 0 && name[0] == 0 {
				s.Path = "@" + string(name[1:])
			} else {
				s.Path = string(bytes.TrimRight(name, "\x00"))
			}
		}
		a = a[min((alen+3)&^3, len(a)):]
	}
	return s, nil
}
