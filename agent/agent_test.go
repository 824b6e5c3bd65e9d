package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vdibroker/vdibroker"
)

func writeJSON(tb testing.TB, path string, v any) {
	tb.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		tb.Fatal(err)
	}
}

// TestRegisterHeartbeatShutdown: register once with the policy (R-LI5), then
// heartbeat metrics, the file's sessions and the policy; on stop a last
// heartbeat says shuttingDown (R-H1) and Run returns nil.
func TestRegisterHeartbeatShutdown(t *testing.T) {
	b := newFakeBroker(t)
	dir := t.TempDir()
	sessions := filepath.Join(dir, "sessions.json")
	writeJSON(t, sessions, []vdibroker.AgentSession{{ID: "s1", User: "alice", State: "Active"}})
	policy := filepath.Join(dir, "policy.json")
	writeJSON(t, policy, map[string]int{"hostLoadIndexThreshold": 80})
	a := newTestAgent(t, Config{Server: b.srv.URL, StateDir: filepath.Join(dir, "state"),
		Sessions: &FileProvider{Path: sessions}, PolicyFile: policy})
	stop := start(t, a)
	waitFor(t, "two heartbeats", func() bool { return b.heartbeatCount() >= 2 })

	b.locked(func() {
		if len(b.registrations) != 1 {
			t.Fatalf("%d registrations, want 1", len(b.registrations))
		}
		r := b.registrations[0]
		if r.HostName != "host-01" || r.Address != "10.0.0.1:3389" || !slices.Equal(r.Protocols, []string{"RDP"}) ||
			r.Policy == nil || *r.Policy.HostLoadIndexThreshold != 80 {
			t.Errorf("register request = %+v", r)
		}
	})
	hb := b.lastHeartbeat()
	if hb.Metrics == nil || hb.Metrics.CPUPercent != 12.5 || hb.Metrics.MemoryPercent != 40 {
		t.Errorf("heartbeat metrics = %+v", hb.Metrics)
	}
	if diff := cmp.Diff([]vdibroker.AgentSession{{ID: "s1", User: "alice", State: "Active"}}, hb.Sessions); diff != "" {
		t.Errorf("heartbeat sessions (-want +got):\n%s", diff)
	}
	if hb.Policy == nil || *hb.Policy.HostLoadIndexThreshold != 80 || hb.HealthError != "" || hb.ShuttingDown {
		t.Errorf("heartbeat = %+v", hb)
	}

	// The policy file is re-read every heartbeat.
	writeJSON(t, policy, map[string]int{"hostLoadIndexThreshold": 60, "hostConnectingSessionThreshold": 3})
	waitFor(t, "the new policy", func() bool {
		p := b.lastHeartbeat().Policy
		return p != nil && *p.HostLoadIndexThreshold == 60 && p.HostConnectingSessionThreshold != nil
	})

	if err := stop(); err != nil {
		t.Fatalf("Run = %v, want nil after stop", err)
	}
	if last := b.lastHeartbeat(); !last.ShuttingDown {
		t.Errorf("last heartbeat %+v does not say shuttingDown", last)
	}
}

