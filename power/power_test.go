//go:build unix

package power

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vdibroker/vdibroker"
)

// script writes an executable shell script (the driver runs it as a
// program, without a shell of its own) and returns its path.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "vm")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

var target = Target{Pool: "pool-1", Host: "host-a", Address: "10.0.0.7:3389"}

func TestSubstitute(t *testing.T) {
	got := Substitute([]string{"/bin/vm", "{host}", "--pool={pool}", "{address}", "{host}{host}", "{other}"}, target)
	want := []string{"/bin/vm", "host-a", "--pool=pool-1", "10.0.0.7:3389", "host-ahost-a", "{other}"}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatal(d)
	}
	// A host name is one argument, never shell words (R-A4: no shell).
	evil := Target{Host: "a; rm -rf / $(id)"}
	if got := Substitute([]string{"{host}"}, evil); len(got) != 1 || got[0] != evil.Host {
		t.Fatalf("got %q", got)
	}
}

func TestExecActionsAndStatusCodes(t *testing.T) {
	out := filepath.Join(t.TempDir(), "args")
	vm := script(t, `echo "$@" >> `+out+`
echo "said $1"
echo "complained" >&2
case "$1" in status) exit "$STATUS";; fail) exit 7;; esac
`)
	var logs bytes.Buffer
	e := &Exec{Name: "lab", StartArgv: []string{vm, "start", "{pool}", "{host}", "{address}"}, StopArgv: []string{vm, "stop", "{host}"},
		StatusArgv: []string{vm, "status", "{host}"}, Timeout: 10 * time.Second, Log: slog.New(slog.NewTextHandler(&logs, nil))}
	ctx := t.Context()
	if err := e.Start(ctx, target); err != nil {
		t.Fatal(err)
	}
	if err := e.Stop(ctx, target); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(out)
	if got, want := string(b), "start pool-1 host-a 10.0.0.7:3389\nstop host-a\n"; got != want {
		t.Fatalf("argv: got %q, want %q", got, want)
	}
	for _, s := range []string{`stream=stdout line="said start"`, `stream=stderr line=complained`, "driver=lab", "host=host-a"} {
		if !strings.Contains(logs.String(), s) {
			t.Errorf("log lacks %q:\n%s", s, logs.String())
		}
	}
	// exit 0 Running, 3 Stopped, anything else Unknown.
	for code, want := range map[string]string{"0": vdibroker.PowerRunning, "3": vdibroker.PowerStopped, "1": vdibroker.PowerUnknown, "4": vdibroker.PowerUnknown} {
		t.Setenv("STATUS", code)
		got, _ := e.Status(ctx, target)
		if got != want {
			t.Errorf("exit %s: got %s, want %s", code, got, want)
		}
	}
	e.StartArgv = []string{vm, "fail"}
	if err := e.Start(ctx, target); err == nil || !strings.Contains(err.Error(), "exit status 7") {
		t.Fatalf("a failing start: %v", err)
	}
	e.StatusArgv = nil
	if _, err := e.Status(ctx, target); err != ErrNoStatus {
		t.Fatalf("no status argv: %v", err)
	}
}

