package http_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestAdoptedSessionReconnectsWherePlacementWould_RC1_RS2: a user who
// logged on directly (adopted from the agent's report, R-S2) is answered
// that session (R-C1) on a host placement would have put them on; on a
// drained host the adopted session stays a fact and the user is placed
// anew elsewhere, and from then on reconnects to the session the broker
// placed.
func TestAdoptedSessionReconnectsWherePlacementWould_RC1_RS2(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pool("adopt", nil)
	hosts := e.addHosts("adopt", "adh", 2)
	e.heartbeat(hosts[0], vdibroker.AgentSession{ID: "1", User: "alice", State: vdibroker.StateActive},
		vdibroker.AgentSession{ID: "2", User: "bob", State: vdibroker.StateActive})
	r := e.mustConnect("adopt", "alice")
	if !r.Reconnect || r.SessionHost != hosts[0] {
		t.Errorf("alice: host %s reconnect %v, want her adopted session on %s (reconnect)", r.SessionHost, r.Reconnect, hosts[0])
	}
	drain(t, e, "adopt", hosts[0], false)
	r = e.mustConnect("adopt", "bob")
	if r.Reconnect || r.SessionHost != hosts[1] {
		t.Errorf("bob on a drained host: host %s reconnect %v, want a new session on %s", r.SessionHost, r.Reconnect, hosts[1])
	}
	l, err := e.admin.ListUserSessions(ctx, "adopt", vhttp.SessionQuery{User: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	if len(l) != 2 {
		t.Errorf("bob has %d open sessions, want 2: the adopted one stays a fact", len(l))
	}
	again := e.mustConnect("adopt", "bob")
	if !again.Reconnect || again.SessionID != r.SessionID {
		t.Errorf("bob again: %s reconnect %v, want the placed session %s", again.SessionID, again.Reconnect, r.SessionID)
	}
}

// TestReplicaHonoursLoweredLimit_RC4_RP2: a limit lowered through one
// replica binds another replica at once, although its view is older: the
// database checks the stored limit (R-D3).
func TestReplicaHonoursLoweredLimit_RC4_RP2(t *testing.T) {
	e := newEnvWith(t, envOptions{replicas: 2})
	ctx := context.Background()
	e.pool("lower", map[string]any{"maxSessionLimit": 10})
	hosts := e.addHosts("lower", "lwh", 1)
	c1 := e.client(1, adminToken)
	if _, err := c1.Connect(ctx, "lower", vhttp.ConnectRequest{User: "warm"}); err != nil { // loads replica 1's view
		t.Fatal(err)
	}
	if _, err := e.admin.PatchHostPool(ctx, "lower", map[string]any{"maxSessionLimit": 1}); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		_, err := c1.Connect(ctx, "lower", vhttp.ConnectRequest{User: fmt.Sprint("u", i)})
		if code := vdibroker.ErrorCode(err); code != vdibroker.ENoCapacity {
			t.Errorf("connect u%d via replica 1 = %v, want NoCapacity (limit lowered to 1, host has 1)", i, err)
		}
	}
	if got := e.sessionsPerHost("lower")[hosts[0]]; got != 1 {
		t.Errorf("host has %d sessions, want 1: the lowered limit ends nothing and admits nothing (R-P2)", got)
	}
}

// TestReplicaHonoursDrain_RC2: a host drained through one replica takes no
// new session through another replica whose view predates the drain.
func TestReplicaHonoursDrain_RC2(t *testing.T) {
	e := newEnvWith(t, envOptions{replicas: 2})
	ctx := context.Background()
	e.pool("drainrep", nil)
	hosts := e.addHosts("drainrep", "drh", 2)
	c1 := e.client(1, adminToken)
	if _, err := c1.Connect(ctx, "drainrep", vhttp.ConnectRequest{User: "warm"}); err != nil {
		t.Fatal(err)
	}
	drain(t, e, "drainrep", hosts[0], false) // through replica 0
	for i := range 10 {
		r, err := c1.Connect(ctx, "drainrep", vhttp.ConnectRequest{User: fmt.Sprint("d", i)})
		if err != nil {
			t.Fatalf("connect d%d: %v", i, err)
		}
		if r.SessionHost == hosts[0] {
			t.Errorf("d%d placed on drained %s via replica 1", i, hosts[0])
		}
	}
}

// TestPersistentIgnoresNamedHost_RPE3: only MultiplePersistent honours a
// named sessionHost; in a Persistent pool the user's connect naming another
// host answers the user's existing session instead of adding a second.
func TestPersistentIgnoresNamedHost_RPE3(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pool("persist", map[string]any{"hostPoolType": "Personal"})
	hosts := e.addHosts("persist", "psh", 2)
	a := e.mustConnect("persist", "alice")
	other := hosts[0]
	if a.SessionHost == hosts[0] {
		other = hosts[1]
	}
	b, err := e.admin.Connect(ctx, "persist", vhttp.ConnectRequest{User: "alice", SessionHost: other})
	if err != nil {
		t.Fatal(err)
	}
	if !b.Reconnect || b.SessionID != a.SessionID {
		t.Errorf("second connect = session %s reconnect %v, want alice's session %s again", b.SessionID, b.Reconnect, a.SessionID)
	}
	l, err := e.admin.ListUserSessions(ctx, "persist", vhttp.SessionQuery{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if len(l) != 1 {
		t.Errorf("alice has %d open sessions, want 1", len(l))
	}
}

// TestDryRunSeesOtherReplicasSession_RC8_RC1: a dry run answers what a
// connect would: the user's session placed through another replica.
func TestDryRunSeesOtherReplicasSession_RC8_RC1(t *testing.T) {
	e := newEnvWith(t, envOptions{replicas: 2})
	ctx := context.Background()
	e.pool("dryrep", nil)
	e.addHosts("dryrep", "dqh", 4)
	c1 := e.client(1, adminToken)
	if _, err := c1.Connect(ctx, "dryrep", vhttp.ConnectRequest{User: "warm"}); err != nil {
		t.Fatal(err)
	}
	a := e.mustConnect("dryrep", "alice") // through replica 0
	r, err := c1.Connect(ctx, "dryrep", vhttp.ConnectRequest{User: "alice", DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Reconnect || r.SessionHost != a.SessionHost {
		t.Errorf("dry run via replica 1 = host %s reconnect %v, want alice's %s (reconnect)", r.SessionHost, r.Reconnect, a.SessionHost)
	}
}

// TestPatchHostPoolTypeAlone_RP1: changing only hostPoolType is refused
// with the R-P1 message on that field, either way.
func TestPatchHostPoolTypeAlone_RP1(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pool("typepool", nil)
	e.pool("typepers", map[string]any{"hostPoolType": "Personal"})
	for _, tc := range []struct{ pool, to string }{{"typepool", "Personal"}, {"typepers", "Pooled"}} {
		_, err := e.admin.PatchHostPool(ctx, tc.pool, map[string]any{"hostPoolType": tc.to})
		if vdibroker.ErrorCode(err) != vdibroker.EInvalid || vdibroker.ErrorField(err) != "hostPoolType" {
			t.Errorf("PATCH %s hostPoolType=%s: %v, want InvalidArgument on hostPoolType", tc.pool, tc.to, err)
		}
	}
}

// TestMultiplePersistentReconnectsToLiveHost_RC1_RPE3: a user with sessions
// on two assigned hosts whose first host (in query order) fell silent is
// answered with the session on the live host, not given a second one there.
func TestMultiplePersistentReconnectsToLiveHost_RC1_RPE3(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pool("multi", map[string]any{"hostPoolType": "Personal", "loadBalancerType": "MultiplePersistent", "personalDesktopAssignmentType": "Direct"})
	hosts := e.addHosts("multi", "mph", 2)
	for _, h := range hosts {
		if _, err := e.admin.PatchSessionHost(ctx, "multi", h, map[string]any{"assignedUsers": []string{"erin"}}); err != nil {
			t.Fatal(err)
		}
	}
	onSecond, err := e.admin.Connect(ctx, "multi", vhttp.ConnectRequest{User: "erin", SessionHost: hosts[1]})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.Connect(ctx, "multi", vhttp.ConnectRequest{User: "erin", SessionHost: hosts[0]}); err != nil {
		t.Fatal(err)
	}
	// hosts[0] falls silent past the 90 s heartbeat timeout; hosts[1] stays.
	e.clock.Advance(100 * time.Second)
	e.heartbeat(hosts[1])
	r, err := e.connect("multi", "erin")
	if err != nil {
		t.Fatal(err)
	}
	if !r.Reconnect || r.SessionID != onSecond.SessionID {
		t.Errorf("connect = session %s on %s reconnect %v, want erin's session %s on %s (reconnect)", r.SessionID, r.SessionHost, r.Reconnect, onSecond.SessionID, hosts[1])
	}
	l, err := e.admin.ListUserSessions(ctx, "multi", vhttp.SessionQuery{User: "erin", SessionHost: hosts[1]})
	if err != nil {
		t.Fatal(err)
	}
	if len(l) != 1 {
		t.Errorf("erin has %d open sessions on %s, want 1", len(l), hosts[1])
	}
}