// TestCredentialKeptAndReused: the credential is saved 0600 in a 0700 state
// dir and a restarted agent uses it without registering, even when the token
// is no longer valid.
func TestCredentialKeptAndReused(t *testing.T) {
	b := newFakeBroker(t)
	state := filepath.Join(t.TempDir(), "state")
	stop := start(t, newTestAgent(t, Config{Server: b.srv.URL, StateDir: state}))
	waitFor(t, "a heartbeat", func() bool { return b.heartbeatCount() >= 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	di, err := os.Stat(state)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(state, credentialFile))
	if err != nil {
		t.Fatal(err)
	}
	if di.Mode().Perm() != 0o700 || fi.Mode().Perm() != 0o600 {
		t.Errorf("state dir %v, credential %v; want 0700 and 0600", di.Mode().Perm(), fi.Mode().Perm())
	}
	before, _ := os.ReadFile(filepath.Join(state, credentialFile))
	if !bytes.Contains(before, []byte(`"credential": "cred-1"`)) {
		t.Fatalf("credential file = %s", before)
	}
	if entries, _ := os.ReadDir(state); len(entries) != 1 {
		t.Errorf("state dir holds %d files, want only the credential (no temp files left)", len(entries))
	}

	b.locked(func() { b.tokenValid = false })
	n := b.heartbeatCount()
	start(t, newTestAgent(t, Config{Server: b.srv.URL, StateDir: state}))
	waitFor(t, "heartbeats of the restarted agent", func() bool { return b.heartbeatCount() >= n+2 })
	b.locked(func() {
		if len(b.registrations) != 1 {
			t.Errorf("%d registrations, want 1: the restart must reuse the credential", len(b.registrations))
		}
		if got := b.heartbeatCred[len(b.heartbeatCred)-1]; got != "cred-1" {
			t.Errorf("restarted agent used credential %q, want cred-1", got)
		}
	})
	after, _ := os.ReadFile(filepath.Join(state, credentialFile))
	if !bytes.Equal(before, after) {
		t.Error("credential file changed on restart")
	}
}

// TestReregisterWhenCredentialRefused: a 401 on heartbeat with a still-valid
// token registers again and keeps the new credential.
func TestReregisterWhenCredentialRefused(t *testing.T) {
	b := newFakeBroker(t)
	state := t.TempDir()
	start(t, newTestAgent(t, Config{Server: b.srv.URL, StateDir: state}))
	waitFor(t, "a heartbeat", func() bool { return b.heartbeatCount() >= 1 })
	b.locked(func() { clear(b.credentials) }) // e.g. the host was re-keyed
	waitFor(t, "a heartbeat with a new credential", func() bool {
		var cred string
		b.locked(func() { cred = b.heartbeatCred[len(b.heartbeatCred)-1] })
		return cred == "cred-2"
	})
	data, _ := os.ReadFile(filepath.Join(state, credentialFile))
	if !bytes.Contains(data, []byte("cred-2")) {
		t.Errorf("state holds %s, want the new credential cred-2", data)
	}
}

// TestStopsWhenCredentialAndTokenRefused: retrying cannot help, so Run
// returns an error that says what to do.
func TestStopsWhenCredentialAndTokenRefused(t *testing.T) {
	b := newFakeBroker(t)
	a := newTestAgent(t, Config{Server: b.srv.URL, StateDir: t.TempDir()})
	done := make(chan error, 1)
	go func() { done <- a.Run(t.Context()) }()
	waitFor(t, "a heartbeat", func() bool { return b.heartbeatCount() >= 1 })
	b.locked(func() { clear(b.credentials); b.tokenValid = false })
	err := <-done
	if err == nil || !strings.Contains(err.Error(), "registration token is invalid or expired") || vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated {
		t.Fatalf("Run = %v, want the broker's Unauthenticated answer", err)
	}
}

// flakyTransport fails the first n requests as an unreachable broker would.
type flakyTransport struct {
	n     atomic.Int32
	calls atomic.Int32
}

func (f *flakyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	f.calls.Add(1)
	if f.n.Add(-1) >= 0 {
		return nil, errors.New("dial tcp: connection refused")
	}
	return http.DefaultTransport.RoundTrip(r)
}

// logCounter counts log records by message.
type logCounter struct {
	mu   sync.Mutex
	msgs map[string]int
}

func (l *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCounter) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs[r.Message]++
	return nil
}
func (l *logCounter) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCounter) WithGroup(string) slog.Handler      { return l }
func (l *logCounter) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.msgs[msg]
}

// TestUnreachableBrokerNeverExits: connection errors and 503s, before and
// after registration, are retried with backoff (a 503 without
// Retry-After: a wait the broker asked for, of the backoff's length);
// each outage is logged once.
func TestUnreachableBrokerNeverExits(t *testing.T) {
	b := newFakeBroker(t)
	tr := &flakyTransport{}
	tr.n.Store(25)
	logs := &logCounter{msgs: map[string]int{}}
	a := newTestAgent(t, Config{Server: b.srv.URL, HTTPClient: &http.Client{Transport: tr}, Logger: slog.New(logs)})
	stop := start(t, a)
	waitFor(t, "registration after 25 refused connections", func() bool { return b.heartbeatCount() >= 1 })
	if c := logs.count("broker unreachable; retrying registration with backoff"); c != 1 {
		t.Errorf("outage before registration logged %d times, want once", c)
	}

	// Now the broker answers 503 for a while after registration.
	b.locked(func() { b.failNext = 25 })
	n := b.heartbeatCount()
	waitFor(t, "heartbeats after 25 failures", func() bool { return b.heartbeatCount() >= n+2 })
	if c := logs.count("broker answered 503 to the heartbeat; waiting to heartbeat again"); c != 1 {
		t.Errorf("outage after registration logged %d times, want once", c)
	}
	if c := logs.count("heartbeating"); c != 2 {
		t.Errorf("recovery logged %d times, want twice (start and after the outage)", c)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run = %v", err)
	}
}

