package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/internal/syncbuf"
)

// TestAgentWine runs the agent built for Windows under Wine (Debian's wine64,
// Wine 8), against a `vdibroker serve` on loopback, as on a Windows session
// host. It needs VDIBROKER_TEST_WINE=1, wine64 and gcc-mingw-w64-x86-64
// (.ci/run installs them); VDIBROKER_TEST_WINE_PREFIX names a prefix made
// by wineboot to use instead of making one (about 10 s to a minute).
//
// What runs for real under Wine: the agent's Windows tests compiled for
// Windows (registry, state directory call, WTS and PDH calls as Wine
// answers them: agent/windows_test.go), and the whole agent: registration,
// heartbeats with gopsutil's CPU and memory and the custom load value read
// from Wine's registry as a Horizon script writes it, the file sessions
// provider with Windows paths, Ctrl+C's last heartbeat, a start again on
// the credential saved, made with the agent's DACL from its first byte
// (which Wine keeps as a mode that gives others nothing), and the service:
// install, start by Wine's service control manager as LocalSystem, its
// messages reaching ReportEventW, stop by the SCM with the last heartbeat,
// uninstall.
//
// What Wine cannot exercise, covered elsewhere: RDS sessions (Wine's
// wtsapi32 has none: the recorded answers of agent/wts_test.go), the
// PhysicalDisk counters (agent/metrics_pdh_test.go), DACLs (Wine 8
// keeps none on files: it answers one made from the Unix owner and mode,
// and turns a DACL given into a mode; agent/statedir_test.go checks the
// SDDL, and TestWindowsStateDir what Windows reads from it), the service's recovery
// actions (Wine's QueryServiceConfig2 and failure actions are stubs: the
// install only sets them) and the event log itself (Wine's ReportEventW
// traces the message and keeps nothing).
func TestAgentWine(t *testing.T) {
	if os.Getenv("VDIBROKER_TEST_WINE") != "1" {
		t.Skip("the Windows agent under Wine: set VDIBROKER_TEST_WINE=1 (needs wine64 and gcc-mingw-w64-x86-64)")
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("Wine runs the amd64 Windows build on linux/amd64")
	}
	w := newWine(t)
	dir := t.TempDir()
	t.Run("agent tests for Windows", func(t *testing.T) { wineAgentTests(t, w, dir) })
	b := e2eStartBroker(t)
	exe := filepath.Join(dir, "vdibroker.exe")
	goBuildWindows(t, exe, "build", ".")
	// The pool samples every 5 s (the minimum), so registry changes show soon.
	b.api.call("PATCH", "/hostpools/"+e2ePool, map[string]any{"loadBalancing": map[string]any{"sampleIntervalSeconds": 5}}, 200, nil)
	t.Run("agent", func(t *testing.T) { wineSmoke(t, w, b, exe, dir) })
	t.Run("service", func(t *testing.T) { wineService(t, w, b, exe) })
}

// wineEnv is a Wine prefix in which Go's Windows programs start.
type wineEnv struct {
	prefix string
	env    []string
	// system is where Wine's system processes (services.exe and the
	// services it starts) write their traces: ReportEventW's.
	system string
}

