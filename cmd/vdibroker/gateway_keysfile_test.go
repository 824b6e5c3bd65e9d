package main

import (
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker/internal/syncbuf"
)

// TestGatewayKeysFileWithBrokerWarns (R-GW6): a gateway reporting to a
// broker (--broker-url) but reading its keys from a file warns at start
// that the broker's next key (every --gateway-key-rotation, signing 5
// minutes after) will be refused until the file is rewritten, and names
// --keys-url; with --keys-url, or a file and no broker, it says nothing
// of the kind.
func TestGatewayKeysFileWithBrokerWarns(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	cert, key := ca.issue(t, dir, "gateway", 2, false)
	jwks := testKeysDoc(t)
	keysFile := filepath.Join(dir, "keys.json")
	if err := os.WriteFile(keysFile, jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	keysURL := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(jwks) }))
	defer keysURL.Close()
	// The broker's address: nothing listens there; the start's check of
	// it warns of that, which is not what this test is about.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	broker := "http://" + ln.Addr().String() + "/api/v1/gateway/tunnels"
	ln.Close()
	const warning = "--keys-file with --broker-url"
	for _, tc := range []struct {
		name                      string
		keysFile, keysURL, broker string
		warns                     bool
	}{
		{"a file and a broker", keysFile, "", broker, true},
		{"the broker's keys URL", "", keysURL.URL, broker, false},
		{"a file and no broker", keysFile, "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs syncbuf.Buffer
			m := &GatewayMain{Listen: "127.0.0.1:0", TLSCert: cert, TLSKey: key, Name: "rdgw-keys",
				KeysFile: tc.keysFile, KeysURL: tc.keysURL, BrokerURL: tc.broker, BrokerToken: "vdbt_x",
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))}
			if err := m.Open(t.Context()); err != nil {
				t.Fatalf("the gateway did not start: %v", err)
			}
			defer m.Close()
			if m.probed != nil {
				<-m.probed
			}
			got := logs.String()
			if strings.Contains(got, warning) != tc.warns {
				t.Errorf("warns of the keys file: %v, want %v:\n%s", !tc.warns, tc.warns, got)
			}
			if tc.warns && !strings.Contains(got, "give --keys-url") {
				t.Errorf("the warning does not name --keys-url:\n%s", got)
			}
		})
	}
}