// countingProvider counts the calls that reach the wrapped provider.
type countingProvider struct {
	SessionProvider
	mu    sync.Mutex
	calls []string
}

func (c *countingProvider) record(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, s)
}

func (c *countingProvider) Logoff(ctx context.Context, id string) error {
	c.record("Logoff " + id)
	return c.SessionProvider.Logoff(ctx, id)
}

func (c *countingProvider) Disconnect(ctx context.Context, id string) error {
	c.record("Disconnect " + id)
	return c.SessionProvider.Disconnect(ctx, id)
}

// TestCommands: each command of a heartbeat answer is carried out and its
// result reported on a following heartbeat; what cannot be done is Failed
// with the reason (R-S4); a command delivered twice runs once.
func TestCommands(t *testing.T) {
	b := newFakeBroker(t)
	path := filepath.Join(t.TempDir(), "sessions.json")
	writeJSON(t, path, []vdibroker.AgentSession{{ID: "s1", User: "alice"}, {ID: "s2", User: "bob"}})
	prov := &countingProvider{SessionProvider: &FileProvider{Path: path}}
	start(t, newTestAgent(t, Config{Server: b.srv.URL, Sessions: prov}))
	waitFor(t, "a heartbeat", func() bool { return b.heartbeatCount() >= 1 })

	cmds := []vdibroker.Command{
		{ID: "c1", Type: vdibroker.CommandLogoff, AgentSessionID: "s1", User: "alice"},
		{ID: "c2", Type: vdibroker.CommandDisconnect, User: "bob"}, // found by user
		{ID: "c3", Type: vdibroker.CommandSendMessage, User: "carol", Message: "hi"},
		{ID: "c4", Type: "Reboot", User: "bob"},
		{ID: "c5", Type: vdibroker.CommandLogoff, User: "dave"},
	}
	b.locked(func() { b.commands = cmds })
	var results []vdibroker.CommandResult
	waitFor(t, "the results", func() bool {
		results = b.results()
		return len(results) >= len(cmds)
	})
	want := []vdibroker.CommandResult{
		{ID: "c1", Success: true},
		{ID: "c2", Success: true},
		{ID: "c3", Message: `user "carol" has no session on this host`},
		{ID: "c4", Message: `unknown command type "Reboot"`},
		{ID: "c5", Success: true, Message: `user "dave" has no session on this host; nothing to log off`},
	}
	if diff := cmp.Diff(want, results); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	got, _ := (&FileProvider{Path: path}).Sessions(t.Context())
	if diff := cmp.Diff([]vdibroker.AgentSession{{ID: "s2", User: "bob", State: "Disconnected"}}, got); diff != "" {
		t.Errorf("sessions file after logoff s1, disconnect bob (-want +got):\n%s", diff)
	}
	waitFor(t, "the file's change in a heartbeat", func() bool {
		return cmp.Equal(b.lastHeartbeat().Sessions, got)
	})

	// Delivered again (the broker did not get the result): reported again,
	// not run again.
	b.locked(func() { b.commands = cmds[:1] })
	waitFor(t, "the repeated result", func() bool {
		r := b.lastHeartbeat().Results
		return len(r) == 1 && r[0] == want[0]
	})
	prov.mu.Lock()
	defer prov.mu.Unlock()
	if !slices.Equal(prov.calls, []string{"Logoff s1", "Disconnect s2"}) {
		t.Errorf("provider calls %v, want each command once", prov.calls)
	}
}

// TestCommandFailsWithReason: a provider that cannot do a command gives a
// Failed result naming why, never a dropped command.
func TestCommandFailsWithReason(t *testing.T) {
	b := newFakeBroker(t)
	start(t, newTestAgent(t, Config{Server: b.srv.URL, Sessions: NoSessions{}}))
	b.locked(func() {
		b.commands = []vdibroker.Command{{ID: "c1", Type: vdibroker.CommandDisconnect, AgentSessionID: "7", User: "alice"}}
	})
	waitFor(t, "the result", func() bool { return len(b.lastHeartbeatOrEmpty().Results) == 1 })
	r := b.lastHeartbeat().Results[0]
	if r.Success || !strings.Contains(r.Message, "none cannot disconnect") {
		t.Errorf("result %+v, want Failed saying the provider cannot disconnect", r)
	}
}

