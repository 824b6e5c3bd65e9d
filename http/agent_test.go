package http_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

func sessionByUser(t *testing.T, e *env, pool, user, state string) *vdibroker.UserSession {
	t.Helper()
	list, err := e.admin.ListUserSessions(context.Background(), pool, vhttp.SessionQuery{User: user, State: state})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		t.Fatalf("%s has %d sessions in state %q, want 1: %+v", user, len(list), state, list)
	}
	return list[0]
}

// TestHeartbeatReconciliation_RS2: the agent's report drives the session
// states, synchronously: when the heartbeat is answered, the counts show it.
func TestHeartbeatReconciliation_RS2(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pool("rs2", map[string]any{"loadBalancing": map[string]any{"sampleIntervalSeconds": 15}})
	host := e.addHosts("rs2", "rs2h", 1)[0]
	c := e.mustConnect("rs2", "alice")

	// Pending seen -> Active, with the agent's id.
	hb := e.heartbeat(host, vdibroker.AgentSession{ID: "7", User: "alice", State: "Active"})
	if hb.Settings.SampleIntervalSeconds != 15 || hb.Settings.HeartbeatTimeoutSeconds != 90 {
		t.Errorf("heartbeat settings %+v", hb.Settings)
	}
	s := sessionByUser(t, e, "rs2", "alice", "")
	if s.ID != c.SessionID || s.State != vdibroker.StateActive || s.AgentSessionID != "7" {
		t.Errorf("after Active report: %+v", s)
	}
	// Reported disconnected -> Disconnected; a reconnect answers it (R-C1).
	e.heartbeat(host, vdibroker.AgentSession{ID: "7", User: "alice", State: "Disconnected"})
	if s := sessionByUser(t, e, "rs2", "alice", ""); s.State != vdibroker.StateDisconnected {
		t.Errorf("after Disconnected report: %s", s.State)
	}
	if r := e.mustConnect("rs2", "alice"); !r.Reconnect || r.SessionID != c.SessionID || r.State != vdibroker.StateDisconnected {
		t.Errorf("reconnect to disconnected session: %+v", r)
	}
	// Unknown user -> adopted.
	e.heartbeat(host,
		vdibroker.AgentSession{ID: "7", User: "alice", State: "Active"},
		vdibroker.AgentSession{ID: "8", User: "bob", State: "Active"})
	if s := sessionByUser(t, e, "rs2", "bob", ""); s.State != vdibroker.StateActive || s.SessionHost != host {
		t.Errorf("adopted session: %+v", s)
	}
	if h, _ := e.admin.GetSessionHost(ctx, "rs2", host); h.Sessions != 2 {
		t.Errorf("host sessions %d, want 2", h.Sessions)
	}
	// A heartbeat whose sessions are unknown (the agent's provider failed
	// before it ever listed them) changes none: alice and bob stay Active.
	if _, err := e.heartbeatErr(host, &vdibroker.HeartbeatRequest{SessionsUnknown: true, HealthError: "loginctl: exit status 1"}); err != nil {
		t.Fatal(err)
	}
	if open, _ := e.admin.ListUserSessions(ctx, "rs2", vhttp.SessionQuery{}); len(open) != 2 {
		t.Errorf("after a heartbeat of unknown sessions: %d open sessions, want alice's and bob's", len(open))
	}
	// No longer reported -> LoggedOff; the placement view sees the freed
	// slot at once.
	e.heartbeat(host)
	open, _ := e.admin.ListUserSessions(ctx, "rs2", vhttp.SessionQuery{})
	if len(open) != 0 {
		t.Errorf("after empty report: %d open sessions", len(open))
	}
	ended := sessionByUser(t, e, "rs2", "alice", vdibroker.StateLoggedOff)
	if ended.ID != c.SessionID {
		t.Errorf("ended session %s, want %s", ended.ID, c.SessionID)
	}
	if h, _ := e.admin.GetSessionHost(ctx, "rs2", host); h.Sessions != 0 {
		t.Errorf("host sessions %d, want 0", h.Sessions)
	}
	if _, err := e.admin.PatchHostPool(ctx, "rs2", map[string]any{"maxSessionLimit": 1}); err != nil {
		t.Fatal(err)
	}
	if r := e.mustConnect("rs2", "carol"); !r.Created {
		t.Errorf("carol: %+v", r)
	}
}

