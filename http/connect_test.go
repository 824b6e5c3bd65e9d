package http_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

func drain(t *testing.T, e *env, pool, host string, allow bool) {
	t.Helper()
	if _, err := e.admin.PatchSessionHost(context.Background(), pool, host, vhttp.SessionHostRequest{AllowNewSession: vhttp.Ptr(allow)}); err != nil {
		t.Fatalf("drain %s: %v", host, err)
	}
}

// TestConnect_RC1_ReconnectToDrainedHostOverLimit: a user with a session
// gets that session back (200, reconnect) even when its host is drained and
// the pool's limit is below the host's count.
func TestConnect_RC1_ReconnectToDrainedHostOverLimit(t *testing.T) {
	e := newEnv(t)
	e.pool("rc1", map[string]any{"maxSessionLimit": 5})
	e.addHosts("rc1", "rc1h", 2)
	first := e.mustConnect("rc1", "alice")
	if !first.Created || first.Reconnect || first.SessionID == "" || first.State != vdibroker.StatePending {
		t.Fatalf("first connect: %+v", first)
	}
	e.mustConnect("rc1", "bob")
	e.mustConnect("rc1", "carol")
	drain(t, e, "rc1", first.SessionHost, false)
	if _, err := e.admin.PatchHostPool(context.Background(), "rc1", map[string]any{"maxSessionLimit": 1}); err != nil {
		t.Fatal(err)
	}
	again := e.mustConnect("rc1", "alice")
	if again.Created || !again.Reconnect || again.SessionID != first.SessionID || again.SessionHost != first.SessionHost {
		t.Errorf("reconnect: got %+v, want session %s on %s, reconnect, 200", again, first.SessionID, first.SessionHost)
	}
}

