package http_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/agent"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestCommandWarnings_RS4: a logoff, disconnect or message for a session
// whose host is Unavailable (no heartbeat within heartbeatTimeoutSeconds)
// is queued all the same, as the host may come back, but the 202 warns,
// in the body's "warnings" and a Warning header, that the host is
// Unavailable since when and gets the command when its agent reports
// again; it does. A drained host runs commands: no warning; a host whose
// agent said it is stopping (Shutdown) warns too.
func TestCommandWarnings_RS4(t *testing.T) {
	e := newEnvWith(t, envOptions{maintenance: time.Hour})
	ctx := t.Context()
	e.pool("cwp", map[string]any{"heartbeatTimeoutSeconds": 90})
	host := e.addHosts("cwp", "cwh", 1)[0]
	alice := e.mustConnect("cwp", "alice")
	e.heartbeat(host, vdibroker.AgentSession{ID: "7", User: "alice", State: "Active"})
	sessions := "/api/v1/hostpools/cwp/usersessions/" + alice.SessionID
	// command sends one and returns its warnings, from the body and the
	// Warning headers, which must agree.
	command := func(method, path, body string) []string {
		t.Helper()
		resp, ve, raw := rawDoAt(t, e.urls[0], method, path, adminToken, body)
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("%s %s: %d %+v", method, path, resp.StatusCode, ve)
		}
		var c vdibroker.Command
		if err := json.Unmarshal(raw, &c); err != nil || c.State != vdibroker.CommandQueued {
			t.Fatalf("%s %s: %s, %v; want a queued command", method, path, raw, err)
		}
		var headers []string
		for _, h := range resp.Header.Values("Warning") {
			headers = append(headers, strings.TrimSuffix(strings.TrimPrefix(h, `299 vdibroker "`), `"`))
		}
		if strings.Join(headers, "|") != strings.Join(c.Warnings, "|") {
			t.Errorf("%s %s: Warning headers %q, body's warnings %q", method, path, headers, c.Warnings)
		}
		return c.Warnings
	}

	// Drain does not stop commands: no warning.
	if _, _, raw := rawDo(t, e, "PATCH", "/api/v1/hostpools/cwp/sessionhosts/"+host, adminToken, `{"allowNewSession": false}`); !strings.Contains(string(raw), `"allowNewSession":false`) {
		t.Fatalf("drain: %s", raw)
	}
	if w := command("POST", sessions+"/sendmessage", `{"message": "drained"}`); len(w) != 0 {
		t.Errorf("message to a session on a drained, Available host: warnings %q, want none", w)
	}

	// Unavailable: queued, with the warning.
	h, err := e.admin.GetSessionHost(ctx, "cwp", host)
	if err != nil || h.LastHeartBeat == nil {
		t.Fatalf("host: %+v, %v", h, err)
	}
	last := h.LastHeartBeat.UTC()
	e.clock.Advance(91 * time.Second)
	since := last.Add(90 * time.Second).Format(time.RFC3339)
	// The disconnect and the logoff asked twice: the second is answered
	// with the one queued and writes nothing (R-S4, R-SEC), and warns as
	// the first did, as the host is no readier for it.
	for _, c := range []struct{ method, path, body, what string }{
		{"POST", sessions + "/sendmessage", `{"message": "back soon"}`, "the message"},
		{"POST", sessions + "/disconnect", ``, "the disconnect"},
		{"POST", sessions + "/disconnect", ``, "the disconnect"},
		{"DELETE", sessions, ``, "the logoff"},
		{"DELETE", sessions, ``, "the logoff"},
	} {
		want := "session host " + host + " is Unavailable since " + since + " (last heartbeat " + last.Format(time.RFC3339) + "): " +
			"queued, the host gets " + c.what + " when its agent reports again"
		if w := command(c.method, c.path, c.body); len(w) != 1 || w[0] != want {
			t.Errorf("%s %s to an Unavailable host: warnings %q, want [%q]", c.method, c.path, w, want)
		}
	}
	// The agent reports again: it gets them all.
	hb := e.heartbeat(host, vdibroker.AgentSession{ID: "7", User: "alice", State: "Active"})
	var got []string
	for _, c := range hb.Commands {
		got = append(got, c.Type)
	}
	if strings.Join(got, ",") != "SendMessage,SendMessage,Disconnect,Logoff" {
		t.Errorf("the host back gets %q; want the 4 commands queued", got)
	}
	if w := command("POST", sessions+"/sendmessage", `{"message": "all good"}`); len(w) != 0 {
		t.Errorf("message once the host reported again: warnings %q, want none", w)
	}

	// Shutdown: its agent said it is stopping.
	if _, err := e.heartbeatErr(host, &vdibroker.HeartbeatRequest{ShuttingDown: true,
		Sessions: []vdibroker.AgentSession{{ID: "7", User: "alice", State: "Active"}}}); err != nil {
		t.Fatal(err)
	}
	if w := command("POST", sessions+"/sendmessage", `{"message": "stopping"}`); len(w) != 1 || !strings.HasPrefix(w[0], "session host "+host+" is Shutdown (") {
		t.Errorf("message to a host shutting down: warnings %q, want one saying it is Shutdown", w)
	}
}