// A command that outlives the timeout is killed with its process group:
// the child it started in the background dies too.
func TestExecTimeoutKillsGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	vm := script(t, `sleep 300 &
echo $! > `+pidFile+`
sleep 300
`)
	e := &Exec{Name: "slow", StartArgv: []string{vm}, StopArgv: []string{vm}, Timeout: 500 * time.Millisecond}
	err := e.Start(t.Context(), target)
	if err == nil || !strings.Contains(err.Error(), "killed after 500ms") {
		t.Fatalf("got %v, want killed after 500ms", err)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmtSscan(strings.TrimSpace(string(b)), &pid); err != nil {
		t.Fatal(err)
	}
	// The killed child is a zombie or gone: either way signal 0 on a
	// reaped pid fails, and a zombie's state is Z.
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("child %d outlived the timeout's kill", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A start script that leaves a background process holding its output open
// (an agent it launched) still returns once the script exited.
func TestExecBackgroundChildDoesNotHoldAction(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	vm := script(t, `sleep 300 &
echo $! > `+pidFile+`
exit 0
`)
	e := &Exec{Name: "bg", StartArgv: []string{vm}, StopArgv: []string{vm}, Timeout: time.Minute}
	if err := e.Start(t.Context(), target); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(pidFile)
	var pid int
	fmtSscan(strings.TrimSpace(string(b)), &pid)
	syscall.Kill(pid, syscall.SIGKILL)
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] != "Z"
}

func TestWebhook(t *testing.T) {
	var got []WebhookRequest
	var auth []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req WebhookRequest
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "bad method or type", 400)
			return
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		got = append(got, req)
		auth = append(auth, r.Header.Get("Authorization"))
		switch req.Action {
		case "status":
			w.Write([]byte(`{"powerState":"Stopped"}`))
		case "stop":
			http.Error(w, "no such vm", http.StatusNotFound)
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600)
	secret := filepath.Join(dir, "secret")
	os.WriteFile(secret, []byte("s3cret\n"), 0o600)
	cfg := `drivers:
  - name: cloud
    type: webhook
    url: ` + srv.URL + `/hooks/vdi
    secretFile: ` + secret + `
    caFile: ` + ca + `
    timeout: 5s
`
	set, err := Parse([]byte(cfg), nil)
	if err != nil {
		t.Fatal(err)
	}
	d := set["cloud"]
	ctx := t.Context()
	if err := d.Start(ctx, target); err != nil {
		t.Fatal(err)
	}
	st, err := d.Status(ctx, target)
	if err != nil || st != vdibroker.PowerStopped {
		t.Fatalf("status: %s, %v", st, err)
	}
	if err := d.Stop(ctx, target); err == nil || !strings.Contains(err.Error(), "HTTP 404: no such vm") {
		t.Fatalf("stop answered 404: %v", err)
	}
	want := []WebhookRequest{
		{Action: "start", Pool: "pool-1", Host: "host-a", Address: "10.0.0.7:3389"},
		{Action: "status", Pool: "pool-1", Host: "host-a", Address: "10.0.0.7:3389"},
		{Action: "stop", Pool: "pool-1", Host: "host-a", Address: "10.0.0.7:3389"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatal(diff)
	}
	for _, a := range auth {
		if a != "Bearer s3cret" {
			t.Fatalf("Authorization %q", a)
		}
	}
	// Without the CA file the server's certificate is not trusted.
	set, err = Parse([]byte(strings.Replace(cfg, "    caFile: "+ca+"\n", "", 1)), nil)
	if err != nil {
		t.Fatal(err)
	}
	var uae x509.UnknownAuthorityError
	if err := set["cloud"].Start(ctx, target); err == nil || !strings.Contains(err.Error(), uae.Error()[:20]) {
		t.Fatalf("untrusted certificate: %v", err)
	}
}

func TestSimulated(t *testing.T) {
	now := time.Unix(1000, 0)
	s := &Simulated{StartDelay: 20 * time.Second, Now: func() time.Time { return now }}
	ctx := context.Background()
	if st, _ := s.Status(ctx, target); st != vdibroker.PowerUnknown {
		t.Fatal(st)
	}
	s.Start(ctx, target)
	if st, _ := s.Status(ctx, target); st != vdibroker.PowerStarting {
		t.Fatal(st)
	}
	now = now.Add(20 * time.Second)
	if st, _ := s.Status(ctx, target); st != vdibroker.PowerRunning {
		t.Fatal(st)
	}
	s.Stop(ctx, target)
	if st, _ := s.Status(ctx, target); st != vdibroker.PowerStopped || s.Calls("start", "pool-1", "host-a") != 1 {
		t.Fatal(st)
	}
}

func TestParse(t *testing.T) {
	set, err := Parse([]byte(`drivers:
  - {name: lab, type: exec, start: [/bin/vm, start, "{host}"], stop: [/bin/vm, stop, "{host}"], timeout: 90s}
  - {name: demo, type: simulated, startDelay: 5s}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"demo", "lab"}, set.Names()); d != "" {
		t.Fatal(d)
	}
	if e := set["lab"].(*Exec); e.Timeout != 90*time.Second || e.StatusArgv != nil {
		t.Fatalf("%+v", e)
	}
	if s := set["demo"].(*Simulated); s.StartDelay != 5*time.Second {
		t.Fatalf("%+v", s)
	}
}

// Every bad config is refused with an error naming the driver and field.
func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"not yaml", "drivers: [", "parse"},
		{"unknown field", "drivers:\n  - {name: a, type: exec, timout: 5s}", "timout"},
		{"no name", "drivers:\n  - {type: simulated}", "drivers[0]: name is required"},
		{"twice", "drivers:\n  - {name: a, type: simulated}\n  - {name: a, type: simulated}", `driver "a": name: defined twice`},
		{"no type", "drivers:\n  - {name: a}", `driver "a": type: is required`},
		{"bad type", "drivers:\n  - {name: a, type: ipmi}", `driver "a": type: "ipmi" is not one of exec, webhook, simulated`},
		{"no start", "drivers:\n  - {name: a, type: exec, stop: [/bin/x]}", `driver "a": start: an argv is required`},
		{"relative", "drivers:\n  - {name: a, type: exec, start: [vm], stop: [/bin/x]}", `driver "a": start: the program "vm" must be an absolute path`},
		{"bad timeout", "drivers:\n  - {name: a, type: exec, start: [/bin/x], stop: [/bin/x], timeout: soon}", `driver "a": timeout: "soon" is not a duration`},
		{"exec with url", "drivers:\n  - {name: a, type: exec, start: [/bin/x], stop: [/bin/x], url: http://x}", `driver "a": url: not a field of a exec driver`},
		{"bad url", "drivers:\n  - {name: w, type: webhook, url: 'ftp://x'}", `driver "w": url: "ftp://x" is not an http(s) URL`},
		{"no secret", "drivers:\n  - {name: w, type: webhook, url: 'https://x', secretFile: /nonexistent/s}", `driver "w": secretFile: open /nonexistent/s`},
		{"no ca", "drivers:\n  - {name: w, type: webhook, url: 'https://x', caFile: /nonexistent/ca}", `driver "w": caFile: open /nonexistent/ca`},
		{"bad delay", "drivers:\n  - {name: s, type: simulated, startDelay: -1s}", `driver "s": startDelay: "-1s" is not a duration`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
	if _, err := LoadFile("/nonexistent/power.yaml", nil); err == nil || !strings.Contains(err.Error(), "power config") {
		t.Fatalf("missing file: %v", err)
	}
}

// A registration token lets a host choose its name and address (both may
// begin with "-"): substituted as a whole argument they must not become an
// option of the admin's program, as "vm stop --all" would (found in a
// review: option injection).
func TestExecRefusesOptionLikeValues(t *testing.T) {
	if err := vdibroker.ValidateName("hostName", "--all", vdibroker.MinHostNameLen, vdibroker.MaxHostNameLen); err != nil {
		t.Fatalf("the attack needs %q to be a valid host name: %v", "--all", err)
	}
	if err := vdibroker.ValidateAddress("address", "-oProxy:1"); err != nil {
		t.Fatalf("the attack needs %q to be a valid address: %v", "-oProxy:1", err)
	}
	out := filepath.Join(t.TempDir(), "args")
	vm := script(t, `echo "$@" >> `+out+"\n")
	e := &Exec{Name: "lab", StartArgv: []string{vm, "start", "{address}"}, StopArgv: []string{vm, "stop", "{host}"},
		Timeout: 10 * time.Second, Log: slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))}
	ctx := t.Context()
	if err := e.Stop(ctx, Target{Pool: "p", Host: "--all"}); err == nil || !strings.Contains(err.Error(), `"--all"`) {
		t.Fatalf("stop of host --all: err %v, want a refusal naming it", err)
	}
	if err := e.Start(ctx, Target{Pool: "p", Host: "h", Address: "-oProxy:1"}); err == nil {
		t.Fatal("start with address -oProxy:1: no error")
	}
	if b, _ := os.ReadFile(out); len(b) != 0 {
		t.Fatalf("the program ran: %q", b)
	}
	// An option the config itself spells is substituted as before.
	e.StopArgv = []string{vm, "stop", "--name={host}"}
	if err := e.Stop(ctx, Target{Pool: "p", Host: "-x"}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(out); string(b) != "stop --name=-x\n" {
		t.Fatalf("ran %q", b)
	}
}

// TestStartingConflict (R-A4): the 409 of a start of a host Starting
// within the start timeout (10 minutes) gives since when and from when a
// start is accepted again, each in UTC and relative to now: the time
// passed rounded down, the wait rounded up, so a retry after the wait it
// names is accepted.
func TestStartingConflict(t *testing.T) {
	at := time.Date(2026, 12, 6, 13, 52, 2, 0, time.FixedZone("CET", 3600))
	h := &vdibroker.SessionHost{PowerState: vdibroker.PowerStarting, PowerStateTime: &at}
	for _, tc := range []struct {
		name       string
		since      time.Duration
		ago, again string
	}{
		{"just started", 0, "(0 seconds ago)", "(in 10 minutes;"},
		{"one second", time.Second, "(1 second ago)", "(in 10 minutes;"}, // 9m59s left, up
		{"5m30s", 5*time.Minute + 30*time.Second, "(5 minutes ago)", "(in 5 minutes;"},
		{"9m", 9 * time.Minute, "(9 minutes ago)", "(in 1 minute;"},
		{"9m59.5s", 9*time.Minute + 59*time.Second + 500*time.Millisecond, "(9 minutes ago)", "(in 1 second;"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := startingConflict(h, "h1", 90*time.Second, at.Add(tc.since))
			if vdibroker.ErrorCode(err) != vdibroker.EConflict {
				t.Fatalf("code %q, want Conflict: %v", vdibroker.ErrorCode(err), err)
			}
			for _, want := range []string{
				`"h1" is Starting since 2026-12-06T12:52:02Z ` + tc.ago,
				"accepted again from 2026-12-06T13:02:02Z " + tc.again + " the start timeout is 10 minutes)",
			} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%q\nlacks %q", err, want)
				}
			}
		})
	}
	// Started within a second (12:52:02.3): a start is accepted from
	// 13:02:02.3, so the whole second it names is 13:02:03, not 13:02:02,
	// at which it is still refused.
	frac := at.Add(300 * time.Millisecond)
	hf := &vdibroker.SessionHost{PowerState: vdibroker.PowerStarting, PowerStateTime: &frac}
	err := startingConflict(hf, "h1", 90*time.Second, frac.Add(time.Minute))
	if want := "accepted again from 2026-12-06T13:02:03Z (in 9 minutes;"; !strings.Contains(err.Error(), want) {
		t.Errorf("%q\nlacks %q", err, want)
	}
	if vdibroker.StartTimedOut(hf, time.Date(2026, 12, 6, 13, 2, 2, 0, time.UTC)) || !vdibroker.StartTimedOut(hf, time.Date(2026, 12, 6, 13, 2, 3, 0, time.UTC)) {
		t.Error("a start is not refused at 13:02:02 and accepted at 13:02:03, as the message names")
	}
}
