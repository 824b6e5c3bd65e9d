package main

// Agent end-to-end tests: the real vdibroker binary runs `serve` on
// loopback and `agent --sessions-provider file:...` against it, as on a
// session host. Nothing is faked: the agent's file provider is the one the
// tests (and integrations) write.

import (
	"bufio"
	"bytes"
	"cmp"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/internal/syncbuf"
	_ "modernc.org/sqlite" // read the command results the broker stored
)

// e2eBuild builds the vdibroker binary into dir.
func e2eBuild(tb testing.TB, dir string) string {
	tb.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		tb.Skip("go tool not found; the end-to-end tests build the binary")
	}
	bin := filepath.Join(dir, "vdibroker")
	out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		tb.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// e2eProc is a running vdibroker process.
type e2eProc struct {
	cmd    *exec.Cmd
	stderr *syncbuf.Buffer
	done   chan struct{}
	err    error
}

func e2eStart(tb testing.TB, bin string, env []string, stdout io.Writer, args ...string) *e2eProc {
	tb.Helper()
	p := &e2eProc{cmd: exec.Command(bin, args...), stderr: &syncbuf.Buffer{}, done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout = stdout
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		tb.Fatalf("start vdibroker %s: %v", args[0], err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	tb.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
		if tb.Failed() {
			tb.Logf("vdibroker %s output:\n%s", args[0], p.stderr.String())
		}
	})
	return p
}

// wait waits for the process to exit and returns its exit code.
func (p *e2eProc) wait(tb testing.TB) int {
	tb.Helper()
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		tb.Fatalf("process did not exit; output:\n%s", p.stderr.String())
	}
	return p.cmd.ProcessState.ExitCode()
}

// e2eAPI calls the broker's API with the admin token.
type e2eAPI struct {
	tb    testing.TB
	base  string
	token string
	// client makes the calls (nil: http.DefaultClient, no timeout).
	client *http.Client
}

func (a e2eAPI) call(method, path string, body any, wantStatus int, out any) {
	a.tb.Helper()
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, a.base+"/api/v1"+path, rd)
	if err != nil {
		a.tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Content-Type", "application/json")
	res, err := cmp.Or(a.client, http.DefaultClient).Do(req)
	if err != nil {
		a.tb.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	if res.StatusCode != wantStatus {
		a.tb.Fatalf("%s %s = %d %s, want %d", method, path, res.StatusCode, data, wantStatus)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			a.tb.Fatalf("%s %s: decode %s: %v", method, path, data, err)
		}
	}
}

func (a e2eAPI) host(pool, name string) vdibroker.SessionHost {
	a.tb.Helper()
	var h vdibroker.SessionHost
	a.call("GET", "/hostpools/"+pool+"/sessionhosts/"+name, nil, 200, &h)
	return h
}

// tryHost reads a host that may not exist yet (before its agent registers).
func (a e2eAPI) tryHost(pool, name string) (vdibroker.SessionHost, bool) {
	var h vdibroker.SessionHost
	req, err := http.NewRequest("GET", a.base+"/api/v1/hostpools/"+pool+"/sessionhosts/"+name, nil)
	if err != nil {
		return h, false
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return h, false
	}
	defer res.Body.Close()
	return h, res.StatusCode == 200 && json.NewDecoder(res.Body).Decode(&h) == nil
}

func (a e2eAPI) sessions(pool string, q url.Values) []vdibroker.UserSession {
	a.tb.Helper()
	var list struct {
		Value []vdibroker.UserSession `json:"value"`
	}
	a.call("GET", "/hostpools/"+pool+"/usersessions?"+q.Encode(), nil, 200, &list)
	return list.Value
}

