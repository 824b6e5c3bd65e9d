package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
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
