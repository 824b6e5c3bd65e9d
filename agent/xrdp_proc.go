package agent

import (
	"bufio"
	"bytes"
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

// displayConnected reports whether an xrdp client is attached to display
// n: the X server holds a connected stream socket with the path of its
// xrdp_display_<n> listening socket, which is the end xorgxrdp accepted
// from xrdp's connection process. held are the inodes of the X server's
// sockets; sockdir is where xrdp keeps its sockets.
func displayConnected(table []UnixSocket, held map[uint64]bool, sockdir string, n int) bool {
	path := strings.TrimRight(sockdir, "/") + "/xrdp_display_" + strconv.Itoa(n)
	for _, s := range table {
		if s.Path == path && s.Type == unixStream && s.State == unixConnected && held[s.Inode] {
			return true
		}
	}
	return false
}
