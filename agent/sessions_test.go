package agent

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vdibroker/vdibroker"
)

// TestParseUtmp decodes testdata/utmp.bin (written by make_utmp.py).
func TestParseUtmp(t *testing.T) {
	data, err := os.ReadFile("testdata/utmp.bin")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := ParseUtmp(data, binary.LittleEndian)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 8 {
		t.Fatalf("%d records, want 8", len(entries))
	}
	want := UtmpEntry{Type: 7, PID: 1234, Line: "pts/0", ID: "ts/0", User: "alice", Host: "10.0.0.5", Session: 1234,
		Time: time.Unix(1764401000, 250000000).UTC()}
	if diff := cmp.Diff(want, entries[3]); diff != "" {
		t.Errorf("record 3 (-want +got):\n%s", diff)
	}
	// USER_PROCESS records of live processes: alice (ssh), bob (xrdp :10),
	// carol (console). Not the boot, runlevel, getty or dead records, and
	// not "stale", whose process is gone.
	alive := func(e UtmpEntry) bool { return e.PID != 9999 }
	got := UtmpSessions(entries, alive)
	wantSessions := []vdibroker.AgentSession{
		{ID: "pts/0", User: "alice", State: "Active", LogonTime: &entries[3].Time},
		{ID: ":10", User: "bob", State: "Active"},
		{ID: "tty2", User: "carol", State: "Active"},
	}
	for i := range wantSessions[1:] {
		for _, e := range entries {
			if e.User == wantSessions[1+i].User {
				wantSessions[1+i].LogonTime = &e.Time // each user's login time, from its record
			}
		}
	}
	if diff := cmp.Diff(wantSessions, got); diff != "" {
		t.Errorf("UtmpSessions (-want +got):\n%s", diff)
	}

	if _, err := ParseUtmp(data[:500], binary.LittleEndian); err == nil {
		t.Error("truncated utmp parsed without error")
	}
}

func TestUtmpProviderCommands(t *testing.T) {
	var hung []int
	var wrote []string
	p := &UtmpProvider{
		Path: "testdata/utmp.bin", Order: binary.LittleEndian,
		Alive: func(pid int) bool { return pid != 9999 },
		Hangup: func(pid int, same func() bool) error {
			if !same() {
				return os.ErrProcessDone
			}
			hung = append(hung, pid)
			return nil
		},
		WriteTTY: func(tty, msg string) error { wrote = append(wrote, tty+":"+msg); return nil },
	}
	ctx := t.Context()
	if err := p.Logoff(ctx, ":10"); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(hung, []int{2345}) {
		t.Errorf("hung up %v, want bob's xrdp session 2345", hung)
	}
	if err := p.Logoff(ctx, "pts/2"); !errors.Is(err, ErrNoSession) {
		t.Errorf("logoff of the stale record: %v, want ErrNoSession", err)
	}
	if err := p.Disconnect(ctx, "pts/0"); !errors.Is(err, ErrUnsupported) {
		t.Errorf("disconnect: %v, want ErrUnsupported", err)
	}
	if err := p.SendMessage(ctx, "pts/0", "hi"); err != nil || !slices.Equal(wrote, []string{"pts/0:hi"}) {
		t.Errorf("send message: %v, wrote %v", err, wrote)
	}
	if err := p.SendMessage(ctx, ":10", "hi"); !errors.Is(err, ErrUnsupported) {
		t.Errorf("message to an xrdp display: %v, want ErrUnsupported", err)
	}
}

func TestParseLoginctlList(t *testing.T) {
	for _, name := range []string{"loginctl-list-v252.txt", "loginctl-list-v255.txt"} {
		out, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := ParseLoginctlList(out), []string{"3", "c1", "5", "6", "7"}; !slices.Equal(got, want) {
			t.Errorf("%s: ids %v, want %v", name, got, want)
		}
	}
	if got := ParseLoginctlList([]byte("No sessions.\n")); len(got) != 0 {
		t.Errorf("no sessions: %v", got)
	}
}

