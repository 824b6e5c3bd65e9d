package http_test

import (
	"context"
	"regexp"
	"testing"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// storedID is the one shape of every stored row's ID (vdibroker.NewID).
var storedID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// TestStoredIDsOneShape: a placed session, an adopted one (R-S2), a
// command (R-S4), an API token and a registration token all get IDs of one
// shape, and sessions made one after another sort by ID in that order (the
// ?after= cursor and the pool views' catch-up compare IDs as strings).
func TestStoredIDsOneShape(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pool := uniq("ids")
	e.pool(pool, nil)
	host := e.addHosts(pool, "ids", 1)[0]

	placed := e.mustConnect(pool, "alice")
	e.heartbeat(host, vdibroker.AgentSession{ID: "7", User: "alice", State: vdibroker.StateActive},
		vdibroker.AgentSession{ID: "8", User: "bob", State: vdibroker.StateActive})
	sessions, err := e.admin.ListUserSessions(ctx, pool, vhttp.SessionQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sessions) != 2 || sessions[0].ID != placed.SessionID || sessions[0].Adopted || !sessions[1].Adopted {
		t.Fatalf("sessions %+v: want alice's placed %s, then bob's adopted", sessions, placed.SessionID)
	}
	cmd, err := e.admin.Logoff(ctx, pool, sessions[1].ID)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: vdibroker.RoleReader, Subject: "ids"})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := e.admin.CreateRegistrationToken(ctx, pool, vhttp.RegistrationTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for what, id := range map[string]string{"placed session": sessions[0].ID, "adopted session": sessions[1].ID,
		"command": cmd.ID, "API token": tok.ID, "registration token": rt.ID} {
		if !storedID.MatchString(id) {
			t.Errorf("%s ID %q: want 32 lowercase hex digits", what, id)
		}
	}
	if sessions[0].ID >= sessions[1].ID {
		t.Errorf("placed %s, then adopted %s: the later does not sort after", sessions[0].ID, sessions[1].ID)
	}
}
