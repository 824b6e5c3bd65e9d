package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGatewayFlagsFromEnv (R-GW1): the gateway takes every flag also from
// VDIBROKER_<FLAG>, as serve and agent do, so deploy/gateway.env is its
// settings: a gateway given nothing on the command line but --max-tunnels
// starts from the environment alone (listen address, certificate, keys,
// name, the metrics token's file), and --max-tunnels on the command line
// wins over VDIBROKER_MAX_TUNNELS.
func TestGatewayFlagsFromEnv(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	cert, key := ca.issue(t, dir, "127.0.0.1", 2, false)
	jwks := testKeysDoc(t)
	keysFile := filepath.Join(dir, "keys.json")
	metricsFile := filepath.Join(dir, "metrics.token")
	for name, data := range map[string][]byte{keysFile: jwks, metricsFile: []byte("metrics-token-from-a-file\n")} {
		if err := os.WriteFile(name, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("VDIBROKER_LISTEN", "127.0.0.1:0")
	t.Setenv("VDIBROKER_TLS_CERT", cert)
	t.Setenv("VDIBROKER_TLS_KEY", key)
	t.Setenv("VDIBROKER_KEYS_FILE", keysFile)
	t.Setenv("VDIBROKER_NAME", "rdgw-env")
	t.Setenv("VDIBROKER_METRICS_TOKEN_FILE", metricsFile)
	t.Setenv("VDIBROKER_MAX_TUNNELS", "7")

	m := &GatewayMain{}
	cmd := newGatewayCmdFor(m)
	cmd.SetArgs([]string{"--max-tunnels", "9"})
	out, w := io.Pipe()
	cmd.SetOut(w)
	cmd.SetErr(io.Discard)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- cmd.ExecuteContext(ctx)
		w.Close()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	go io.Copy(io.Discard, out) // the rest: a command that fails prints its usage
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "vdibroker gateway listening on ")
	if !ok {
		cancel()
		t.Fatalf("the gateway printed %q (%v), then: %v", line, err, <-done)
	}

	if m.Name != "rdgw-env" || m.KeysFile != keysFile || m.TLSCert != cert {
		t.Errorf("name %q, keys file %q, cert %q: not the environment's", m.Name, m.KeysFile, m.TLSCert)
	}
	if m.Config.MaxTunnels != 9 {
		t.Errorf("max tunnels %d, want 9: the command line wins over VDIBROKER_MAX_TUNNELS=7", m.Config.MaxTunnels)
	}
	// It serves on the environment's certificate, and /metrics asks for
	// the token of the environment's file.
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	defer client.CloseIdleConnections()
	for _, tc := range []struct {
		token string
		want  int
	}{{"", http.StatusUnauthorized}, {"metrics-token-from-a-file", http.StatusOK}} {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", "https://"+addr+"/metrics", nil)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET /metrics: %v", err)
		}
		res.Body.Close()
		if res.StatusCode != tc.want {
			t.Errorf("GET /metrics with token %q: %d, want %d", tc.token, res.StatusCode, tc.want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("the gateway ended with %v", err)
	}
}

// TestGatewayEnvErrorsNameTheVariable (R-GW1): a value from the
// environment the flag refuses is a usage error naming the variable, as
// for serve and agent, and a token in the environment (by analogy with
// the agent's VDIBROKER_REGISTRATION_TOKEN), which the gateway does not
// read, is a usage error naming the variable of the file it reads
// instead, not a gateway started without its token.
func TestGatewayEnvErrorsNameTheVariable(t *testing.T) {
	for _, tc := range []struct {
		env, value string
		want       []string
	}{
		{"VDIBROKER_MAX_TUNNELS", "many", []string{"VDIBROKER_MAX_TUNNELS: ", `"many"`}},
		{"VDIBROKER_IDLE_TIMEOUT", "1 hour", []string{"VDIBROKER_IDLE_TIMEOUT: "}},
		// Parsed, but out of range: the flag's own check, naming the
		// variable and the flag (docs/gateway.md says so).
		{"VDIBROKER_MAX_TUNNELS", "0", []string{"VDIBROKER_MAX_TUNNELS (--max-tunnels): must be 1 or more, got 0"}},
		{"VDIBROKER_BROKER_TOKEN", "vdbt_x", []string{"VDIBROKER_BROKER_TOKEN: ", "VDIBROKER_BROKER_TOKEN_FILE (--broker-token-file)"}},
		{"VDIBROKER_KEYS_TOKEN", "vdbt_x", []string{"VDIBROKER_KEYS_TOKEN: ", "VDIBROKER_KEYS_TOKEN_FILE"}},
		{"VDIBROKER_METRICS_TOKEN", "secret-secret-secret", []string{"VDIBROKER_METRICS_TOKEN: ", "VDIBROKER_METRICS_TOKEN_FILE"}},
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Setenv(tc.env, tc.value)
			cmd := newGatewayCmd()
			cmd.SetArgs(nil)
			cmd.SetOut(io.Discard)
			cmd.SetErr(io.Discard)
			err := cmd.Execute()
			var ue usageError
			if !errors.As(err, &ue) {
				t.Fatalf("gateway with %s=%s: %v, want a usage error", tc.env, tc.value, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("gateway with %s=%s: %q, want %q in it", tc.env, tc.value, err, w)
				}
			}
		})
	}
}