// fakeLoginctl answers loginctl from the testdata files and records calls.
type fakeLoginctl struct {
	calls []string
}

func (f *fakeLoginctl) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	f.calls = append(f.calls, name+" "+strings.Join(args, " "))
	switch args[0] {
	case "list-sessions":
		return os.ReadFile("testdata/loginctl-list-v255.txt")
	case "show-session":
		all, err := os.ReadFile("testdata/loginctl-show.txt")
		if err != nil {
			return nil, err
		}
		// Properties first, then "--" and the ids.
		i := slices.Index(args, "--")
		if i < 0 {
			return nil, errors.New("show-session without -- before its ids")
		}
		ids := args[i+1:]
		// Keep the blocks of the asked ids, as loginctl does.
		var out []string
		for _, block := range strings.Split(string(all), "\n\n") {
			sc := bufio.NewScanner(strings.NewReader(block))
			sc.Scan()
			if slices.Contains(ids, strings.TrimPrefix(sc.Text(), "Id=")) {
				out = append(out, block)
			}
		}
		if len(out) == 0 {
			return nil, errors.New("exit status 1: Failed to get session: No session '" + ids[0] + "' known")
		}
		return []byte(strings.Join(out, "\n\n")), nil
	case "terminate-session":
		return nil, nil
	}
	return nil, errors.New("unexpected loginctl call")
}

func TestLogindProvider(t *testing.T) {
	fake := &fakeLoginctl{}
	var wrote []string
	p := &LogindProvider{Run: fake.run, WriteTTY: func(tty, msg string) error { wrote = append(wrote, tty+":"+msg); return nil }}
	ctx := t.Context()
	got, err := p.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// alice (ssh) and bob (xrdp); not the greeter, not carol's closing
	// session, not alice's user manager.
	want := []vdibroker.AgentSession{{ID: "3", User: "alice", State: "Active"}, {ID: "5", User: "bob", State: "Active"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Sessions (-want +got):\n%s", diff)
	}

	fake.calls = nil
	if err := p.Logoff(ctx, "5"); err != nil {
		t.Fatal(err)
	}
	if last := fake.calls[len(fake.calls)-1]; last != "loginctl terminate-session -- 5" {
		t.Errorf("last call %q, want loginctl terminate-session -- 5", last)
	}
	if err := p.Logoff(ctx, "42"); !errors.Is(err, ErrNoSession) {
		t.Errorf("logoff of unknown session: %v, want ErrNoSession", err)
	}
	if err := p.Disconnect(ctx, "5"); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "x11") {
		t.Errorf("disconnect: %v, want ErrUnsupported naming the session type", err)
	}
	if err := p.SendMessage(ctx, "3", "maintenance at 18:00"); err != nil || !slices.Equal(wrote, []string{"pts/0:maintenance at 18:00"}) {
		t.Errorf("send message: %v, wrote %v", err, wrote)
	}
	if err := p.SendMessage(ctx, "5", "hi"); !errors.Is(err, ErrUnsupported) {
		t.Errorf("message to a session without terminal: %v, want ErrUnsupported", err)
	}
}

// The session id of a command comes from the broker (R-S4): one that is no
// logind session id (an option such as -H, which makes loginctl ssh to
// a host, as root) never reaches loginctl.
func TestLogindCommandIDs(t *testing.T) {
	fake := &fakeLoginctl{}
	p := &LogindProvider{Run: fake.run, WriteTTY: func(tty, msg string) error {
		t.Errorf("wrote to %s", tty)
		return nil
	}}
	ctx := t.Context()
	for _, id := range []string{"-Hroot@attacker.example", "--help", "--machine=x", "-p", "3 5", "", "3/../5"} {
		for name, cmd := range map[string]func() error{
			"Logoff":      func() error { return p.Logoff(ctx, id) },
			"Disconnect":  func() error { return p.Disconnect(ctx, id) },
			"SendMessage": func() error { return p.SendMessage(ctx, id, "hi") },
		} {
			fake.calls = nil
			if err := cmd(); !errors.Is(err, ErrNoSession) {
				t.Errorf("%s(%q) = %v, want ErrNoSession", name, id, err)
			}
			if len(fake.calls) > 0 {
				t.Errorf("%s(%q) ran %q", name, id, fake.calls)
			}
		}
	}
}

