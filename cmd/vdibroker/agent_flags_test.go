package main

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestAgentFlagsChecked: the agent refuses a session host name the broker
// would refuse (SPEC §3: 3..48 characters) and a heartbeat interval outside
// 1s..1h before it contacts the broker, as a usage error (exit 2) naming
// the flag; a default host name the broker would refuse (a machine named
// "vm") says it is the machine's and to give --host-name.
func TestAgentFlagsChecked(t *testing.T) {
	tests := []struct {
		name     string
		host     string
		interval time.Duration
		want     string // "" accepted
	}{
		{"good", "rdsh-01", 10 * time.Second, ""},
		{"interval zero is the default", "rdsh-01", 0, ""},
		{"bounds", "rdsh-01", time.Hour, ""},
		{"machine's name too short", "vm", 10 * time.Second, `--host-name "vm" (this machine's host name; give the session host's name with --host-name): must be 3..48 characters`},
		{"given name with a slash", "a/b/c", 10 * time.Second, `--host-name "a/b/c": must be`},
		{"interval below a second", "rdsh-01", time.Millisecond, "--heartbeat-interval 1ms: must be 1s..1h"},
		{"negative interval", "rdsh-01", -5 * time.Second, "--heartbeat-interval -5s: must be 1s..1h"},
		{"interval past an hour", "rdsh-01", 2 * time.Hour, "--heartbeat-interval 2h: must be 1s..1h"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &agentFlags{provider: "none", protocols: []string{"RDP"}, machineName: "vm"}
			o.cfg.Server, o.cfg.HostName, o.cfg.HeartbeatInterval = "http://127.0.0.1:1", tt.host, tt.interval
			o.logs = logFlags{level: "info"}
			_, _, err := o.config()
			var ue usageError
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && (!errors.As(err, &ue) || !strings.HasPrefix(err.Error(), tt.want)):
				t.Errorf("got %v; want a usage error starting %q", err, tt.want)
			}
		})
	}
}
