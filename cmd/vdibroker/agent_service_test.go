package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
)

// The Windows service's parts that are decisions, tested on every system;
// installing, running and stopping the service under Wine's service control
// manager is TestAgentWine's (agent_wine_test.go).

func TestDefaultAgentStateDir(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	tests := []struct {
		goos string
		env  map[string]string
		want string
	}{
		{"linux", nil, "/var/lib/vdibroker-agent"},
		{"windows", map[string]string{"ProgramData": `C:\ProgramData`}, `C:\ProgramData\vdibroker`},
		{"windows", map[string]string{"ProgramData": `D:\Data\`}, `D:\Data\vdibroker`},
		{"windows", nil, `C:\ProgramData\vdibroker`}, // a service always has it; a default if not
	}
	for _, tt := range tests {
		if got := defaultAgentStateDir(tt.goos, env(tt.env)); got != tt.want {
			t.Errorf("defaultAgentStateDir(%s, %v) = %q, want %q", tt.goos, tt.env, got, tt.want)
		}
	}
}

// windowsAbs makes a path absolute the way filepath.Abs does on Windows
// in the directory cwd, so that install's arguments are checked on Linux.
func windowsAbs(cwd string) func(string) (string, error) {
	return func(p string) (string, error) {
		if len(p) >= 2 && p[1] == ':' || strings.HasPrefix(p, `\\`) {
			return p, nil
		}
		return strings.TrimRight(cwd, `\`) + `\` + p, nil
	}
}

// TestAgentServiceArgs: the service runs the agent with the flags install
// was given, but never the registration token (a service's command line is
// readable by every user), with its state directory and token file named,
// and file paths that still hold when it starts in System32.
func TestAgentServiceArgs(t *testing.T) {
	const state = `C:\ProgramData\vdibroker`
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want []string // after the fixed part
	}{
		{"token and the usual flags",
			[]string{"--server", "https://broker.contoso.com", "--registration-token", "vdbr_secret", "--address", "rdsh01.contoso.com:3389",
				"--custom-load-registry", "horizon", "--sessions-provider", "wts:domain"},
			nil,
			[]string{"--address=rdsh01.contoso.com:3389", "--custom-load-registry=horizon", "--server=https://broker.contoso.com", "--sessions-provider=wts:domain"}},
		{"server and token from the environment",
			nil,
			map[string]string{"VDIBROKER_SERVER": "https://broker.contoso.com", "VDIBROKER_REGISTRATION_TOKEN": "vdbr_secret"},
			[]string{"--server=https://broker.contoso.com"}},
		{"files made absolute",
			[]string{"--server", "https://b", "--ca-file", `certs\ca.pem`, "--client-cert", `D:\pki\host.pem`, "--client-key", `host.key`,
				"--policy-file", "policy.json", "--custom-script", `\\fs01\scripts\load.cmd`, "--sessions-provider", "file:sessions.json"},
			nil,
			[]string{`--ca-file=C:\Install\certs\ca.pem`, `--client-cert=D:\pki\host.pem`, `--client-key=C:\Install\host.key`,
				`--custom-script=\\fs01\scripts\load.cmd`, `--policy-file=C:\Install\policy.json`, "--server=https://b",
				`--sessions-provider=file:C:\Install\sessions.json`}},
		{"lists, booleans, durations",
			[]string{"--server", "https://b", "--protocols", "RDP,Blast", "--standard-features=false", "--heartbeat-interval", "15s",
				"--log-level", "debug", "--host-name", "rdsh01"},
			nil,
			[]string{"--heartbeat-interval=15s", "--host-name=rdsh01", "--log-level=debug", "--protocols=RDP,Blast", "--server=https://b",
				"--standard-features=false"}},
		{"the state directory and token file given",
			[]string{"--server", "https://b", "--state-dir", `E:\agent`, "--registration-token-file", `C:\token.txt`},
			nil,
			[]string{"--server=https://b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o agentFlags
			f := pflag.NewFlagSet("install", pflag.ContinueOnError)
			o.register(f)
			if err := f.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			got, err := agentServiceArgs(f, state, func(k string) string { return tt.env[k] }, windowsAbs(`C:\Install`))
			if err != nil {
				t.Fatal(err)
			}
			want := append([]string{"agent", "--windows-service", `--state-dir=` + state,
				`--registration-token-file=C:\ProgramData\vdibroker\registration-token`}, tt.want...)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
			if strings.Contains(strings.Join(got, " "), "vdbr_secret") {
				t.Errorf("the token is on the service's command line: %q", got)
			}
		})
	}
	t.Run("a path that cannot be made absolute", func(t *testing.T) {
		var o agentFlags
		f := pflag.NewFlagSet("install", pflag.ContinueOnError)
		o.register(f)
		f.Parse([]string{"--policy-file", "p.json"})
		_, err := agentServiceArgs(f, state, func(string) string { return "" }, func(string) (string, error) { return "", fmt.Errorf("no cwd") })
		if err == nil || !strings.Contains(err.Error(), "--policy-file") {
			t.Errorf("err = %v, want it to name --policy-file", err)
		}
	})
}

func TestAgentExeWarning(t *testing.T) {
	env := map[string]string{"ProgramFiles": `C:\Program Files`, "ProgramFiles(x86)": `C:\Program Files (x86)`, "SystemRoot": `C:\Windows`}
	getenv := func(k string) string { return env[k] }
	for exe, warn := range map[string]bool{
		`C:\Program Files\vdibroker\vdibroker.exe`:       false,
		`c:\program files\vdibroker\vdibroker.exe`:       false, // paths are not case-sensitive
		`C:\Program Files (x86)\vdibroker\vdibroker.exe`: false,
		`C:\Windows\vdibroker.exe`:                       false,
		`C:\Users\alice\Downloads\vdibroker.exe`:         true,
		`C:\Program Files Evil\vdibroker.exe`:            true, // a prefix of the name is not the folder
		`Z:\tmp\vdibroker.exe`:                           true,
	} {
		if got := agentExeWarning(exe, getenv); (got != "") != warn {
			t.Errorf("agentExeWarning(%s) = %q, want a warning: %v", exe, got, warn)
		}
	}
}

// TestAgentServiceOffWindows: install and uninstall say they are Windows
// only; --windows-service is a usage error.
func TestAgentServiceOffWindows(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Windows installs the service")
	}
	for _, args := range [][]string{
		{"agent", "install", "--server", "http://127.0.0.1:1"},
		{"agent", "uninstall"},
		{"agent", "--windows-service", "--server", "http://127.0.0.1:1", "--sessions-provider", "none", "--host-name", "rdsh-01"},
	} {
		var stderr bytes.Buffer
		code := execute(rootCmd, args, &stderr)
		if code == 0 || !strings.Contains(stderr.String(), "Windows only") {
			t.Errorf("%v: exit %d, %q; want a failure saying Windows only", args, code, stderr.String())
		}
	}
}

// fakeEventLog records what the service would write to the event log.
type fakeEventLog struct{ events []string }

func (f *fakeEventLog) Info(eid uint32, msg string) error {
	f.events = append(f.events, fmt.Sprintf("info %d %s", eid, msg))
	return nil
}

func (f *fakeEventLog) Warning(eid uint32, msg string) error {
	f.events = append(f.events, fmt.Sprintf("warning %d %s", eid, msg))
	return nil
}

func (f *fakeEventLog) Error(eid uint32, msg string) error {
	f.events = append(f.events, fmt.Sprintf("error %d %s", eid, msg))
	return nil
}

func TestEventLogHandler(t *testing.T) {
	w := &fakeEventLog{}
	log := slog.New(newEventLogHandler(w, slog.LevelInfo)).With("host", "rdsh01")
	log.Debug("not at info level")
	log.Info("heartbeating", "server", "https://b")
	log.Warn("broker unreachable; retrying with backoff", "err", "dial tcp: refused")
	log.WithGroup("cmd").Error("command failed", "id", "c1")
	want := []string{
		"info 1 level=INFO msg=heartbeating host=rdsh01 server=https://b",
		`warning 2 level=WARN msg="broker unreachable; retrying with backoff" host=rdsh01 err="dial tcp: refused"`,
		"error 3 level=ERROR msg=\"command failed\" host=rdsh01 cmd.id=c1",
	}
	if diff := cmp.Diff(want, w.events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if !newEventLogHandler(w, slog.LevelWarn).Enabled(context.Background(), slog.LevelWarn) {
		t.Error("warnings disabled at warn level")
	}
}