func TestFileProvider(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessions.json")
	p := &FileProvider{Path: path, Now: func() time.Time { return time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC) }}
	ctx := t.Context()
	if got, err := p.Sessions(ctx); err != nil || len(got) != 0 {
		t.Fatalf("missing file: %v, %v; want no session", got, err)
	}
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`[{"id":"s1","user":"alice"},{"id":"s2","user":"bob","state":"Disconnected"}]`)
	got, err := p.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []vdibroker.AgentSession{{ID: "s1", User: "alice", State: "Active"}, {ID: "s2", User: "bob", State: "Disconnected"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Sessions (-want +got):\n%s", diff)
	}

	if err := p.Disconnect(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if err := p.SendMessage(ctx, "s2", "bye"); err != nil {
		t.Fatal(err)
	}
	if err := p.Logoff(ctx, "s2"); err != nil {
		t.Fatal(err)
	}
	if err := p.Logoff(ctx, "s2"); !errors.Is(err, ErrNoSession) {
		t.Errorf("second logoff: %v, want ErrNoSession", err)
	}
	var onDisk []vdibroker.AgentSession
	data, _ := os.ReadFile(path)
	if err := json.Unmarshal(data, &onDisk); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]vdibroker.AgentSession{{ID: "s1", User: "alice", State: "Disconnected"}}, onDisk); diff != "" {
		t.Errorf("file after disconnect s1 and logoff s2 (-want +got):\n%s", diff)
	}
	msgs, _ := os.ReadFile(path + ".messages")
	if got, want := string(msgs), `{"time":"2026-11-29T14:00:00Z","sessionId":"s2","user":"bob","message":"bye"}`+"\n"; got != want {
		t.Errorf("messages file = %q, want %q", got, want)
	}

	for _, bad := range []string{`{"id":"s1"}`, `[{"id":"s1"}]`, `[{"id":"s1","user":"a","state":"Pending"}]`} {
		write(bad)
		if _, err := p.Sessions(ctx); err == nil {
			t.Errorf("file %s read without error", bad)
		}
	}
}

func TestNewSessionProvider(t *testing.T) {
	for _, spec := range []string{"file:", "bogus", "file"} {
		if _, err := NewSessionProvider(spec); err == nil {
			t.Errorf("NewSessionProvider(%q) = nil error", spec)
		}
	}
	p, err := NewSessionProvider("file:/tmp/x.json")
	if fp, ok := p.(*FileProvider); err != nil || !ok || fp.Path != "/tmp/x.json" {
		t.Errorf("file:/tmp/x.json = %#v, %v", p, err)
	}
	if p, err := NewSessionProvider("none"); err != nil || p != (NoSessions{}) {
		t.Errorf("none = %#v, %v", p, err)
	}
}

func TestReadPolicyFile(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, file, body string
		want             *vdibroker.HostPolicy
		field            string
	}{
		{"json", "p.json", `{"hostLoadIndexThreshold": 80, "hostConnectingSessionThreshold": 5}`,
			&vdibroker.HostPolicy{HostLoadIndexThreshold: intp(80), HostConnectingSessionThreshold: intp(5)}, ""},
		{"yaml", "p.yaml", "hostLoadIndexThreshold: 70\n", &vdibroker.HostPolicy{HostLoadIndexThreshold: intp(70)}, ""},
		{"out of range", "p.json", `{"hostLoadIndexThreshold": 101}`, nil, "hostLoadIndexThreshold"},
		{"connecting out of range", "p.yml", "hostConnectingSessionThreshold: 151\n", nil, "hostConnectingSessionThreshold"},
		{"unknown key", "p.json", `{"loadIndexThreshold": 10}`, nil, ""},
		{"unknown yaml key", "p.yaml", "cpu: 10\n", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, tt.name+tt.file)
			if err := os.WriteFile(path, []byte(tt.body), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := ReadPolicyFile(path)
			if tt.want != nil {
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("policy (-want +got):\n%s", diff)
				}
				return
			}
			if err == nil {
				t.Fatalf("policy %s accepted", tt.body)
			}
			if tt.field != "" && vdibroker.ErrorField(err) != tt.field {
				t.Errorf("error %v names field %q, want %q", err, vdibroker.ErrorField(err), tt.field)
			}
		})
	}
}

