package agent

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// openPTY opens a pseudo-terminal pair and returns the master and the
// slave's name ("pts/N"), as a logged-on user's terminal would be.
func openPTY(tb testing.TB) (*os.File, string) {
	tb.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		tb.Skipf("no pseudo-terminals here: %v", err)
	}
	tb.Cleanup(func() { master.Close() })
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		tb.Skipf("unlock pty: %v", e)
	}
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		tb.Skipf("pty number: %v", e)
	}
	name := fmt.Sprintf("pts/%d", n)
	// Keep the slave open so writes to it are not lost.
	slave, err := os.OpenFile("/dev/"+name, os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		tb.Skipf("open %s: %v", name, err)
	}
	tb.Cleanup(func() { slave.Close() })
	return master, name
}

// readPTY reads what arrived on the terminal until want shows up.
func readPTY(tb testing.TB, master *os.File, want string) string {
	tb.Helper()
	master.SetReadDeadline(time.Now().Add(10 * time.Second))
	var got strings.Builder
	buf := make([]byte, 512)
	for !strings.Contains(got.String(), want) {
		n, err := master.Read(buf)
		if err != nil {
			tb.Fatalf("terminal shows %q, no %q: %v", got.String(), want, err)
		}
		got.Write(buf[:n])
	}
	return got.String()
}

// utmpRecord encodes one USER_PROCESS record (glibc layout, see ParseUtmp).
func utmpRecord(pid int, line, user string) []byte {
	return utmpRecordAt(pid, line, user, time.Now())
}

func utmpRecordAt(pid int, line, user string, at time.Time) []byte {
	r := make([]byte, utmpRecordSize)
	binary.NativeEndian.PutUint16(r[0:], utmpUserProcess)
	binary.NativeEndian.PutUint32(r[4:], uint32(pid))
	copy(r[8:40], line)
	copy(r[44:76], user)
	binary.NativeEndian.PutUint32(r[340:], uint32(at.Unix()))
	return r
}

// TestWriteTTY writes a message to a real terminal, as SendMessage does.
func TestWriteTTY(t *testing.T) {
	master, name := openPTY(t)
	if err := writeTTY(name, "Maintenance at 18:00\nSave your work"); err != nil {
		t.Fatal(err)
	}
	got := readPTY(t, master, "Save your work")
	if !strings.Contains(got, "Message from vdibroker") || !strings.Contains(got, "Maintenance at 18:00") {
		t.Errorf("terminal shows %q", got)
	}
	for _, bad := range []string{"../etc/passwd", ":10", "pts/../../etc/shadow", ""} {
		if err := writeTTY(bad, "x"); err == nil {
			t.Errorf("writeTTY(%q) wrote", bad)
		}
	}
}

// TestUtmpProviderLive runs the Linux utmp provider (only the file is not
// /var/run/utmp) on a real session: a process on a real terminal. Logoff
// hangs it up.
func TestUtmpProviderLive(t *testing.T) {
	if signal.Ignored(syscall.SIGHUP) {
		// Started under nohup: every child ignores SIGHUP too, so a hang-up
		// cannot end the stand-in session leader.
		t.Skip("SIGHUP is ignored in this process (nohup?): the stand-in session could not be hung up")
	}
	master, name := openPTY(t)
	leader := exec.Command("sleep", "60")
	if err := leader.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { leader.Process.Kill(); leader.Wait() })
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "utmp")
	data := append(utmpRecord(leader.Process.Pid, name, "alice"), utmpRecord(dead.Process.Pid, "pts/999", "ghost")...)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := newUtmp(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	got, err := p.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != name || got[0].User != "alice" {
		t.Fatalf("Sessions = %+v, want alice on %s only (ghost's process is gone)", got, name)
	}
	if err := p.SendMessage(ctx, name, "hello alice"); err != nil {
		t.Fatal(err)
	}
	readPTY(t, master, "hello alice")
	if err := p.Logoff(ctx, name); err != nil {
		t.Fatal(err)
	}
	err = leader.Wait()
	if ws, ok := leader.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGHUP {
		t.Fatalf("session leader ended with %v, want SIGHUP", err)
	}
}

