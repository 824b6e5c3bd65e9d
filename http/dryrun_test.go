package http_test

import (
	"context"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestDryRunWritesNothing_RC8: a dry run for a user whose Pending session
// has outlived pendingTimeoutSeconds decides as a connect would (the old
// session is not answered, R-S3) but stores nothing: the session stays
// Pending until a real connect, the maintenance loop or a heartbeat ends
// it. Before, the dry run ended it itself.
func TestDryRunWritesNothing_RC8(t *testing.T) {
	e := newEnvWith(t, envOptions{maintenance: time.Hour})
	ctx := context.Background()
	e.pool("rc8w", map[string]any{"loadBalancerType": "DepthFirst", "maxSessionLimit": 5, "pendingTimeoutSeconds": 10})
	e.addHosts("rc8w", "rc8w", 2)
	first := e.mustConnect("rc8w", "alice")
	// Past pendingTimeoutSeconds; no heartbeat meanwhile (it would end
	// the session, R-S3), the hosts stay Available (R-H1: 90 s).
	e.clock.Advance(11 * time.Second)

	dry, err := e.admin.Connect(ctx, "rc8w", vhttp.ConnectRequest{User: "alice", DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if dry.Reconnect || dry.SessionID != "" {
		t.Errorf("dry run answered the expired Pending session: %+v", dry)
	}
	got, err := e.store.GetUserSession(ctx, "rc8w", first.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != vdibroker.StatePending {
		t.Fatalf("after a dry run the session is %s (%s); a dry run must store nothing (R-C8)", got.State, got.EndReason)
	}

	// A real connect ends it (R-S3) and places anew.
	again := e.mustConnect("rc8w", "alice")
	if !again.Created || again.SessionID == first.SessionID {
		t.Errorf("connect after the timeout: %+v, want a new session", again)
	}
	got, err = e.store.GetUserSession(ctx, "rc8w", first.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != vdibroker.StateLoggedOff || got.EndReason != "PendingTimeout" {
		t.Errorf("old session after the connect: %s %q, want LoggedOff PendingTimeout", got.State, got.EndReason)
	}
}