// A message goes to the user's terminal (R-S4): whatever the broker's
// answer holds (a hostile broker, or one reached through a proxy that
// changed it), no escape sequence reaches the terminal, which could set
// its title, write the clipboard (OSC 52) or, on some terminals, answer
// with text the shell reads as typed; only line breaks and tabs pass,
// the rest as write(1) shows them.
func TestTTYMessage(t *testing.T) {
	now := time.Date(2026, 12, 5, 16, 30, 0, 0, time.UTC)
	tests := []struct {
		name, message, want string
	}{{
		name:    "plain lines",
		message: "maintenance at 18:00\nsave your work\tplease",
		want:    "\r\n\a*** Message from vdibroker at 16:30 ***\r\nmaintenance at 18:00\r\nsave your work\tplease\r\n",
	}, {
		name:    "CR LF from a Windows client is one line break",
		message: "one\r\ntwo",
		want:    "\r\n\a*** Message from vdibroker at 16:30 ***\r\none\r\ntwo\r\n",
	}, {
		name:    "escape sequences, a lone CR, DEL and C1 controls are shown, not sent",
		message: "\x1b]52;c;cm0gLXJmIH4=\a\x1b[2Jhi\rX\x7f\u009b31m",
		want:    "\r\n\a*** Message from vdibroker at 16:30 ***\r\n^[]52;c;cm0gLXJmIH4=^G^[[2Jhi^MX^??31m\r\n",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(ttyMessage(tt.message, now)); got != tt.want {
				t.Errorf("ttyMessage(%q) =\n%q, want\n%q", tt.message, got, tt.want)
			}
		})
	}
}

// The wall clock set forward after a logon (a host without a battery
// clock set by NTP after boot, a VM resumed from a snapshot) moves the boot
// time /proc/stat gives with it, and so every process's start: a login
// that started an hour before its utmp record was written would seem to
// have started after it, and its session vanish (R-S2). The start is
// counted from the earliest boot time seen; set back, the clock counts
// from the new one.
func TestBootClockSetForward(t *testing.T) {
	var c bootClock
	const boot = 1_700_000_000
	login := c.start(boot, 6000) // 60 s after boot
	if want := time.Unix(boot+60, 0); !login.Equal(want) {
		t.Fatalf("start = %v, want %v", login, want)
	}
	// An hour later NTP sets the clock forward by a day: btime moves too.
	if got := c.start(boot+86400, 6000); !got.Equal(login) {
		t.Errorf("after the clock was set forward a day, the login started %v, want %v", got, login)
	}
	// Set back by a day and a minute: the earlier boot time counts.
	if got, want := c.start(boot-60, 6000), time.Unix(boot, 0); !got.Equal(want) {
		t.Errorf("after the clock was set back, the login started %v, want %v", got, want)
	}
}

// A session whose process ends, or whose pid another process takes,
// between the listing and the hang-up was logged off already: the
// command succeeds as for a session gone (R-S4).
func TestUtmpLogoffProcessEndedMeanwhile(t *testing.T) {
	p := &UtmpProvider{
		Path: "testdata/utmp.bin", Order: binary.LittleEndian,
		Alive: func(pid int) bool { return pid != 9999 },
		Hangup: func(pid int, same func() bool) error {
			if !same() {
				t.Error("the session's process failed the check: want it to pass, and the pid held then end")
			}
			return os.ErrProcessDone
		},
	}
	if err := p.Logoff(t.Context(), ":10"); !errors.Is(err, ErrNoSession) {
		t.Errorf("logoff = %v, want ErrNoSession", err)
	}
}
