package http_test

import (
	"context"
	"testing"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// A replica authenticates a host's heartbeats from memory once it has seen
// the credential (a full pod's 1,000 heartbeats a second cost no read
// each), yet a credential revoked on another replica stops working there
// at once (R-SEC): re-keyed, then deleted, the old credential's heartbeat
// is refused with 401 and changes nothing.
func TestCredentialRevokedOnAnotherReplica(t *testing.T) {
	e := newEnvWith(t, envOptions{replicas: 2})
	ctx := context.Background()
	e.pool("creds", nil)
	host := e.addHosts("creds", "credh", 1)[0]
	cred1 := e.agents[host]
	a := e.client(0, "") // the replica the agent heartbeats to
	if _, err := a.Heartbeat(ctx, cred1, &vdibroker.HeartbeatRequest{}); err != nil {
		t.Fatal(err) // replica 0 has seen the credential
	}
	rt, err := e.admin.CreateRegistrationToken(ctx, "creds", vhttp.RegistrationTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// Re-keyed through replica 1: replica 0 still remembers cred1.
	rk, err := e.client(1, "").ReKey(ctx, cred1, &vdibroker.RegisterRequest{Token: rt.Token, HostName: host, Address: host + ".example.test:3389"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Heartbeat(ctx, cred1, &vdibroker.HeartbeatRequest{HealthError: "written by a revoked credential"})
	wantCode(t, err, vdibroker.EUnauthenticated, "revoked")
	h, err := e.store.GetSessionHost(ctx, "creds", host)
	if err != nil {
		t.Fatal(err)
	}
	if h.HealthError != "" {
		t.Errorf("the revoked credential's heartbeat was applied: healthError %q", h.HealthError)
	}
	if _, err := a.Heartbeat(ctx, rk.Credential, &vdibroker.HeartbeatRequest{}); err != nil {
		t.Fatalf("the new credential on replica 0: %v", err)
	}
	// Deleted through replica 1: replica 0 remembers the new credential.
	if err := e.client(1, adminToken).DeleteSessionHost(ctx, "creds", host, true); err != nil {
		t.Fatal(err)
	}
	_, err = a.Heartbeat(ctx, rk.Credential, &vdibroker.HeartbeatRequest{})
	wantCode(t, err, vdibroker.EUnauthenticated, "revoked")
	if _, err := e.store.GetSessionHost(ctx, "creds", host); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
		t.Errorf("the deleted host after its old credential's heartbeat: %v, want NotFound", err)
	}
}
