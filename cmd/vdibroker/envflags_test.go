package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestEnvOverriddenAsParsed: the warning that the command line overrode
// a VDIBROKER_ variable compares the values as the flag reads them, and
// never counts a flag the environment itself set (flagsFromEnv marks it
// changed): a duration, boolean, number or list written otherwise than
// the flag prints it ("1m", not "1m0s"; "1", not "true"; "a,b", not
// "[a,b]") is no conflict, with or without the same flag on the command
// line; another value is.
func TestEnvOverriddenAsParsed(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cmd      func() *cobra.Command
		env      map[string]string
		args     []string
		want     string
		fromEnvs string
	}{
		{"a duration from the environment only", newServeCmd, map[string]string{"VDIBROKER_RETENTION": "720h"}, nil, "", "retention"},
		{"a list from the environment only", newGatewayCmd, map[string]string{"VDIBROKER_TARGET_PORTS": "3389,443"}, nil, "", "target-ports"},
		{"a boolean from the environment only", newServeCmd, map[string]string{"VDIBROKER_TLS_CLIENT_ANY_HOST": "1"}, nil, "", "tls-client-any-host"},
		{"a number from the environment only", newGatewayCmd, map[string]string{"VDIBROKER_REQUEST_RATE": "5.0"}, nil, "", "request-rate"},
		{"the same duration on both", newServeCmd, map[string]string{"VDIBROKER_STORE_TIMEOUT": "1m"}, []string{"--store-timeout", "60s"}, "", ""},
		{"the same list on both", newGatewayCmd, map[string]string{"VDIBROKER_TARGET_PORTS": "3389,443"}, []string{"--target-ports", "3389,443"}, "", ""},
		{"the same boolean on both", newServeCmd, map[string]string{"VDIBROKER_TLS_CLIENT_ANY_HOST": "1"}, []string{"--tls-client-any-host"}, "", ""},
		{"another duration", newServeCmd, map[string]string{"VDIBROKER_STORE_TIMEOUT": "1m"}, []string{"--store-timeout", "30s"}, "VDIBROKER_STORE_TIMEOUT", ""},
		{"another list", newGatewayCmd, map[string]string{"VDIBROKER_TARGET_PORTS": "3389,443"}, []string{"--target-ports", "3389"}, "VDIBROKER_TARGET_PORTS", ""},
		{"another boolean", newServeCmd, map[string]string{"VDIBROKER_TLS_CLIENT_ANY_HOST": "false"}, []string{"--tls-client-any-host"}, "VDIBROKER_TLS_CLIENT_ANY_HOST", ""},
		{"a value the flag refuses", newServeCmd, map[string]string{"VDIBROKER_STORE_TIMEOUT": "soon"}, []string{"--store-timeout", "30s"}, "VDIBROKER_STORE_TIMEOUT", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			cmd := tc.cmd()
			if err := cmd.ParseFlags(tc.args); err != nil {
				t.Fatal(err)
			}
			// As serve, agent and gateway do: the environment's flags,
			// then the warning.
			fromEnv, err := flagsFromEnv(cmd)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(fromEnv, ","); got != tc.fromEnvs {
				t.Fatalf("flags from the environment: %q, want %q", got, tc.fromEnvs)
			}
			if got := strings.Join(envOverridden(cmd, fromEnv), ","); got != tc.want {
				t.Errorf("variables the command line overrides: %q, want %q", got, tc.want)
			}
		})
	}
}