// TestLogoffOfPendingSessionSaysEnded_RS4: the answer of a logoff says
// whether it ended the session at once ("sessionEnded": a Pending session
// its agent never reported, R-S4), so that a client says "logged off",
// not "its agent runs it"; a logoff of a session the agent reported says
// nothing of it, and the agent is never sent the field.
func TestLogoffOfPendingSessionSaysEnded_RS4(t *testing.T) {
	e := newEnv(t)
	e.pool("rs4p", nil)
	host := e.addHosts("rs4p", "rs4p", 1)[0]
	pending := e.mustConnect("rs4p", "alice")
	status, _, raw := rawDo(t, e, "DELETE", "/api/v1/hostpools/rs4p/usersessions/"+pending.SessionID, adminToken, "")
	if status != http.StatusAccepted || !strings.Contains(string(raw), `"sessionEnded":true`) {
		t.Errorf("logoff of a Pending session: %d %s; want 202 with sessionEnded true", status, raw)
	}
	active := e.mustConnect("rs4p", "bob")
	delivered := e.heartbeat(host, vdibroker.AgentSession{ID: "7", User: "bob", State: "Active"}).Commands // alice's Logoff
	status, _, raw = rawDo(t, e, "DELETE", "/api/v1/hostpools/rs4p/usersessions/"+active.SessionID, adminToken, "")
	if status != http.StatusAccepted || strings.Contains(string(raw), "sessionEnded") {
		t.Errorf("logoff of an Active session: %d %s; want 202 without sessionEnded", status, raw)
	}
	delivered = append(delivered, e.heartbeat(host, vdibroker.AgentSession{ID: "7", User: "bob", State: "Active"}).Commands...)
	if len(delivered) != 2 || slices.ContainsFunc(delivered, func(c vdibroker.Command) bool { return c.SessionEnded }) {
		t.Errorf("delivered: %+v; want the two Logoffs, neither with SessionEnded", delivered)
	}
}

