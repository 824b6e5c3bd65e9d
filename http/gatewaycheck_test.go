package http_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/broker"
	"github.com/vdibroker/vdibroker/gateway"
	"github.com/vdibroker/vdibroker/gatewaytoken"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestGatewayCheckTunnels_RGW4: a gateway's periodic check, through the
// HTTP handlers and the store, answers the tunnels whose session is open
// and leaves out the one whose session the broker ended without the host
// dropping it, a token id the broker never issued, a tunnel asked about
// under another gateway's name (the admin token's question: a Gateway
// token's under another name is refused, TestGatewayTokenIsOneGateway_RGW4),
// and, for a Gateway token scoped to
// another pool, every tunnel; User tokens and anonymous callers are
// refused.
func TestGatewayCheckTunnels_RGW4(t *testing.T) {
	w := newGatewayWorld(t, broker.GatewayConfig{})
	ctx := context.Background()
	w.e.pool("gwpool", nil)
	w.addEchoHost(t, "gwpool", "gwh001")
	open := func(user string) gateway.TunnelEvent {
		t.Helper()
		ev, _ := w.opened(t, "gwpool", user, time.Now())
		return ev
	}
	alice, bob := open("alice"), open("bob")
	check := func(b *gateway.HTTPBroker, name string, evs ...gateway.TunnelEvent) []string {
		t.Helper()
		got, err := b.CheckTunnels(ctx, name, evs)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		return got
	}
	want := []string{alice.TokenID, bob.TokenID}
	slices.Sort(want)
	if got := check(w.broker, "rdgw-1", alice, bob); !slices.Equal(got, want) {
		t.Errorf("both sessions open: %v, want both %v", got, want)
	}
	// The broker ends bob's session (the pending timeout, a forced
	// logoff): the host never dropped the connection.
	if err := w.e.store.EndSession(ctx, "gwpool", bob.Session, vdibroker.EndPendingTimeout, time.Now()); err != nil {
		t.Fatal(err)
	}
	forged := alice
	forged.TokenID = gatewaytoken.NewID() + gatewaytoken.NewID()
	if got := check(w.broker, "rdgw-1", alice, bob, forged); !slices.Equal(got, []string{alice.TokenID}) {
		t.Errorf("bob's session ended, a forged token id: %v, want alice's alone", got)
	}
	// Alice's admitted token id with a claim altered (another host): not
	// a token the broker issued, though its record matches otherwise.
	altered := alice
	altered.Host = "127.0.0.1:22"
	if got := check(w.broker, "rdgw-1", altered); len(got) != 0 {
		t.Errorf("altered claims: %v, want none", got)
	}
	// Another gateway's name, asked with the admin token (which names
	// its gateway as it likes): not that gateway's tunnel.
	if got := check(&gateway.HTTPBroker{URL: w.broker.URL, Token: adminToken}, "rdgw-2", alice); len(got) != 0 {
		t.Errorf("asked as rdgw-2: %v, want none", got)
	}
	// A Gateway token of another pool learns nothing of this one's.
	other, err := w.e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: vdibroker.RoleGateway, Subject: "rdgw-9", HostPools: []string{"otherpool"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := check(&gateway.HTTPBroker{URL: w.broker.URL, Token: other.Secret}, "rdgw-9", alice); len(got) != 0 {
		t.Errorf("a Gateway token scoped to otherpool: %v, want none", got)
	}
	// The admin token may ask.
	admin := &gateway.HTTPBroker{URL: w.broker.URL, Token: adminToken}
	if got := check(admin, "rdgw-1", alice); !slices.Equal(got, []string{alice.TokenID}) {
		t.Errorf("the admin token: %v, want alice's", got)
	}

	user, err := w.e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: vdibroker.RoleUser, Subject: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"gateway": "rdgw-1", "tunnels": []}`
	for _, tt := range []struct {
		who, token string
		want       int
	}{{"a User token", user.Secret, 403}, {"anonymous", "", 401}, {"the Gateway token", w.broker.Token, 200}} {
		if status, _, raw := rawDo(t, w.e, "POST", "/api/v1/gateway/tunnels/check", tt.token, body); status != tt.want {
			t.Errorf("%s: %d %s, want %d", tt.who, status, raw, tt.want)
		}
	}
	// The question is bounded: a gateway with more tunnels asks in several.
	big := make([]gateway.TunnelEvent, vdibroker.MaxTunnelCheck+1)
	for i := range big {
		big[i] = alice
	}
	if _, err := w.broker.CheckTunnels(ctx, "rdgw-1", big); err == nil {
		t.Errorf("a check of %d tunnels was answered, want 400", len(big))
	}
}
