package agent

import (
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"
)

// Fuzz targets of the xrdp provider's /proc parsers: whatever a process
// puts in its command line, environment or name must not crash the agent,
// and what comes out must be what the provider relies on.

func FuzzParsePIDStat(f *testing.F) {
	for _, pid := range []string{"2987", "29565", "3050"} { // Xorg, sesman, ssh-agent
		data, err := os.ReadFile(twoSessions + "/" + pid + "/stat")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("7 (a) (b) Z 1 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 99 0 0")) // parentheses in comm
	f.Add([]byte("7 () S"))                                                   // empty comm, short
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := ParsePIDStat(data)
		if err != nil {
			return
		}
		if st.PID <= 0 || st.PPID < 0 {
			t.Fatalf("ParsePIDStat(%q) = %+v", data, st)
		}
	})
}

func FuzzParseProcStatusUID(f *testing.F) {
	data, err := os.ReadFile(twoSessions + "/2987/status")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte("Uid:\n"))                    // no value
	f.Add([]byte("Uid:\t4294967296\t0\t0\t0")) // above uint32
	f.Fuzz(func(t *testing.T, data []byte) {
		uid, err := ParseProcStatusUID(data)
		if (err == nil) != (uid >= 0) {
			t.Fatalf("ParseProcStatusUID(%q) = %d, %v", data, uid, err)
		}
	})
}

func FuzzParseNulList(f *testing.F) {
	for _, name := range []string{"2987/cmdline", "2987/environ"} {
		data, err := os.ReadFile(twoSessions + "/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("Xorg\x00:99999\x00")) // display out of range
	f.Add([]byte("\x00\x00"))           // empty strings only
	f.Fuzz(func(t *testing.T, data []byte) {
		list := ParseNulList(data)
		if n, ok := XrdpDisplay(list); ok && (n < 0 || n > 9999) {
			t.Fatalf("display %d from %q", n, data)
		}
		for _, s := range list {
			if strings.Contains(s, "\x00") {
				t.Fatalf("element %q holds a NUL", s)
			}
		}
		envValue(list, "USER")
	})
}

func FuzzParseNetUnix(f *testing.F) {
	data, err := os.ReadFile(twoSessions + "/2987/net/unix")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte("Num RefCount\n0: 2 0 zz 0001 03 1 /p\n"))                   // bad flags: skipped
	f.Add([]byte("Num RefCount\n0: 2 0 0 0001 03 1 /path with spaces\n"))     // spaces in path
	f.Add([]byte("Num RefCount\n0: 2 0 0 0001 03 18446744073709551616 /x\n")) // inode overflow
	f.Fuzz(func(t *testing.T, data []byte) {
		table, err := ParseNetUnix(data)
		if err != nil {
			return
		}
		held := map[uint64]bool{}
		for _, s := range table {
			held[s.Inode] = true
		}
		displayConnected(table, held, displayPath(DefaultXrdpSockDir, 10))
	})
}

func FuzzParseSocketLink(f *testing.F) {
	f.Add("socket:[49707]")
	f.Add("pipe:[1]")
	f.Add("socket:[]")
	f.Fuzz(func(t *testing.T, link string) {
		if _, ok := ParseSocketLink(link); ok && !strings.HasPrefix(link, "socket:[") {
			t.Fatalf("ParseSocketLink(%q) ok", link)
		}
	})
}

// diagAnswer builds a sock_diag answer as the kernel sends it for one
// Unix socket: nlmsghdr, unix_diag_msg and a UNIX_DIAG_NAME attribute.
func diagAnswer(typ, state byte, inode uint32, name string) []byte {
	le := binary.NativeEndian
	attr := make([]byte, 4+len(name))
	le.PutUint16(attr[0:], uint16(len(attr)))
	le.PutUint16(attr[2:], unixDiagName)
	copy(attr[4:], name)
	for len(attr)%4 != 0 {
		attr = append(attr, 0)
	}
	msg := make([]byte, nlmsgHeaderLen+unixDiagMsgLen, nlmsgHeaderLen+unixDiagMsgLen+len(attr))
	msg = append(msg, attr...)
	le.PutUint32(msg[0:], uint32(len(msg)))
	le.PutUint16(msg[4:], sockDiagByFamily)
	body := msg[nlmsgHeaderLen:]
	body[0], body[1], body[2] = afUnix, typ, state
	le.PutUint32(body[4:], inode)
	return msg
}

// FuzzParseUnixDiag: the kernel's sock_diag answer, whether an xrdp
// session is connected (R-S2, R-S5), is decoded with every length
// checked, whatever the bytes.
func FuzzParseUnixDiag(f *testing.F) {
	f.Add(diagAnswer(1, tcpEstablished, 63465, "/run/xrdp/sockdir/xrdp_display_11\x00")) // accepted client
	f.Add(diagAnswer(1, tcpListen, 63428, "/run/xrdp/sockdir/xrdp_display_11\x00"))      // listener
	f.Add(diagAnswer(1, 7, 63419, ""))                                                   // unbound
	f.Add(diagAnswer(1, tcpEstablished, 66578, "\x00/tmp/.X11-unix/X11"))                // abstract
	errAnswer := make([]byte, 36)
	binary.NativeEndian.PutUint32(errAnswer[0:], 36)
	binary.NativeEndian.PutUint16(errAnswer[4:], nlmsgError)
	binary.NativeEndian.PutUint32(errAnswer[16:], uint32(0xfffffffe)) // -ENOENT
	f.Add(errAnswer)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}) // short
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseUnixDiag(data)
		if err != nil {
			return
		}
		if s.State != 1 && s.State != unixConnected {
			t.Fatalf("ParseUnixDiag(%q) = %+v: state %d", data, s, s.State)
		}
	})
}