// TestSessionCommands_RS4: logoff, disconnect and messages are queued (202)
// and delivered on the host's next heartbeat.
func TestSessionCommands_RS4(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pool("rs4", nil)
	host := e.addHosts("rs4", "rs4h", 1)[0]
	c := e.mustConnect("rs4", "alice")
	e.heartbeat(host, vdibroker.AgentSession{ID: "42", User: "alice", State: "Active"})

	if _, err := e.admin.SendMessage(ctx, "rs4", c.SessionID, "maintenance at 18:00"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.Disconnect(ctx, "rs4", c.SessionID); err != nil {
		t.Fatal(err)
	}
	cmd, err := e.admin.Logoff(ctx, "rs4", c.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if cmd.Type != vdibroker.CommandLogoff || cmd.State != vdibroker.CommandQueued || cmd.AgentSessionID != "42" {
		t.Errorf("logoff command %+v", cmd)
	}
	hb := e.heartbeat(host, vdibroker.AgentSession{ID: "42", User: "alice", State: "Active"})
	types := map[string]vdibroker.Command{}
	for _, c := range hb.Commands {
		types[c.Type] = c
	}
	if len(hb.Commands) != 3 || types[vdibroker.CommandSendMessage].Message != "maintenance at 18:00" ||
		types[vdibroker.CommandLogoff].AgentSessionID != "42" || types[vdibroker.CommandDisconnect].SessionID != c.SessionID {
		t.Errorf("delivered commands %+v", hb.Commands)
	}
	// Delivered once: the next heartbeat carries the results, no commands.
	res := []vdibroker.CommandResult{}
	for _, c := range hb.Commands {
		res = append(res, vdibroker.CommandResult{ID: c.ID, Success: true})
	}
	hb2, err := e.heartbeatErr(host, &vdibroker.HeartbeatRequest{Results: res})
	if err != nil {
		t.Fatal(err)
	}
	if len(hb2.Commands) != 0 {
		t.Errorf("commands delivered twice: %+v", hb2.Commands)
	}
	// The agent logged alice off: the session is over, ended by the
	// admin's logoff, not unseen (NotReported); commands on it conflict.
	if s, err := e.admin.GetUserSession(ctx, "rs4", c.SessionID); err != nil || s.State != vdibroker.StateLoggedOff || s.EndReason != vdibroker.EndLoggedOffByAdmin {
		t.Errorf("after the agent's logoff: %+v, %v; want LoggedOff LoggedOffByAdmin", s, err)
	}
	// A user who logs off alone, with no logoff asked, is NotReported.
	bob := e.mustConnect("rs4", "bob")
	e.heartbeat(host, vdibroker.AgentSession{ID: "43", User: "bob", State: "Active"})
	e.heartbeat(host)
	if s, err := e.admin.GetUserSession(ctx, "rs4", bob.SessionID); err != nil || s.EndReason != vdibroker.EndNotReported {
		t.Errorf("bob's own logoff: %+v, %v; want NotReported", s, err)
	}
	_, err = e.admin.Disconnect(ctx, "rs4", c.SessionID)
	wantCode(t, err, vdibroker.EConflict)
	_, err = e.admin.SendMessage(ctx, "rs4", c.SessionID, "")
	wantCode(t, err, vdibroker.EInvalid)
	_, err = e.admin.Logoff(ctx, "rs4", "nosuch")
	wantCode(t, err, vdibroker.ENotFound)
}

// TestPendingTimeout_RS3: a Pending session the agent never reports ends
// after pendingTimeoutSeconds, and its slot is free again.
func TestPendingTimeout_RS3(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pool("rs3", map[string]any{"maxSessionLimit": 1, "pendingTimeoutSeconds": 60})
	host := e.addHosts("rs3", "rs3h", 1)[0]
	first := e.mustConnect("rs3", "alice")
	_, err := e.connect("rs3", "bob")
	wantCode(t, err, vdibroker.ENoCapacity)
	e.clock.Advance(61 * time.Second)
	e.heartbeat(host)
	s, err := e.admin.GetUserSession(ctx, "rs3", first.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if s.State != vdibroker.StateLoggedOff || s.EndReason != "PendingTimeout" {
		t.Errorf("after timeout: %+v, want LoggedOff PendingTimeout", s)
	}
	if r := e.mustConnect("rs3", "bob"); !r.Created {
		t.Errorf("bob after timeout: %+v", r)
	}
}

// TestRegisterAndCredentials_RSEC: registration tokens expire and are range
// checked; each host's credential works for that host only and dies with
// the host; the agent re-keys its host with its current credential.
func TestRegisterAndCredentials_RSEC(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pool("sec", nil)
	for _, secs := range []int{3599, 2332801, -1} {
		_, err := e.admin.CreateRegistrationToken(ctx, "sec", vhttp.RegistrationTokenRequest{ExpiresInSeconds: secs})
		if ve := wantCode(t, err, vdibroker.EInvalid, "3600..2332800"); ve.Field != "expiresInSeconds" {
			t.Errorf("field %q", ve.Field)
		}
	}
	rt, err := e.admin.CreateRegistrationToken(ctx, "sec", vhttp.RegistrationTokenRequest{ExpiresInSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}
	if d := rt.ExpirationTime.Sub(e.clock.Now()); d < 3590*time.Second || d > 3600*time.Second {
		t.Errorf("expirationTime in %s, want 1h", d)
	}
	_, err = e.admin.Register(ctx, &vdibroker.RegisterRequest{Token: "wrong", HostName: "sech1"})
	wantCode(t, err, vdibroker.EUnauthenticated)
	_, err = e.admin.Register(ctx, &vdibroker.RegisterRequest{Token: rt.Token, HostName: "x"})
	wantCode(t, err, vdibroker.EInvalid, "3..48")
	_, err = e.admin.Register(ctx, &vdibroker.RegisterRequest{Token: rt.Token, HostName: "sech1", Address: "nohostport"})
	wantCode(t, err, vdibroker.EInvalid, "host:port")
	_, err = e.admin.Register(ctx, &vdibroker.RegisterRequest{Token: rt.Token, HostName: "sech1", Protocols: []string{"VNC"}})
	wantCode(t, err, vdibroker.EInvalid, "RDP, PCoIP, Blast")

	cred1 := e.register(rt.Token, "sech1")
	e.heartbeat("sech1")
	rk, err := e.admin.ReKey(ctx, cred1, &vdibroker.RegisterRequest{Token: rt.Token, HostName: "sech1", Address: "sech1.example.test:3389"})
	if err != nil {
		t.Fatalf("re-key with the current credential: %v", err)
	}
	cred2 := rk.Credential
	if cred1 == cred2 {
		t.Fatal("re-register returned the same credential")
	}
	_, err = e.admin.Heartbeat(ctx, cred1, &vdibroker.HeartbeatRequest{})
	wantCode(t, err, vdibroker.EUnauthenticated)
	if _, err := e.admin.Heartbeat(ctx, cred2, &vdibroker.HeartbeatRequest{}); err != nil {
		t.Errorf("new credential: %v", err)
	}
	// An API token is not a host credential.
	_, err = e.admin.Heartbeat(ctx, adminToken, &vdibroker.HeartbeatRequest{})
	wantCode(t, err, vdibroker.EUnauthenticated)
	// Bad heartbeat bodies are refused with the field.
	_, err = e.admin.Heartbeat(ctx, cred2, &vdibroker.HeartbeatRequest{Sessions: []vdibroker.AgentSession{{ID: "1", User: "a", State: "Running"}}})
	if ve := wantCode(t, err, vdibroker.EInvalid, "Active, Disconnected"); ve.Field != "sessions[0].state" {
		t.Errorf("field %q", ve.Field)
	}
	_, err = e.admin.Heartbeat(ctx, cred2, &vdibroker.HeartbeatRequest{Metrics: &vdibroker.Metrics{CPUPercent: 140}})
	wantCode(t, err, vdibroker.EInvalid, "metrics.cpuPercent")

	// Deleting the host: 409 with sessions, force revokes the credential.
	e.mustConnect("sec", "alice")
	wantCode(t, e.admin.DeleteSessionHost(ctx, "sec", "sech1", false), vdibroker.EConflict)
	if err := e.admin.DeleteSessionHost(ctx, "sec", "sech1", true); err != nil {
		t.Fatal(err)
	}
	_, err = e.admin.Heartbeat(ctx, cred2, &vdibroker.HeartbeatRequest{})
	wantCode(t, err, vdibroker.EUnauthenticated)
	_, err = e.connect("sec", "bob")
	wantCode(t, err, vdibroker.ENoCapacity, "no session hosts")

	// Registration tokens expire.
	e.clock.Advance(3601 * time.Second)
	_, err = e.admin.Register(ctx, &vdibroker.RegisterRequest{Token: rt.Token, HostName: "sech2"})
	wantCode(t, err, vdibroker.EUnauthenticated)
}

// TestSessionHostAPI_SPEC9: PUT/PATCH/GET of hosts with their validation;
// PATCH takes only the four admin fields.
func TestSessionHostAPI_SPEC9(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pool("hostapi", nil)
	h, err := e.admin.PutSessionHost(ctx, "hostapi", "rdsh01", vhttp.SessionHostRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !h.AllowNewSession || !h.StandardFeatures || h.Status != vdibroker.StatusUnavailable || len(h.Protocols) != 1 {
		t.Errorf("defaults: %+v", h)
	}
	bad := []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"address": "nohostport"}, "address"},
		{map[string]any{"address": "host:70000"}, "address"},
		{map[string]any{"assignedUsers": []string{"alice"}}, "assignedUsers"}, // Pooled pool
		{map[string]any{"protocols": []string{"RDP"}}, "protocols"},
		{map[string]any{"status": "Available"}, "status"},
		{map[string]any{"allowNewSession": "no"}, "allowNewSession"},
	}
	for _, b := range bad {
		_, err := e.admin.PatchSessionHost(ctx, "hostapi", "rdsh01", b.body)
		if ve := wantCode(t, err, vdibroker.EInvalid); ve.Field != b.field {
			t.Errorf("PATCH %v: field %q, want %q", b.body, ve.Field, b.field)
		}
	}
	_, err = e.admin.PutSessionHost(ctx, "hostapi", "x!", vhttp.SessionHostRequest{})
	wantCode(t, err, vdibroker.EInvalid, "3..48")
	_, err = e.admin.PutSessionHost(ctx, "hostapi", "rdsh02", vhttp.SessionHostRequest{Protocols: &[]string{"RDP", "RDP"}})
	wantCode(t, err, vdibroker.EInvalid, "twice")
	got, err := e.admin.PatchSessionHost(ctx, "hostapi", "rdsh01", map[string]any{"address": "[2001:db8::1]:3389", "standardFeatures": false})
	if err != nil {
		t.Fatal(err)
	}
	if got.Address != "[2001:db8::1]:3389" || got.StandardFeatures || !got.AllowNewSession {
		t.Errorf("after PATCH: %+v", got)
	}
	// PUT without an address keeps it.
	got, err = e.admin.PutSessionHost(ctx, "hostapi", "rdsh01", vhttp.SessionHostRequest{AllowNewSession: vhttp.Ptr(false)})
	if err != nil {
		t.Fatal(err)
	}
	if got.Address != "[2001:db8::1]:3389" || got.AllowNewSession || !got.StandardFeatures {
		t.Errorf("after PUT: %+v", got)
	}
	_, err = e.admin.GetSessionHost(ctx, "hostapi", "nosuch")
	wantCode(t, err, vdibroker.ENotFound)
	_, err = e.admin.PutSessionHost(ctx, "nosuchpool", "rdsh01", vhttp.SessionHostRequest{})
	wantCode(t, err, vdibroker.ENotFound)
}

// TestDisconnectedTimeout_RS5: a session disconnected longer than the
// pool's disconnectedSessionTimeoutMinutes gets a Logoff command on the
// host's next heartbeat.
func TestDisconnectedTimeout_RS5(t *testing.T) {
	e := newEnv(t)
	e.pool("rs5", map[string]any{"disconnectedSessionTimeoutMinutes": 1})
	host := e.addHosts("rs5", "rs5h", 1)[0]
	c := e.mustConnect("rs5", "alice")
	e.heartbeat(host, vdibroker.AgentSession{ID: "9", User: "alice", State: "Disconnected"})
	if hb := e.heartbeat(host, vdibroker.AgentSession{ID: "9", User: "alice", State: "Disconnected"}); len(hb.Commands) != 0 {
		t.Fatalf("logoff before the timeout: %+v", hb.Commands)
	}
	e.clock.Advance(61 * time.Second)
	hb := e.heartbeat(host, vdibroker.AgentSession{ID: "9", User: "alice", State: "Disconnected"})
	if len(hb.Commands) != 1 || hb.Commands[0].Type != vdibroker.CommandLogoff || hb.Commands[0].SessionID != c.SessionID || hb.Commands[0].AgentSessionID != "9" {
		t.Errorf("after 61 s disconnected: commands %+v, want one Logoff of %s", hb.Commands, c.SessionID)
	}
	// The agent logs alice off: her session ended by the broker's logoff.
	e.heartbeat(host)
	if s, err := e.admin.GetUserSession(context.Background(), "rs5", c.SessionID); err != nil || s.EndReason != vdibroker.EndDisconnectedTimeout {
		t.Errorf("after the R-S5 logoff: %+v, %v; want LoggedOff DisconnectedTimeout", s, err)
	}
}

// TestOversizedHeartbeatRefused: a heartbeat with more results
// or sessions than a host can have is refused with 400 naming the field,
// instead of becoming tens of thousands of writes in the shared batch.
func TestOversizedHeartbeatRefused(t *testing.T) {
	e := newEnv(t)
	e.pool("bighb", nil)
	host := e.addHosts("bighb", "bighb", 1)[0]
	results := make([]vdibroker.CommandResult, vdibroker.MaxHeartbeatResults+1)
	for i := range results {
		results[i] = vdibroker.CommandResult{ID: fmt.Sprint("c", i)}
	}
	_, err := e.heartbeatErr(host, &vdibroker.HeartbeatRequest{Results: results})
	if ve := wantCode(t, err, vdibroker.EInvalid, fmt.Sprint(vdibroker.MaxHeartbeatResults)); ve.Field != "results" {
		t.Errorf("field %q, want results", ve.Field)
	}
	sessions := make([]vdibroker.AgentSession, vdibroker.MaxHeartbeatSessions+1)
	for i := range sessions {
		sessions[i] = vdibroker.AgentSession{ID: fmt.Sprint(i), User: fmt.Sprint("u", i), State: vdibroker.StateActive}
	}
	_, err = e.heartbeatErr(host, &vdibroker.HeartbeatRequest{Sessions: sessions})
	if ve := wantCode(t, err, vdibroker.EInvalid); ve.Field != "sessions" {
		t.Errorf("field %q, want sessions", ve.Field)
	}
	if _, err := e.heartbeatErr(host, &vdibroker.HeartbeatRequest{Results: results[:vdibroker.MaxHeartbeatResults]}); err != nil {
		t.Errorf("a heartbeat at the cap: %v", err)
	}
}

// TestHeartbeatIDsWithoutControlCharacters: a host's own session ids and
// command result ids are the host's word, stored, answered by the API
// (agentSessionId) and recorded in adoption audit entries (R-S2); one
// holding a control character (ESC starts a terminal's escape sequence)
// is refused with its field and the allowed range, and nothing of the
// heartbeat is applied (R-SEC).
func TestHeartbeatIDsWithoutControlCharacters(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pool("ctlid", nil)
	host := e.addHosts("ctlid", "ctlid", 1)[0]
	for _, c := range []struct {
		name, field string
		hb          vdibroker.HeartbeatRequest
	}{
		{"session id with ESC", "sessions[0].id", vdibroker.HeartbeatRequest{Sessions: []vdibroker.AgentSession{
			{ID: "3\x1b[2J", User: "mallory", State: vdibroker.StateActive}}}},
		{"session id with a C1 CSI", "sessions[1].id", vdibroker.HeartbeatRequest{Sessions: []vdibroker.AgentSession{
			{ID: "4", User: "bob", State: vdibroker.StateActive}, {ID: "5\u009b31m", User: "mallory", State: vdibroker.StateActive}}}},
		{"session id with a line break", "sessions[0].id", vdibroker.HeartbeatRequest{Sessions: []vdibroker.AgentSession{
			{ID: "6\nforged", User: "mallory", State: vdibroker.StateActive}}}},
		{"result id with ESC", "results[0].id", vdibroker.HeartbeatRequest{Results: []vdibroker.CommandResult{{ID: "c\x1b]0;x\x07"}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := e.heartbeatErr(host, &c.hb)
			if ve := wantCode(t, err, vdibroker.EInvalid, "control characters", fmt.Sprint(vdibroker.MaxUserLen)); ve.Field != c.field {
				t.Errorf("field %q, want %s", ve.Field, c.field)
			}
		})
	}
	if open, err := e.admin.ListUserSessions(ctx, "ctlid", vhttp.SessionQuery{}); err != nil || len(open) != 0 {
		t.Errorf("sessions after refused heartbeats: %v %+v, want none", err, open)
	}
	// The same ids without the control characters are taken.
	if _, err := e.heartbeatErr(host, &vdibroker.HeartbeatRequest{Sessions: []vdibroker.AgentSession{
		{ID: "3", User: "mallory", State: vdibroker.StateActive}}}); err != nil {
		t.Fatalf("a plain session id: %v", err)
	}
}

// TestRepeatedCommandQueuedOnce (R-S4, R-U3, R-SEC): an end user may log
// off and disconnect her own sessions, within her write budget; a logoff
// or disconnect already queued for the session and not yet delivered is
// the answer to the same command asked again, not one more row. Each
// was a command row (never pruned while queued) and one more command in
// the host's next heartbeat answer: a User token looping on her session
// on a host whose agent is away wrote rows without bound and had the
// host handed them all when it came back. Each ask is still an audit
// entry naming the one command, before and after alike: a helpdesk
// reading the trail sees every time she asked (her budget bounds them).
func TestRepeatedCommandQueuedOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pool := uniq("rs4q")
	e.pool(pool, nil)
	e.desktopFor(pool, vdibroker.Assignments{Users: []string{"alice"}})
	host := e.addHosts(pool, pool+"h", 1)[0]
	c := e.mustConnect(pool, "alice")
	e.heartbeat(host, vdibroker.AgentSession{ID: "42", User: "alice", State: "Active"})
	alice := e.client(0, e.userToken("alice", nil))
	var first [2]string
	const rounds = vhttp.UserWriteBurst/2 - 1 // two writes each, and one more: within her budget
	for i := range rounds {
		d, err := alice.Disconnect(ctx, pool, c.SessionID)
		if err != nil {
			t.Fatal(err)
		}
		l, err := alice.Logoff(ctx, pool, c.SessionID)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = [2]string{d.ID, l.ID}
		} else if d.ID != first[0] || l.ID != first[1] {
			t.Errorf("asked again, answered commands %s and %s, want the queued %s and %s", d.ID, l.ID, first[0], first[1])
		}
	}
	hb := e.heartbeat(host, vdibroker.AgentSession{ID: "42", User: "alice", State: "Active"})
	if len(hb.Commands) != 2 {
		t.Errorf("the host was handed %d commands, want the disconnect and the logoff once each", len(hb.Commands))
	}
	list, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Action: "usersession.logoff", Target: "hostpools/" + pool + "/usersessions/" + c.SessionID})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != rounds {
		t.Errorf("%d audit entries of her logoffs, want %d, one an ask", len(list), rounds)
	}
	for i, a := range list {
		var before, after vdibroker.Command
		if json.Unmarshal(a.Before, &before) != nil || json.Unmarshal(a.After, &after) != nil || after.ID != first[1] ||
			(i > 0 && before.ID != first[1]) || a.Principal.Name != "alice" || a.Outcome != vdibroker.AuditOK {
			t.Errorf("audit entry %d of her logoffs: %s by %+v, before %s after %s; want the queued %s", i, a.Outcome, a.Principal, a.Before, a.After, first[1])
		}
	}
	// Delivered, it may be asked again (the agent may not have run it).
	l, err := alice.Logoff(ctx, pool, c.SessionID)
	if err != nil || l.ID == first[1] {
		t.Errorf("a logoff asked after the first was delivered: %+v, %v; want a new command", l, err)
	}
}