// newWine readies a prefix: made by wineboot unless
// VDIBROKER_TEST_WINE_PREFIX names one, with the bcryptprimitives.dll Go
// needs, and a wineserver that persists until the test ends, so that the
// agent's service runs with no other Wine program, and so that Wine's
// system processes, started here, hold no test's output pipe.
func newWine(t *testing.T) *wineEnv {
	for _, tool := range []string{"wine", "wineserver", "wineboot", "x86_64-w64-mingw32-gcc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("VDIBROKER_TEST_WINE=1 but %s is missing: apt-get install wine64 gcc-mingw-w64-x86-64", tool)
		}
	}
	w := &wineEnv{prefix: os.Getenv("VDIBROKER_TEST_WINE_PREFIX")}
	if w.prefix == "" {
		// Not t.TempDir: the prefix's files are removed after wineserver.
		dir, err := os.MkdirTemp("", "vdibroker-wine-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		w.prefix = filepath.Join(dir, "prefix")
	}
	w.system = filepath.Join(t.TempDir(), "wine-system.log")
	// No Mono nor Gecko: nothing here needs them, and their installers
	// would look for the network.
	w.env = []string{"WINEPREFIX=" + w.prefix, "WINEDEBUG=-all", "WINEDLLOVERRIDES=mscoree,mshtml="}
	// Before anything starts a wineserver for the prefix: it ends with the
	// test (before the prefix is removed, if it was made here).
	t.Cleanup(func() { w.command(context.Background(), "wineserver", "-k").Run() })
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	// Wine's own daemons (wineserver, and the system processes) keep the
	// output of the command that started them: a file, not a pipe that
	// Wait would wait on.
	sys, err := os.OpenFile(w.system, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	run := func(name string, args ...string) {
		cmd := w.command(ctx, name, args...)
		cmd.Stdout, cmd.Stderr = sys, sys
		if err := cmd.Run(); err != nil {
			data, _ := os.ReadFile(w.system)
			t.Fatalf("%s %v: %v\n%s", name, args, err, data)
		}
	}
	if _, err := os.Stat(filepath.Join(w.prefix, "system.reg")); err != nil {
		run("wineboot", "-i")
	}
	// Go's runtime needs ProcessPrng (testdata/wine/bcryptprimitives.c).
	dll := filepath.Join(w.prefix, "drive_c", "windows", "system32", "bcryptprimitives.dll")
	tmp := dll + ".tmp"
	out, err := exec.CommandContext(ctx, "x86_64-w64-mingw32-gcc", "-shared", "-O2", "-o", tmp,
		"testdata/wine/bcryptprimitives.c", "testdata/wine/bcryptprimitives.def", "-ladvapi32").CombinedOutput()
	if err != nil {
		t.Fatalf("build bcryptprimitives.dll: %v\n%s", err, out)
	}
	if err := os.Rename(tmp, dll); err != nil {
		t.Fatal(err)
	}
	// A wineboot that made the prefix leaves its wineserver for a few
	// seconds; -k ends it, so that the next one is started persistent.
	w.command(ctx, "wineserver", "-k").Run()
	w.command(ctx, "wineserver", "-w").Run()
	run("wineserver", "-p")
	sys.Truncate(0) // from here on, the system processes' traces
	w.env = append(w.env, "WINEDEBUG=-all,+eventlog")
	run("wine", "cmd", "/c", "exit")
	w.env = w.env[:len(w.env)-1]
	return w
}

func (w *wineEnv) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), w.env...)
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// wine runs a Windows program to its end and returns its output and exit
// code.
func (w *wineEnv) wine(t *testing.T, args ...string) (string, int) {
	t.Helper()
	// Not t.Context(): uninstall also runs in a cleanup.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := w.command(ctx, "wine", args...).CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("wine %v: %v", args, err)
	}
	if exit != nil {
		return string(out), exit.ExitCode()
	}
	return string(out), 0
}

// reg runs Wine's reg.exe, which must succeed.
func (w *wineEnv) reg(t *testing.T, args ...string) string {
	t.Helper()
	out, code := w.wine(t, append([]string{"reg"}, args...)...)
	if code != 0 {
		t.Fatalf("reg %v: exit %d\n%s", args, code, out)
	}
	return out
}

