package main

import (
	"testing"

	"github.com/vdibroker/vdibroker"
)

// TestQueuedLine: the line of a logoff, disconnect or message names the pod of a
// session in another pod (--pod), leaves out what the answer does not
// carry, and escapes a name's terminal controls.
func TestQueuedLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		q    vdibroker.Command
		pod  string
		want string
	}{
		{"another pod", vdibroker.Command{Type: vdibroker.CommandLogoff, SessionID: "s1", User: "hank", SessionHost: "ams-01", HostPool: "office-ams1"}, "ams1",
			"queued logoff of session s1 of hank on ams-01 (pool office-ams1, pod ams1): its agent runs it on its next heartbeat"},
		{"no host or pool", vdibroker.Command{Type: vdibroker.CommandDisconnect, SessionID: "s2", User: "bob"}, "",
			"queued disconnect of session s2 of bob: its agent runs it on its next heartbeat"},
		{"ended at once", vdibroker.Command{Type: vdibroker.CommandLogoff, SessionID: "s4", User: "carol", SessionHost: "h", HostPool: "p", SessionEnded: true}, "",
			"logged off session s4 of carol on h (pool p): it ended now, as its agent had not reported it yet; a logoff stays queued in case its logon is under way"},
		{"message", vdibroker.Command{Type: vdibroker.CommandSendMessage, SessionID: "s5", User: "dan", SessionHost: "h", HostPool: "p"}, "",
			"queued message to session s5 of dan on h (pool p): its agent shows it on its next heartbeat"},
		{"escaped", vdibroker.Command{Type: vdibroker.CommandLogoff, SessionID: "s3", User: "eve\x1b[2J", SessionHost: "h", HostPool: "p"}, "",
			`queued logoff of session s3 of eve\x1b[2J on h (pool p): its agent runs it on its next heartbeat`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := queuedLine(&tc.q, tc.pod); got != tc.want {
				t.Errorf("queuedLine = %q, want %q", got, tc.want)
			}
		})
	}
}