// TestHeartbeatBucketsOnlyForHosts (R-SEC): the heartbeat rate limit is
// kept per host credential, at most 65,536 buckets, past which every new
// key shares one overflow bucket. A bucket was made for any bearer value
// before it was checked: an anonymous caller sending heartbeats of made-up
// credentials filled the map, and the real hosts whose buckets had been
// swept (full ones are, every second) were then throttled in the shared
// bucket it drained, 429 to their heartbeats. Only a host's credential
// has a bucket.
func TestHeartbeatBucketsOnlyForHosts(t *testing.T) {
	e := newEnv(t)
	pool := uniq("hbb")
	e.pool(pool, nil)
	host := e.addHosts(pool, pool+"h", 1)[0]
	before := vhttp.HeartbeatBuckets(e.srvs[0].Server)
	for i := range 100 {
		_, err := e.admin.Heartbeat(context.Background(), fmt.Sprintf("vdbh_madeup%04d", i), &vdibroker.HeartbeatRequest{})
		if c := vdibroker.ErrorCode(err); c != vdibroker.EUnauthenticated && c != vdibroker.ETooManyRequests {
			t.Fatalf("a made-up credential's heartbeat: %v", err)
		}
	}
	if n := vhttp.HeartbeatBuckets(e.srvs[0].Server) - before; n != 0 {
		t.Errorf("100 made-up credentials made %d heartbeat buckets, want none", n)
	}
	e.heartbeat(host)
}
