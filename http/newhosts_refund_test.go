package http_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/testserver"
)

// newHostsServer serves st on a loopback server whose clock stands at
// now, so a token's bucket of new hosts does not refill, and whose tokens
// register burst new hosts at once; it creates the host pool pool and
// returns the server and its admin client.
func newHostsServer(t *testing.T, st *rawStore, now time.Time, burst int, pool string) (*testserver.Server, *vhttp.Client) {
	t.Helper()
	srv := testserver.New(testserver.Config{Store: st.Store, AdminToken: adminToken, Now: func() time.Time { return now }})
	vhttp.BoundNewHosts(srv.Server, burst)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { ts.Close(); srv.Close() })
	admin := vhttp.NewClient(ts.URL, adminToken)
	if _, err := admin.PutHostPool(t.Context(), pool, map[string]any{}); err != nil {
		t.Fatal(err)
	}
	return srv, admin
}

// TestNewHostsRefundedWhenNotWritten_RSEC (R-SEC): a registration the
// store fails after it admitted the new host (the database refuses what
// its transaction writes after that: a disk full, a write that timed
// out) made no host, and spends none of its token's new hosts: once the
// store writes again the token registers as many as before. Before, each such failure took one
// of the burst, so a store failing during a rollout drained the token's
// new hosts with no host made, leaving the agents waiting at 60 a minute.
func TestNewHostsRefundedWhenNotWritten_RSEC(t *testing.T) {
	st := openRawStore(t, "")
	now := time.Now().Truncate(time.Second) // frozen: the bucket does not refill
	const burst = 2
	_, admin := newHostsServer(t, st, now, burst, "refund")
	ctx := context.Background()
	tok, err := admin.CreateRegistrationToken(ctx, "refund", vdibroker.RegistrationTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	register := func(host string) error {
		_, err := admin.Register(ctx, &vdibroker.RegisterRequest{Token: tok.Token, HostName: host, Address: host + ".example.test:3389"})
		return err
	}

	// The database refuses what a registration writes after its
	// admission: its audit entry, in its transaction.
	st.exec(`CREATE TRIGGER host_fails BEFORE INSERT ON audit_log WHEN NEW.action = 'sessionhost.register' AND NEW.outcome <> 'refused'
		BEGIN SELECT RAISE(ABORT, 'disk full'); END`)
	for i := range 3 * burst {
		if err := register("failed-" + string(rune('a'+i))); err == nil || vdibroker.ErrorCode(err) == vdibroker.ETooManyRequests {
			t.Fatalf("registration %d while the store refuses the host's row: %v, want the store's failure, not a success nor 429", i, err)
		}
	}
	st.exec(`DROP TRIGGER host_fails`)

	// The whole burst is still there.
	for i := range burst {
		if err := register("host-" + string(rune('a'+i))); err != nil {
			t.Fatalf("new host %d of the token's %d after registrations that made no host: %v", i+1, burst, err)
		}
	}
	if err := register("host-over"); vdibroker.ErrorCode(err) != vdibroker.ETooManyRequests {
		t.Fatalf("new host past the burst: %v, want TooManyRequests", err)
	}
}
