package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vdibroker/vdibroker"
)

// testdata/xrdp/two-sessions is a /proc recorded with record.sh on Debian 12
// (xrdp 0.9.21.1, xorgxrdp 0.9.19) while two users had xrdp sessions:
//
//	29565 xrdp-sesman (root)
//	  29786 xrdp-sesman: 29807 Xorg :10 (rdplabuser, uid 1001, its client gone),
//	        29806 x-terminal-emulator → 29953 ssh-agent, 29995 bash; 29892 xrdp-chansrv
//	  2985 xrdp-sesman:  2987 Xorg :11 (rdplabbob, uid 1002, connected),
//	        2986 x-terminal-emulator → 3050 ssh-agent, 3059 bash; 3003 xrdp-chansrv
//	29609 xrdp (root) → 2899 xrdp (serving rdplabbob's client)
//	29701 Xvfb :0 (root, the client's display: no xrdp session)
//	3308 sleep (uid 1001, DISPLAY=:11 but not started by the session)
//	3309 sleep (uid 1002, no DISPLAY: a login of bob outside the session)
//
// Environments are recorded for the users' processes only.
const twoSessions = "testdata/xrdp/two-sessions/proc"

// labUIDs is the recorded host's passwd, for XrdpProvider.LookupUID.
func labUIDs(name string) (int, error) {
	switch name {
	case "rdplabuser":
		return 1001, nil
	case "rdplabbob":
		return 1002, nil
	}
	return 0, fmt.Errorf("user %q: unknown", name)
}

func TestXrdpSessionsRecorded(t *testing.T) {
	p := &XrdpProvider{Proc: twoSessions, LookupUID: labUIDs}
	got, err := p.Sessions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// Ids: display and the Xorg's start time (field 22 of its stat).
	want := []vdibroker.AgentSession{
		{ID: "xrdp-10-57169", User: "rdplabuser", State: vdibroker.StateDisconnected},
		{ID: "xrdp-11-69049", User: "rdplabbob", State: vdibroker.StateActive},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Sessions (-want +got):\n%s", diff)
	}
}

// copyTree copies a recorded tree, symbolic links (the fd links) as links,
// so a test can change it.
func copyTree(tb testing.TB, src string) string {
	tb.Helper()
	dst := filepath.Join(tb.TempDir(), "proc")
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, to)
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, data, 0o644)
	})
	if err != nil {
		tb.Fatal(err)
	}
	return dst
}

