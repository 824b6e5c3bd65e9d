//go:build linux

package main

// The RDP end-to-end test: a real RDP client reaches a real Linux
// session host through the broker. Everything is real: `vdibroker serve`,
// xrdp-sesman and xrdp in a network namespace of their own with
// `vdibroker agent --sessions-provider xrdp` beside them, a local user with
// a password, and xfreerdp under Xvfb opening the connect answer's rdpFile.
// What the test believes about the host it reads with other tools than the
// agent's (ss for the client connection, /proc for the X server), so the
// agent's provider is checked, not trusted.
//
// Linux only: network namespaces, process groups and xrdp.

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/internal/syncbuf"
)

// The test's own names and its private /30: the broker listens on the
// host's end, xrdp and the agent live behind the other.
const (
	rdpNetns    = "vdbrdp-e2e"
	rdpVethHost = "vdbrdp0"
	rdpVethNS   = "vdbrdp1"
	rdpHostAddr = "10.213.0.1"
	rdpNSAddr   = "10.213.0.2"
	rdpUser     = "vdbrdpuser"
	rdpPool     = "rdp-pool"
	rdpHostName = "rdp-e2e-host"
)

// rdpHeartbeat is the agent's heartbeat interval, the bound the
// Pending→Active time is held to: 2s, or VDIBROKER_TEST_RDP_HEARTBEAT (the
// agent's default is 10s).
func rdpHeartbeat(t *testing.T) time.Duration {
	v := os.Getenv("VDIBROKER_TEST_RDP_HEARTBEAT")
	if v == "" {
		return 2 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Second {
		t.Fatalf("VDIBROKER_TEST_RDP_HEARTBEAT=%q: want a duration of 1s or more", v)
	}
	return d
}

// TestServeRDPDefaultsInvalid: serve refuses an --rdp-defaults file it
// cannot use, naming the line and the property, before it opens anything.
func TestServeRDPDefaultsInvalid(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rdp-defaults")
	if err := os.WriteFile(path, []byte("redirectprinters:i:0\nloadbalanceinfo:s:x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := newServeCmd()
	cmd.SetArgs([]string{"--rdp-defaults", path, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0"})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	err := cmd.Execute()
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), `line 2: property "loadbalanceinfo"`) {
		t.Fatalf("serve --rdp-defaults = %v, want a usage error naming line 2 and loadbalanceinfo", err)
	}
}

// rdpRun runs a command to its end within a bound and returns its output.
func rdpRun(tb testing.TB, name string, args ...string) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		tb.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// rdpDaemon is a process the test started, in a process group of its own
// with whatever it starts (sesman's session processes), ended in cleanup.
// Its output goes to a file: a pipe would keep Wait waiting for the
// group's last process.
type rdpDaemon struct {
	tb      testing.TB
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
}

func rdpStart(tb testing.TB, name string, env []string, args ...string) *rdpDaemon {
	tb.Helper()
	d := &rdpDaemon{tb: tb, cmd: exec.Command(name, args...), done: make(chan struct{})}
	d.cmd.Env = append(os.Environ(), env...)
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	log, err := os.CreateTemp(tb.TempDir(), "log")
	if err != nil {
		tb.Fatal(err)
	}
	defer log.Close()
	d.logPath = log.Name()
	d.cmd.Stdout, d.cmd.Stderr = log, log
	if err := d.cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", name, err)
	}
	go func() { d.cmd.Wait(); close(d.done) }()
	tb.Cleanup(func() {
		d.stop()
		if tb.Failed() {
			tb.Logf("%s %s output (last 3000 bytes):\n%s", name, strings.Join(args, " "), tail(d.output(), 3000))
		}
	})
	return d
}

func (d *rdpDaemon) output() string {
	data, _ := os.ReadFile(d.logPath)
	return string(data)
}

// stop ends the process group: SIGTERM, SIGKILL after 5 s, each wait
// bounded.
func (d *rdpDaemon) stop() {
	pgid := d.cmd.Process.Pid
	syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(5 * time.Second):
	}
	syscall.Kill(-pgid, syscall.SIGKILL) // the group's other processes too
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		d.tb.Errorf("%s (pid %d) did not end after SIGKILL", d.cmd.Path, pgid)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// rdpNamespace makes the network namespace and the veth pair, the host's
// end 10.213.0.1/30 and the namespace's 10.213.0.2/30; cleanup deletes the
// namespace, which takes the pair with it.
func rdpNamespace(t *testing.T) {
	exec.Command("ip", "netns", "del", rdpNetns).Run() // a crashed run's
	exec.Command("ip", "link", "del", rdpVethHost).Run()
	rdpRun(t, "ip", "netns", "add", rdpNetns)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", rdpNetns).CombinedOutput(); err != nil {
			t.Errorf("delete namespace %s: %v %s", rdpNetns, err, out)
		}
	})
	rdpRun(t, "ip", "link", "add", rdpVethHost, "type", "veth", "peer", "name", rdpVethNS)
	rdpRun(t, "ip", "link", "set", rdpVethNS, "netns", rdpNetns)
	rdpRun(t, "ip", "addr", "add", rdpHostAddr+"/30", "dev", rdpVethHost)
	rdpRun(t, "ip", "link", "set", rdpVethHost, "up")
	rdpRun(t, "ip", "netns", "exec", rdpNetns, "ip", "addr", "add", rdpNSAddr+"/30", "dev", rdpVethNS)
	rdpRun(t, "ip", "netns", "exec", rdpNetns, "ip", "link", "set", rdpVethNS, "up")
	// sesman listens on [::1]:3350 inside.
	rdpRun(t, "ip", "netns", "exec", rdpNetns, "ip", "link", "set", "lo", "up")
}

