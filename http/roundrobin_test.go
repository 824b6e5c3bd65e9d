package http_test

import (
	"github.com/vdibroker/vdibroker/internal/testserver"

	"context"
	"net/http/httptest"
	"testing"
	"time"

	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestRoundRobinCursorShared_RLI4: bucket 1's round robin goes on from the
// host after the one last chosen in the pool, whichever replica chose it,
// and after a restart. Two servers share one store; a third starts later
// as a restarted broker would. Before, each server kept its own cursor in
// memory: the second server's first connect went to the first host again.
func TestRoundRobinCursorShared_RLI4(t *testing.T) {
	e := newEnvWith(t, envOptions{replicas: 2, maintenance: 50 * time.Millisecond})
	ctx := context.Background()
	e.pool("rrpool", map[string]any{"loadBalancerType": "LoadIndex", "maxSessionLimit": 10})
	hosts := e.addHosts("rrpool", "rrh", 3) // all light: bucket 1 (R-LI3)

	connect := func(c *vhttp.Client, user string) string {
		t.Helper()
		r, err := c.Connect(ctx, "rrpool", vhttp.ConnectRequest{User: user})
		if err != nil {
			t.Fatalf("connect %s: %v", user, err)
		}
		return r.SessionHost
	}

	got := []string{connect(e.client(0, adminToken), "u1")}
	got = append(got, connect(e.client(1, adminToken), "u2")) // a fresh view: reads the cursor
	// The first server's maintenance ticks after u2: its view, used by
	// u1, is read again, or, left idle, takes the cursor at u3 (R-LI4).
	e.waitTicks(0, 2)
	got = append(got, connect(e.client(0, adminToken), "u3"))

	// A restarted broker on the same store goes on from the cursor.
	srv := testserver.New(testserver.Config{Store: e.store, Now: e.clock.Now, AdminToken: adminToken})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { ts.Close(); srv.Close() })
	got = append(got, connect(vhttp.NewClient(ts.URL, adminToken), "u4"))

	// Round robin in query order: h1, h2, h3, then h1 again.
	want := []string{hosts[0], hosts[1], hosts[2], hosts[0]}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("placements %v, want %v (R-LI4: from the host after the one last chosen in this pool)", got, want)
		}
	}
}
