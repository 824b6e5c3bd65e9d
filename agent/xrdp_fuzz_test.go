package agent

import (
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
		displayConnected(table, held, DefaultXrdpSockDir, 10)
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
