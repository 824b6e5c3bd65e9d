package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vdibroker/vdibroker/gatewaytoken"
)

// TestGatewayPerAddressFlags (R-GW1): --max-conns-per-address and
// --max-handshakes-per-address take 1 or more; 0 or less, which the
// gateway would take silently as its default (1,000 and 20), not as "no
// limit", is a usage error naming the flag and its range.
func TestGatewayPerAddressFlags(t *testing.T) {
	for _, flag := range []string{"--max-conns-per-address", "--max-handshakes-per-address"} {
		for _, v := range []string{"0", "-1"} {
			cmd := newGatewayCmd()
			cmd.SetArgs([]string{flag, v})
			cmd.SetOut(io.Discard)
			cmd.SetErr(io.Discard)
			err := cmd.Execute()
			var ue usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), flag+": must be 1 or more, got "+v) {
				t.Errorf("gateway %s %s = %v, want a usage error naming the range", flag, v, err)
			}
		}
	}
}

// TestGatewayLimitFlagsRefuseZero (R-GW1): the gateway's other limits
// and timeouts take gateway.Config's default for 0 or less, so 0 there
// would not mean what an admin reads into it (no limit, as serve's
// --gateway-max-tunnels-per-user 0; never, for a timeout) but 10 tunnels
// or an hour without a word: a usage error naming the flag instead. The
// defaults start (the check after these is the certificate's).
func TestGatewayLimitFlagsRefuseZero(t *testing.T) {
	for _, tc := range []struct{ flag, value, want string }{
		{"--max-tunnels-per-user", "0", "--max-tunnels-per-user: must be 1 or more, got 0"},
		{"--max-tunnels", "-5", "--max-tunnels: must be 1 or more, got -5"},
		{"--request-burst", "0", "--request-burst: must be 1 or more, got 0"},
		{"--idle-timeout", "0", "--idle-timeout: must be above 0, got 0s"},
		{"--max-lifetime", "-1h", "--max-lifetime: must be above 0, got -1h"},
		{"--max-start-wait", "0", "--max-start-wait: must be above 0, got 0s"},
		{"--keepalive-interval", "0", "--keepalive-interval: must be above 0, got 0s"},
		{"--handshake-timeout", "0", "--handshake-timeout: must be above 0, got 0s"},
		{"--max-tunnels-per-user", "1", "--tls-cert and --tls-key are required"},
		{"--idle-timeout", "1s", "--tls-cert and --tls-key are required"},
	} {
		cmd := newGatewayCmd()
		cmd.SetArgs([]string{tc.flag, tc.value})
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		err := cmd.Execute()
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("gateway %s %s = %v, want a usage error %q", tc.flag, tc.value, err, tc.want)
		}
	}
}

// TestGatewayURLFlagErrorsNameTheFlag: a --keys-url or --broker-url the
// gateway refuses (plain http:// off loopback, not a URL) is a usage error
// naming that flag, not the CLI's --server, which the gateway has not;
// both --keys-file and --keys-url is a usage error saying to give one,
// not that one is missing.
func TestGatewayURLFlagErrorsNameTheFlag(t *testing.T) {
	dir := t.TempDir()
	jwks := testKeysDoc(t)
	keys := filepath.Join(dir, "keys.json")
	if err := os.WriteFile(keys, jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--keys-url", "http://10.1.1.1/api/v1/gateway/keys"}, `--keys-url "http://10.1.1.1/api/v1/gateway/keys": plain http://`},
		{[]string{"--keys-url", "broker.example.com/keys"}, `--keys-url "broker.example.com/keys": want a URL`},
		{[]string{"--keys-file", keys, "--broker-url", "http://10.1.1.1/api/v1/gateway/tunnels"}, `--broker-url "http://10.1.1.1/api/v1/gateway/tunnels": plain http://`},
		{[]string{"--keys-file", keys, "--keys-url", "https://127.0.0.1:1/api/v1/gateway/keys"}, "--keys-file and --keys-url: give one, not both"},
		{nil, "one of --keys-file and --keys-url is required"},
	} {
		cmd := newGatewayCmd()
		cmd.SetArgs(append([]string{"--listen", "127.0.0.1:0", "--tls-cert", filepath.Join(dir, "none.crt"), "--tls-key", filepath.Join(dir, "none.key")}, tc.args...))
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		err := cmd.Execute()
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("gateway %v = %v, want a usage error %q", tc.args, err, tc.want)
		}
	}
}

