package agent

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/vdibroker/vdibroker"
)

// Fuzz targets of what reaches the agent from outside the host: the
// broker's answers (a hostile broker, or whoever answers in its name),
// the sessions file an integration writes, and the WTSINFOW Windows
// fills. None of it may crash the agent, and what it does with them must
// stay inside its bounds.

// FuzzHeartbeatAnswer feeds a heartbeat answer to the agent as a broker
// would send it: settings and commands, run against a file provider. Every
// command gets one result under its id, whose message the broker accepts
// (R-S4); the sample interval stays within its bounds (R-IDX).
func FuzzHeartbeatAnswer(f *testing.F) {
	f.Add([]byte(`{"commands":[{"id":"c1","type":"Logoff","agentSessionId":"s1"},{"id":"c2","type":"SendMessage","user":"BOB","message":"hi\n\u001b[2J"}],"settings":{"sampleIntervalSeconds":30,"useCustomScript":true}}`))
	f.Add([]byte(`{"commands":[{"id":"c1","type":"Disconnect","agentSessionId":"../../etc/passwd"},{"id":"c1","type":"Logoff","user":""}],"settings":{"sampleIntervalSeconds":4611686018427387904}}`))
	f.Add([]byte(`{"commands":[{"id":"x","type":"Reboot"}],"settings":{"sampleIntervalSeconds":-5,"heartbeatTimeoutSeconds":9223372036854775807}}`))
	f.Add([]byte(`{"commands":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var resp vdibroker.HeartbeatResponse
		if json.Unmarshal(data, &resp) != nil {
			return
		}
		dir := t.TempDir()
		path := filepath.Join(dir, "sessions.json")
		if err := os.WriteFile(path, []byte(`[{"id":"s1","user":"alice"},{"id":"s2","user":"bob"}]`), 0o644); err != nil {
			t.Fatal(err)
		}
		a := newTestAgent(t, Config{Server: "http://127.0.0.1:1", Sessions: &FileProvider{Path: path}})
		a.lastSessions, _ = a.cfg.Sessions.Sessions(t.Context())
		a.applySettings(resp.Settings)
		a.mu.Lock()
		interval := a.sampleInterval
		a.mu.Unlock()
		if interval < minSampleInterval || interval > maxSampleInterval {
			t.Fatalf("sample interval %v out of bounds", interval)
		}
		if len(resp.Commands) > 20 {
			resp.Commands = resp.Commands[:20]
		}
		for _, c := range resp.Commands {
			r := a.execute(t.Context(), c)
			if r.ID != c.ID {
				t.Fatalf("command %q: result for %q", c.ID, r.ID)
			}
			if n := utf8.RuneCountInString(r.Message); n > vdibroker.MaxTextLen {
				t.Fatalf("result message of %d characters", n)
			}
			for _, ch := range r.Message {
				if unicode.IsControl(ch) {
					t.Fatalf("result message %q with a control character", r.Message)
				}
			}
		}
		// Whatever the commands, the provider's files stay in its
		// directory: the sessions file and its messages.
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if n := e.Name(); n != "sessions.json" && n != "sessions.json.messages" {
				t.Fatalf("file %q left in the provider's directory", n)
			}
		}
	})
}

// FuzzDecodeError: any error answer is an error, and a 5xx or anything
// not the broker's error JSON stays a transport error the agent retries
// (R-SEC: the broker's answer is read within bounds, whatever it is).
func FuzzDecodeError(f *testing.F) {
	f.Add(401, []byte(`{"error":{"code":"Unauthenticated","message":"credential refused"}}`))
	f.Add(409, []byte(`{"error":{"code":"Conflict","message":"registered already"}}`))
	f.Add(502, []byte(`<html>Bad Gateway</html>`))
	f.Add(400, []byte(`{"error":{"code":""}}`))
	f.Add(403, []byte(`{"error":null}`))
	f.Fuzz(func(t *testing.T, status int, data []byte) {
		err := decodeError(status, data)
		if err == nil {
			t.Fatal("no error")
		}
		var te *transportError
		if status >= 500 && !errors.As(err, &te) {
			t.Fatalf("HTTP %d: %v, want a transport error", status, err)
		}
		if errors.As(err, &te) && utf8.RuneCountInString(te.body) > 201 {
			t.Fatalf("transport error body of %d characters", utf8.RuneCountInString(te.body))
		}
	})
}

// FuzzFileProviderSessions: whatever an integration writes to the sessions
// file, the provider reports sessions with id, user and a state the broker
// knows, or an error (R-S2).
func FuzzFileProviderSessions(f *testing.F) {
	f.Add([]byte(`[{"id":"s1","user":"alice"},{"id":"s2","user":"bob","state":"Disconnected"}]`))
	f.Add([]byte(`[{"id":"s1"}]`))
	f.Add([]byte(`{"id":"s1","user":"a"}`))
	f.Add([]byte("  \n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "sessions.json")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		list, err := (&FileProvider{Path: path}).Sessions(t.Context())
		if err != nil {
			return
		}
		for _, s := range list {
			if s.ID == "" || s.User == "" || (s.State != vdibroker.StateActive && s.State != vdibroker.StateDisconnected) {
				t.Fatalf("session %+v", s)
			}
		}
	})
}

// FuzzDecodeWTSInfo: the WTSINFOW decoder reads only inside the buffer
// (R-S2: the sessions and logon times the host reports).
func FuzzDecodeWTSInfo(f *testing.F) {
	data, err := os.ReadFile("testdata/windows/wtsinfo-session2.bin")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add(data[:wtsInfoSize-1])
	f.Add(make([]byte, wtsInfoSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := decodeWTSInfo(b)
		if err != nil {
			if len(b) >= wtsInfoSize {
				t.Fatalf("%d bytes: %v", len(b), err)
			}
			return
		}
		if utf8.RuneCountInString(info.User) > wtsInfoUserNameLen/2 || utf8.RuneCountInString(info.Domain) > wtsInfoDomainLen/2 {
			t.Fatalf("names longer than their fields: %+v", info)
		}
		_ = FiletimeTime(info.LogonTime)
	})
}
