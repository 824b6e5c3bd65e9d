//go:build unix

package main

import (
	"errors"
	"net/http"
	"os"
	"os/exec"
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

// TestEnvRangeErrorsNameTheVariable: a value from the environment that
// parses but fails the flag's own check (a level no logger has, a wait
// past its range) stops the real serve, agent and gateway with exit 2 and
// an error naming the variable the administrator wrote in broker.env,
// with the flag after it, as a value the flag refuses to parse is named;
// the same value on the command line is named by the flag alone.
func TestEnvRangeErrorsNameTheVariable(t *testing.T) {
	bin := selfBin(t)
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string
		not  string
	}{
		{"serve log level", []string{"VDIBROKER_LOG_LEVEL=bogus"}, []string{"serve"},
			"error: VDIBROKER_LOG_LEVEL (--log-level): ", "VDIBROKER_LOG_LEVEL (--log-level) "},
		{"serve connect wait", []string{"VDIBROKER_MAX_CONNECT_WAIT=1h"}, []string{"serve"},
			"error: VDIBROKER_MAX_CONNECT_WAIT (--max-connect-wait): must be 1s..", ""},
		{"serve outage share", []string{"VDIBROKER_OUTAGE_SHARE=0"}, []string{"serve"},
			"error: VDIBROKER_OUTAGE_SHARE (--outage-share) 0: want 1 to 100", ""},
		{"serve command line", nil, []string{"serve", "--log-level", "bogus"},
			"error: --log-level: ", "VDIBROKER_"},
		{"serve both, the command line wins", []string{"VDIBROKER_LOG_LEVEL=info"}, []string{"serve", "--log-level", "bogus"},
			"error: --log-level: ", "VDIBROKER_"},
		{"agent heartbeat", []string{"VDIBROKER_HEARTBEAT_INTERVAL=2h"}, []string{"agent", "--server", "http://127.0.0.1:1", "--host-name", "sh-env-1"},
			"error: VDIBROKER_HEARTBEAT_INTERVAL (--heartbeat-interval) 2h: must be 1s..1h", ""},
		{"gateway tunnels", []string{"VDIBROKER_MAX_TUNNELS=0"}, []string{"gateway"},
			"error: VDIBROKER_MAX_TUNNELS (--max-tunnels): must be 1 or more, got 0", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if args[0] == "serve" {
				args = append(args, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0")
			}
			cmd := exec.Command(bin, args...)
			cmd.Env = append(os.Environ(), tc.env...)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 {
				t.Fatalf("%v %v: %v, want exit 2; output:\n%s", tc.env, args, err, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("%v %v: output\n%s\nwant %q in it", tc.env, args, out, tc.want)
			}
			if tc.not != "" && strings.Contains(string(out), tc.not) {
				t.Errorf("%v %v: output\n%s\nwant no %q in it", tc.env, args, out, tc.not)
			}
		})
	}
}