// e2eEventually polls cond until it holds; the bound only ends a hung test.
func e2eEventually(tb testing.TB, what string, bound time.Duration, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("gave up after %s waiting for %s", bound, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func e2eWriteSessions(tb testing.TB, path string, list []vdibroker.AgentSession) {
	tb.Helper()
	data, _ := json.Marshal(list)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		tb.Fatal(err)
	}
}

// e2eBroker is a running `vdibroker serve` with one pool whose
// heartbeatTimeoutSeconds is 10 (the minimum) and a registration token.
type e2eBroker struct {
	bin, base, dataDir, token string
	api                       e2eAPI
}

const e2ePool = "e2e-pool"

// e2eServe runs `vdibroker serve` on port 0 with dataDir and the admin
// token, and returns the process and the URL it printed.
func e2eServe(tb testing.TB, bin, dataDir, admin string) (*e2eProc, string) {
	tb.Helper()
	return e2eServeAt(tb, bin, dataDir, admin, "127.0.0.1:0")
}

// e2eServeAt is e2eServe listening on listen, with more serve flags.
func e2eServeAt(tb testing.TB, bin, dataDir, admin, listen string, args ...string) (*e2eProc, string) {
	tb.Helper()
	pr, pw := io.Pipe()
	p := e2eStart(tb, bin, []string{"VDIBROKER_ADMIN_TOKEN=" + admin}, pw,
		append([]string{"serve", "--listen", listen, "--data-dir", dataDir}, args...)...)
	tb.Cleanup(func() { pw.Close() })
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "vdibroker listening on "); ok {
				urls <- u
			}
		}
	}()
	select {
	case base := <-urls:
		return p, base
	case <-time.After(60 * time.Second):
		tb.Fatal("serve did not print its address")
		return nil, ""
	}
}

func e2eStartBroker(t *testing.T) *e2eBroker {
	t.Helper()
	dir := t.TempDir()
	bin := e2eBuild(t, dir)
	dataDir := filepath.Join(dir, "broker")
	const admin = "vdb_admin_e2e_agent_test"
	_, base := e2eServe(t, bin, dataDir, admin)
	api := e2eAPI{tb: t, base: base, token: admin}
	api.call("PUT", "/hostpools/"+e2ePool, map[string]any{
		"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst", "heartbeatTimeoutSeconds": 10,
	}, 201, nil)
	var tok struct {
		Token string `json:"token"`
	}
	api.call("POST", "/hostpools/"+e2ePool+"/registrationtoken", map[string]any{"expiresInSeconds": 3600}, 201, &tok)
	return &e2eBroker{bin: bin, base: base, dataDir: dataDir, token: tok.Token, api: api}
}

// TestAgentE2E runs the broker and real host agents: one through a host's
// life (registration, reconciliation R-S2, logoff R-S4, SIGTERM Shutdown,
// restart with the saved credential, SIGKILL Unavailable), one through the
// host's own checks (policy R-LI5, custom script R-IDX3, health R-H1) and the
// other commands.
func TestAgentE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds the binary and waits for a heartbeat timeout")
	}
	b := e2eStartBroker(t)
	t.Run("usage", func(t *testing.T) { e2eUsage(t, b) })
	t.Run("lifecycle", func(t *testing.T) { e2eLifecycle(t, b) })
	t.Run("checks and commands", func(t *testing.T) { e2eChecksAndCommands(t, b) })
}