// rdpTestUser creates the local user with a fresh password; cleanup ends
// its processes and removes it with its home.
func rdpTestUser(t *testing.T) (password string, uid int) {
	exec.Command("userdel", "-f", "-r", rdpUser).Run() // a crashed run's
	b := make([]byte, 12)
	rand.Read(b)
	password = "Rdp-" + hex.EncodeToString(b)
	rdpRun(t, "useradd", "-m", "-s", "/bin/bash", rdpUser)
	t.Cleanup(func() {
		for _, pid := range rdpUserProcs(uid, false) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		// -f: the user's zombies count as processes where init does not
		// reap them.
		if out, err := exec.Command("userdel", "-f", "-r", rdpUser).CombinedOutput(); err != nil {
			t.Errorf("userdel %s: %v %s", rdpUser, err, out)
		}
	})
	cmd := exec.Command("chpasswd")
	cmd.Stdin = strings.NewReader(rdpUser + ":" + password + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chpasswd: %v %s", err, out)
	}
	out := strings.TrimSpace(rdpRun(t, "id", "-u", rdpUser))
	uid, err := strconv.Atoi(out)
	if err != nil {
		t.Fatalf("id -u %s: %q", rdpUser, out)
	}
	return password, uid
}

// rdpUserProcs lists the pids of uid's processes (not zombies); with
// xorg, only its X servers.
func rdpUserProcs(uid int, xorg bool) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		status, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		var name, state string
		owner := -1
		for _, l := range strings.Split(string(status), "\n") {
			f := strings.Fields(l)
			switch {
			case len(f) >= 2 && f[0] == "Name:":
				name = f[1]
			case len(f) >= 2 && f[0] == "State:":
				state = f[1]
			case len(f) >= 2 && f[0] == "Uid:":
				owner, _ = strconv.Atoi(f[1])
			}
		}
		if owner == uid && state != "Z" && (!xorg || name == "Xorg") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// rdpClientConnected says, from `ss -xp` in the namespace, whether an xrdp
