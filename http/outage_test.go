package http_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/intercept"
	"github.com/vdibroker/vdibroker/internal/pgtest"
)

// TestStoreOutage_PostgreSQL (R-OUT1): two replicas on a PostgreSQL
// server of the test's own, which is stopped (and, separately, paused with
// SIGSTOP) while sessions are open. During the outage /healthz says so
// within the store timeout and /healthz?live stays 200; reconnects of
// existing users are answered from memory on their host (R-C1) through
// either replica, and new users get 503 StoreUnavailable with
// Retry-After, never a hang or a 500, none of them reaching the store;
// heartbeats are accepted. When the server is back, with no restart of the brokers,
// every session is in the database, the counts are exact, a heartbeat held
// during the outage has been reconciled (R-S2), and new connects work.
func TestStoreOutage_PostgreSQL(t *testing.T) {
	for _, mode := range []string{"stopped", "paused"} {
		t.Run(mode, func(t *testing.T) { testStoreOutage(t, mode) })
	}
}

func testStoreOutage(t *testing.T, mode string) {
	start := time.Now()
	pg := pgtest.Start(t)
	t.Logf("%v: PostgreSQL started", time.Since(start))
	const storeTimeout = 2 * time.Second
	// The calls that reach each replica's store, past its guard; the
	// prober's pings, which ask the store during an outage, are not
	// counted.
	var (
		callsMu sync.Mutex
		calls   []string
	)
	storeCall := func(i int, op string) {
		if op == intercept.OpPing || op == intercept.OpClose {
			return
		}
		callsMu.Lock()
		calls = append(calls, fmt.Sprintf("replica %d: %s", i, op))
		callsMu.Unlock()
	}
	reached := func() int { callsMu.Lock(); defer callsMu.Unlock(); return len(calls) }
	e := newEnvWith(t, envOptions{dsn: pg.DSN, replicas: 2, maintenance: 200 * time.Millisecond, storeTimeout: storeTimeout, storeCall: storeCall})
	ctx := context.Background()
	e.pool("outage", map[string]any{"maxSessionLimit": 3})
	hosts := e.addHosts("outage", "oh", 3)
	placed := map[string]*vhttp.ConnectResult{}
	for i := range 6 {
		user := fmt.Sprintf("u%d", i)
		r, err := e.client(i%2, adminToken).Connect(ctx, "outage", vhttp.ConnectRequest{User: user})
		if err != nil {
			t.Fatalf("connect %s: %v", user, err)
		}
		placed[user] = r
	}
	// The agents report their users logged on; then u4 logs off (placed
	// by replica 0, which remembers the session; the report it applies
	// says it ended).
	report := func() {
		t.Helper()
		for _, h := range hosts {
			var ss []vdibroker.AgentSession
			for user, r := range placed {
				if r.SessionHost == h {
					ss = append(ss, vdibroker.AgentSession{ID: "x" + user, User: user, State: vdibroker.StateActive})
				}
			}
			if _, err := e.heartbeatErr(h, &vdibroker.HeartbeatRequest{Sessions: ss}); err != nil {
				t.Fatal(err)
			}
		}
	}
	report()
	gone := placed["u4"]
	delete(placed, "u4")
	report()
	// Let both replicas catch up with the sessions the other placed (the
	// maintenance loop does it every tick).
	for i := range e.srvs {
		e.waitTicks(i, 2)
	}

	switch mode {
	case "stopped":
		pg.Stop()
	case "paused":
		pg.Pause()
	}
	// Known on each replica. That each store call and ping runs under the
	// store timeout is broker/outage's TestGuardTimeouts and
	// TestGuardBoundsAHungStore (by the deadline set); the half minute
	// here only bounds a replica that never notices, on a loaded machine.
	for i := range e.urls {
		waitHealth(t, e.urls[i], http.StatusServiceUnavailable, 30*time.Second)
		if got := healthStatus(t, e.urls[i]+"/healthz?live"); got != http.StatusOK {
			t.Errorf("replica %d: /healthz?live = %d during the outage, want 200", i, got)
		}
	}

	t.Logf("%v: the outage is known", time.Since(start))
	// u4's session ended: replica 0 remembers it, but its host's last
	// report does not have u4, so it is not answered from memory.
	if status, ve, _ := rawConnect(t, e.urls[0], "outage", "u4"); status != http.StatusServiceUnavailable || ve == nil || ve.Code != vdibroker.EStoreUnavailable {
		t.Errorf("u4, logged off before the outage: %d %+v, want 503 StoreUnavailable, not its ended session %s", status, ve, gone.SessionID)
	}
	// Reconnects, each through the replica that did not place it, are
	// answered from memory, and a new user is refused, without a call
	// reaching the store: each would wait for the store (up to the
	// store timeout when it is paused). Not timed: what reached the
	// store is counted.
	before := reached()
	for i := range 6 {
		user := fmt.Sprintf("u%d", i)
		if user == "u4" {
			continue
		}
		r, err := e.client((i+1)%2, adminToken).Connect(ctx, "outage", vhttp.ConnectRequest{User: user})
		if err != nil {
			t.Errorf("reconnect %s during the outage: %v", user, err)
			continue
		}
		want := placed[user]
		if !r.Reconnect || r.Created || r.SessionHost != want.SessionHost || r.SessionID != want.SessionID {
			t.Errorf("reconnect %s: %+v, want session %s on %s, reconnect", user, r.ConnectResponse, want.SessionID, want.SessionHost)
		}
	}
	status, ve, retry := rawConnect(t, e.urls[0], "outage", "newcomer")
	if status != http.StatusServiceUnavailable || ve == nil || ve.Code != vdibroker.EStoreUnavailable || retry == "" {
		t.Errorf("new connect during the outage: %d %+v Retry-After %q, want 503 StoreUnavailable with Retry-After", status, ve, retry)
	}
	callsMu.Lock()
	if got := calls[before:]; len(got) > 0 {
		t.Errorf("the connects during the outage reached the store: %q; want them answered without it", got)
	}
	callsMu.Unlock()

	// Heartbeats are accepted; u0's host reports u0 disconnected.
	for _, h := range hosts {
		var ss []vdibroker.AgentSession
		for user, r := range placed {
			if r.SessionHost == h {
				state := vdibroker.StateActive
				if user == "u0" {
					state = vdibroker.StateDisconnected
				}
				ss = append(ss, vdibroker.AgentSession{ID: "x" + user, User: user, State: state})
			}
		}
		if _, err := e.heartbeatErr(h, &vdibroker.HeartbeatRequest{Sessions: ss}); err != nil {
			t.Errorf("heartbeat of %s during the outage: %v", h, err)
		}
	}

	switch mode {
	case "stopped":
		pg.Restart()
	case "paused":
		pg.Resume()
	}
	t.Logf("%v: PostgreSQL is back", time.Since(start))
	for i := range e.urls {
		waitHealth(t, e.urls[i], http.StatusOK, 15*time.Second)
	}
	t.Logf("%v: the brokers know", time.Since(start))

	// Nothing lost, counts exact, the held heartbeat reconciled (it is
	// written just after the store is known to be back).
	var open []*vdibroker.UserSession
	for deadline := time.Now().Add(10 * time.Second); ; {
		var err error
		if open, err = e.admin.ListUserSessions(ctx, "outage", vhttp.SessionQuery{User: "u0"}); err != nil {
			t.Fatal(err)
		}
		if len(open) == 1 && open[0].State == vdibroker.StateDisconnected || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	open, err := e.admin.ListUserSessions(ctx, "outage", vhttp.SessionQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(open) != len(placed) {
		t.Errorf("after recovery %d open sessions, want %d", len(open), len(placed))
	}
	perHost := map[string]int{}
	for _, us := range open {
		perHost[us.SessionHost]++
		if us.User == "u0" && us.State != vdibroker.StateDisconnected {
			t.Errorf("u0 is %s after recovery; the heartbeat held during the outage reported it Disconnected", us.State)
		}
	}
	for h, n := range e.sessionsPerHost("outage") {
		if n != perHost[h] {
			t.Errorf("host %s counts %d sessions, %d are open", h, n, perHost[h])
		}
	}
	if r, err := e.client(1, adminToken).Connect(ctx, "outage", vhttp.ConnectRequest{User: "newcomer"}); err != nil || !r.Created {
		t.Errorf("new connect after recovery: %+v, %v", r, err)
	}
	t.Logf("%v: checked", time.Since(start))
}

// rawConnect posts a connect and returns the status, error body and
// Retry-After header.
func rawConnect(t *testing.T, base, pool, user string) (int, *vdibroker.Error, string) {
	t.Helper()
	resp, ve, _ := rawDoAt(t, base, "POST", "/api/v1/hostpools/"+pool+"/connect", adminToken, `{"user":"`+user+`"}`)
	return resp.StatusCode, ve, resp.Header.Get("Retry-After")
}

func healthStatus(t *testing.T, url string) int {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitHealth waits until base's /healthz answers want, failing after within.
func waitHealth(t *testing.T, base string, want int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := healthStatus(t, base+"/healthz")
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/healthz is %d after %v, want %d", base, got, within, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