// TestConnect_RC1_UnavailableHostEndsOldSession: when the user's host fell
// silent, the old session ends and a new placement is made.
func TestConnect_RC1_UnavailableHostEndsOldSession(t *testing.T) {
	e := newEnv(t)
	e.pool("rc1b", nil)
	hosts := e.addHosts("rc1b", "rc1bh", 2)
	drain(t, e, "rc1b", hosts[1], false)
	first := e.mustConnect("rc1b", "alice")
	if first.SessionHost != hosts[0] {
		t.Fatalf("placed on %s, want %s (the other is drained)", first.SessionHost, hosts[0])
	}
	drain(t, e, "rc1b", hosts[1], true)
	e.clock.Advance(120 * time.Second) // both silent for > 90 s
	e.heartbeat(hosts[1])              // only the second comes back
	second := e.mustConnect("rc1b", "alice")
	if !second.Created || second.SessionHost != hosts[1] || second.SessionID == first.SessionID {
		t.Fatalf("after host loss: %+v, want a new session on %s", second, hosts[1])
	}
	old, err := e.admin.GetUserSession(context.Background(), "rc1b", first.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if old.State != vdibroker.StateLoggedOff {
		t.Errorf("old session state %s, want LoggedOff", old.State)
	}
}

// TestConnect_RC2_DrainedHostsSkipped: new sessions never go to drained
// hosts.
func TestConnect_RC2_DrainedHostsSkipped(t *testing.T) {
	e := newEnv(t)
	e.pool("rc2", nil)
	hosts := e.addHosts("rc2", "rc2h", 3)
	drain(t, e, "rc2", hosts[0], false)
	drain(t, e, "rc2", hosts[2], false)
	for _, u := range []string{"u1", "u2", "u3", "u4", "u5", "u6"} {
		if r := e.mustConnect("rc2", u); r.SessionHost != hosts[1] {
			t.Errorf("%s placed on %s, want %s (the only host not drained)", u, r.SessionHost, hosts[1])
		}
	}
}

// TestConnect_RC3_UnavailableHostsSkipped: a host created by PUT is
// Unavailable until its agent registers and sends a heartbeat.
func TestConnect_RC3_UnavailableHostsSkipped(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pool("rc3", nil)
	h, err := e.admin.PutSessionHost(ctx, "rc3", "put-only", vhttp.SessionHostRequest{Address: vhttp.Ptr("10.0.0.5:3389")})
	if err != nil {
		t.Fatal(err)
	}
	if h.Status != vdibroker.StatusUnavailable || h.LoadIndex < 0 && h.LoadIndex != -1 {
		t.Errorf("new host status %s, want Unavailable", h.Status)
	}
	_, err = e.connect("rc3", "alice")
	wantCode(t, err, vdibroker.ENoCapacity, "unavailable", "increase maxSessionLimit or add session hosts")

	rt, err := e.admin.CreateRegistrationToken(ctx, "rc3", vhttp.RegistrationTokenRequest{ExpiresInSeconds: 7200})
	if err != nil {
		t.Fatal(err)
	}
	e.register(rt.Token, "put-only")
	if h, _ := e.admin.GetSessionHost(ctx, "rc3", "put-only"); h.Status != vdibroker.StatusUnavailable {
		t.Errorf("registered, no heartbeat: status %s, want Unavailable", h.Status)
	}
	e.heartbeat("put-only")
	if h, _ := e.admin.GetSessionHost(ctx, "rc3", "put-only"); h.Status != vdibroker.StatusAvailable {
		t.Errorf("after heartbeat: status %s, want Available", h.Status)
	}
	if r := e.mustConnect("rc3", "alice"); r.SessionHost != "put-only" {
		t.Errorf("placed on %s", r.SessionHost)
	}
}

// TestConnect_RP2_LoweringLimitEndsNothing: lowering maxSessionLimit below
// the hosts' counts ends no session; they just take no new one (R-C4), and
// the refusal says why (R-C5).
func TestConnect_RP2_LoweringLimitEndsNothing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pool("rp2", map[string]any{"maxSessionLimit": 10})
	e.addHosts("rp2", "rp2h", 2)
	for _, u := range []string{"a1", "a2", "a3", "a4", "a5", "a6"} {
		e.mustConnect("rp2", u)
	}
	if _, err := e.admin.PatchHostPool(ctx, "rp2", map[string]any{"maxSessionLimit": 2}); err != nil {
		t.Fatal(err)
	}
	open, err := e.admin.ListUserSessions(ctx, "rp2", vhttp.SessionQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(open) != 6 {
		t.Errorf("after lowering the limit: %d open sessions, want 6", len(open))
	}
	_, err = e.connect("rp2", "newcomer")
	wantCode(t, err, vdibroker.ENoCapacity, "maxSessionLimit 2", "increase maxSessionLimit or add session hosts")
	// Existing users still reconnect (R-C1).
	if r := e.mustConnect("rp2", "a1"); !r.Reconnect {
		t.Errorf("a1 reconnect: %+v", r)
	}
}

// TestConnect_RC5_NoCapacityMessages: 503 NoCapacity says why and what to do.
func TestConnect_RC5_NoCapacityMessages(t *testing.T) {
	e := newEnv(t)
	e.pool("rc5", map[string]any{"maxSessionLimit": 1})
	_, err := e.connect("rc5", "alice")
	wantCode(t, err, vdibroker.ENoCapacity, "no session hosts", "add session hosts")

	hosts := e.addHosts("rc5", "rc5h", 2)
	for _, h := range hosts {
		drain(t, e, "rc5", h, false)
	}
	_, err = e.connect("rc5", "alice")
	wantCode(t, err, vdibroker.ENoCapacity, "all 2 session hosts are drained")

	for _, h := range hosts {
		drain(t, e, "rc5", h, true)
	}
	e.mustConnect("rc5", "u1")
	e.mustConnect("rc5", "u2")
	_, err = e.connect("rc5", "u3")
	wantCode(t, err, vdibroker.ENoCapacity, "all 2 session hosts are at maxSessionLimit 1", "increase maxSessionLimit or add session hosts")

	// Over HTTP: 503 with the error body.
	status, ve, _ := rawDo(t, e, "POST", "/api/v1/hostpools/rc5/connect", adminToken, `{"user":"u4"}`)
	if status != http.StatusServiceUnavailable || ve == nil || ve.Code != vdibroker.ENoCapacity {
		t.Errorf("got %d %v, want 503 NoCapacity", status, ve)
	}
}

// TestConnect_RC8_DryRunStoresNothing and R-C7: a dry run answers the
// decision without a session; a real connect records its decision.
func TestConnect_RC8_DryRun_RC7_Record(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pool("rc8", map[string]any{"loadBalancerType": "DepthFirst", "maxSessionLimit": 2})
	hosts := e.addHosts("rc8", "rc8h", 2)
	for range 3 {
		dry, err := e.admin.Connect(ctx, "rc8", vhttp.ConnectRequest{User: "alice", DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		if !dry.DryRun || dry.SessionID != "" || dry.Created || dry.SessionHost != hosts[0] {
			t.Errorf("dry run: %+v", dry)
		}
	}
	open, _ := e.admin.ListUserSessions(ctx, "rc8", vhttp.SessionQuery{})
	if len(open) != 0 {
		t.Fatalf("dry runs stored %d sessions", len(open))
	}
	// R-DF2: the first host fills to the limit before the second gets one.
	var got []string
	for _, u := range []string{"u1", "u2", "u3"} {
		got = append(got, e.mustConnect("rc8", u).SessionHost)
	}
	if want := []string{hosts[0], hosts[0], hosts[1]}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("DepthFirst placement %v, want %v", got, want)
	}
	r := e.mustConnect("rc8", "u4")
	_ = r
	rec, err := e.admin.GetPlacement(ctx, "rc8", e.mustConnect("rc8", "u1").SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Chosen != hosts[0] || rec.Algorithm != "DepthFirst" || rec.User != "u1" || rec.Pool != "rc8" {
		t.Errorf("decision record: %+v", rec)
	}
	_, err = e.admin.GetPlacement(ctx, "rc8", "nosuchsession")
	wantCode(t, err, vdibroker.ENotFound)
}

// TestConnect_RDPFile: the answer carries an .rdp file with the host's
// address and the user name, in CRLF lines.
func TestConnect_RDPFile(t *testing.T) {
	e := newEnv(t)
	e.pool("rdp01", nil)
	hosts := e.addHosts("rdp01", "rdph", 1)
	r := e.mustConnect("rdp01", "CONTOSO\\alice")
	for _, line := range []string{
		"full address:s:" + hosts[0] + ".example.test:3389\r\n",
		"username:s:CONTOSO\\alice\r\n",
		"prompt for credentials:i:1\r\n",
		"screen mode id:i:2\r\n",
	} {
		if !strings.Contains(r.RDPFile, line) {
			t.Errorf("rdpFile lacks %q:\n%s", line, r.RDPFile)
		}
	}
	if r.Address != hosts[0]+".example.test:3389" {
		t.Errorf("address %q", r.Address)
	}
	// A user name with a line break cannot inject lines into the file.
	_, err := e.connect("rdp01", "eve\r\nfull address:s:evil:3389")
	wantCode(t, err, vdibroker.EInvalid)
}

// TestConnect_RC6_IdempotencyKey: the same key gets the same answer; a new
// key for the same user gets the existing session (one per user and pool).
func TestConnect_RC6_IdempotencyKey(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pool("idem", nil)
	e.addHosts("idem", "idemh", 3)
	a, err := e.admin.ConnectIdempotent(ctx, "idem", vhttp.ConnectRequest{User: "alice"}, "key-1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.admin.ConnectIdempotent(ctx, "idem", vhttp.ConnectRequest{User: "alice"}, "key-1")
	if err != nil {
		t.Fatal(err)
	}
	if !a.Created || !b.Created || a.SessionID != b.SessionID {
		t.Errorf("same key: %+v then %+v, want the same 201 answer", a, b)
	}
	c, err := e.admin.ConnectIdempotent(ctx, "idem", vhttp.ConnectRequest{User: "alice"}, "key-2")
	if err != nil {
		t.Fatal(err)
	}
	if c.Created || !c.Reconnect || c.SessionID != a.SessionID {
		t.Errorf("new key: %+v, want reconnect to %s", c, a.SessionID)
	}
	open, _ := e.admin.ListUserSessions(ctx, "idem", vhttp.SessionQuery{User: "alice"})
	if len(open) != 1 {
		t.Errorf("alice has %d sessions, want 1", len(open))
	}
}

// TestConnect_RPE_Personal: Persistent + Automatic assigns the first free
// host for good (R-PE1); Direct refuses unassigned users (R-PE2) and lets
// the assigned user in even on a drained host (R-PE4).
func TestConnect_RPE_Personal(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pool("pers", map[string]any{"hostPoolType": "Personal"})
	hosts := e.addHosts("pers", "persh", 2)
	a := e.mustConnect("pers", "alice")
	b := e.mustConnect("pers", "bob")
	if a.SessionHost != hosts[0] || b.SessionHost != hosts[1] {
		t.Errorf("R-PE1: alice on %s, bob on %s", a.SessionHost, b.SessionHost)
	}
	_, err := e.connect("pers", "carol")
	wantCode(t, err, vdibroker.ENoCapacity)
	h, _ := e.admin.GetSessionHost(ctx, "pers", hosts[0])
	if len(h.AssignedUsers) != 1 || h.AssignedUsers[0] != "alice" {
		t.Errorf("R-PE1: %s assigned %v, want [alice]", hosts[0], h.AssignedUsers)
	}

	e.pool("direct", map[string]any{"hostPoolType": "Personal", "personalDesktopAssignmentType": "Direct"})
	dh := e.addHosts("direct", "dirh", 1)
	_, err = e.connect("direct", "alice")
	wantCode(t, err, vdibroker.ENotAssigned)
	if _, err := e.admin.PatchSessionHost(ctx, "direct", dh[0], map[string]any{"assignedUsers": []string{"alice"}, "allowNewSession": false}); err != nil {
		t.Fatal(err)
	}
	if r := e.mustConnect("direct", "alice"); r.SessionHost != dh[0] {
		t.Errorf("R-PE4: assigned user on drained host: %+v", r)
	}
}

// TestConnect_Validation: the connect body is checked like every other.
func TestConnect_Validation(t *testing.T) {
	e := newEnv(t)
	e.pool("cval", nil)
	cases := []struct{ body, field string }{
		{`{}`, "user"},
		{`{"user": ""}`, "user"},
		{`{"user": "` + strings.Repeat("u", 257) + `"}`, "user"},
		{`{"user": "alice", "dryRun": "yes"}`, "dryRun"},
		{`{"user": "alice", "sessionHost": "x"}`, "sessionHost"},
		{`{"user": "alice", "extra": 1}`, "extra"},
	}
	for _, tc := range cases {
		status, ve, raw := rawDo(t, e, "POST", "/api/v1/hostpools/cval/connect", adminToken, tc.body)
		if status != 400 || ve == nil || ve.Field != tc.field {
			t.Errorf("body %s: %d %s, want 400 on field %s", tc.body, status, raw, tc.field)
		}
	}
	_, err := e.connect("nosuchpool", "alice")
	wantCode(t, err, vdibroker.ENotFound)
}

// TestConnect_RC1_ReplicaReconnectAtLimit: a user whose session another
// replica placed gets it back from this one, even with the pool full and
// the host drained (R-C1) — the replica must not answer NoCapacity from
// what it does not know.
func TestConnect_RC1_ReplicaReconnectAtLimit(t *testing.T) {
	e := newEnvWith(t, envOptions{replicas: 2}) // two servers, one store
	ctx := context.Background()
	e.pool("rep", map[string]any{"maxSessionLimit": 1})
	hosts := e.addHosts("rep", "reph", 1)
	other := e.client(1, adminToken)
	if _, err := other.Connect(ctx, "rep", vhttp.ConnectRequest{User: "warm", DryRun: true}); err != nil {
		t.Fatal(err) // replica 1 loads its view while the pool is empty
	}
	first := e.mustConnect("rep", "alice") // on replica 0
	// Drained through replica 1, so its own view says no capacity.
	if _, err := other.PatchSessionHost(ctx, "rep", hosts[0], map[string]any{"allowNewSession": false}); err != nil {
		t.Fatal(err)
	}
	got, err := other.Connect(ctx, "rep", vhttp.ConnectRequest{User: "alice"})
	if err != nil {
		t.Fatalf("alice via the other replica: %v", err)
	}
	if !got.Reconnect || got.SessionID != first.SessionID {
		t.Errorf("got %+v, want reconnect to %s", got, first.SessionID)
	}
	_, err = other.Connect(ctx, "rep", vhttp.ConnectRequest{User: "bob"})
	wantCode(t, err, vdibroker.ENoCapacity)
}
