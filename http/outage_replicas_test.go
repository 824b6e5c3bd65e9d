package http_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestGoneHostsReportGoesOnEveryReplica_RSEC (R-SEC, R-OUT1): a host's
// last report, which a replica uses to answer reconnects during a store
// outage, goes on a replica that did not see the host go once it learns
// it: at its next read of the pool's hosts (a host deleted, one deleted
// and registered again under its name, the pool deleted), or when the
// revoked credential's heartbeat is refused there (a reset). Replica 1
// (B) takes the old machines' heartbeats; every change goes through
// replica 0. Before, B kept each report until a day after its last
// heartbeat, and the old machine's report (no user) refused, during an
// outage, the reconnect of a user the new machine under its name has
// logged on.
func TestGoneHostsReportGoesOnEveryReplica_RSEC(t *testing.T) {
	e := newEnvWith(t, envOptions{replicas: 2, failing: true, maintenance: 100 * time.Millisecond})
	ctx := context.Background()
	b, bAdmin := e.client(1, ""), e.client(1, adminToken)
	reports := func() int { return e.srvs[1].Broker.OutageState().ReportedHosts }
	token := func(pool string) string {
		t.Helper()
		tok, err := e.admin.CreateRegistrationToken(ctx, pool, vhttp.RegistrationTokenRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return tok.Token
	}
	heartbeatB := func(cred string) error {
		_, err := b.Heartbeat(ctx, cred, &vdibroker.HeartbeatRequest{})
		return err
	}
	useOnB := func(pool, user string) *vhttp.ConnectResult {
		t.Helper()
		r, err := bAdmin.Connect(ctx, pool, vhttp.ConnectRequest{User: user})
		if err != nil {
			t.Fatalf("connect %s to %s through replica 1: %v", user, pool, err)
		}
		return r
	}

	// A host deleted and registered again: B learns it at its first
	// read of the pool.
	p := uniq("gone")
	e.pool(p, nil)
	if err := heartbeatB(e.register(token(p), "gone-h1")); err != nil {
		t.Fatal(err)
	}
	if got := reports(); got != 1 {
		t.Fatalf("replica 1 keeps %d hosts' reports, want 1", got)
	}
	if err := e.admin.DeleteSessionHost(ctx, p, "gone-h1", true); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Second)
	e.register(token(p), "gone-h1") // a new machine, heartbeating to replica 0
	e.heartbeat("gone-h1")
	alice := e.mustConnect(p, "alice")
	e.heartbeat("gone-h1", vdibroker.AgentSession{ID: "s1", User: "alice", State: vdibroker.StateActive})
	if r := useOnB(p, "alice"); r.SessionID != alice.SessionID {
		t.Fatalf("alice through replica 1: session %s, want %s", r.SessionID, alice.SessionID)
	}
	if got := reports(); got != 0 {
		t.Errorf("replica 1 keeps %d hosts' reports after it read the pool, want the old gone-h1's gone", got)
	}
	// An outage on replica 1: alice's reconnect is answered from memory,
	// not refused by the old machine's report, which lacked her.
	e.storeDown[1].Store(true)
	if got := healthStatus(t, e.urls[1]+"/healthz"); got != http.StatusServiceUnavailable {
		t.Fatalf("replica 1's /healthz with its store down: %d, want 503", got)
	}
	r, err := bAdmin.Connect(ctx, p, vhttp.ConnectRequest{User: "alice"})
	if err != nil || !r.Reconnect || r.SessionID != alice.SessionID {
		t.Errorf("alice's reconnect through replica 1 in an outage: %+v, %v; want her session %s on the new gone-h1", r, err, alice.SessionID)
	}
	e.storeDown[1].Store(false)
	waitHealth(t, e.urls[1], http.StatusOK, 15*time.Second)

	// A host deleted, a pool deleted: B learns them at the next read of
	// their pool, a maintenance tick's of a pool it used.
	q := uniq("gone")
	e.pool(q, nil)
	tq := token(q)
	for _, h := range []string{"gone-q1", "gone-q2"} {
		if err := heartbeatB(e.register(tq, h)); err != nil {
			t.Fatal(err)
		}
	}
	useOnB(q, "bob")
	if got := reports(); got != 2 {
		t.Fatalf("replica 1 keeps %d hosts' reports, want gone-q1's and gone-q2's", got)
	}
	if err := e.admin.DeleteSessionHost(ctx, q, "gone-q1", true); err != nil {
		t.Fatal(err)
	}
	useOnB(q, "bob")
	e.waitTicks(1, 1)
	if got := reports(); got != 1 {
		t.Errorf("replica 1 keeps %d hosts' reports after gone-q1 was deleted, want gone-q2's alone", got)
	}
	if _, err := e.admin.DeleteHostPool(ctx, q, true); err != nil {
		t.Fatal(err)
	}
	if _, err := bAdmin.Connect(ctx, q, vhttp.ConnectRequest{User: "bob"}); err == nil {
		t.Fatalf("connect to the deleted pool %s through replica 1 answered", q)
	}
	e.waitTicks(1, 1)
	if got := reports(); got != 0 {
		t.Errorf("replica 1 keeps %d hosts' reports after pool %s was deleted, want none", got, q)
	}

	// A registration reset: B learns it when the old credential's
	// heartbeat is refused there.
	cred := e.register(token(p), "gone-h2")
	if err := heartbeatB(cred); err != nil {
		t.Fatal(err)
	}
	if got := reports(); got != 1 {
		t.Fatalf("replica 1 keeps %d hosts' reports, want gone-h2's", got)
	}
	if err := e.admin.ResetRegistration(ctx, p, "gone-h2"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, heartbeatB(cred), vdibroker.EUnauthenticated)
	if got := reports(); got != 0 {
		t.Errorf("replica 1 keeps %d hosts' reports after it refused gone-h2's revoked credential, want none", got)
	}
}