// TestHostMessage_RS4: POST .../sessionhosts/{host}/sendmessage queues one
// message for each Active and Disconnected session of the host (not its
// Pending ones, not other hosts'), answers how many, and writes one audit
// entry for the host listing at most 20 sessions; the agent gets them on
// its next heartbeat. The message is checked as a session's (400 naming
// the field); a host that is Unavailable warns (R-S4), and so does one
// with no session to message.
func TestHostMessage_RS4(t *testing.T) {
	e := newEnvWith(t, envOptions{maintenance: time.Hour})
	ctx := t.Context()
	// DepthFirst in query order: the first 25 users go to hmh001.
	e.pool("hmp", map[string]any{"loadBalancerType": "DepthFirst", "maxSessionLimit": 25})
	hosts := e.addHosts("hmp", "hmh", 3)
	var report []vdibroker.AgentSession
	for i := range 23 {
		user := fmt.Sprintf("user%02d", i+1)
		if c := e.mustConnect("hmp", user); c.SessionHost != hosts[0] {
			t.Fatalf("%s placed on %s, want %s", user, c.SessionHost, hosts[0])
		}
		switch {
		case i < 21:
			report = append(report, vdibroker.AgentSession{ID: fmt.Sprint(i + 1), User: user, State: "Active"})
		case i == 21:
			report = append(report, vdibroker.AgentSession{ID: fmt.Sprint(i + 1), User: user, State: "Disconnected"})
		} // user23 stays Pending: not logged on, nothing to show it in
	}
	e.heartbeat(hosts[0], report...)
	if _, _, raw := rawDo(t, e, "PATCH", "/api/v1/hostpools/hmp/sessionhosts/"+hosts[0], adminToken, `{"allowNewSession": false}`); !strings.Contains(string(raw), `"allowNewSession":false`) {
		t.Fatalf("drain: %s", raw)
	}
	if c := e.mustConnect("hmp", "dave"); c.SessionHost != hosts[1] {
		t.Fatalf("dave on %s, want %s", c.SessionHost, hosts[1])
	}
	e.heartbeat(hosts[1], vdibroker.AgentSession{ID: "1", User: "dave", State: "Active"})

	path := "/api/v1/hostpools/hmp/sessionhosts/" + hosts[0] + "/sendmessage"
	resp, ve, raw := rawDoAt(t, e.urls[0], "POST", path, adminToken, `{"message": "This host restarts in 10 minutes"}`)
	var m vdibroker.HostMessage
	if resp.StatusCode != http.StatusAccepted || json.Unmarshal(raw, &m) != nil || m.Queued != 22 || m.SessionHost != hosts[0] || len(m.Warnings) != 0 || resp.Header.Get("Warning") != "" {
		t.Fatalf("message to %s: %d %+v %s; want 202, 22 queued (21 Active, 1 Disconnected), no warning", hosts[0], resp.StatusCode, ve, raw)
	}
	got := map[string]string{}
	for _, c := range e.heartbeat(hosts[0], report...).Commands {
		if c.Type != vdibroker.CommandSendMessage || c.Message != "This host restarts in 10 minutes" || c.AgentSessionID == "" {
			t.Errorf("command %+v", c)
		}
		got[c.User] = c.AgentSessionID
	}
	if len(got) != 22 || got["user01"] != "1" || got["user22"] != "22" || got["user23"] != "" {
		t.Errorf("the agent got messages for %v; want user01..user22, each by its own session id", got)
	}
	if hb := e.heartbeat(hosts[1], vdibroker.AgentSession{ID: "1", User: "dave", State: "Active"}); len(hb.Commands) != 0 {
		t.Errorf("another host got %+v", hb.Commands)
	}
	entries, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Action: "sessionhost.sendmessage"})
	if err != nil || len(entries) != 1 {
		t.Fatalf("audit: %d entries, %v; want one for the host", len(entries), err)
	}
	var after struct {
		Queued   int
		Sessions []struct{ ID, User, State string }
	}
	if json.Unmarshal(entries[0].After, &after) != nil || after.Queued != 22 || len(after.Sessions) != 20 || after.Sessions[0].User != "user01" {
		t.Errorf("audit entry after %s; want queued 22 and the first 20 sessions", entries[0].After)
	}

	// The message is checked as a session's: 400 naming the field.
	for _, body := range []string{`{"message": ""}`, `{}`, `{"message": "` + strings.Repeat("x", vdibroker.MaxMessageLen+1) + `"}`, `{"message": "\u001b[2J"}`} {
		resp, ve, _ := rawDoAt(t, e.urls[0], "POST", path, adminToken, body)
		if resp.StatusCode != http.StatusBadRequest || ve == nil || ve.Code != vdibroker.EInvalid || ve.Field != "message" {
			t.Errorf("body %.40s: %d %+v; want 400 InvalidArgument naming message", body, resp.StatusCode, ve)
		}
	}
	if resp, ve, _ := rawDoAt(t, e.urls[0], "POST", path, adminToken, `{"message": "x", "title": "y"}`); resp.StatusCode != http.StatusBadRequest || ve == nil || ve.Code != vdibroker.EInvalid {
		t.Errorf("unknown field: %d %+v; want 400", resp.StatusCode, ve)
	}
	if resp, ve, _ := rawDoAt(t, e.urls[0], "POST", "/api/v1/hostpools/hmp/sessionhosts/nosuch/sendmessage", adminToken, `{"message": "x"}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown host: %d %+v; want 404", resp.StatusCode, ve)
	}

	// No session to message: queued 0, and it says so.
	if m, err := e.admin.SendHostMessage(ctx, "hmp", hosts[2], "hello"); err != nil || m.Queued != 0 || len(m.Warnings) != 1 || !strings.Contains(m.Warnings[0], "no Active or Disconnected session") {
		t.Errorf("message to a host without sessions: %+v, %v; want 0 queued and a warning", m, err)
	}

	// Unavailable: queued, with the warning of R-S4.
	e.clock.Advance(91 * time.Second)
	m2, err := e.admin.SendHostMessage(ctx, "hmp", hosts[0], "restart postponed")
	if err != nil || m2.Queued != 22 || len(m2.Warnings) != 1 || !strings.HasPrefix(m2.Warnings[0], "session host "+hosts[0]+" is Unavailable since ") ||
		!strings.HasSuffix(m2.Warnings[0], "queued, the host gets the 22 messages when its agent reports again") {
		t.Errorf("message to an Unavailable host: %+v, %v; want 22 queued and the warning", m2, err)
	}
	// The same text again: every session has it queued, none again, and
	// the answer says so.
	if m3, err := e.admin.SendHostMessage(ctx, "hmp", hosts[0], "restart postponed"); err != nil || m3.Queued != 22 || m3.AlreadyQueued != 22 || m2.AlreadyQueued != 0 {
		t.Errorf("the same message again: %+v, %v (the first: %+v); want 22, all 22 queued already", m3, err, m2)
	}
	// Its audit entry counts as the answer does: queued is every session
	// shown the message, alreadyQueued how many of them had it already.
	audit, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Action: "sessionhost.sendmessage", Newest: true})
	if err != nil || len(audit) == 0 {
		t.Fatalf("audit of the host's messages: %v, %d entries", err, len(audit))
	}
	var again struct{ Queued, AlreadyQueued int }
	if err := json.Unmarshal(audit[0].After, &again); err != nil || again.Queued != 22 || again.AlreadyQueued != 22 {
		t.Errorf("the audit entry of the same message again says %s (%v), want queued 22, alreadyQueued 22 as the answer", audit[0].After, err)
	}
}

// TestHeartbeatAnswerFitsTheAgent_RS4: the agent reads at most 8 MiB of
// an answer and fails one longer whole, so a heartbeat answer carries the
// host's queued commands up to a bound and leaves the rest queued for the
// next heartbeat. Six messages of 4,096 characters (each '<', six bytes
// in JSON: 24 KiB a command) to a host of 60 sessions are 360 commands,
// about 8.9 MB: in one answer the agent could read none of them, and they
// were all lost with the logoff queued beside them, marked delivered.
// Every command reaches the agent once, in the order queued.
func TestHeartbeatAnswerFitsTheAgent_RS4(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	e.pool("big", map[string]any{"loadBalancerType": "DepthFirst", "maxSessionLimit": 100})
	host := e.addHosts("big", "bigh", 1)[0]
	var report []vdibroker.AgentSession
	var first string
	for i := range 60 {
		u := fmt.Sprintf("u%02d", i)
		c := e.mustConnect("big", u)
		if i == 0 {
			first = c.SessionID
		}
		report = append(report, vdibroker.AgentSession{ID: fmt.Sprint(i + 1), User: u, State: "Active"})
	}
	e.heartbeat(host, report...)
	for i := range 6 { // six texts: the same one again is not queued again
		if m, err := e.admin.SendHostMessage(ctx, "big", host, strings.Repeat("<", vdibroker.MaxMessageLen-1)+fmt.Sprint(i)); err != nil || m.Queued != 60 {
			t.Fatalf("host message: %+v, %v", m, err)
		}
	}
	logoff, err := e.admin.Logoff(ctx, "big", first)
	if err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	cred := e.agents[host]
	e.mu.Unlock()
	ac := &agent.Client{Server: e.urls[0], HTTP: http.DefaultClient}
	seen := map[string]bool{}
	var answers []int
	for len(seen) < 361 && len(answers) < 10 {
		res, err := ac.Heartbeat(ctx, cred, vdibroker.HeartbeatRequest{Sessions: report})
		if err != nil {
			t.Fatalf("heartbeat %d: the agent could not read the answer: %v", len(answers)+1, err)
		}
		answers = append(answers, len(res.Commands))
		for _, c := range res.Commands {
			if seen[c.ID] {
				t.Errorf("command %s delivered twice", c.ID)
			}
			seen[c.ID] = true
		}
	}
	if len(seen) != 361 || !seen[logoff.ID] || len(answers) < 2 {
		t.Errorf("the agent got %d commands in answers of %v (the logoff: %v); want the 361 queued, over several answers", len(seen), answers, seen[logoff.ID])
	}
}
