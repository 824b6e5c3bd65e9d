package http_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
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
	for _, c := range []struct{ method, path, body, what string }{
		{"POST", sessions + "/sendmessage", `{"message": "back soon"}`, "the message"},
		{"POST", sessions + "/disconnect", ``, "the disconnect"},
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