func e2eLifecycle(t *testing.T, b *e2eBroker) {
	dir := t.TempDir()
	api := e2eAPI{tb: t, base: b.base, token: b.api.token}
	bin, base, dataDir := b.bin, b.base, b.dataDir
	const pool, hostName = e2ePool, "e2e-host-01"
	sessionsFile := filepath.Join(dir, "sessions.json")
	stateDir := filepath.Join(dir, "agent-state")
	agentArgs := func(token string) []string {
		return []string{"agent", "--server", base, "--registration-token", token, "--host-name", hostName,
			"--address", "127.0.0.1:3389", "--state-dir", stateDir, "--heartbeat-interval", "1s",
			"--sessions-provider", "file:" + sessionsFile}
	}
	agent := e2eStart(t, bin, nil, io.Discard, agentArgs(b.token)...)
	e2eEventually(t, "the host Available", 30*time.Second, func() bool {
		h, ok := api.tryHost(pool, hostName)
		return ok && h.Status == vdibroker.StatusAvailable
	})
	credPath := filepath.Join(stateDir, "credential.json")
	cred, err := os.ReadFile(credPath)
	if err != nil {
		t.Fatalf("credential not kept: %v", err)
	}
	if fi, _ := os.Stat(credPath); fi.Mode().Perm() != 0o600 {
		t.Errorf("credential file mode %v, want 0600", fi.Mode().Perm())
	}

	// R-S2: a placed session turns Active when the agent reports its user.
	var placed struct {
		SessionID string `json:"sessionId"`
		State     string `json:"state"`
	}
	api.call("POST", "/hostpools/"+pool+"/connect", map[string]any{"user": "alice"}, 201, &placed)
	if placed.State != vdibroker.StatePending {
		t.Fatalf("connect state %q, want Pending", placed.State)
	}
	e2eWriteSessions(t, sessionsFile, []vdibroker.AgentSession{{ID: "s-alice", User: "alice", State: "Active"}})
	e2eEventually(t, "alice's session Active", 30*time.Second, func() bool {
		s := api.sessions(pool, url.Values{"user": {"alice"}})
		return len(s) == 1 && s[0].ID == placed.SessionID && s[0].State == vdibroker.StateActive
	})

	// R-S2: a user the broker did not place is adopted; one who leaves ends.
	e2eWriteSessions(t, sessionsFile, []vdibroker.AgentSession{{ID: "s-alice", User: "alice", State: "Active"}, {ID: "s-bob", User: "bob", State: "Active"}})
	e2eEventually(t, "bob adopted", 30*time.Second, func() bool {
		s := api.sessions(pool, url.Values{"user": {"bob"}})
		return len(s) == 1 && s[0].State == vdibroker.StateActive && s[0].SessionHost == hostName
	})
	e2eWriteSessions(t, sessionsFile, []vdibroker.AgentSession{{ID: "s-alice", User: "alice", State: "Active"}})
	e2eEventually(t, "bob's session ended", 30*time.Second, func() bool {
		return len(api.sessions(pool, url.Values{"user": {"bob"}})) == 0 &&
			len(api.sessions(pool, url.Values{"user": {"bob"}, "state": {vdibroker.StateLoggedOff}})) == 1
	})

	// R-S4: logoff travels to the agent (the file entry goes) and back (the
	// result is stored as Succeeded, the session ends).
	var cmd vdibroker.Command
	api.call("DELETE", "/hostpools/"+pool+"/usersessions/"+placed.SessionID, nil, 202, &cmd)
	e2eEventually(t, "alice removed from the sessions file", 30*time.Second, func() bool {
		data, err := os.ReadFile(sessionsFile)
		return err == nil && !strings.Contains(string(data), "alice")
	})
	e2eEventually(t, "alice's session LoggedOff", 30*time.Second, func() bool {
		return len(api.sessions(pool, url.Values{"user": {"alice"}})) == 0
	})
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dataDir, "vdibroker.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	e2eEventually(t, "the logoff result stored", 30*time.Second, func() bool {
		var state string
		err := db.QueryRow(`SELECT state FROM commands WHERE id = ?`, cmd.ID).Scan(&state)
		return err == nil && state == vdibroker.CommandSucceeded
	})

	// R-H1: SIGTERM sends a last heartbeat; the host is Shutdown as soon as
	// the agent has exited, long before the 10 s timeout.
	if err := agent.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := agent.wait(t); code != 0 {
		t.Fatalf("agent exit code %d after SIGTERM, want 0", code)
	}
	if h := api.host(pool, hostName); h.Status != vdibroker.StatusShutdown {
		t.Fatalf("host status %q right after SIGTERM, want Shutdown", h.Status)
	}

	// Restart: the saved credential is used. The token given now is not
	// valid, so a registration would fail and stop the agent.
	agent = e2eStart(t, bin, nil, io.Discard, agentArgs("not-a-valid-token")...)
	before := api.host(pool, hostName).LastHeartBeat
	e2eEventually(t, "the restarted agent heartbeating", 30*time.Second, func() bool {
		h := api.host(pool, hostName)
		return h.Status == vdibroker.StatusAvailable && h.LastHeartBeat != nil && before != nil && h.LastHeartBeat.After(*before)
	})
	if after, _ := os.ReadFile(credPath); !bytes.Equal(after, cred) {
		t.Error("credential file changed on restart; want it reused as is")
	}
	if strings.Contains(agent.stderr.String(), "host registered") {
		t.Error("the restarted agent registered again")
	}

	// R-H1: SIGKILL sends nothing; the host turns Unavailable once its last
	// heartbeat is older than heartbeatTimeoutSeconds (10).
	if err := agent.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	agent.wait(t)
	last := api.host(pool, hostName).LastHeartBeat
	var seen vdibroker.SessionHost
	e2eEventually(t, "the host Unavailable", 60*time.Second, func() bool {
		seen = api.host(pool, hostName)
		return seen.Status == vdibroker.StatusUnavailable
	})
	if last == nil || seen.LastHeartBeat == nil || !seen.LastHeartBeat.Equal(*last) {
		t.Errorf("lastHeartBeat moved after SIGKILL: %v then %v", last, seen.LastHeartBeat)
	}
	if age := time.Since(*last); age < 10*time.Second {
		t.Errorf("Unavailable after %s without heartbeat, want at least the 10 s timeout", age)
	}
}