func TestXrdpSessionsCases(t *testing.T) {
	tests := []struct {
		name   string
		change func(tb testing.TB, proc string)
		want   []vdibroker.AgentSession
	}{{
		name: "client gone: the accepted socket closes",
		change: func(tb testing.TB, proc string) {
			removeLines(tb, filepath.Join(proc, "2987/net/unix"), " 03 63465 ")
		},
		want: []vdibroker.AgentSession{
			{ID: "xrdp-10-57169", User: "rdplabuser", State: vdibroker.StateDisconnected},
			{ID: "xrdp-11-69049", User: "rdplabbob", State: vdibroker.StateDisconnected},
		},
	}, {
		name: "the connected socket is not the X server's",
		change: func(tb testing.TB, proc string) {
			// fd 9 is the accepted socket, inode 63465.
			if err := os.Remove(filepath.Join(proc, "2987/fd/9")); err != nil {
				tb.Fatal(err)
			}
		},
		want: []vdibroker.AgentSession{
			{ID: "xrdp-10-57169", User: "rdplabuser", State: vdibroker.StateDisconnected},
			{ID: "xrdp-11-69049", User: "rdplabbob", State: vdibroker.StateDisconnected},
		},
	}, {
		name: "an X server sesman did not start is no session",
		change: func(tb testing.TB, proc string) {
			// Xorg :10's parent becomes init, as a console's X server.
			rewrite(tb, filepath.Join(proc, "29807/stat"), "S 29786 ", "S 1 ")
		},
		want: []vdibroker.AgentSession{{ID: "xrdp-11-69049", User: "rdplabbob", State: vdibroker.StateActive}},
	}, {
		name: "no USER in the environment: the uid's name",
		change: func(tb testing.TB, proc string) {
			os.WriteFile(filepath.Join(proc, "29807/environ"), []byte("DISPLAY=:10.0\x00XRDP_SESSION=1\x00"), 0o644)
		},
		want: []vdibroker.AgentSession{
			{ID: "xrdp-10-57169", User: "uid1001", State: vdibroker.StateDisconnected},
			{ID: "xrdp-11-69049", User: "rdplabbob", State: vdibroker.StateActive},
		},
	}, {
		// R-S2: the X server runs as its user, who may rewrite its
		// environment (ptrace, /proc/<pid>/mem): a USER naming another
		// account is not believed, the uid's name is reported.
		name: "USER naming another account than the X server's: the uid's name",
		change: func(tb testing.TB, proc string) {
			rewrite(tb, filepath.Join(proc, "29807/environ"), "USER=rdplabuser", "USER=rdplabbob")
		},
		want: []vdibroker.AgentSession{
			{ID: "xrdp-10-57169", User: "uid1001", State: vdibroker.StateDisconnected},
			{ID: "xrdp-11-69049", User: "rdplabbob", State: vdibroker.StateActive},
		},
	}, {
		name: "USER naming no account: the uid's name",
		change: func(tb testing.TB, proc string) {
			rewrite(tb, filepath.Join(proc, "29807/environ"), "USER=rdplabuser", "USER=nosuchuser")
		},
		want: []vdibroker.AgentSession{
			{ID: "xrdp-10-57169", User: "uid1001", State: vdibroker.StateDisconnected},
			{ID: "xrdp-11-69049", User: "rdplabbob", State: vdibroker.StateActive},
		},
	}, {
		name: "environment unreadable (agent not root): still found by its parent",
		change: func(tb testing.TB, proc string) {
			os.Remove(filepath.Join(proc, "2987/environ"))
		},
		want: []vdibroker.AgentSession{
			{ID: "xrdp-10-57169", User: "rdplabuser", State: vdibroker.StateDisconnected},
			{ID: "xrdp-11-69049", User: "uid1002", State: vdibroker.StateActive},
		},
	}, {
		name: "a zombie X server is no session",
		change: func(tb testing.TB, proc string) {
			rewrite(tb, filepath.Join(proc, "2987/stat"), "(Xorg) S ", "(Xorg) Z ")
		},
		want: []vdibroker.AgentSession{{ID: "xrdp-10-57169", User: "rdplabuser", State: vdibroker.StateDisconnected}},
	}, {
		// R-S2: a session is reported only when xrdp made it. Any local
		// user can name a process xrdp-sesman (a copy of any program
		// under that name, or prctl) and start a child "Xorg :12" with
		// USER=rdplabbob and XRDP_SESSION in its environment; sesman runs
		// as root, she cannot.
		name: "an X server under a user's process named xrdp-sesman is no session",
		change: func(tb testing.TB, proc string) {
			addProc(tb, proc, 4000, "xrdp-sesman", 1, 1003, []string{"xrdp-sesman"}, nil)
			addProc(tb, proc, 4001, "Xorg", 4000, 1003, []string{"/usr/lib/xorg/Xorg", ":12"},
				[]string{"USER=rdplabbob", "DISPLAY=:12", "XRDP_SESSION=1"})
		},
		want: []vdibroker.AgentSession{
			{ID: "xrdp-10-57169", User: "rdplabuser", State: vdibroker.StateDisconnected},
			{ID: "xrdp-11-69049", User: "rdplabbob", State: vdibroker.StateActive},
		},
	}, {
		// xrdp 0.10 (Debian 13, Fedora) starts each session's X server
		// from xrdp-sesexec, which sesman runs as root for the session,
		// not from a child of xrdp-sesman.
		name: "xrdp 0.10: an X server under root's xrdp-sesexec",
		change: func(tb testing.TB, proc string) {
			rewrite(tb, filepath.Join(proc, "29786/stat"), "(xrdp-sesman)", "(xrdp-sesexec)")
		},
		want: []vdibroker.AgentSession{
			{ID: "xrdp-10-57169", User: "rdplabuser", State: vdibroker.StateDisconnected},
			{ID: "xrdp-11-69049", User: "rdplabbob", State: vdibroker.StateActive},
		},
	}, {
		name: "an X server under a user's process named xrdp-sesexec is no session",
		change: func(tb testing.TB, proc string) {
			addProc(tb, proc, 4000, "xrdp-sesexec", 1, 1003, []string{"xrdp-sesexec"}, nil)
			addProc(tb, proc, 4001, "Xorg", 4000, 1003, []string{"/usr/lib/xorg/Xorg", ":12"},
				[]string{"USER=rdplabbob", "DISPLAY=:12", "XRDP_SESSION=4000"})
		},
		want: []vdibroker.AgentSession{
			{ID: "xrdp-10-57169", User: "rdplabuser", State: vdibroker.StateDisconnected},
			{ID: "xrdp-11-69049", User: "rdplabbob", State: vdibroker.StateActive},
		},
	}, {
		name: "sesman gone: no session",
		change: func(tb testing.TB, proc string) {
			for _, pid := range []string{"29565", "29786", "2985"} {
				os.RemoveAll(filepath.Join(proc, pid))
			}
		},
		want: nil,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proc := copyTree(t, twoSessions)
			tt.change(t, proc)
			p := &XrdpProvider{Proc: proc, LookupUID: labUIDs, LookupUser: func(uid int) (string, error) { return fmt.Sprint("uid", uid), nil }}
			got, err := p.Sessions(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Sessions (-want +got):\n%s", diff)
			}
		})
	}
}

