package http_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestOutageStateGoesWithItsHost_RSEC (R-SEC, R-OUT1): what a replica
// keeps of a host for a store outage (the users of its last report, its
// held heartbeat) is the host's agent's word. A host deleted, or whose
// registration an admin reset (a new machine takes its name), takes it
// with it, and a deleted pool takes its hosts'; before, it stayed until
// the map reset at 131,072 hosts, each holding up to some 4.5 MB.
func TestOutageStateGoesWithItsHost_RSEC(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pa, pb := uniq("oa"), uniq("ob")
	e.pool(pa, nil)
	e.pool(pb, nil)
	hosts := e.addHosts(pa, "oah", 3)
	other := e.addHosts(pb, "obh", 2)
	for _, h := range append(hosts, other...) {
		e.heartbeat(h, vdibroker.AgentSession{ID: "1", User: "user-of-" + h, State: vdibroker.StateActive})
	}
	svc := e.srvs[0].Broker
	state := func() int {
		t.Helper()
		st := svc.OutageState()
		if st.ReportedHosts > 0 && st.ReportBytes <= 0 {
			t.Errorf("%d hosts' reports hold %d bytes", st.ReportedHosts, st.ReportBytes)
		}
		return st.ReportedHosts
	}
	if got := state(); got != 5 {
		t.Fatalf("%d hosts' reports kept, want 5", got)
	}
	// Deleted (it has an adopted session: forced).
	if err := e.admin.DeleteSessionHost(ctx, pa, hosts[0], true); err != nil {
		t.Fatal(err)
	}
	if got := state(); got != 4 {
		t.Errorf("after %s's delete %d hosts' reports kept, want 4", hosts[0], got)
	}
	// Its registration reset: the next machine to register the name is
	// another.
	if err := e.admin.ResetRegistration(ctx, pa, hosts[1]); err != nil {
		t.Fatal(err)
	}
	if got := state(); got != 3 {
		t.Errorf("after %s's reset %d hosts' reports kept, want 3", hosts[1], got)
	}
	// Its old credential is refused and writes nothing.
	if _, err := e.heartbeatErr(hosts[1], &vdibroker.HeartbeatRequest{Sessions: []vdibroker.AgentSession{{ID: "2", User: "x", State: vdibroker.StateActive}}}); vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated {
		t.Errorf("the reset host's old credential: %v, want Unauthenticated", err)
	}
	if got := state(); got != 3 {
		t.Errorf("after the old credential's heartbeat %d hosts' reports kept, want 3", got)
	}
	if _, err := e.admin.DeleteHostPool(ctx, pb, true); err != nil {
		t.Fatal(err)
	}
	if got := state(); got != 1 {
		t.Errorf("after the other pool's delete %d hosts' reports kept, want %s's alone", got, hosts[2])
	}
}