func e2eChecksAndCommands(t *testing.T, b *e2eBroker) {
	dir := t.TempDir()
	api := e2eAPI{tb: t, base: b.base, token: b.api.token}
	const pool, hostName = e2ePool, "e2e-host-02"
	sessionsFile := filepath.Join(dir, "sessions.json")
	policyFile := filepath.Join(dir, "policy.json")
	valueFile := filepath.Join(dir, "load")
	script := filepath.Join(dir, "load.sh")
	write := func(path, data string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(path, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
	}
	write(policyFile, `{"hostLoadIndexThreshold": 70}`, 0o644)
	write(valueFile, "150", 0o644)
	write(script, "#!/bin/sh\ncat "+valueFile+"\n", 0o755)
	e2eWriteSessions(t, sessionsFile, []vdibroker.AgentSession{{ID: "s-carol", User: "carol", State: "Active"}})
	// The pool samples every 5 s (the minimum), so script changes show soon.
	api.call("PATCH", "/hostpools/"+pool, map[string]any{"loadBalancing": map[string]any{"sampleIntervalSeconds": 5}}, 200, nil)

	e2eStart(t, b.bin, nil, io.Discard, "agent", "--server", b.base, "--registration-token", b.token,
		"--host-name", hostName, "--address", "127.0.0.1:3390", "--state-dir", filepath.Join(dir, "state"),
		"--heartbeat-interval", "1s", "--sessions-provider", "file:"+sessionsFile,
		"--policy-file", policyFile, "--custom-script", script)

	// R-LI5 and R-IDX3: the policy arrives with the registration; the
	// script's 150 is reported capped at 100.
	e2eEventually(t, "the host with policy and custom value", 30*time.Second, func() bool {
		h, ok := api.tryHost(pool, hostName)
		return ok && h.Status == vdibroker.StatusAvailable &&
			h.Policy.HostLoadIndexThreshold != nil && *h.Policy.HostLoadIndexThreshold == 70 &&
			h.Metrics != nil && h.Metrics.CustomLoadValue != nil && *h.Metrics.CustomLoadValue == 100
	})
	// The policy file is re-read every heartbeat.
	write(policyFile, `{"hostLoadIndexThreshold": 40, "hostConnectingSessionThreshold": 3}`, 0o644)
	e2eEventually(t, "the new policy", 30*time.Second, func() bool {
		p := api.host(pool, hostName).Policy
		return p.HostLoadIndexThreshold != nil && *p.HostLoadIndexThreshold == 40 &&
			p.HostConnectingSessionThreshold != nil && *p.HostConnectingSessionThreshold == 3
	})

	// R-H1: a script that cannot run is a failed health check: the host
	// needs assistance (still placeable), and recovers when it runs again.
	write(script, "#!/bin/sh\ncat "+valueFile+"\n", 0o644)
	e2eEventually(t, "the host NeedsAssistance", 30*time.Second, func() bool {
		h := api.host(pool, hostName)
		return h.Status == vdibroker.StatusNeedsAssistance && strings.Contains(h.HealthError, "load.sh")
	})
	write(valueFile, "35", 0o644)
	write(script, "#!/bin/sh\ncat "+valueFile+"\n", 0o755)
	e2eEventually(t, "the host Available again with value 35", 30*time.Second, func() bool {
		h := api.host(pool, hostName)
		return h.Status == vdibroker.StatusAvailable && h.HealthError == "" &&
			h.Metrics != nil && h.Metrics.CustomLoadValue != nil && *h.Metrics.CustomLoadValue == 35
	})

	// R-S4: send message and disconnect travel to the agent's sessions file.
	var carol []vdibroker.UserSession
	e2eEventually(t, "carol adopted", 30*time.Second, func() bool {
		carol = api.sessions(pool, url.Values{"user": {"carol"}})
		return len(carol) == 1 && carol[0].State == vdibroker.StateActive
	})
	api.call("POST", "/hostpools/"+pool+"/usersessions/"+carol[0].ID+"/sendmessage", map[string]any{"message": "Maintenance at 18:00"}, 202, nil)
	e2eEventually(t, "the message in the messages file", 30*time.Second, func() bool {
		data, err := os.ReadFile(sessionsFile + ".messages")
		return err == nil && strings.Contains(string(data), `"user":"carol","message":"Maintenance at 18:00"`)
	})
	api.call("POST", "/hostpools/"+pool+"/usersessions/"+carol[0].ID+"/disconnect", nil, 202, nil)
	e2eEventually(t, "carol Disconnected", 30*time.Second, func() bool {
		s := api.sessions(pool, url.Values{"user": {"carol"}})
		return len(s) == 1 && s[0].State == vdibroker.StateDisconnected
	})
}

// e2eUsage: wrong flags exit 2 naming the flag; a token the broker refuses
// exits 1 with the broker's message (retrying cannot help).
func e2eUsage(t *testing.T, b *e2eBroker) {
	state := filepath.Join(t.TempDir(), "state")
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no server", []string{"agent", "--state-dir", state}, 2, "--server"},
		{"bad provider", []string{"agent", "--server", b.base, "--sessions-provider", "wmi"}, 2, "--sessions-provider"},
		{"bad heartbeat interval", []string{"agent", "--server", b.base, "--heartbeat-interval", "soon"}, 2, "heartbeat-interval"},
		{"bad host name", []string{"agent", "--server", b.base, "--registration-token", b.token, "--host-name", "x",
			"--state-dir", state, "--sessions-provider", "none"}, 2, `--host-name "x": must be 3..48 characters`},
		{"refused token", []string{"agent", "--server", b.base, "--registration-token", "vdb_wrong", "--host-name", "e2e-host-09",
			"--state-dir", state, "--sessions-provider", "none"}, 1, "registration token is invalid, expired or revoked"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := e2eStart(t, b.bin, nil, io.Discard, tt.args...)
			if code := p.wait(t); code != tt.code || !strings.Contains(p.stderr.String(), tt.want) {
				t.Errorf("exit %d, stderr %q; want exit %d mentioning %q", code, p.stderr.String(), tt.code, tt.want)
			}
		})
	}
}
