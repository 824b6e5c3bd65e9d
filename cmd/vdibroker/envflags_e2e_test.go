//go:build unix

package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeWarnsOfMisspeltEnv: a real serve process whose environment has
// VDIBROKER_METRICS_TOKEN_FLE (a line of broker.env with a letter left
// out) serves /metrics without a token, as the variable is no setting,
// and says so at start: a warning naming the variable and the one meant,
// never the value. The admin CLI's VDIBROKER_SERVER and VDIBROKER_TOKEN
// in the same environment are not warned of.
func TestServeWarnsOfMisspeltEnv(t *testing.T) {
	bin := selfBin(t)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "metrics-token-path")
	if err := os.WriteFile(tokenFile, []byte("a-metrics-token-of-enough-length\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("VDIBROKER_METRICS_TOKEN_FLE", tokenFile)
	t.Setenv("VDIBROKER_SERVER", "http://127.0.0.1:8080")
	t.Setenv("VDIBROKER_TOKEN", "vdbt_cli_token")
	p, base := e2eServeAt(t, bin, filepath.Join(dir, "data"), "vdb_admin_misspelt_env_0123456789", "127.0.0.1:0")
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d, want 200 (the misspelt variable sets no token)", resp.StatusCode)
	}
	log := p.stderr.String()
	line := ""
	for l := range strings.SplitSeq(log, "\n") {
		if strings.Contains(l, "VDIBROKER_METRICS_TOKEN_FLE") {
			line = l
		}
	}
	if !strings.Contains(line, "level=WARN") || !strings.Contains(line, "VDIBROKER_METRICS_TOKEN_FILE") {
		t.Fatalf("want a warning naming VDIBROKER_METRICS_TOKEN_FLE and VDIBROKER_METRICS_TOKEN_FILE, log:\n%s", log)
	}
	if strings.Contains(log, "metrics-token-path") || strings.Contains(log, "VDIBROKER_SERVER") || strings.Contains(log, "VDIBROKER_TOKEN ") {
		t.Errorf("the warning quotes a value, or names the CLI's variables:\n%s", log)
	}
}
