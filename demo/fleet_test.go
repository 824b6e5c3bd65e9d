package demo

import (
	"context"
	"math/rand/v2"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/testserver"
	"github.com/vdibroker/vdibroker/store"
)

// startBroker serves the real API (no console, no /metrics: the fleet
// needs neither) on a SQLite store in a temp dir.
func startBroker(t *testing.T) (url, token string) {
	t.Helper()
	st, err := store.Open(t.Context(), "", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	const admin = "fleet-test-admin"
	srv := testserver.New(testserver.Config{Store: st, AdminToken: admin})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ts.Close()
		srv.Close()
		st.Close()
	})
	return ts.URL, admin
}

// TestFleet: Start leaves every simulated host Available, office-08 drained
// and the first wave of users placed; the agents soon report users Active
// (R-S2) and the drained host never gets a new session (R-C2). After Close
// the agents stop heartbeating.
func TestFleet(t *testing.T) {
	url, token := startBroker(t)
	f := &Fleet{
		URL: url, AdminToken: token,
		Rand:      rand.New(rand.NewPCG(3, 4)),
		Heartbeat: 100 * time.Millisecond,
		UserTick:  20 * time.Millisecond,
	}
	if err := f.Start(t.Context()); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	ctx := context.Background()
	c := vhttp.NewClient(url, token)

	if got, want := f.Pools(), 3; got != want {
		t.Errorf("Pools() = %d, want %d", got, want)
	}
	hosts := 0
	for _, p := range demoPools {
		hs, err := c.ListSessionHosts(ctx, p.name)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hs {
			if !vdibroker.Placeable(h.Status) {
				t.Errorf("%s/%s is %s right after Start, want Available", p.name, h.Name, h.Status)
			}
		}
		hosts += len(hs)
	}
	if hosts != f.Hosts() || hosts != 20 {
		t.Errorf("%d hosts registered, Hosts() = %d, want 20 (8+6+6)", hosts, f.Hosts())
	}
	drained, err := c.GetSessionHost(ctx, "office-breadth", "office-08")
	if err != nil {
		t.Fatal(err)
	}
	if drained.AllowNewSession {
		t.Error("office-08 is not drained after Start")
	}

	// The users act every 20ms: within a few heartbeats some sessions are
	// Active (the agents report their users), none on the drained host.
	deadline := time.Now().Add(30 * time.Second)
	for {
		active := 0
		for _, p := range demoPools {
			ss, err := c.ListUserSessions(ctx, p.name, vhttp.SessionQuery{State: vdibroker.StateActive})
			if err != nil {
				t.Fatal(err)
			}
			active += len(ss)
		}
		if active > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no session became Active: the simulated agents do not report their users")
		}
		time.Sleep(50 * time.Millisecond)
	}
	ss, err := c.ListUserSessions(ctx, "office-breadth", vhttp.SessionQuery{SessionHost: "office-08"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 0 {
		t.Errorf("drained office-08 has %d sessions, want none (R-C2)", len(ss))
	}

	// Close stops the agents: no heartbeat arrives afterwards.
	if err := f.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	before, err := c.GetSessionHost(ctx, "dev-depth", "dev-01")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * f.Heartbeat)
	after, err := c.GetSessionHost(ctx, "dev-depth", "dev-01")
	if err != nil {
		t.Fatal(err)
	}
	if before.LastHeartBeat == nil || after.LastHeartBeat == nil || !after.LastHeartBeat.Equal(*before.LastHeartBeat) {
		t.Errorf("dev-01 heartbeat moved from %v to %v after Close", before.LastHeartBeat, after.LastHeartBeat)
	}
}
