package http_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker/identity"
	"github.com/vdibroker/vdibroker/internal/testop"
	"github.com/vdibroker/vdibroker/internal/testserver"
	"github.com/vdibroker/vdibroker/store"
)

// clientFrom is an HTTP client whose connections come from the loopback
// address ip (127.0.0.2: another client address on this machine).
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}

func whoamiStatus(t *testing.T, c *http.Client, base, token string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/api/v1/whoami", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// TestUnknownKeyIDsFetchKeysOnceAMinute (R-SEC): 300 anonymous JWTs
// naming a key id the provider does not publish make the broker fetch the
// provider's keys no more than once a minute (it fetched them for every
// one). The failed-authentication bucket is looked at before the token
// is verified: once an address has used it up, a token of a key the broker
// does not hold yet (the provider rotated its key) is refused from that
// address without a fetch, while another address's makes the broker fetch
// the new key, and a token of a key held is still accepted from the
// throttled address. The server's clock stands still, so the bucket does
// not refill while the test runs; the provider's clock is stepped.
func TestUnknownKeyIDsFetchKeysOnceAMinute(t *testing.T) {
	op := testop.Start(t, "vdibroker-test", "s3cret")
	idClock := clocktesting.NewFakeClock(time.Now())
	op.Now = idClock.Now
	p, err := identity.New(context.Background(), identity.Config{Issuer: op.Issuer, ClientID: op.ClientID,
		ClientSecret: op.ClientSecret, Roles: testRoles, Now: idClock.Now})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.Context(), "", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	frozen := time.Now()
	srv := testserver.New(testserver.Config{Store: st, Now: func() time.Time { return frozen }, OIDC: p, MaintenanceInterval: time.Hour})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { ts.Close(); srv.Close() })
	here, there := clientFrom("127.0.0.1"), clientFrom("127.0.0.2")
	claims := map[string]any{"sub": "reader-1", "groups": []string{"readers"}}

	for range 300 {
		if s := whoamiStatus(t, here, ts.URL, op.MintWithKeyID("no-such-kid", claims)); s != 401 && s != 429 {
			t.Fatalf("a token of an unknown key: %d", s)
		}
	}
	if n := op.JWKSFetches(); n != 1 {
		t.Fatalf("300 tokens of an unknown key: %d fetches of the keys, want the start's 1", n)
	}
	idClock.Step(identity.KeyRefresh)
	op.RotateKey()
	rotated := op.Mint(claims)
	if s := whoamiStatus(t, here, ts.URL, rotated); s != 429 || op.JWKSFetches() != 1 {
		t.Errorf("a new key's token from the throttled address: %d, %d fetches; want 429 and no fetch", s, op.JWKSFetches())
	}
	if s := whoamiStatus(t, there, ts.URL, rotated); s != 200 || op.JWKSFetches() != 2 {
		t.Errorf("a new key's token from another address: %d, %d fetches; want 200 after one fetch", s, op.JWKSFetches())
	}
	if s := whoamiStatus(t, here, ts.URL, op.Mint(claims)); s != 200 {
		t.Errorf("a token of a key held, from the throttled address: %d, want 200", s)
	}
}