// process holds a Unix stream connected to the X server's
// xrdp_display_<n> socket: a client is attached to the session.
func rdpClientConnected(t *testing.T, display int) bool {
	out := rdpRun(t, "ip", "netns", "exec", rdpNetns, "ss", "-xpH")
	path := fmt.Sprintf("/run/xrdp/sockdir/xrdp_display_%d", display)
	// u_str ESTAB 0 0 <local path> <inode> <peer path> <peer inode> users:((...))
	server := map[string]bool{}
	var lines [][]string
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < 8 || f[0] != "u_str" || f[1] != "ESTAB" {
			continue
		}
		lines = append(lines, f)
		if f[4] == path {
			server[f[5]] = true
		}
	}
	for _, f := range lines {
		if server[f[7]] && len(f) > 8 && strings.Contains(f[8], `(("xrdp",`) {
			return true
		}
	}
	return false
}

// rdpXorg returns the user's X server and its display, if it has one.
func rdpXorg(uid int) (pid, display int, ok bool) {
	for _, p := range rdpUserProcs(uid, true) {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		if err != nil {
			continue
		}
		args := strings.Split(string(data), "\x00")
		if len(args) > 1 && strings.HasPrefix(args[1], ":") {
			if n, err := strconv.Atoi(args[1][1:]); err == nil {
				return p, n, true
			}
		}
	}
	return 0, 0, false
}