func (b *fakeBroker) lastHeartbeatOrEmpty() vdibroker.HeartbeatRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.heartbeats) == 0 {
		return vdibroker.HeartbeatRequest{}
	}
	return b.heartbeats[len(b.heartbeats)-1]
}

// brokenSessions answers sessions until broken is set.
type brokenSessions struct {
	NoSessions
	broken atomic.Bool
}

func (s *brokenSessions) Sessions(context.Context) ([]vdibroker.AgentSession, error) {
	if s.broken.Load() {
		return nil, errors.New("loginctl: exit status 1")
	}
	return []vdibroker.AgentSession{{ID: "3", User: "alice", State: "Active"}}, nil
}

// TestHealthErrors: failed health checks are reported (R-H1
// NeedsAssistance) and a failing sessions provider does not make the broker
// end the host's sessions (the last known list is sent).
func TestHealthErrors(t *testing.T) {
	b := newFakeBroker(t)
	prov := &brokenSessions{}
	start(t, newTestAgent(t, Config{Server: b.srv.URL, Sessions: prov}))
	waitFor(t, "a healthy heartbeat", func() bool { return b.heartbeatCount() >= 1 })
	if h := b.lastHeartbeat(); h.HealthError != "" || len(h.Sessions) != 1 {
		t.Fatalf("heartbeat %+v, want healthy with alice", h)
	}
	prov.broken.Store(true)
	waitFor(t, "the health error", func() bool { return strings.Contains(b.lastHeartbeat().HealthError, "loginctl: exit status 1") })
	if s := b.lastHeartbeat().Sessions; len(s) != 1 || s[0].User != "alice" {
		t.Errorf("sessions while the provider fails = %+v, want the last known (alice)", s)
	}
	if b.lastHeartbeat().SessionsUnknown {
		t.Error("sessionsUnknown with a last known list to send")
	}
	prov.broken.Store(false)
	b.locked(func() { b.settings.UseCustomScript = true })
	waitFor(t, "the missing custom script reported", func() bool {
		return strings.Contains(b.lastHeartbeat().HealthError, "custom load script but this agent has none")
	})
}

// TestSessionsUnknownBeforeAnyList (R-S2): a provider that fails before
// it ever listed the host's sessions (an agent restarted while logind is
// down) has no last list: the heartbeat says the sessions are unknown
// rather than sending an empty list, which the broker would take as every
// session ended; once a list comes, it is sent as usual.
func TestSessionsUnknownBeforeAnyList(t *testing.T) {
	b := newFakeBroker(t)
	prov := &brokenSessions{}
	prov.broken.Store(true)
	start(t, newTestAgent(t, Config{Server: b.srv.URL, Sessions: prov}))
	waitFor(t, "a heartbeat", func() bool { return b.heartbeatCount() >= 1 })
	if h := b.lastHeartbeat(); !h.SessionsUnknown || len(h.Sessions) != 0 || !strings.Contains(h.HealthError, "loginctl") {
		t.Fatalf("heartbeat %+v, want sessionsUnknown with the provider's error", h)
	}
	prov.broken.Store(false)
	waitFor(t, "a heartbeat with the host's sessions", func() bool {
		h := b.lastHeartbeat()
		return !h.SessionsUnknown && len(h.Sessions) == 1
	})
}

// TestHealthErrorForMissingScriptAndPolicy: an unexecutable custom script and
// an unreadable policy file are health errors, not reasons to stop.
func TestHealthErrorForMissingScriptAndPolicy(t *testing.T) {
	b := newFakeBroker(t)
	dir := t.TempDir()
	start(t, newTestAgent(t, Config{Server: b.srv.URL, CustomScript: filepath.Join(dir, "missing.sh"),
		PolicyFile: filepath.Join(dir, "policy.json")}))
	waitFor(t, "a heartbeat", func() bool { return b.heartbeatCount() >= 1 })
	h := b.lastHeartbeat()
	if !strings.Contains(h.HealthError, "missing.sh") || !strings.Contains(h.HealthError, "policy.json") {
		t.Errorf("health error %q, want both the script and the policy file named", h.HealthError)
	}
	if h.Metrics == nil || h.Metrics.CustomLoadValue != nil {
		t.Errorf("metrics %+v, want metrics without a custom value", h.Metrics)
	}
}

