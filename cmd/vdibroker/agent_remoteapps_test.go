package main

import (
	"testing"

	"github.com/spf13/pflag"
)

// TestAgentRemoteAppsFlag_RE12: --remote-apps auto leaves the word to the
// sessions provider (nil), yes and no override it, anything else is a
// usage error.
func TestAgentRemoteAppsFlag_RE12(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "nil", "true", "false"
	}{
		{nil, "nil"},
		{[]string{"--remote-apps=auto"}, "nil"},
		{[]string{"--remote-apps=yes"}, "true"},
		{[]string{"--remote-apps", "no"}, "false"},
	} {
		var o agentFlags
		f := pflag.NewFlagSet("agent", pflag.ContinueOnError)
		o.register(f)
		if err := f.Parse(append([]string{"--server=http://127.0.0.1:1", "--sessions-provider=none", "--host-name=rdsh-01"}, tc.args...)); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		cfg, _, err := o.config()
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		got := "nil"
		if cfg.RemoteApps != nil {
			got = map[bool]string{true: "true", false: "false"}[*cfg.RemoteApps]
		}
		if got != tc.want {
			t.Errorf("%v: RemoteApps %s, want %s", tc.args, got, tc.want)
		}
	}
	var o agentFlags
	f := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	o.register(f)
	if err := f.Parse([]string{"--remote-apps=maybe"}); err == nil {
		t.Error("--remote-apps=maybe accepted")
	}
}