func TestRDPE2E(t *testing.T) {
	if os.Getenv("VDIBROKER_TEST_RDP") != "1" {
		t.Skip("RDP end-to-end test: set VDIBROKER_TEST_RDP=1 to run it (as root, after apt-get install -y xrdp xorgxrdp freerdp2-x11 xvfb imagemagick iproute2; .ci/run does both)")
	}
	if os.Geteuid() != 0 {
		t.Fatal("RDP end-to-end test: VDIBROKER_TEST_RDP=1 needs root (network namespace, a local user, xrdp)")
	}
	for _, tool := range []string{"xrdp", "xrdp-sesman", "xfreerdp", "Xvfb", "ip", "ss", "useradd", "userdel", "chpasswd", "import", "convert"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("RDP end-to-end test: %s not found (apt-get install -y xrdp xorgxrdp freerdp2-x11 xvfb imagemagick iproute2)", tool)
		}
	}
	start := time.Now()
	heartbeat := rdpHeartbeat(t)
	dir := t.TempDir()
	bin := e2eBuild(t, dir)
	rdpNamespace(t)
	password, uid := rdpTestUser(t)

	// The broker, on the host's end of the pair, with an admin's extra
	// .rdp properties.
	defaults := filepath.Join(dir, "rdp-defaults")
	if err := os.WriteFile(defaults, []byte("# no printers or sound for the test client\nredirectprinters:i:0\naudiomode:i:2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const admin = "vdb_admin_e2e_rdp_test"
	base := rdpServe(t, bin, filepath.Join(dir, "broker"), admin, "--rdp-defaults", defaults)
	api := e2eAPI{tb: t, base: base, token: admin}
	api.call("PUT", "/hostpools/"+rdpPool, map[string]any{
		"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
		"heartbeatTimeoutSeconds": max(10, int(3*heartbeat/time.Second)),
	}, 201, nil)
	var tok struct {
		Token string `json:"token"`
	}
	api.call("POST", "/hostpools/"+rdpPool+"/registrationtoken", map[string]any{"expiresInSeconds": 3600}, 201, &tok)

	// The session host: xrdp as the packages install it, and the agent.
	rdpPIDFiles(t)
	inNS := func(args ...string) []string { return append([]string{"netns", "exec", rdpNetns}, args...) }
	rdpStart(t, "ip", nil, inNS("xrdp-sesman", "--nodaemon")...)
	rdpStart(t, "ip", nil, inNS("xrdp", "--nodaemon")...)
	e2eEventually(t, "xrdp listening on "+rdpNSAddr+":3389", 20*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", rdpNSAddr+":3389", time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	e2eEventually(t, "xrdp-sesman listening on [::1]:3350", 20*time.Second, func() bool {
		return strings.Contains(rdpRun(t, "ip", inNS("ss", "-Hltn")...), "[::1]:3350")
	})
	rdpStart(t, "ip", nil, inNS(bin, "agent", "--server", base, "--registration-token", tok.Token,
		"--host-name", rdpHostName, "--address", rdpNSAddr+":3389", "--state-dir", filepath.Join(dir, "agent"),
		"--heartbeat-interval", heartbeat.String(), "--sessions-provider", "xrdp", "--log-level", "debug",
		// The broker is the test's own, across the test's own veth pair.
		"--insecure-http")...)
	e2eEventually(t, "the host Available", 30*time.Second, func() bool {
		h, ok := api.tryHost(rdpPool, rdpHostName)
		return ok && h.Status == vdibroker.StatusAvailable
	})

	// The client's display.
	display := rdpXvfb(t)

	// Connect through the API: a Pending session and an .rdp file.
	var first vdibroker.ConnectResponse
	connected := time.Now()
	api.call("POST", "/hostpools/"+rdpPool+"/connect", map[string]any{"user": rdpUser}, 201, &first)
	if first.State != vdibroker.StatePending || first.SessionHost != rdpHostName {
		t.Fatalf("connect: %+v, want Pending on %s", first, rdpHostName)
	}
	for _, line := range []string{"full address:s:" + rdpNSAddr + ":3389\r\n", "username:s:" + rdpUser + "\r\n", "redirectprinters:i:0\r\n", "audiomode:i:2\r\n"} {
		if !strings.Contains(first.RDPFile, line) {
			t.Errorf("rdpFile lacks %q:\n%s", line, first.RDPFile)
		}
	}
	for _, bad := range []string{"loadbalanceinfo", "networkautodetect"} {
		if strings.Contains(first.RDPFile, bad) {
			t.Errorf("rdpFile has %s:\n%s", bad, first.RDPFile)
		}
	}
	client := rdpClient(t, dir, "first.rdp", first.RDPFile, display, password)

	// Pending → Active when the xrdp session appears (R-S2): measured from
	// the moment the session's X server runs (sesman starts it once the
	// user's password is checked); the client attaches to it a moment
	// later.
	var xorgPID, xdisplay int
	e2eEventually(t, "the user's xrdp session (its X server)", 60*time.Second, func() bool {
		var ok bool
		xorgPID, xdisplay, ok = rdpXorg(uid)
		return ok
	})
	appeared := time.Now()
	var active vdibroker.UserSession
	e2eEventually(t, "the broker's session Active", 30*time.Second, func() bool {
		s := api.sessions(rdpPool, url.Values{"user": {rdpUser}})
		if len(s) == 1 && s[0].State == vdibroker.StateActive {
			active = s[0]
		}
		return active.ID != ""
	})
	pendingToActive := time.Since(appeared)
	e2eEventually(t, "the client attached to the session (ss)", 30*time.Second, func() bool { return rdpClientConnected(t, xdisplay) })
	if active.ID != first.SessionID || active.SessionHost != rdpHostName {
		t.Fatalf("active session %+v, want %s on %s", active, first.SessionID, rdpHostName)
	}
	t.Logf("Pending→Active: %v after the xrdp session appeared (heartbeat interval %v); connect→Active %v (includes xrdp's logon)",
		pendingToActive.Round(time.Millisecond), heartbeat, time.Since(connected).Round(time.Millisecond))
	if pendingToActive > heartbeat+time.Second {
		t.Errorf("Pending→Active took %v, want within one heartbeat interval (%v) and the test's polling", pendingToActive, heartbeat)
	}
	rdpScreenshot(t, display)

	// The client goes away: the xrdp session stays, the broker's session
	// turns Disconnected (R-S2).
	client.stop()
	e2eEventually(t, "the client detached on the host", 20*time.Second, func() bool { return !rdpClientConnected(t, xdisplay) })
	if p, _, ok := rdpXorg(uid); !ok || p != xorgPID {
		t.Fatalf("the X server %d ended with the client (now %d, %v); a disconnect must keep the session", xorgPID, p, ok)
	}
	e2eEventually(t, "the broker's session Disconnected", 30*time.Second, func() bool {
		s := api.sessions(rdpPool, url.Values{"user": {rdpUser}})
		return len(s) == 1 && s[0].ID == first.SessionID && s[0].State == vdibroker.StateDisconnected
	})
	if out := client.output(); strings.Contains(out, "Correcting") {
		t.Errorf("FreeRDP corrected the broker's .rdp file:\n%s", out)
	}

	// Reconnect through the broker: the same session on the same host
	// (R-C1), and xrdp attaches the client to the same X server.
	var again vdibroker.ConnectResponse
	api.call("POST", "/hostpools/"+rdpPool+"/connect", map[string]any{"user": rdpUser}, 200, &again)
	if !again.Reconnect || again.SessionID != first.SessionID || again.SessionHost != rdpHostName {
		t.Fatalf("reconnect answer %+v, want session %s on %s again", again, first.SessionID, rdpHostName)
	}
	client = rdpClient(t, dir, "again.rdp", again.RDPFile, display, password)
	e2eEventually(t, "the client attached again", 60*time.Second, func() bool { return rdpClientConnected(t, xdisplay) })
	if p, _, ok := rdpXorg(uid); !ok || p != xorgPID {
		t.Fatalf("reconnect landed on X server %d (%v), want the session's %d", p, ok, xorgPID)
	}
	e2eEventually(t, "the broker's session Active again", 30*time.Second, func() bool {
		s := api.sessions(rdpPool, url.Values{"user": {rdpUser}})
		return len(s) == 1 && s[0].ID == first.SessionID && s[0].State == vdibroker.StateActive
	})

	// Disconnect through the API (R-S4): the agent has xrdp drop the
	// client, the session stays, the client is told.
	api.call("POST", "/hostpools/"+rdpPool+"/usersessions/"+first.SessionID+"/disconnect", nil, 202, nil)
	e2eEventually(t, "the client dropped on the host", 30*time.Second, func() bool { return !rdpClientConnected(t, xdisplay) })
	select {
	case <-client.done:
	case <-time.After(20 * time.Second):
		t.Error("xfreerdp still runs after the broker disconnected it")
	}
	if p, _, ok := rdpXorg(uid); !ok || p != xorgPID {
		t.Fatalf("the X server %d ended with a disconnect (now %d, %v)", xorgPID, p, ok)
	}
	e2eEventually(t, "the broker's session Disconnected by the admin", 30*time.Second, func() bool {
		s := api.sessions(rdpPool, url.Values{"user": {rdpUser}})
		return len(s) == 1 && s[0].ID == first.SessionID && s[0].State == vdibroker.StateDisconnected
	})
	api.call("POST", "/hostpools/"+rdpPool+"/connect", map[string]any{"user": rdpUser}, 200, &again)
	if again.SessionID != first.SessionID {
		t.Fatalf("second reconnect answered session %s, want %s", again.SessionID, first.SessionID)
	}
	client = rdpClient(t, dir, "third.rdp", again.RDPFile, display, password)
	e2eEventually(t, "the client attached a third time", 60*time.Second, func() bool { return rdpClientConnected(t, xdisplay) })
	// Logged off only once the broker has it Active again, as a user's
	// session is: a logoff within the first second of the client's
	// connection, while it still negotiates, reaches it as a network
	// failure, and its automatic reconnection then starts a new session.
	e2eEventually(t, "the broker's session Active a third time", 30*time.Second, func() bool {
		s := api.sessions(rdpPool, url.Values{"user": {rdpUser}})
		return len(s) == 1 && s[0].ID == first.SessionID && s[0].State == vdibroker.StateActive
	})

	// Logoff through the API (R-S4): the agent ends the xrdp session and
	// the user's processes, the client is told, the broker's session ends.
	api.call("DELETE", "/hostpools/"+rdpPool+"/usersessions/"+first.SessionID, nil, 202, nil)
	e2eEventually(t, "the user's processes gone from the host", 30*time.Second, func() bool { return len(rdpUserProcs(uid, false)) == 0 })
	e2eEventually(t, "the broker's session LoggedOff", 30*time.Second, func() bool {
		s := api.sessions(rdpPool, url.Values{"user": {rdpUser}, "state": {vdibroker.StateLoggedOff}})
		return len(s) == 1 && s[0].ID == first.SessionID && len(api.sessions(rdpPool, url.Values{"user": {rdpUser}})) == 0
	})
	select {
	case <-client.done:
	case <-time.After(20 * time.Second):
		t.Error("xfreerdp still runs after the logoff ended its session")
	}
	t.Logf("RDP end-to-end test took %v", time.Since(start).Round(time.Second))
}