// winPath is a Linux path as a Windows program under Wine names it.
func winPath(p string) string { return `Z:` + strings.ReplaceAll(p, "/", `\`) }

// goBuildWindows runs `go <verb> ... -o out pkg` for windows/amd64.
func goBuildWindows(t *testing.T, out, verb, pkg string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", verb, "-o", out, pkg)
	if verb == "test" {
		cmd.Args = []string{"go", "test", "-c", "-o", out, pkg}
	}
	cmd.Env = append(os.Environ(), "GOOS=windows", "GOARCH=amd64", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("GOOS=windows go %s %s: %v\n%s", verb, pkg, err, b)
	}
}

// runWindowsTest compiles pkg's tests for Windows into exe and runs test
// (one test function, by its whole name) under Wine with env added,
// failing t unless it passed; it returns the test's output.
func (w *wineEnv) runWindowsTest(t *testing.T, exe, pkg, test string, env ...string) []byte {
	t.Helper()
	goBuildWindows(t, exe, "test", pkg)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := w.command(ctx, "wine", exe, "-test.v", "-test.count=1", "-test.run", "^"+test+"$")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	if err != nil || !regexp.MustCompile(`(?m)^--- PASS: `+test+` `).Match(out) {
		t.Fatalf("%s under Wine: %v\n%s", test, err, out)
	}
	return out
}

// wineAgentTests compiles the agent's tests for Windows and runs, under
// Wine, the Windows tests and the pure ones that must hold there too. The
// others need /bin/sh, /proc, or os.RemoveAll (t.TempDir), which Wine 8's
// missing FILE_DISPOSITION_INFORMATION_EX breaks.
func wineAgentTests(t *testing.T, w *wineEnv, dir string) {
	exe := filepath.Join(dir, "agent.test.exe")
	goBuildWindows(t, exe, "test", "../../agent")
	mustPass := []string{"TestWindowsRegistryLive", "TestWindowsStateDir", "TestWindowsWTSLive", "TestWindowsMetricsLive",
		"TestWTSProviderRecorded", "TestWTSProviderChanges", "TestWTSProviderCommands", "TestWTSProviderInAgent",
		"TestDecodeWTSInfo", "TestParseRegistryLoad", "TestCustomLoadFromRegistry", "TestDiskFiguresFromPDH", "TestStateDirSDDL", "TestWindowsFileTrust", "TestCheckWindowsSecurity", "TestWindowsSecretFile", "TestWindowsStateAccess"}
	pattern := "^(TestWindows|TestWTS|TestDecodeWTS|TestParseRegistry|TestCustomLoadFromRegistry|TestNewCustomLoadRegistry|" +
		"TestDiskFiguresFromPDH|TestCPUSampleFromTimes|TestStateDirSDDL|TestCheckWindowsSecurity|TestWindowsUserName|TestSameUser|TestParseWindowsUserFormat|TestParseCustomLoad)"
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := w.command(ctx, "wine", exe, "-test.v", "-test.count=1", "-test.run", pattern)
	agentDir, err := filepath.Abs("../../agent")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Dir = agentDir // testdata
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("agent tests under Wine: %v\n%s", err, out)
	}
	for _, name := range mustPass {
		if !regexp.MustCompile(`(?m)^--- PASS: ` + name + ` `).Match(out) {
			t.Errorf("%s did not pass under Wine:\n%s", name, out)
		}
	}
}

// wineAgent is the Windows agent running under Wine.
type wineAgent struct {
	cmd  *exec.Cmd
	log  *syncbuf.Buffer
	done chan error
}

// wineSmoke: the Windows agent registers, heartbeats its metrics and the
// custom load value Horizon's scripts write (R-IDX3), reports the sessions
// of its file, and Ctrl+C sends its last heartbeat (R-H1 Shutdown).
func wineSmoke(t *testing.T, w *wineEnv, b *e2eBroker, exe, dir string) {
	const host = "wine-host-01"
	const key = `HKLM\Software\VMware, Inc.\VMware VDM\Performance Stats`
	setLoad := func(typ, data string) { w.reg(t, "add", key, "/v", "CustomLoadValue", "/t", typ, "/d", data, "/f") }
	setLoad("REG_DWORD", "42")
	sessions := filepath.Join(dir, "sessions.json")
	if err := os.WriteFile(sessions, []byte(`[{"id": "wts-2-1", "user": "CONTOSO\\alice", "state": "Active"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	args := []string{"--host-name", host, "--address", "127.0.0.1:3389", "--state-dir", winPath(state),
		"--heartbeat-interval", "1s", "--sessions-provider", "file:" + winPath(sessions), "--custom-load-registry", agentHorizonPath}
	a := wineStartAgent(t, w, exe, append([]string{"--server", b.base, "--registration-token", b.token}, args...)...)

	api := e2eAPI{tb: t, base: b.base, token: b.api.token}
	var h vdibroker.SessionHost
	value := func(want int) func() bool {
		return func() bool {
			var ok bool
			h, ok = api.tryHost(e2ePool, host)
			return ok && h.Metrics != nil && h.Metrics.CustomLoadValue != nil && *h.Metrics.CustomLoadValue == want
		}
	}
	e2eEventually(t, "the Windows host with custom load value 42", 60*time.Second, value(42))
	if h.Status != vdibroker.StatusAvailable || h.HealthError != "" {
		t.Errorf("host %s %q, want Available without health error", h.Status, h.HealthError)
	}
	// gopsutil's figures on Windows (GetSystemTimes, GlobalMemoryStatusEx);
	// Wine has no PhysicalDisk counters: those are 0, and logged.
	if m := h.Metrics; m.CPUPercent < 0 || m.CPUPercent > 100 || m.MemoryPercent <= 0 || m.MemoryPercent > 100 || m.SampledAt.IsZero() {
		t.Errorf("metrics %+v", m)
	}
	e2eEventually(t, `CONTOSO\alice's session`, 30*time.Second, func() bool {
		s := api.sessions(e2ePool, url.Values{"user": {`CONTOSO\alice`}})
		return len(s) == 1 && s[0].State == vdibroker.StateActive && s[0].SessionHost == host
	})

	// R-IDX3: a REG_SZ over 100 is capped; a word is no value, with the
	// reason as a health error; a value again clears it.
	setLoad("REG_SZ", "250")
	e2eEventually(t, "the value 250 capped at 100", 30*time.Second, value(100))
	setLoad("REG_SZ", "lots")
	e2eEventually(t, "no value and the reason", 30*time.Second, func() bool {
		h = api.host(e2ePool, host)
		return h.Status == vdibroker.StatusNeedsAssistance && h.Metrics != nil && h.Metrics.CustomLoadValue == nil &&
			strings.Contains(h.HealthError, `CustomLoadValue: REG_SZ "lots", want an integer 0..100`)
	})
	setLoad("REG_DWORD", "17")
	e2eEventually(t, "the value 17 and the host Available", 30*time.Second, func() bool {
		return value(17)() && h.Status == vdibroker.StatusAvailable && h.HealthError == ""
	})
	if !strings.Contains(a.log.String(), `disk counters without a value count 0: \\PhysicalDisk(_Total)\\Avg. Disk Queue Length: PDH_CSTATUS_NO_COUNTER`) {
		t.Errorf("the agent did not log Wine's missing disk counters:\n%s", a.log.String())
	}

	// Ctrl+C (Wine turns SIGINT into CTRL_C_EVENT): the last heartbeat.
	if err := a.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-a.done:
		a.done <- err
		if err != nil {
			t.Fatalf("agent exit after Ctrl+C: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the agent did not stop on Ctrl+C")
	}
	if h := api.host(e2ePool, host); h.Status != vdibroker.StatusShutdown {
		t.Errorf("host %s after Ctrl+C, want Shutdown", h.Status)
	}

	// The host credential was made with the agent's DACL from its first
	// byte (Wine keeps it as the Unix mode 0750: nothing for others), and
	// a start without the registration token uses it: on Windows one
	// others may read is not used (agent.CheckSecretFile, R-SEC).
	if fi, err := os.Stat(filepath.Join(state, "credential.json")); err != nil || fi.Mode().Perm()&0o007 != 0 {
		t.Errorf("credential.json: %v, %v; want nothing for others (Wine's mode of a DACL of SYSTEM and Administrators)", fi.Mode(), err)
	}
	again := wineStartAgent(t, w, exe, append([]string{"--server", b.base}, args...)...)
	e2eEventually(t, "the host Available again on its saved credential", 60*time.Second, func() bool {
		h, ok := api.tryHost(e2ePool, host)
		return ok && h.Status == vdibroker.StatusAvailable && strings.Contains(again.log.String(), "using saved credential")
	})
	if strings.Contains(again.log.String(), "saved credential unusable") {
		t.Errorf("the saved credential was refused:\n%s", again.log.String())
	}
}

// wineStartAgent starts `vdibroker.exe agent args...` under Wine; it is
// killed at the end of the test.
func wineStartAgent(t *testing.T, w *wineEnv, exe string, args ...string) *wineAgent {
	t.Helper()
	a := &wineAgent{log: &syncbuf.Buffer{}, done: make(chan error, 1)}
	a.cmd = w.command(context.Background(), "wine", append([]string{exe, "agent"}, args...)...)
	a.cmd.Stdout, a.cmd.Stderr = a.log, a.log
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { a.done <- a.cmd.Wait() }()
	t.Cleanup(func() {
		a.cmd.Process.Kill()
		<-a.done
		if t.Failed() {
			t.Logf("Windows agent output:\n%s", a.log.String())
		}
	})
	return a
}

// agentHorizonPath is Horizon's CustomLoadValue path, given as it is.
const agentHorizonPath = `HKLM\Software\VMware, Inc.\VMware VDM\Performance Stats\CustomLoadValue`

// wineService: install registers the service with the agent's flags and
// starts it; Wine's service control manager runs it as LocalSystem; auto
// picks the wts provider (whose listing Wine cannot answer: a health
// error); uninstall stops it with the last heartbeat and removes it.
func wineService(t *testing.T, w *wineEnv, b *e2eBroker, exe string) {
	const host = "wine-svc-01"
	api := e2eAPI{tb: t, base: b.base, token: b.api.token}
	w.reg(t, "add", `HKLM\Software\VMware, Inc.\VMware VDM\Performance Stats`, "/v", "CustomLoadValue", "/t", "REG_DWORD", "/d", "23", "/f")
	args := []string{exe, "agent", "install", "--server", b.base, "--registration-token", b.token, "--host-name", host,
		"--address", "127.0.0.1:3389", "--heartbeat-interval", "1s", "--custom-load-registry", agentHorizonPath}
	out, code := w.wine(t, args...)
	if code != 0 || !strings.Contains(out, "service vdibroker-agent installed and running") {
		t.Fatalf("install: exit %d\n%s", code, out)
	}
	if !strings.Contains(out, `is not under %ProgramFiles%`) {
		t.Errorf("install of a program in %s did not warn:\n%s", winPath(exe), out)
	}
	t.Cleanup(func() { w.wine(t, exe, "agent", "uninstall") })

	var h vdibroker.SessionHost
	e2eEventually(t, "the service's host with the health error of the wts provider", 60*time.Second, func() bool {
		var ok bool
		h, ok = api.tryHost(e2ePool, host)
		return ok && h.Status == vdibroker.StatusNeedsAssistance && strings.Contains(h.HealthError, "wts sessions: WTSEnumerateSessionsExW") &&
			h.Metrics != nil && h.Metrics.CustomLoadValue != nil && *h.Metrics.CustomLoadValue == 23
	})

	// What install registered: automatic start, the agent's flags, the
	// token in the state directory rather than on the command line.
	svcKey := `HKLM\System\CurrentControlSet\Services\vdibroker-agent`
	image := w.reg(t, "query", svcKey, "/v", "ImagePath")
	for _, want := range []string{"agent --windows-service", `--state-dir=C:\ProgramData\vdibroker`,
		`--registration-token-file=C:\ProgramData\vdibroker\registration-token`, "--host-name=" + host, "--custom-load-registry=" + agentHorizonPath} {
		if !strings.Contains(image, want) {
			t.Errorf("ImagePath lacks %q:\n%s", want, image)
		}
	}
	if strings.Contains(image, b.token) {
		t.Errorf("the registration token is on the service's command line:\n%s", image)
	}
	if start := w.reg(t, "query", svcKey, "/v", "Start"); !strings.Contains(start, "0x2") {
		t.Errorf("Start %q, want 0x2 (automatic)", start)
	}
	state := filepath.Join(w.prefix, "drive_c", "ProgramData", "vdibroker")
	if tok, err := os.ReadFile(filepath.Join(state, "registration-token")); err != nil || strings.TrimSpace(string(tok)) != b.token {
		t.Errorf("token file %q, %v", tok, err)
	}
	// Both made with the agent's DACL from their first byte, which Wine
	// keeps as the Unix mode (0750), and the service read them (R-SEC).
	for _, name := range []string{"registration-token", "credential.json"} {
		if fi, err := os.Stat(filepath.Join(state, name)); err != nil || fi.Mode().Perm()&0o007 != 0 {
			t.Errorf("%s: %v, %v; want nothing for others", name, fi.Mode(), err)
		}
	}
	var cred struct{ HostName string }
	if data, err := os.ReadFile(filepath.Join(state, "credential.json")); err != nil || json.Unmarshal(data, &cred) != nil || cred.HostName != host {
		t.Errorf("credential in the state directory: %q, %v", data, err)
	}
	if out, code := w.wine(t, args...); code != 1 || !strings.Contains(out, "installed already") {
		t.Errorf("second install: exit %d\n%s", code, out)
	}

	// Stopped by the SCM: the last heartbeat marks the host Shutdown.
	out, code = w.wine(t, exe, "agent", "uninstall")
	if code != 0 || !strings.Contains(out, "stopped and removed") {
		t.Fatalf("uninstall: exit %d\n%s", code, out)
	}
	if h := api.host(e2ePool, host); h.Status != vdibroker.StatusShutdown {
		t.Errorf("host %s after uninstall, want Shutdown", h.Status)
	}
	if out, code := w.wine(t, "reg", "query", svcKey); code == 0 {
		t.Errorf("the service is still registered:\n%s", out)
	}
	// The service's log went to ReportEventW (Wine traces it, keeps nothing).
	sys, _ := os.ReadFile(w.system)
	for _, want := range []string{`msg=heartbeating host=wine-svc-01`, `msg=\"told the broker the host is shutting down\" host=wine-svc-01`} {
		if !strings.Contains(string(sys), `ReportEventW L"level=INFO `+want) {
			t.Errorf("no event %q in Wine's trace:\n%s", want, sys)
		}
	}
}