// TestSampleIntervalFromSettings: the broker's sampleIntervalSeconds sets
// how often metrics are sampled.
func TestSampleIntervalFromSettings(t *testing.T) {
	b := newFakeBroker(t)
	b.settings.SampleIntervalSeconds = 1
	m := &staticMetrics{}
	start(t, newTestAgent(t, Config{Server: b.srv.URL, Metrics: m}))
	// The default interval is 30 s; a third sample means the 1 s took over.
	waitFor(t, "three samples", func() bool { return m.count() >= 3 })
}

// The sample interval comes from the broker's answer: values out of any
// pool's range (5 to 3600 s, R-IDX) are brought into 1 s..1 h, so that an
// answer cannot make the agent sample (and run the custom load script,
// R-IDX3) in a tight loop, as a number of seconds that overflows a
// time.Duration to 0 or below did.
func TestSampleIntervalFromSettingsBounded(t *testing.T) {
	a := newTestAgent(t, Config{Server: "http://127.0.0.1:1"})
	for _, tt := range []struct {
		seconds int
		want    time.Duration
	}{
		{30, 30 * time.Second},
		// On 64-bit targets; a 32-bit int holds none of them, and takes
		// its largest value instead.
		{min(1<<62, math.MaxInt), time.Hour}, // × 1e9 ns overflows to 0
		{min(1<<62+1, math.MaxInt), time.Hour},
		{min(9223372037, math.MaxInt), time.Hour}, // × 1e9 ns overflows to a negative
		{86400, time.Hour},
		{1, time.Second},
		{0, time.Second}, // no value: unchanged
	} {
		a.applySettings(vdibroker.AgentSettings{SampleIntervalSeconds: tt.seconds})
		a.mu.Lock()
		got := a.sampleInterval
		a.mu.Unlock()
		if got != tt.want {
			t.Errorf("sampleIntervalSeconds %d: interval %v, want %v", tt.seconds, got, tt.want)
		}
	}
}

func TestHealthTextAndAcceptableSessions(t *testing.T) {
	got := healthText([]string{"script: exit status 1: line1\nline2", strings.Repeat("x", 600)})
	if n := len([]rune(got)); n != maxHealthText || strings.ContainsAny(got, "\n\r") {
		t.Errorf("healthText gave %d characters with control characters %v", n, strings.ContainsAny(got, "\n\r"))
	}
	if err := vdibroker.ValidateHeartbeat(&vdibroker.HeartbeatRequest{HealthError: got}); err != nil {
		t.Errorf("broker would refuse the health text: %v", err)
	}
	ok, dropped := acceptable([]vdibroker.AgentSession{
		{ID: "1", User: "alice", State: "Active"},
		{ID: "2", User: "bad\x01user", State: "Active"},
	})
	if len(ok) != 1 || ok[0].User != "alice" || len(dropped) != 1 || !strings.Contains(dropped[0], `session "2"`) {
		t.Errorf("acceptable = %v, dropped %v", ok, dropped)
	}
}

// TestNeedsTokenOrCredential: without a saved credential the token is
// required, and the error says so instead of retrying forever.
func TestNeedsTokenOrCredential(t *testing.T) {
	b := newFakeBroker(t)
	a, err := New(Config{Server: b.srv.URL, HostName: "host-01", Address: "10.0.0.1:3389", StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "no registration token") {
		t.Fatalf("Run = %v, want an error asking for the registration token", err)
	}
	for _, cfg := range []Config{
		{Server: "broker:8080", HostName: "h", Address: "a:1", RegistrationToken: "t"},
		{Server: b.srv.URL, Address: "a:1", RegistrationToken: "t"},
		{Server: b.srv.URL, HostName: "h", RegistrationToken: "t"},
		{Server: b.srv.URL, HostName: "h", Address: "a:1"},
	} {
		if _, err := New(cfg); vdibroker.ErrorCode(err) != vdibroker.EInvalid || vdibroker.ErrorField(err) == "" {
			t.Errorf("New(%+v) = %v, want InvalidArgument naming the field", cfg, err)
		}
	}
}