// TestGatewayTokenValidFlag: `gateway token --valid` out of 1s..1h is a
// usage error naming the flag and its range, not the claims' nbf and exp
// in Unix seconds that the signer would refuse.
func TestGatewayTokenValidFlag(t *testing.T) {
	dir := t.TempDir()
	key, jwks := filepath.Join(dir, "signing.pem"), filepath.Join(dir, "keys.json")
	keygen := newGatewayKeygenCmd()
	keygen.SetArgs([]string{"--key-id", "k1", "--private-key", key, "--jwks", jwks})
	if err := keygen.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ valid, want string }{
		{"2h", "--valid: must be 1s..1h, got 2h"},
		{"0", "--valid: must be 1s..1h, got 0s"},
		{"-1m", "--valid: must be 1s..1h, got -1m"},
		{"1h", ""},
	} {
		cmd := newGatewayTokenCmd()
		cmd.SetArgs([]string{"--key-id", "k1", "--private-key", key, "--user", "alice", "--host", "10.0.0.12:3389", "--valid", tc.valid})
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		err := cmd.Execute()
		var ue usageError
		if tc.want == "" && err != nil || tc.want != "" && (!errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("gateway token --valid %s = %v, want %q", tc.valid, err, tc.want)
		}
	}
}

// TestGatewayKeysRefreshFlag_RGW6: --keys-refresh below 1s (0 read the
// keys never again) is a usage error; so is, with --keys-url, one longer
// than 4 minutes: a broker publishes a key 5 minutes before it signs
// with it (R-GW6), but a replica other than the one that made it
// publishes it up to 30 s later, so a gateway reading every 5 minutes
// could miss it at one read and refuse its tokens for up to 30 s after
// the next. A --keys-file an admin rotates by hand may be read seldom.
func TestGatewayKeysRefreshFlag_RGW6(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--keys-refresh", "0"}, "--keys-refresh: must be at least 1s, got 0s"},
		{[]string{"--keys-refresh", "-1m"}, "--keys-refresh: must be at least 1s, got -1m"},
		{[]string{"--keys-url", "https://127.0.0.1:1/api/v1/gateway/keys", "--keys-refresh", "6m"}, "--keys-refresh: must be at most 4m with --keys-url, got 6m"},
		{[]string{"--keys-url", "https://127.0.0.1:1/api/v1/gateway/keys", "--keys-refresh", "5m"}, "--keys-refresh: must be at most 4m with --keys-url, got 5m"},
		// Accepted: the next check is the certificate's.
		{[]string{"--keys-url", "https://127.0.0.1:1/api/v1/gateway/keys", "--keys-refresh", "4m"}, "--tls-cert and --tls-key are required"},
		{[]string{"--keys-file", "keys.json", "--keys-refresh", "24h"}, "--tls-cert and --tls-key are required"},
	} {
		cmd := newGatewayCmd()
		cmd.SetArgs(tc.args)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		err := cmd.Execute()
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("gateway %v = %v, want a usage error %q", tc.args, err, tc.want)
		}
	}
}

