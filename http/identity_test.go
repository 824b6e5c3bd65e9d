package http_test

import (
	"context"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestRegistrationCannotTakeOverAHost (R-SEC), as an attacker holding a
// registration token of the pool: registering an existing host's name is
// refused with 409; the real agent's heartbeats go on and users are still
// sent to its address. An admin's reset lets a new machine take the name.
// A deleted host does not come back with the token it was registered
// with. A one-use token registers one host; tokens are listed without
// secrets and revoked.
func TestRegistrationCannotTakeOverAHost(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pool("idpool", nil)
	rt, err := e.admin.CreateRegistrationToken(ctx, "idpool", vhttp.RegistrationTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	e.register(rt.Token, "real-01")
	e.heartbeat("real-01")

	// The attacker: a registration token and no credential.
	attacker := vhttp.NewClient(e.urls[0], "")
	_, err = attacker.Register(ctx, &vdibroker.RegisterRequest{Token: rt.Token, HostName: "real-01", Address: "evil.example.test:3389"})
	wantCode(t, err, vdibroker.EConflict, "registered already")
	e.heartbeat("real-01") // the real agent is undisturbed
	if got := e.mustConnect("idpool", "alice"); got.Address != "real-01.example.test:3389" {
		t.Errorf("alice sent to %s after a refused takeover", got.Address)
	}

	// An admin replaces the machine: the old credential stops, a new agent registers.
	if err := e.admin.ResetRegistration(ctx, "idpool", "real-01"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.heartbeatErr("real-01", &vdibroker.HeartbeatRequest{}); vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated {
		t.Errorf("the old credential after a reset: %v, want Unauthenticated", err)
	}
	e.register(rt.Token, "real-01")
	e.heartbeat("real-01")
	// Only an admin resets: a Reader may not.
	reader, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: vdibroker.RoleReader, Subject: "audit"})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, vhttp.NewClient(e.urls[0], reader.Secret).ResetRegistration(ctx, "idpool", "real-01"), vdibroker.EPermission)

	// Deleted: not back with the token it was registered with.
	if err := e.admin.DeleteSessionHost(ctx, "idpool", "real-01", true); err != nil {
		t.Fatal(err)
	}
	_, err = attacker.Register(ctx, &vdibroker.RegisterRequest{Token: rt.Token, HostName: "real-01"})
	wantCode(t, err, vdibroker.EConflict, "was deleted")

	// A one-use token, then listing and revocation.
	once, err := e.admin.CreateRegistrationToken(ctx, "idpool", vhttp.RegistrationTokenRequest{MaxHosts: 1})
	if err != nil {
		t.Fatal(err)
	}
	e.register(once.Token, "new-01")
	_, err = attacker.Register(ctx, &vdibroker.RegisterRequest{Token: once.Token, HostName: "new-02"})
	wantCode(t, err, vdibroker.EPermission, "maxHosts")
	_, err = e.admin.CreateRegistrationToken(ctx, "idpool", vhttp.RegistrationTokenRequest{MaxHosts: -1})
	if ve := wantCode(t, err, vdibroker.EInvalid); ve.Field != "maxHosts" {
		t.Errorf("maxHosts -1: field %q", ve.Field)
	}
	list, err := e.admin.ListRegistrationTokens(ctx, "idpool")
	if err != nil || len(list) != 2 {
		t.Fatalf("registration tokens: %+v, %v; want 2", list, err)
	}
	if err := e.admin.DeleteRegistrationToken(ctx, "idpool", rt.ID); err != nil {
		t.Fatal(err)
	}
	_, err = attacker.Register(ctx, &vdibroker.RegisterRequest{Token: rt.Token, HostName: "new-03"})
	wantCode(t, err, vdibroker.EUnauthenticated)
}