// R-S2: a socket's path may hold a newline, and /proc/net/unix prints it
// as is, so any local user can add a line to the table: here one saying
// that the listening socket Xorg :10 holds (inode 49686) is a connected
// one on xrdp_display_10, and one saying that Xorg :11's client (63465)
// is a listener. The kernel's own word on the X servers' sockets
// (KernelSocket, here the recorded table before the lines were added)
// decides.
func TestXrdpAddedNetUnixLines(t *testing.T) {
	proc := copyTree(t, twoSessions)
	genuine := map[int]map[uint64]UnixSocket{}
	for _, pid := range []int{29807, 2987} {
		path := filepath.Join(proc, fmt.Sprint(pid), "net/unix")
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		table, err := ParseNetUnix(data)
		if err != nil {
			t.Fatal(err)
		}
		genuine[pid] = map[uint64]UnixSocket{}
		for _, s := range table {
			genuine[pid][s.Inode] = s
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.WriteString("00000000deadbeef: 00000002 00000000 00010000 0001 01 77777 /home/mallory/x\n" +
			"0: 2 0 0 1 3 49686 /run/xrdp/sockdir/xrdp_display_10\n" +
			"0: 2 0 10000 1 1 63465 /run/xrdp/sockdir/xrdp_display_11\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	p := &XrdpProvider{Proc: proc, LookupUID: labUIDs}
	got, err := p.Sessions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got[0].State != vdibroker.StateActive {
		t.Fatalf("without the kernel's word, :10 is %s: the added line shows nothing", got[0].State)
	}
	asked := map[int]bool{}
	p = &XrdpProvider{Proc: proc, LookupUID: labUIDs, KernelSocket: func(pid int, inode uint64) (UnixSocket, error) {
		asked[pid] = true
		if s, ok := genuine[pid][inode]; ok {
			return s, nil
		}
		return UnixSocket{}, errNoSocket
	}}
	got, err = p.Sessions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []vdibroker.AgentSession{
		{ID: "xrdp-10-57169", User: "rdplabuser", State: vdibroker.StateDisconnected},
		{ID: "xrdp-11-69049", User: "rdplabbob", State: vdibroker.StateActive},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Sessions (-want +got):\n%s", diff)
	}
	if want := map[int]bool{29807: true, 2987: true}; !maps.Equal(asked, want) {
		t.Errorf("asked the kernel about the sockets of %v, want the X servers' %v", asked, want)
	}
}

// addProc adds a process to a copied tree: its stat (start time 90000
// ticks), status, cmdline and, unless env is nil, environ.
func addProc(tb testing.TB, proc string, pid int, comm string, ppid, uid int, args, env []string) {
	tb.Helper()
	dir := filepath.Join(proc, fmt.Sprint(pid))
	if err := os.MkdirAll(filepath.Join(dir, "fd"), 0o755); err != nil {
		tb.Fatal(err)
	}
	files := map[string]string{
		"stat":    fmt.Sprintf("%d (%s) S %d %d %d 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 90000 0 0\n", pid, comm, ppid, ppid, ppid),
		"status":  fmt.Sprintf("Name:\t%s\nPPid:\t%d\nUid:\t%d\t%d\t%d\t%d\n", comm, ppid, uid, uid, uid, uid),
		"cmdline": strings.Join(args, "\x00") + "\x00",
	}
	if env != nil {
		files["environ"] = strings.Join(env, "\x00") + "\x00"
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

func rewrite(tb testing.TB, path, old, new string) {
	tb.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	if !strings.Contains(string(data), old) {
		tb.Fatalf("%s has no %q", path, old)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(data), old, new, 1)), 0o644); err != nil {
		tb.Fatal(err)
	}
}

func removeLines(tb testing.TB, path, having string) {
	tb.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var keep []string
	for _, l := range strings.SplitAfter(string(data), "\n") {
		if !strings.Contains(l, having) {
			keep = append(keep, l)
		}
	}
	if len(keep) == len(strings.SplitAfter(string(data), "\n")) {
		tb.Fatalf("%s has no line with %q", path, having)
	}
	if err := os.WriteFile(path, []byte(strings.Join(keep, "")), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// fakeHost plays the processes of a copied tree: a signal a process obeys
// removes its directory (it exits), with the processes that go with it.
type fakeHost struct {
	tb   testing.TB
	proc string
	// obeys says which signal ends a pid (default SIGTERM); exitsWith
	// lists the pids that end when a pid ends.
	obeys     map[int]syscall.Signal
	exitsWith map[int][]int

	mu   sync.Mutex
	sent []string
}

func (h *fakeHost) signal(pid int, start uint64, sig syscall.Signal) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	data, err := os.ReadFile(filepath.Join(h.proc, fmt.Sprint(pid), "stat"))
	if err != nil {
		return os.ErrProcessDone
	}
	if st, err := ParsePIDStat(data); err != nil || st.Start != start {
		h.tb.Errorf("signal %v to pid %d with start %d: not that process", sig, pid, start)
		return os.ErrProcessDone
	}
	h.sent = append(h.sent, fmt.Sprintf("%d %v", pid, sig))
	want, ok := h.obeys[pid]
	if !ok {
		want = syscall.SIGTERM
	}
	if sig == want || sig == syscall.SIGKILL {
		for _, p := range append([]int{pid}, h.exitsWith[pid]...) {
			os.RemoveAll(filepath.Join(h.proc, fmt.Sprint(p)))
		}
	}
	return nil
}

func TestXrdpLogoffRecorded(t *testing.T) {
	proc := copyTree(t, twoSessions)
	h := &fakeHost{tb: t, proc: proc,
		// As observed: Xorg ends on SIGTERM and takes the window manager,
		// bash, chansrv and sesman's session process with it; the ssh-agent
		// stays behind and here ignores SIGTERM too.
		obeys:     map[int]syscall.Signal{3050: syscall.SIGKILL},
		exitsWith: map[int][]int{2987: {2985, 2986, 3003, 3059}},
	}
	p := &XrdpProvider{Proc: proc, Signal: h.signal, Grace: 50 * time.Millisecond, Poll: 5 * time.Millisecond,
		SendDatagram: func(path string, owner int, msg []byte) error {
			h.mu.Lock()
			h.sent = append(h.sent, fmt.Sprint("datagram ", path, " ", owner))
			h.mu.Unlock()
			// xorgxrdp drops its client: the accepted socket goes.
			removeLines(t, filepath.Join(proc, "2987/net/unix"), " 03 63465 ")
			return nil
		}}
	if err := p.Logoff(t.Context(), "xrdp-11-69049"); err != nil {
		t.Fatal(err)
	}
	// The attached client is dropped first, so that it is told and does
	// not reconnect on its own (R-S4). rdplabuser's sleep with
	// DISPLAY=:11 (3308) and bob's login outside the session (3309) are
	// left alone, as is the other session.
	want := []string{"datagram /run/xrdp/sockdir/xrdp_disconnect_display_11 1002", "2987 terminated", "3050 terminated", "3050 killed"}
	if diff := cmp.Diff(want, h.sent); diff != "" {
		t.Errorf("signals (-want +got):\n%s", diff)
	}
	got, err := p.Sessions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != "xrdp-10-57169" {
		t.Errorf("after logoff: %+v, want rdplabuser's session only", got)
	}
	if err := p.Logoff(t.Context(), "xrdp-11-69049"); !errors.Is(err, ErrNoSession) {
		t.Errorf("second Logoff = %v, want ErrNoSession", err)
	}
}

// TestXrdpLogoffClientStays (R-S4): a client xorgxrdp does not drop on
// the datagram does not stop the logoff; it ends the session after the
// grace.
func TestXrdpLogoffClientStays(t *testing.T) {
	proc := copyTree(t, twoSessions)
	h := &fakeHost{tb: t, proc: proc, obeys: map[int]syscall.Signal{3050: syscall.SIGKILL},
		exitsWith: map[int][]int{2987: {2985, 2986, 3003, 3059}}}
	p := &XrdpProvider{Proc: proc, Signal: h.signal, Grace: 20 * time.Millisecond, Poll: 5 * time.Millisecond,
		SendDatagram: func(path string, owner int, msg []byte) error {
			h.mu.Lock()
			h.sent = append(h.sent, "datagram")
			h.mu.Unlock()
			return nil
		}}
	if err := p.Logoff(t.Context(), "xrdp-11-69049"); err != nil {
		t.Fatal(err)
	}
	if want := []string{"datagram", "2987 terminated", "3050 terminated", "3050 killed"}; !cmp.Equal(want, h.sent) {
		t.Errorf("sent %q, want %q", h.sent, want)
	}
}

func TestXrdpLogoffStuck(t *testing.T) {
	proc := copyTree(t, twoSessions)
	h := &fakeHost{tb: t, proc: proc}
	// A process in uninterruptible sleep survives even SIGKILL for a while.
	p := &XrdpProvider{Proc: proc, Grace: 20 * time.Millisecond, Poll: 5 * time.Millisecond,
		Signal: func(pid int, start uint64, sig syscall.Signal) error {
			h.mu.Lock()
			h.sent = append(h.sent, fmt.Sprintf("%d %v", pid, sig))
			h.mu.Unlock()
			return nil
		}}
	err := p.Logoff(t.Context(), "xrdp-10-57169")
	if err == nil || !strings.Contains(err.Error(), "X server (pid 29807) still runs after SIGKILL") {
		t.Fatalf("Logoff = %v, want the X server named", err)
	}
	if want := []string{"29807 terminated", "29807 killed"}; !cmp.Equal(want, h.sent) {
		t.Errorf("signals %q, want %q", h.sent, want)
	}
}

func TestXrdpDisconnectRecorded(t *testing.T) {
	proc := copyTree(t, twoSessions)
	var sent []string
	p := &XrdpProvider{Proc: proc, Grace: 200 * time.Millisecond, Poll: 5 * time.Millisecond,
		SendDatagram: func(path string, owner int, msg []byte) error {
			sent = append(sent, fmt.Sprint(path, " ", owner))
			// xorgxrdp drops its client: the accepted socket goes.
			removeLines(t, filepath.Join(proc, "2987/net/unix"), " 03 63465 ")
			return nil
		}}
	ctx := t.Context()
	if err := p.Disconnect(ctx, "xrdp-11-69049"); err != nil {
		t.Fatal(err)
	}
	if want := []string{"/run/xrdp/sockdir/xrdp_disconnect_display_11 1002"}; !cmp.Equal(want, sent) {
		t.Errorf("datagrams to %q, want %q", sent, want)
	}
	// Already disconnected: nothing to do, nothing sent.
	if err := p.Disconnect(ctx, "xrdp-10-57169"); err != nil {
		t.Errorf("Disconnect of a disconnected session = %v", err)
	}
	if len(sent) != 1 {
		t.Errorf("datagrams %q, want one", sent)
	}
	if err := p.Disconnect(ctx, "xrdp-12-1"); !errors.Is(err, ErrNoSession) {
		t.Errorf("Disconnect(unknown) = %v, want ErrNoSession", err)
	}
	if err := p.SendMessage(ctx, "xrdp-10-57169", "hi"); !errors.Is(err, ErrUnsupported) {
		t.Errorf("SendMessage = %v, want ErrUnsupported", err)
	}
}

func TestXrdpDisconnectIgnored(t *testing.T) {
	p := &XrdpProvider{Proc: twoSessions, Grace: 20 * time.Millisecond, Poll: 5 * time.Millisecond,
		SendDatagram: func(string, int, []byte) error { return nil }}
	err := p.Disconnect(t.Context(), "xrdp-11-69049")
	if err == nil || !strings.Contains(err.Error(), "still has its client") {
		t.Fatalf("Disconnect = %v, want the client still attached", err)
	}
}

func TestXrdpSesmanRunning(t *testing.T) {
	if !xrdpSesmanRunning(twoSessions) {
		t.Error("recorded tree: xrdp-sesman not found")
	}
	proc := copyTree(t, twoSessions)
	for _, pid := range []string{"29565", "29786", "2985"} {
		os.RemoveAll(filepath.Join(proc, pid))
	}
	if xrdpSesmanRunning(proc) {
		t.Error("tree without sesman: xrdp-sesman found")
	}
	// A user's process named xrdp-sesman does not make auto pick xrdp.
	addProc(t, proc, 4000, "xrdp-sesman", 1, 1003, []string{"xrdp-sesman"}, nil)
	if xrdpSesmanRunning(proc) {
		t.Error("a user's process named xrdp-sesman taken for sesman")
	}
}

func TestParsePIDStat(t *testing.T) {
	tests := []struct {
		name, in string
		want     PIDStat
		err      bool
	}{
		{name: "Xorg", in: "29807 (Xorg) S 29786 29565 29565 0 -1 4194560 8815 1402 3 2 2 2 0 1 20 0 2 0 57169 321458176 19375 18446744073709551615",
			want: PIDStat{PID: 29807, Comm: "Xorg", State: 'S', PPID: 29786, Start: 57169}},
		{name: "comm with spaces and parentheses", in: "7 (a) (b c) Z 1 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 99 0 0",
			want: PIDStat{PID: 7, Comm: "a) (b c", State: 'Z', PPID: 1, Start: 99}},
		{name: "truncated", in: "7 (x) S 1 0 0", err: true},
		{name: "no comm", in: "7 x S 1", err: true},
		{name: "bad pid", in: "-7 (x) S 1 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 99 0 0", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParsePIDStat([]byte(tt.in))
			if (err != nil) != tt.err {
				t.Fatalf("err = %v, want error %v", err, tt.err)
			}
			if !tt.err && got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestXrdpSmallParsers(t *testing.T) {
	if n, ok := XrdpDisplay([]string{"/usr/lib/xorg/Xorg", ":10", "-auth", ".Xauthority"}); !ok || n != 10 {
		t.Errorf("XrdpDisplay(Xorg :10) = %d, %v", n, ok)
	}
	for _, args := range [][]string{{"Xvfb"}, {"Xvfb", "-displayfd", "3"}, {"x", "10"}, {"x", ":"}, {"x", ":10.0"}} {
		if _, ok := XrdpDisplay(args); ok {
			t.Errorf("XrdpDisplay(%q) ok", args)
		}
	}
	for _, c := range []struct {
		v    string
		want bool
	}{{":10", true}, {":10.0", true}, {":1", false}, {":100", false}, {"localhost:10.0", false}, {"", false}} {
		if got := onDisplay(c.v, 10); got != c.want {
			t.Errorf("onDisplay(%q, 10) = %v", c.v, got)
		}
	}
	if n, ok := ParseSocketLink("socket:[49707]"); !ok || n != 49707 {
		t.Errorf("ParseSocketLink = %d, %v", n, ok)
	}
	for _, l := range []string{"pipe:[49707]", "socket:[x]", "socket:[1", "/dev/null"} {
		if _, ok := ParseSocketLink(l); ok {
			t.Errorf("ParseSocketLink(%q) ok", l)
		}
	}
	if uid, err := ParseProcStatusUID([]byte("Name:\tXorg\nUid:\t1001\t1001\t1001\t1001\n")); err != nil || uid != 1001 {
		t.Errorf("ParseProcStatusUID = %d, %v", uid, err)
	}
	if _, err := ParseProcStatusUID([]byte("Name:\tXorg\n")); err == nil {
		t.Error("ParseProcStatusUID without Uid: no error")
	}
	if got := ParseNulList([]byte("a=1\x00b=2\x00")); !cmp.Equal(got, []string{"a=1", "b=2"}) {
		t.Errorf("ParseNulList = %q", got)
	}
	data, err := os.ReadFile(twoSessions + "/2987/net/unix")
	if err != nil {
		t.Fatal(err)
	}
	table, err := ParseNetUnix(data)
	if err != nil {
		t.Fatal(err)
	}
	var display []UnixSocket
	for _, s := range table {
		if s.Path == "/run/xrdp/sockdir/xrdp_display_11" {
			display = append(display, s)
		}
	}
	// The listener (flag __SO_ACCEPTCON, unconnected) and the connection
	// xorgxrdp accepted from xrdp.
	want := []UnixSocket{
		{Flags: 0x10000, Type: 1, State: 1, Inode: 63428, Path: "/run/xrdp/sockdir/xrdp_display_11"},
		{Flags: 0, Type: 1, State: 3, Inode: 63465, Path: "/run/xrdp/sockdir/xrdp_display_11"},
	}
	if diff := cmp.Diff(want, display); diff != "" {
		t.Errorf("xrdp_display_11 sockets (-want +got):\n%s", diff)
	}
	if _, err := ParseNetUnix([]byte("0000: 00000002 0 0 0001 01 1 /x\n")); err == nil {
		t.Error("ParseNetUnix without header: no error")
	}
}

// While xrdp attaches the client that started a session, the X server runs
// a moment without it: a young session never seen connected is logging on
// (Active), not Disconnected; once seen with a client it is Disconnected
// as soon as the client goes.
func TestXrdpLogonGrace(t *testing.T) {
	proc := copyTree(t, twoSessions)
	// Xorg :10 started at 57169 ticks (571.69 s), :11 at 69049 (690.49 s).
	if err := os.WriteFile(filepath.Join(proc, "uptime"), []byte("700.00 1300.00\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &XrdpProvider{Proc: proc, LogonGrace: 30 * time.Second}
	states := func() []string {
		t.Helper()
		list, err := p.Sessions(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range list {
			out = append(out, s.ID+" "+s.State)
		}
		return out
	}
	// :10 is 128 s old: past the grace, Disconnected. :11 is connected.
	want := []string{"xrdp-10-57169 Disconnected", "xrdp-11-69049 Active"}
	if got := states(); !cmp.Equal(want, got) {
		t.Errorf("states %q, want %q", got, want)
	}
	// :11 loses its client 9.5 s after it started: seen connected before,
	// so Disconnected at once.
	removeLines(t, filepath.Join(proc, "2987/net/unix"), " 03 63465 ")
	want = []string{"xrdp-10-57169 Disconnected", "xrdp-11-69049 Disconnected"}
	if got := states(); !cmp.Equal(want, got) {
		t.Errorf("after the client left: states %q, want %q", got, want)
	}
	// A fresh provider has not seen :11 with a client: logging on.
	p = &XrdpProvider{Proc: proc, LogonGrace: 30 * time.Second}
	want = []string{"xrdp-10-57169 Disconnected", "xrdp-11-69049 Active"}
	if got := states(); !cmp.Equal(want, got) {
		t.Errorf("logging on: states %q, want %q", got, want)
	}
	// Active while logging on, but no client to drop: Disconnect does
	// nothing.
	p.SendDatagram = func(path string, _ int, _ []byte) error {
		t.Errorf("datagram to %s for a session without a client", path)
		return nil
	}
	if err := p.Disconnect(t.Context(), "xrdp-11-69049"); err != nil {
		t.Errorf("Disconnect while logging on = %v", err)
	}
}

// A kernel without unix_diag (CONFIG_UNIX_DIAG off, or its module not
// loadable) answers ENOENT to every sock_diag request for a Unix socket,
// the same answer as for a socket it does not have. An X server of an
// xrdp session always holds Unix sockets (its display's listening
// socket), so a kernel that knows none of them cannot be asked: the table
// answers, and a connected session stays Active (R-S2, R-S5) instead of
// every session turning Disconnected.
func TestXrdpKernelWithoutUnixDiag(t *testing.T) {
	proc := copyTree(t, twoSessions)
	asked := 0
	p := &XrdpProvider{Proc: proc, LookupUID: labUIDs, KernelSocket: func(pid int, inode uint64) (UnixSocket, error) {
		asked++
		return UnixSocket{}, errNoSocket
	}}
	got, err := p.Sessions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []vdibroker.AgentSession{
		{ID: "xrdp-10-57169", User: "rdplabuser", State: vdibroker.StateDisconnected},
		{ID: "xrdp-11-69049", User: "rdplabbob", State: vdibroker.StateActive},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Sessions (-want +got):\n%s", diff)
	}
	if asked == 0 {
		t.Error("the kernel was not asked: the test shows nothing")
	}
}

// When the kernel cannot be asked about the X servers' sockets, the
// provider reads /proc/<pid>/net/unix, where a user's socket path can add
// lines (R-S2): the agent says so once, with the reason, not at every
// heartbeat.
func TestXrdpFallbackLoggedOnce(t *testing.T) {
	proc := copyTree(t, twoSessions)
	var logs strings.Builder
	p := &XrdpProvider{Proc: proc, LookupUID: labUIDs,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		KernelSocket: func(pid int, inode uint64) (UnixSocket, error) {
			return UnixSocket{}, errors.New("sock_diag: protocol not supported")
		}}
	for range 3 {
		got, err := p.Sessions(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[1].State != vdibroker.StateActive {
			t.Fatalf("Sessions = %+v: the table is not read", got)
		}
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "net/unix") || !strings.Contains(lines[0], "protocol not supported") {
		t.Errorf("logged %q, want one line naming net/unix and the reason", logs.String())
	}
}

// The agent gives the xrdp provider its logger, so that the fallback to
// the table (R-S2) is heard where the agent's logs go.
func TestXrdpGetsTheAgentsLogger(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	p := &XrdpProvider{}
	if _, err := New(Config{Server: "http://broker:8080", HostName: "h", Address: "a:1", RegistrationToken: "t", Sessions: p, Logger: log}); err != nil {
		t.Fatal(err)
	}
	if p.Logger != log {
		t.Errorf("the provider's logger is %v, want the agent's", p.Logger)
	}
}

// An X server whose sockets cannot be listed (its fd directory is
// unreadable to an agent not running as root) holds no client the agent
// can see (R-S2): nothing to ask the kernel, and no word of a kernel
// without unix_diag.
func TestKernelConnectedNoSockets(t *testing.T) {
	asked := false
	kernel := func(uint64) (UnixSocket, error) { asked = true; return UnixSocket{}, errNoSocket }
	if ok, err := kernelConnected(nil, "/run/xrdp/sockdir/xrdp_display_10", kernel); ok || err != nil || asked {
		t.Errorf("kernelConnected(no sockets) = %v, %v (asked %v); want false, nil, not asked", ok, err, asked)
	}
}