// TestLogindProviderExec runs the Linux logind provider against a loginctl
// stand-in on PATH that answers from the recorded output and logs its calls.
func TestLogindProviderExec(t *testing.T) {
	dir := t.TempDir()
	td, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	calls := filepath.Join(dir, "calls")
	script := `#!/bin/sh
echo "$*" >> ` + calls + `
case "$1" in
list-sessions) cat ` + td + `/loginctl-list-v255.txt ;;
show-session) for a; do last=$a; done; if [ "$last" = 42 ]; then echo "Failed to get session: No session '42' known" >&2; exit 1; fi
  cat ` + td + `/loginctl-show.txt ;;
terminate-session) exit 0 ;;
esac
`
	if err := os.WriteFile(filepath.Join(dir, "loginctl"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	p, err := newLogind()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	got, err := p.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].User != "alice" || got[1].User != "bob" {
		t.Errorf("Sessions = %+v, want alice and bob", got)
	}
	if err := p.Logoff(ctx, "42"); err == nil || !strings.Contains(err.Error(), "No session '42' known") {
		t.Errorf("Logoff(42) = %v, want loginctl's own message", err)
	}
	// The stand-in answers every show-session with all blocks; the first
	// (alice's session 3) names the session.
	if err := p.Logoff(ctx, "3"); err != nil {
		t.Fatal(err)
	}
	log, _ := os.ReadFile(calls)
	if !strings.Contains(string(log), "terminate-session -- 3\n") {
		t.Errorf("loginctl calls:\n%s\nwant terminate-session -- 3", log)
	}
}

// The file provider's messages file is appended to as root, in a
// directory the integration writing the sessions file may own: a link
// there must not make the agent append the broker's message to another
// file (/etc/sudoers.d/…), nor a FIFO hang the heartbeat loop (R-S4).
func TestFileProviderMessagesNoLink(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sessions.json")
	if err := os.WriteFile(path, []byte(`[{"id":"s1","user":"alice"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(target, []byte("root file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, path+".messages"); err != nil {
		t.Fatal(err)
	}
	p := &FileProvider{Path: path}
	if err := p.SendMessage(t.Context(), "s1", "hi"); err == nil {
		t.Error("message through a link: no error")
	}
	if data, _ := os.ReadFile(target); string(data) != "root file\n" {
		t.Errorf("the link's target now holds %q", data)
	}
	os.Remove(path + ".messages")
	if err := syscall.Mkfifo(path+".messages", 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.SendMessage(t.Context(), "s1", "hi") }()
	if err := <-done; err == nil {
		t.Error("message to a FIFO: no error")
	}
}

// A utmp record outlives a login that crashed, and its pid goes to a later
// process: one of any user, who may fork until she has it. That process
// started after the record was written, so it is not the login's; the
// record is no session (R-S2), and a logoff must not hang that process up.
func TestUtmpPIDReused(t *testing.T) {
	later := exec.Command("sleep", "60")
	if err := later.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { later.Process.Kill(); later.Wait() })
	path := filepath.Join(t.TempDir(), "utmp")
	hourAgo := time.Now().Add(-time.Hour)
	if err := os.WriteFile(path, utmpRecordAt(later.Process.Pid, "pts/98", "root", hourAgo), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := newUtmp(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Sessions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("Sessions = %+v: a process started after the record taken for its login", got)
	}
	if err := p.Logoff(t.Context(), "pts/98"); !errors.Is(err, ErrNoSession) {
		t.Errorf("Logoff = %v, want ErrNoSession", err)
	}
}

// A host without a battery clock boots with a clock a day behind, a
// console login is recorded, then NTP sets the clock forward: the agent,
// started after that, sees every process start a day later, after its
// login's record. The boot record utmp has from that boot (written, as
// the login's, by the clock before it was set) says when the host booted
// by that clock, and the login keeps its session (R-S2).
func TestUtmpClockSetForwardBeforeTheAgent(t *testing.T) {
	login := exec.Command("sleep", "60")
	if err := login.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { login.Process.Kill(); login.Wait() })
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	var btime int64
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			fmt.Sscan(v, &btime)
		}
	}
	if btime == 0 {
		t.Fatal("/proc/stat: no btime")
	}
	// By the clock before it was set forward a day: booted a day before
	// btime says, the login an hour ago.
	day := 24 * time.Hour
	boot := utmpRecordAt(0, "~", "reboot", time.Unix(btime, 0).Add(-day))
	binary.NativeEndian.PutUint16(boot[0:], utmpBootTime)
	record := append(boot, utmpRecordAt(login.Process.Pid, "tty1", "root", time.Now().Add(-time.Hour))...)
	path := filepath.Join(t.TempDir(), "utmp")
	if err := os.WriteFile(path, record, 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := newUtmp(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Sessions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != "tty1" {
		t.Errorf("Sessions = %+v, want the login on tty1", got)
	}

	// Without the boot record it is a later process that took the pid.
	if err := os.WriteFile(path, record[utmpRecordSize:], 0o644); err != nil {
		t.Fatal(err)
	}
	if p, err = newUtmp(path); err != nil {
		t.Fatal(err)
	}
	if got, err := p.Sessions(t.Context()); err != nil || len(got) != 0 {
		t.Errorf("Sessions = %+v, %v; want none: the test shows nothing", got, err)
	}
}
