package broker

import (
	"log/slog"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// TestCommandResultsLogged: what an agent reports of the commands it ran
// (R-S4) is read back by no call, so the broker logs it, by the command's
// id: a success at info, a failure at warn with the agent's reason.
func TestCommandResultsLogged(t *testing.T) {
	ctx := t.Context()
	st, err := store.OpenWith(ctx, "", t.TempDir(), nil, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var logs logLines
	svc := New(Config{Store: st, MaintenanceInterval: 24 * time.Hour, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	t.Cleanup(func() { svc.Close() })
	if _, err := st.PutHostPool(ctx, &vdibroker.HostPool{Name: "p", HostPoolType: vdibroker.Pooled, LoadBalancerType: vdibroker.BreadthFirst, MaxSessionLimit: 10}, vdibroker.Precondition{}); err != nil {
		t.Fatal(err)
	}
	h := &vdibroker.SessionHost{HostPool: "p", Name: "h1", Address: "h1:3389", Protocols: []string{"RDP"}, AllowNewSession: true, CreateTime: time.Now()}
	if _, err := st.PutSessionHost(ctx, h); err != nil {
		t.Fatal(err)
	}
	msg := &vdibroker.Command{HostPool: "p", SessionHost: "h1", Type: vdibroker.CommandSendMessage, User: "alice", Message: "Maintenance at 18:00"}
	logoff := &vdibroker.Command{HostPool: "p", SessionHost: "h1", Type: vdibroker.CommandLogoff, User: "bob"}
	for _, c := range []*vdibroker.Command{msg, logoff} {
		if err := st.QueueCommand(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	h2 := &vdibroker.SessionHost{HostPool: "p", Name: "h2", Address: "h2:3389", Protocols: []string{"RDP"}, AllowNewSession: true, CreateTime: time.Now()}
	if _, err := st.PutSessionHost(ctx, h2); err != nil {
		t.Fatal(err)
	}
	others := &vdibroker.Command{HostPool: "p", SessionHost: "h2", Type: vdibroker.CommandLogoff, User: "carol"}
	if err := st.QueueCommand(ctx, others); err != nil {
		t.Fatal(err)
	}
	// With them, what a host makes up: a command that is nobody's, and
	// another host's. Neither is logged: a host's credential would
	// otherwise write 200 lines of its choosing a heartbeat.
	hb := &vdibroker.HeartbeatRequest{Results: []vdibroker.CommandResult{
		{ID: msg.ID, Success: true},
		{ID: logoff.ID, Success: false, Message: "loginctl: session 7 not found"},
		{ID: "made-up", Success: false, Message: "pay 555-0100"},
		{ID: others.ID, Success: false, Message: "pay 555-0101"},
	}}
	if _, err := svc.Heartbeat(ctx, h, hb); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`level=INFO msg="command done on the host" pool=p host=h1 command=` + msg.ID,
		`level=WARN msg="command failed on the host" pool=p host=h1 command=` + logoff.ID + ` reason="loginctl: session 7 not found"`,
	} {
		if logs.count(want) != 1 {
			t.Errorf("log has no line %q:\n%s", want, logs.String())
		}
	}
	if n := logs.count("pay 555-01"); n != 0 {
		t.Errorf("the log has %d lines of results that were no command of h1's:\n%s", n, logs.String())
	}
	// Nor is a result of one of h1's own commands, reported again (a
	// command runs once, R-S4): else h1's credential repeats an id it
	// was given, 200 times a heartbeat, each with a text of its choosing.
	hb = &vdibroker.HeartbeatRequest{Results: []vdibroker.CommandResult{
		{ID: logoff.ID, Success: false, Message: "pay 555-0102"},
		{ID: logoff.ID, Success: false, Message: "pay 555-0103"},
	}}
	if _, err := svc.Heartbeat(ctx, h, hb); err != nil {
		t.Fatal(err)
	}
	if n := logs.count("pay 555-01"); n != 0 {
		t.Errorf("the log has %d lines of results reported again:\n%s", n, logs.String())
	}
}
