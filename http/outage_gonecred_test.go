package http_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestGoneHostsCredentialGoesOnEveryReplica_RSEC (R-OUT1, R-SEC): a
// replica that learns at a read of its pool that a host it holds a
// report of was deleted through another replica forgets the host's
// credential with the report. Else the deleted machine, silent while
// the store was up, would have its heartbeat accepted from memory during
// a later outage there, and its report (the old machine's word) back.
func TestGoneHostsCredentialGoesOnEveryReplica_RSEC(t *testing.T) {
	e := newEnvWith(t, envOptions{replicas: 2, failing: true, maintenance: time.Hour})
	ctx := context.Background()
	b, bAdmin := e.client(1, ""), e.client(1, adminToken)
	reports := func() int { return e.srvs[1].Broker.OutageState().ReportedHosts }
	p := uniq("gonecred")
	e.pool(p, nil)
	tok, err := e.admin.CreateRegistrationToken(ctx, p, vhttp.RegistrationTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	cred := e.register(tok.Token, "gonecred-h1")
	sessions := []vdibroker.AgentSession{{ID: "s1", User: "alice", State: vdibroker.StateActive}}
	if _, err := b.Heartbeat(ctx, cred, &vdibroker.HeartbeatRequest{Sessions: sessions}); err != nil {
		t.Fatal(err)
	}
	if got := reports(); got != 1 {
		t.Fatalf("replica 1 keeps %d hosts' reports, want gonecred-h1's", got)
	}
	if err := e.admin.DeleteSessionHost(ctx, p, "gonecred-h1", true); err != nil {
		t.Fatal(err)
	}
	// Replica 1 reads the pool (its connect's answer aside): the host
	// is gone.
	bAdmin.Connect(ctx, p, vhttp.ConnectRequest{User: "bob"})
	if got := reports(); got != 0 {
		t.Fatalf("replica 1 keeps %d hosts' reports after it read the pool, want none", got)
	}

	// An outage on replica 1: the deleted machine's heartbeat is not
	// taken from memory.
	e.storeDown[1].Store(true)
	if got := healthStatus(t, e.urls[1]+"/healthz"); got != http.StatusServiceUnavailable {
		t.Fatalf("replica 1's /healthz with its store down: %d, want 503", got)
	}
	_, err = b.Heartbeat(ctx, cred, &vdibroker.HeartbeatRequest{Sessions: sessions})
	if err == nil || reports() != 0 {
		t.Errorf("the deleted host's heartbeat through replica 1 in an outage: %v, %d reports kept; want it refused and none kept", err, reports())
	}
	e.storeDown[1].Store(false)
	waitHealth(t, e.urls[1], http.StatusOK, 15*time.Second)
}