// TestEnvMisspelt: a VDIBROKER_ variable within two edits of a flag's
// that is no flag of the command is reported with the flag variables near
// it; the command's own variables, the other long-running commands'
// (one shell may hold an agent's and a broker's), the admin CLI's
// (VDIBROKER_SERVER, VDIBROKER_TOKEN), the admin token, the units' extra
// arguments and the tests' switches are not, nor a name far from every
// flag's.
func TestEnvMisspelt(t *testing.T) {
	commands := map[string]func() *cobra.Command{"serve": newServeCmd, "agent": newAgentCmd, "gateway": newGatewayCmd}
	var everyFlag []string
	for _, newCmd := range commands {
		newCmd().Flags().VisitAll(func(f *pflag.Flag) { everyFlag = append(everyFlag, envName(f.Name)+"=x") })
	}
	notFlags := []string{"VDIBROKER_SERVER=http://127.0.0.1:8080", "VDIBROKER_TOKEN=t", "VDIBROKER_ADMIN_TOKEN=t",
		"VDIBROKER_SERVE_ARGS=--x", "VDIBROKER_AGENT_ARGS=--x", "VDIBROKER_TEST_POSTGRES_DSN=x", "VDIBROKER_TEST_AS_CLI=1",
		"VDIBROKER_BENCH_OUTAGE=1", "VDIBROKER_SOMETHING_ELSE_ENTIRELY=1", "PATH=/bin"}
	for name, newCmd := range commands {
		t.Run(name+" takes every known variable", func(t *testing.T) {
			if got := envMisspelt(newCmd(), append(everyFlag, notFlags...)); len(got) != 0 {
				t.Errorf("reported %v, want none", got)
			}
		})
	}
	for _, tc := range []struct {
		name    string
		cmd     func() *cobra.Command
		environ []string
		want    string // name:near,near;...
	}{
		// LISTN is LISTEN without its E: one edit.
		{"a letter left out", newServeCmd, []string{"VDIBROKER_LISTN=0.0.0.0:8443"}, "VDIBROKER_LISTN:VDIBROKER_LISTEN"},
		// FLE for FILE: one edit; /metrics would stay open.
		{"the metrics token file", newServeCmd, []string{"VDIBROKER_METRICS_TOKEN_FLE=/etc/vdibroker/metrics.token"}, "VDIBROKER_METRICS_TOKEN_FLE:VDIBROKER_METRICS_TOKEN_FILE"},
		// CERTS for CERT: one edit.
		{"a letter added", newServeCmd, []string{"VDIBROKER_TLS_CERTS=/etc/vdibroker/broker.pem"}, "VDIBROKER_TLS_CERTS:VDIBROKER_TLS_CERT"},
		// A dash for an underscore: one edit, as a flag name would be written.
		{"a dash", newAgentCmd, []string{"VDIBROKER_STATE-DIR=/srv/agent"}, "VDIBROKER_STATE-DIR:VDIBROKER_STATE_DIR"},
		// Lower case: every letter is an edit, so far from every flag's.
		{"lower case is far", newServeCmd, []string{"vdibroker_listen=x", "VDIBROKER_listen=x"}, ""},
		// The secret itself for its file: five edits, still reported.
		{"a secret for its file", newServeCmd, []string{"VDIBROKER_METRICS_TOKEN=s", "VDIBROKER_OIDC_CLIENT_SECRET=s", "VDIBROKER_FEDERATION_SECRET=s"},
			"VDIBROKER_FEDERATION_SECRET:VDIBROKER_FEDERATION_SECRET_FILE;VDIBROKER_METRICS_TOKEN:VDIBROKER_METRICS_TOKEN_FILE;VDIBROKER_OIDC_CLIENT_SECRET:VDIBROKER_OIDC_CLIENT_SECRET_FILE"},
		{"the agent's token and its file are both flags", newAgentCmd, []string{"VDIBROKER_REGISTRATION_TOKEN=t"}, ""},
		{"sorted by name", newServeCmd, []string{"VDIBROKER_RETENTON=0", "VDIBROKER_LISTN=x"}, "VDIBROKER_LISTN:VDIBROKER_LISTEN;VDIBROKER_RETENTON:VDIBROKER_RETENTION"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var parts []string
			for _, m := range envMisspelt(tc.cmd(), tc.environ) {
				parts = append(parts, m.name+":"+strings.Join(m.near, ","))
			}
			if got := strings.Join(parts, ";"); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestEnvNamed: only the whole flag is named as its variable (not
// --log-level inside --log-level-file), once, and not when the message
// names the variable already; the error's type survives.
func TestEnvNamed(t *testing.T) {
	for _, tc := range []struct {
		msg     string
		fromEnv []string
		want    string
	}{
		{"--log-level: want debug", []string{"log-level"}, "VDIBROKER_LOG_LEVEL (--log-level): want debug"},
		{"--log-level-file x: no level", []string{"log-level"}, "--log-level-file x: no level"},
		{"--x-log-level: no", []string{"log-level"}, "--x-log-level: no"},
		{"--keys-refresh: at most 5m with --keys-url", []string{"keys-refresh", "keys-url"},
			"VDIBROKER_KEYS_REFRESH (--keys-refresh): at most 5m with VDIBROKER_KEYS_URL (--keys-url)"},
		{"--listen a: give --listen b", []string{"listen"}, "VDIBROKER_LISTEN (--listen) a: give --listen b"},
		{"VDIBROKER_NAME: give --name", []string{"name"}, "VDIBROKER_NAME: give --name"},
		// A longer variable's name (VDIBROKER_DATABASE_FILE) is not
		// database's, whichever flag is named first.
		{"give --database or --database-file, not both", []string{"database-file", "database"},
			"give VDIBROKER_DATABASE (--database) or VDIBROKER_DATABASE_FILE (--database-file), not both"},
		{"VDIBROKER_LOG_LEVEL_FILE: no level in it; --log-level is taken", []string{"log-level"},
			"VDIBROKER_LOG_LEVEL_FILE: no level in it; VDIBROKER_LOG_LEVEL (--log-level) is taken"},
		{"--listen a", nil, "--listen a"},
	} {
		err := envNamed(usageError{errors.New(tc.msg)}, tc.fromEnv)
		if got := err.Error(); got != tc.want {
			t.Errorf("envNamed(%q, %v) = %q, want %q", tc.msg, tc.fromEnv, got, tc.want)
		}
		if !errors.As(err, new(usageError)) {
			t.Errorf("envNamed(%q): %T, want a usage error", tc.msg, err)
		}
	}
}