// rdpPIDFiles makes way for the test's xrdp: the daemons refuse to start
// while their pid files exist. A file whose process is gone (a killed run)
// is removed; a running xrdp on the host fails the test with what to do.
func rdpPIDFiles(t *testing.T) {
	for _, path := range []string{"/run/xrdp/xrdp-sesman.pid", "/run/xrdp/xrdp.pid"} {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err == nil && pid > 0 && syscall.Kill(pid, 0) == nil {
			t.Fatalf("xrdp already runs on this machine (%s: pid %d); stop it (/etc/init.d/xrdp stop) for the test", path, pid)
		}
		os.Remove(path)
	}
}

// rdpServe runs `vdibroker serve` on the host's end of the pair, port 0,
// and returns its URL.
func rdpServe(t *testing.T, bin, dataDir, admin string, args ...string) string {
	t.Helper()
	_, u := e2eServeAt(t, bin, dataDir, admin, rdpHostAddr+":0", args...)
	return u
}

// rdpXvfb starts a virtual display for the client and returns its name.
func rdpXvfb(t *testing.T) string {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	d := &rdpDaemon{tb: t, cmd: exec.Command("Xvfb", "-displayfd", "3", "-screen", "0", "1280x800x24", "-br", "-nolisten", "tcp"), done: make(chan struct{})}
	d.cmd.ExtraFiles = []*os.File{w}
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out syncbuf.Buffer
	d.cmd.Stdout, d.cmd.Stderr = &out, &out
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("start Xvfb: %v", err)
	}
	w.Close()
	go func() { d.cmd.Wait(); close(d.done) }()
	t.Cleanup(d.stop)
	got := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		got <- strings.TrimSpace(line)
		r.Close()
	}()
	select {
	case n := <-got:
		if n == "" {
			t.Fatalf("Xvfb printed no display:\n%s", out.String())
		}
		return ":" + n
	case <-time.After(20 * time.Second):
		t.Fatalf("Xvfb did not start:\n%s", out.String())
		return ""
	}
}

// rdpClient writes an .rdp file and opens it with xfreerdp on display, as
// a user would, with the password on the command line instead of typed.
func rdpClient(t *testing.T, dir, name, rdpFile, display, password string) *rdpDaemon {
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(rdpFile), 0o600); err != nil {
		t.Fatal(err)
	}
	return rdpStart(t, "xfreerdp", []string{"DISPLAY=" + display}, path, "/p:"+password, "/cert:ignore", "/size:1024x768")
}

// rdpScreenshot saves the client's display, where its window shows the
// remote desktop, as rdp-client.png in the artifact directory; a picture
// of one colour (Xvfb -br: a black root) means nothing was drawn.
func rdpScreenshot(t *testing.T, display string) {
	path := filepath.Join(artifactDir(t), "rdp-client.png")
	var colours string
	// Give the desktop a moment to draw, up to a bound.
	e2eEventually(t, "the client's window drawn", 20*time.Second, func() bool {
		rdpRun(t, "import", "-display", display, "-window", "root", path)
		colours = strings.TrimSpace(rdpRun(t, "convert", path, "-format", "%k", "info:"))
		n, _ := strconv.Atoi(colours)
		return n > 1
	})
	t.Logf("screenshot: %s (%s colours)", path, colours)
}