// TestRegistrationTokenReach_RSEC (R-SEC): what a registration token can
// do past its life and its pool, as an attacker holding one (or an
// agent's stolen state: its token and its host's credential) tries it.
//   - An expired or revoked token re-keys nothing, not even with the
//     host's current credential (a retry of an agent's registration is
//     a registration: the token is checked first).
//   - A deleted pool's token registers nothing in a pool made again
//     under its name.
//   - A token of pool A naming pool B's host makes a host of that name
//     in A; B's host, its credential and its sessions are untouched.
//   - A one-use token re-keys its own host with the host's credential
//     (no new host), and registers no second name.
func TestRegistrationTokenReach_RSEC(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pa, pb := uniq("rta"), uniq("rtb")
	e.pool(pa, nil)
	e.pool(pb, nil)
	short, err := e.admin.CreateRegistrationToken(ctx, pa, vdibroker.RegistrationTokenRequest{ExpiresInSeconds: 3600, MaxHosts: 1})
	if err != nil {
		t.Fatal(err)
	}
	cred := e.register(short.Token, "rta-h1")
	e.heartbeat("rta-h1")
	// One use: a second name is refused, the host's own re-key is not.
	_, err = e.admin.Register(ctx, &vdibroker.RegisterRequest{Token: short.Token, HostName: "rta-h2", Address: "rta-h2.example.test:3389"})
	wantCode(t, err, vdibroker.EPermission, "maxHosts")
	rk, err := e.admin.ReKey(ctx, cred, &vdibroker.RegisterRequest{Token: short.Token, HostName: "rta-h1", Address: "rta-h1.example.test:3389"})
	if err != nil {
		t.Fatalf("re-key with the host's credential and its used one-use token: %v", err)
	}
	cred = rk.Credential
	// Expired: no re-key, even with the current credential; the
	// credential still works.
	e.clock.Advance(3601 * time.Second)
	_, err = e.admin.ReKey(ctx, cred, &vdibroker.RegisterRequest{Token: short.Token, HostName: "rta-h1", Address: "rta-h1.example.test:3389"})
	wantCode(t, err, vdibroker.EUnauthenticated)
	if _, err := e.admin.Heartbeat(ctx, cred, &vdibroker.HeartbeatRequest{}); err != nil {
		t.Errorf("the host's credential after a refused re-key: %v", err)
	}
	// Revoked: the same.
	rev, err := e.admin.CreateRegistrationToken(ctx, pa, vdibroker.RegistrationTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.admin.DeleteRegistrationToken(ctx, pa, rev.ID); err != nil {
		t.Fatal(err)
	}
	_, err = e.admin.ReKey(ctx, cred, &vdibroker.RegisterRequest{Token: rev.Token, HostName: "rta-h1", Address: "rta-h1.example.test:3389"})
	wantCode(t, err, vdibroker.EUnauthenticated)
	_, err = e.admin.Register(ctx, &vdibroker.RegisterRequest{Token: rev.Token, HostName: "rta-h3", Address: "rta-h3.example.test:3389"})
	wantCode(t, err, vdibroker.EUnauthenticated)

	// A token of pool A naming pool B's host.
	hb := e.addHosts(pb, "rtb-h", 1)[0]
	alice := e.mustConnect(pb, "alice")
	e.heartbeat(hb, vdibroker.AgentSession{ID: "7", User: "alice", State: vdibroker.StateActive})
	ta, err := e.admin.CreateRegistrationToken(ctx, pa, vdibroker.RegistrationTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.admin.Register(ctx, &vdibroker.RegisterRequest{Token: ta.Token, HostName: hb, Address: "evil.example.test:3389"})
	if err != nil || got.HostPool != pa {
		t.Fatalf("pool A's token naming pool B's host: %+v, %v; want a new host in %s", got, err, pa)
	}
	if _, err := e.heartbeatErr(hb, &vdibroker.HeartbeatRequest{Sessions: []vdibroker.AgentSession{{ID: "7", User: "alice", State: vdibroker.StateActive}}}); err != nil {
		t.Errorf("pool B's host's credential after pool A's host of its name registered: %v", err)
	}
	h, err := e.admin.GetSessionHost(ctx, pb, hb)
	if err != nil || h.Address != hb+".example.test:3389" {
		t.Errorf("pool B's host after pool A's registration of its name: %+v, %v; want its own address", h, err)
	}
	r := e.mustConnect(pb, "alice")
	if !r.Reconnect || r.SessionID != alice.SessionID || r.SessionHost != hb {
		t.Errorf("alice in pool B: %+v, want her session %s on %s", r.ConnectResponse, alice.SessionID, hb)
	}

	// A deleted pool's token, in a pool made again under its name.
	tb, err := e.admin.CreateRegistrationToken(ctx, pb, vdibroker.RegistrationTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.DeleteHostPool(ctx, pb, true); err != nil {
		t.Fatal(err)
	}
	e.pool(pb, nil)
	_, err = e.admin.Register(ctx, &vdibroker.RegisterRequest{Token: tb.Token, HostName: "rtb-new", Address: "rtb-new.example.test:3389"})
	wantCode(t, err, vdibroker.EUnauthenticated)
}

// TestHostCredentialReach_RSEC (R-SEC, R-S2, R-S4): what one host's
// credential can make the broker believe about another host's sessions
// and commands. Its reports are reconciled against its own host's
// sessions only: naming a user the broker placed on another host adopts
// nothing and neither logs on that user's Pending session nor ends or
// moves her Active one; a result naming another host's command is not
// recorded, and that host's agent still gets the command.
func TestHostCredentialReach_RSEC(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	p := uniq("hc")
	e.pool(p, map[string]any{"loadBalancerType": "BreadthFirst"})
	hosts := e.addHosts(p, "hc-h", 2)
	alice := e.mustConnect(p, "alice")
	bob := e.mustConnect(p, "bob")
	victim := alice.SessionHost
	rogue := hosts[0]
	if rogue == victim {
		rogue = hosts[1]
	}
	if bob.SessionHost != rogue {
		t.Fatalf("breadth-first placed alice on %s and bob on %s, want them apart", victim, bob.SessionHost)
	}
	carol := e.mustConnect(p, "carol") // Pending on the victim (breadth-first, names break ties)
	if carol.SessionHost != victim {
		// Either way one host holds two sessions: the test needs a
		// Pending one on the victim.
		victim, rogue = rogue, victim
		alice, bob = bob, alice
	}
	// The victim's agent reports alice (or bob) logged on.
	e.heartbeat(victim, vdibroker.AgentSession{ID: "v1", User: alice.User, State: vdibroker.StateActive})
	cmd, err := e.admin.Logoff(ctx, p, alice.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	// The rogue host reports the victim's users as its own, and the
	// victim's command done.
	_, err = e.heartbeatErr(rogue, &vdibroker.HeartbeatRequest{
		Sessions: []vdibroker.AgentSession{
			{ID: "r0", User: bob.User, State: vdibroker.StateActive},
			{ID: "v1", User: alice.User, State: vdibroker.StateDisconnected},
			{ID: "r2", User: carol.User, State: vdibroker.StateActive},
		},
		Results: []vdibroker.CommandResult{{ID: cmd.ID, Success: true, Message: "done (not)"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	sessions, err := e.admin.ListUserSessions(ctx, p, vhttp.SessionQuery{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sessions {
		switch {
		case s.SessionHost == rogue && s.User != bob.User:
			t.Errorf("the rogue host's report gave it %s's session %s (%s)", s.User, s.ID, s.State)
		case s.ID == alice.SessionID && s.State != vdibroker.StateActive:
			t.Errorf("%s's session on %s is %s after another host reported her Disconnected, want Active", s.User, victim, s.State)
		case s.ID == carol.SessionID && s.State != vdibroker.StatePending:
			t.Errorf("%s's Pending session on %s is %s after another host reported her logged on, want Pending", s.User, victim, s.State)
		}
	}
	res := e.heartbeat(victim, vdibroker.AgentSession{ID: "v1", User: alice.User, State: vdibroker.StateActive})
	found := false
	for _, c := range res.Commands {
		found = found || c.ID == cmd.ID
	}
	if !found {
		t.Errorf("the victim's heartbeat carries %+v, want its logoff %s, which another host reported done", res.Commands, cmd.ID)
	}
}

// TestOutageStateGoesWithItsNameOnEveryReplica_RSEC (R-SEC, R-OUT1): a
// host deleted through one replica and registered again under its name
// through another is a new machine; the replica it registers through
// keeps nothing of the old machine's report for an outage, though only
// the other replica saw the delete.
func TestOutageStateGoesWithItsNameOnEveryReplica_RSEC(t *testing.T) {
	e := newEnvWith(t, envOptions{replicas: 2})
	ctx := context.Background()
	p := uniq("or")
	e.pool(p, nil)
	tok, err := e.admin.CreateRegistrationToken(ctx, p, vdibroker.RegistrationTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	other := e.client(1, "")
	reg := func(tok *vhttp.RegistrationTokenResponse) string {
		t.Helper()
		res, err := other.Register(ctx, &vdibroker.RegisterRequest{Token: tok.Token, HostName: "or-h1", Address: "or-h1.example.test:3389"})
		if err != nil {
			t.Fatal(err)
		}
		return res.Credential
	}
	cred := reg(tok)
	if _, err := other.Heartbeat(ctx, cred, &vdibroker.HeartbeatRequest{Sessions: []vdibroker.AgentSession{{ID: "1", User: "alice", State: vdibroker.StateActive}}}); err != nil {
		t.Fatal(err)
	}
	if st := e.srvs[1].Broker.OutageState(); st.ReportedHosts != 1 {
		t.Fatalf("replica 1 keeps %d hosts' reports, want 1", st.ReportedHosts)
	}
	if err := e.admin.DeleteSessionHost(ctx, p, "or-h1", true); err != nil { // through replica 0
		t.Fatal(err)
	}
	// A new machine, with a token issued after the delete (R-SEC),
	// through replica 1.
	if tok, err = e.admin.CreateRegistrationToken(ctx, p, vdibroker.RegistrationTokenRequest{}); err != nil {
		t.Fatal(err)
	}
	reg(tok)
	if st := e.srvs[1].Broker.OutageState(); st.ReportedHosts != 0 {
		t.Errorf("replica 1 keeps %d hosts' reports after or-h1 was registered again, want the old machine's gone", st.ReportedHosts)
	}
}

// TestReKeyBound_RSEC (R-SEC): a holder of a registration token and a
// host's credential re-keys the host at most ReKeysPerHost times at once,
// then that many a minute: past it 429 TooManyRequests with Retry-After
// and the JSON error naming the bound, and nothing changes (the last
// credential still works). Another host's re-keys are not refused, nor
// are registrations with the token alone: the agent's, the first one and
// the one after an admin reset its registration.
func TestReKeyBound_RSEC(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	p := uniq("rk")
	e.pool(p, nil)
	tok, err := e.admin.CreateRegistrationToken(ctx, p, vdibroker.RegistrationTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	req := func(host string) *vdibroker.RegisterRequest {
		return &vdibroker.RegisterRequest{Token: tok.Token, HostName: host, Address: host + ".example.test:3389"}
	}
	cred := e.register(tok.Token, "rk-h1")
	for i := range vhttp.ReKeysPerHost {
		rk, err := e.admin.ReKey(ctx, cred, req("rk-h1"))
		if err != nil {
			t.Fatalf("re-key %d within the bound: %v", i+1, err)
		}
		cred = rk.Credential
	}
	_, err = e.admin.ReKey(ctx, cred, req("rk-h1"))
	if vdibroker.ErrorCode(err) != vdibroker.ETooManyRequests || vdibroker.ErrorRetryAfter(err) <= 0 ||
		!strings.Contains(err.Error(), fmt.Sprintf("faster than %d a minute", vhttp.ReKeysPerHost)) {
		t.Fatalf("re-key %d: %v (retry after %s); want 429 TooManyRequests naming %d a minute, with Retry-After",
			vhttp.ReKeysPerHost+1, err, vdibroker.ErrorRetryAfter(err), vhttp.ReKeysPerHost)
	}
	if _, err := e.admin.Heartbeat(ctx, cred, &vdibroker.HeartbeatRequest{}); err != nil {
		t.Errorf("the credential of the last re-key after a refused one: %v", err)
	}
	// Another host's re-key is its own.
	other := e.register(tok.Token, "rk-h2")
	if _, err := e.admin.ReKey(ctx, other, req("rk-h2")); err != nil {
		t.Errorf("another host's re-key: %v", err)
	}
	// The agent's registrations carry no credential: after each reset of
	// its registration it registers again, however often.
	for i := range 2 * vhttp.ReKeysPerHost {
		if err := e.admin.ResetRegistration(ctx, p, "rk-h1"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.admin.Register(ctx, req("rk-h1")); err != nil {
			t.Fatalf("registration %d after a reset: %v", i+1, err)
		}
	}
	// A minute later (one re-key every 60/ReKeysPerHost s) re-keys go
	// again.
	cred = e.register(tok.Token, "rk-h3")
	for range vhttp.ReKeysPerHost {
		rk, err := e.admin.ReKey(ctx, cred, req("rk-h3"))
		if err != nil {
			t.Fatal(err)
		}
		cred = rk.Credential
	}
	e.clock.Advance(time.Minute / vhttp.ReKeysPerHost)
	if _, err := e.admin.ReKey(ctx, cred, req("rk-h3")); err != nil {
		t.Errorf("a re-key %s after the bound was reached: %v", time.Minute/vhttp.ReKeysPerHost, err)
	}
}
