package http_test

import (
	"context"
	"testing"
	"time"

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

// TestAPITokenRevokedOnAnotherReplica_RSEC: an administrator's API token
// (Reader, Helpdesk, Contributor) revoked through one replica is refused
// by the others at their next request, and one past its expiry by every
// replica at once (R-SEC): no replica keeps a token it has seen. On
// SQLite, and on PostgreSQL when VDIBROKER_TEST_POSTGRES_DSN is set.
func TestAPITokenRevokedOnAnotherReplica_RSEC(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testTokenRevokedOnAnotherReplica(t, envOptions{replicas: 2}) })
	t.Run("postgres", func(t *testing.T) { testTokenRevokedOnAnotherReplica(t, envOptions{dsn: postgresDSN(t), replicas: 2}) })
}

func testTokenRevokedOnAnotherReplica(t *testing.T, o envOptions) {
	e := newEnvWith(t, o)
	ctx := context.Background()
	for _, role := range []string{vdibroker.RoleReader, vdibroker.RoleHelpdesk, vdibroker.RoleContributor} {
		revoked, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: role, Subject: uniq("revoked-" + role)})
		if err != nil {
			t.Fatal(err)
		}
		expiring, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: role, Subject: uniq("expiring-" + role), ExpiresInSeconds: 60})
		if err != nil {
			t.Fatal(err)
		}
		// Each replica has seen both tokens answered.
		for i := range 2 {
			for _, tok := range []string{revoked.Secret, expiring.Secret} {
				if _, err := e.client(i, tok).ListHostPools(ctx); err != nil {
					t.Fatalf("%s token on replica %d before: %v", role, i, err)
				}
			}
		}
		if err := e.client(1, adminToken).DeleteToken(ctx, revoked.ID); err != nil {
			t.Fatal(err)
		}
		_, err = e.client(0, revoked.Secret).ListHostPools(ctx)
		wantCode(t, err, vdibroker.EUnauthenticated, "token revoked at")
		e.clock.Advance(61 * time.Second)
		for i := range 2 {
			_, err = e.client(i, expiring.Secret).ListHostPools(ctx)
			wantCode(t, err, vdibroker.EUnauthenticated, "token expired at")
		}
	}
}