// TestRogueHostCannotCaptureUsers (R-S2): one host's credential
// reports alice, whom the broker placed on another host; her next connect
// still goes to the host the broker placed her on, and the report adopts
// nothing. A user who logged on directly is adopted and marked so.
func TestRogueHostCannotCaptureUsers(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pool("rogue", map[string]any{"loadBalancerType": "DepthFirst", "maxSessionLimit": 5})
	hosts := e.addHosts("rogue", "rg", 2)
	alice := e.mustConnect("rogue", "alice") // DepthFirst: rg001
	rogue := hosts[1]
	if alice.SessionHost == rogue {
		t.Fatalf("alice placed on %s; the test wants her elsewhere", rogue)
	}
	e.heartbeat(rogue, vdibroker.AgentSession{ID: "1", User: "alice", State: vdibroker.StateActive},
		vdibroker.AgentSession{ID: "2", User: "walkin", State: vdibroker.StateActive})
	again := e.mustConnect("rogue", "alice")
	if again.SessionHost != alice.SessionHost || again.SessionID != alice.SessionID {
		t.Errorf("after a rogue report alice reconnects to %s (%s), want her session %s on %s",
			again.SessionHost, again.SessionID, alice.SessionID, alice.SessionHost)
	}
	list, err := e.admin.ListUserSessions(ctx, "rogue", vhttp.SessionQuery{SessionHost: rogue})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].User != "walkin" || !list[0].Adopted {
		t.Fatalf("sessions on the rogue host: %+v, want walkin alone, adopted", list)
	}
	// The audit trail says the host's report put it there.
	status, _, body := rawDo(t, e, "GET", "/api/v1/auditlog?action=usersession.adopt", adminToken, "")
	if status != 200 || strings.Count(string(body), `"action":"usersession.adopt"`) != 1 ||
		!strings.Contains(string(body), `"target":"hostpools/rogue/sessionhosts/`+rogue+`"`) ||
		!strings.Contains(string(body), `"id":"`+list[0].ID+`"`) || !strings.Contains(string(body), `"kind":"host"`) {
		t.Errorf("audit of the adoption: %d %s; want one usersession.adopt entry by the host listing %s", status, body, list[0].ID)
	}
}

// TestSendMessageRefusesControlCharacters: a message goes to the
// user's session, terminals included: escape sequences are refused, line
// breaks and tabs are not.
func TestSendMessageRefusesControlCharacters(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pool("msgpool", nil)
	e.addHosts("msgpool", "msgh", 1)
	us := e.mustConnect("msgpool", "alice")
	_, err := e.admin.SendMessage(ctx, "msgpool", us.SessionID, "hello \x1b[2J\x1b]0;pwned\x07")
	if ve := wantCode(t, err, vdibroker.EInvalid, "control characters"); ve.Field != "message" {
		t.Errorf("field %q, want message", ve.Field)
	}
	if _, err := e.admin.SendMessage(ctx, "msgpool", us.SessionID, "Maintenance at 18:00.\n\tSave your work."); err != nil {
		t.Errorf("a message with a line break and a tab: %v", err)
	}
}

// TestRateLimits: a host credential sending heartbeats far
// faster than an agent does gets 429 with Retry-After, and another host is
// not slowed; an address failing authentication again and again gets 429
// even for a call that would otherwise be answered.
func TestRateLimits(t *testing.T) {
	e := newEnv(t)
	e.clock.Freeze() // the buckets refill by the test's clock alone, not a slow machine's
	e.pool("ratepool", nil)
	hosts := e.addHosts("ratepool", "rate", 2)
	var limited error
	for range vhttp.HeartbeatBurst + 50 {
		if _, err := e.heartbeatErr(hosts[0], &vdibroker.HeartbeatRequest{}); err != nil {
			limited = err
			break
		}
	}
	wantCode(t, limited, vdibroker.ETooManyRequests)
	e.heartbeat(hosts[1]) // another host's heartbeats are not slowed

	forged := vhttp.NewClient(e.urls[0], "vdbt_forged")
	var err error
	for range vhttp.AuthFailureBurst + 10 {
		if _, err = forged.ListHostPools(context.Background()); vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated {
			break
		}
	}
	wantCode(t, err, vdibroker.ETooManyRequests)
}

// TestRateLimitSparesValidCredentials (review): once an address has
// failed authentication too often, its failed attempts get 429, but a
// valid token and a host's heartbeat from the same address (a proxy, a
// NAT) are still answered.
func TestRateLimitSparesValidCredentials(t *testing.T) {
	e := newEnv(t)
	e.clock.Freeze() // the buckets refill by the test's clock alone, not a slow machine's
	ctx := context.Background()
	e.pool("sparepool", nil)
	host := e.addHosts("sparepool", "spare", 1)[0]
	forged := vhttp.NewClient(e.urls[0], "vdbt_forged")
	var err error
	for range vhttp.AuthFailureBurst + 10 {
		if _, err = forged.ListHostPools(ctx); vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated {
			break
		}
	}
	wantCode(t, err, vdibroker.ETooManyRequests)
	if _, err := e.admin.ListHostPools(ctx); err != nil {
		t.Errorf("a valid token from the throttled address: %v", err)
	}
	if _, err := e.heartbeatErr(host, &vdibroker.HeartbeatRequest{}); err != nil {
		t.Errorf("a heartbeat from the throttled address: %v", err)
	}
}