// TestGatewayNameFlag_RGW4: a --name the broker would refuse in every
// report (R-GW4: at most MaxTunnelReportText characters, no control
// characters, none at its ends) is a usage error at start, not a gateway
// whose every tunnel the broker refuses; so is serve's --gateway-name,
// given empty too.
func TestGatewayNameFlag_RGW4(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"", "--name: must be 1..256 characters, got none"},
		{strings.Repeat("g", 257), "--name: must be at most 256 characters, got 257"},
		{"gw\x00one", "--name: must not contain control characters"},
		{" gw-1", "--name: must not start or end with white space"},
		{strings.Repeat("g", 256), ""},
		{"rdgw-1.contoso.example", ""},
	} {
		cmd := newGatewayCmd()
		cmd.SetArgs([]string{"--name", tc.name})
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		err := cmd.Execute()
		want := tc.want
		if want == "" {
			want = "--tls-cert and --tls-key are required" // the check after the name's
		}
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), want) {
			t.Errorf("gateway --name %.20q = %v, want a usage error %q", tc.name, err, want)
		}
		var f GatewayFlags
		fl := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		f.addFlags(fl)
		if err := fl.Parse([]string{"--gateway-name", tc.name}); err != nil {
			t.Fatal(err)
		}
		err = f.check(true)
		if want := strings.Replace(tc.want, "--name", "--gateway-name", 1); (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("serve --gateway-name %.20q = %v, want %q", tc.name, err, want)
		}
	}
	// A Main built in code, whose flags were never parsed, may leave the
	// name empty: the in-process gateway then names itself.
	if err := (&GatewayFlags{}).check(true); err != nil {
		t.Errorf("serve's gateway flags built in code without a name: %v", err)
	}
}

// TestGatewayKeysStartErrorsSayWhatToFix (R-GW6): a first read of the
// keys that a read again would not mend stops the gateway at start, as a
// mistake in its settings (exit 2, which its unit does not restart),
// with the flag and what to fix: a --keys-url that is not the broker's
// keys route (404, a web page), one refused for want of a credential
// (401: --keys-token-file), a --keys-file that cannot be read. A broker
// that does not answer yet does not stop it
// (TestGatewayStartsBeforeItsBroker_RGW6).
func TestGatewayKeysStartErrorsSayWhatToFix(t *testing.T) {
	dir := t.TempDir()
	// Real servers on loopback: one answering 404, as the broker does to
	// the tunnels route's GET or a mistyped path; one wanting a
	// credential, as a proxy may; one a web page.
	notKeys := httptest.NewServer(http.NotFoundHandler())
	defer notKeys.Close()
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "authenticate", http.StatusUnauthorized)
	}))
	defer proxy.Close()
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "<html>vdibroker console</html>")
	}))
	defer page.Close()
	missing := filepath.Join(dir, "keys.json")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--keys-url", notKeys.URL + "/api/v1/gateway/tunnels"}, []string{`--keys-url "` + notKeys.URL + `/api/v1/gateway/tunnels": no keys there (HTTP 404)`, "ending in /api/v1/gateway/keys"}},
		{[]string{"--keys-url", proxy.URL + "/api/v1/gateway/keys"}, []string{`--keys-url "` + proxy.URL + `/api/v1/gateway/keys": refused (HTTP 401)`, "--keys-token-file"}},
		{[]string{"--keys-url", page.URL + "/"}, []string{`--keys-url "` + page.URL + `/"`, "not a JWKS document", "ending in /api/v1/gateway/keys"}},
		{[]string{"--keys-file", missing}, []string{`--keys-file "` + missing + `"`, "no such file"}},
	} {
		root := &cobra.Command{Use: "vdibroker", SilenceUsage: true, SilenceErrors: true}
		root.AddCommand(newGatewayCmd())
		var stderr bytes.Buffer
		root.SetOut(io.Discard)
		root.SetErr(&stderr)
		root.SetContext(t.Context())
		args := append([]string{"gateway", "--listen", "127.0.0.1:0", "--tls-cert", filepath.Join(dir, "none.crt"), "--tls-key", filepath.Join(dir, "none.key")}, tc.args...)
		if code := execute(root, args, &stderr); code != 2 {
			t.Errorf("gateway %v: exit %d, want 2 (a mistake in the settings); stderr %q", tc.args, code, stderr.String())
		}
		for _, want := range tc.want {
			if !strings.Contains(stderr.String(), want) {
				t.Errorf("gateway %v: %q, want it to say %q", tc.args, stderr.String(), want)
			}
		}
	}
}

// testKeysDoc is a JWKS document of one fresh Ed25519 key, "k", as the
// broker's keys URL answers it.
func testKeysDoc(t *testing.T) []byte {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := gatewaytoken.MarshalJWKS(map[string]ed25519.PublicKey{"k": pub})
	if err != nil {
		t.Fatal(err)
	}
	return doc
}