// TestParseUnixDiag decodes the kernel's answers about the sockets that
// tell whether an xrdp session is connected (R-S2, R-S5).
func TestParseUnixDiag(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		want UnixSocket
		err  error
	}{
		{"accepted", diagAnswer(1, tcpEstablished, 63465, "/run/xrdp/sockdir/xrdp_display_11\x00"),
			UnixSocket{Type: 1, State: 3, Inode: 63465, Path: "/run/xrdp/sockdir/xrdp_display_11"}, nil},
		{"listening", diagAnswer(1, tcpListen, 63428, "/run/xrdp/sockdir/xrdp_display_11\x00"),
			UnixSocket{Flags: 0x10000, Type: 1, State: 1, Inode: 63428, Path: "/run/xrdp/sockdir/xrdp_display_11"}, nil},
		{"abstract", diagAnswer(1, tcpEstablished, 66578, "\x00/tmp/.X11-unix/X11"),
			UnixSocket{Type: 1, State: 3, Inode: 66578, Path: "@/tmp/.X11-unix/X11"}, nil},
		{"datagram, unbound", diagAnswer(2, 7, 9, ""), UnixSocket{Type: 2, State: 1, Inode: 9}, nil},
	}
	for _, tt := range tests {
		got, err := ParseUnixDiag(tt.data)
		if err != nil || got != tt.want {
			t.Errorf("%s: %+v, %v; want %+v", tt.name, got, err, tt.want)
		}
	}
	errAnswer := make([]byte, 36)
	binary.NativeEndian.PutUint32(errAnswer[0:], 36)
	binary.NativeEndian.PutUint16(errAnswer[4:], nlmsgError)
	binary.NativeEndian.PutUint32(errAnswer[16:], uint32(0xfffffffe)) // -ENOENT
	if _, err := ParseUnixDiag(errAnswer); !errors.Is(err, errNoSocket) {
		t.Errorf("ENOENT: %v, want errNoSocket", err)
	}
	long := diagAnswer(1, tcpEstablished, 1, "/x\x00")
	binary.NativeEndian.PutUint32(long[0:], uint32(len(long)+4))
	if _, err := ParseUnixDiag(long); err == nil {
		t.Error("a message longer than the answer: no error")
	}
}
