package main

import (
	"log/slog"
	"net"
	"strings"
	"testing"

	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/syncbuf"
)

// TestGatewayStartChecksBrokerURL (R-GW4; docs/gateway.md, "Deploying
// with the broker", step 5): the standalone gateway checks --broker-url
// and its Gateway token at start against a real broker and says what to
// fix, instead of starting silently and refusing every user's tunnel
// later as broker_refused ("the broker did not issue the token"): a URL
// that is the broker's but not its tunnel API, a token the broker
// refuses, a broker that does not answer. Right, it says the broker
// takes its reports. It starts in every case.
func TestGatewayStartChecksBrokerURL(t *testing.T) {
	b := startCLIBroker(t)
	api := vhttp.NewClient(b.m.URL(), b.m.AdminToken)
	gw, err := api.CreateToken(t.Context(), vhttp.TokenRequest{Role: "Gateway", Subject: "rdgw"})
	if err != nil {
		t.Fatal(err)
	}
	// A port nothing listens on: one taken and given back.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/api/v1/gateway/tunnels"
	ln.Close()
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	cert, key := ca.issue(t, dir, "gateway", 2, false)
	tunnels := b.m.URL() + "/api/v1/gateway/tunnels"
	for _, tc := range []struct {
		name, url, token string
		want             []string
	}{
		{"right", tunnels, gw.Secret, []string{"level=INFO", "broker takes this gateway's reports"}},
		{"the broker's root", b.m.URL() + "/", gw.Secret, []string{"level=WARN", "--broker-url: no tunnel API there", "/api/v1/gateway/tunnels"}},
		{"tunnels left off", b.m.URL() + "/api/v1/gateway", gw.Secret, []string{"level=WARN", "--broker-url: no tunnel API there", "no API at POST /api/v1/gateway/check"}},
		{"a token the broker refuses", tunnels, "vdbt_not_issued", []string{"level=WARN", "--broker-token-file: the broker refused this gateway's token", "--role Gateway"}},
		{"no token", tunnels, "", []string{"level=WARN", "--broker-token-file: the broker refused this gateway's token"}},
		{"nothing listens", closed, gw.Secret, []string{"level=WARN", "--broker-url: the broker did not answer", "connection refused"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs syncbuf.Buffer
			m := &GatewayMain{Listen: "127.0.0.1:0", TLSCert: cert, TLSKey: key, Name: "rdgw-probe",
				KeysURL: b.m.URL() + "/api/v1/gateway/keys", BrokerURL: tc.url, BrokerToken: tc.token,
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))}
			if err := m.Open(t.Context()); err != nil {
				t.Fatalf("the gateway did not start: %v", err)
			}
			defer m.Close()
			got := logs.String()
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("the start's log lacks %q:\n%s", w, got)
				}
			}
		})
	}
}
