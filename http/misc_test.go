package http_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/internal/syncbuf"
	"github.com/vdibroker/vdibroker/internal/testserver"
)

// failingStore is the real store with one method broken, to see how the
// server answers an internal error.
type failingStore struct{ vdibroker.Store }

func (failingStore) ListHostPools(context.Context) ([]*vdibroker.HostPool, error) {
	return nil, errors.New("disk on fire at /var/lib/vdibroker")
}

// TestInternalErrors_SPEC9: an internal error answers 500 "internal error"
// with no details; the details and the request id are in the log.
func TestInternalErrors_SPEC9(t *testing.T) {
	e := newEnv(t)
	var logs syncbuf.Buffer
	srv := testserver.New(testserver.Config{Store: failingStore{e.store}, AdminToken: adminToken,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	defer srv.Close()
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	req, _ := http.NewRequest("GET", ts.URL+"/api/v1/hostpools", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("X-Request-Id", "req-12345")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	body.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 500 || body.String() != `{"error":{"code":"Internal","message":"internal error"}}`+"\n" {
		t.Errorf("got %d %s", resp.StatusCode, body.String())
	}
	if resp.Header.Get("X-Request-Id") != "req-12345" {
		t.Errorf("X-Request-Id %q, want the caller's", resp.Header.Get("X-Request-Id"))
	}
	if l := logs.String(); !strings.Contains(l, "disk on fire") || !strings.Contains(l, `"request_id":"req-12345"`) {
		t.Errorf("log lacks the details or the request id:\n%s", l)
	}
	// Without a usable id the server makes one.
	req, _ = http.NewRequest("GET", ts.URL+"/healthz", nil)
	req.Header.Set("X-Request-Id", "bad id with spaces")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if id := resp.Header.Get("X-Request-Id"); id == "" || strings.Contains(id, " ") {
		t.Errorf("generated request id %q", id)
	}
}

// TestMethodNotAllowed: a known path with another method is a JSON 405
// with the Allow header RFC 9110 requires, whose methods the message
// names too: a user who sent GET to a logoff's URL learns it takes DELETE.
func TestMethodNotAllowed(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct{ method, path, allow string }{
		{"POST", "/api/v1/hostpools/x", "GET, PUT, PATCH, DELETE"},
		{"GET", "/api/v1/hostpools/x/usersessions/y/disconnect", "POST"},
	} {
		res, _, raw := rawDoAt(t, e.urls[0], tc.method, tc.path, adminToken, "{}")
		if res.StatusCode != 405 || !strings.Contains(string(raw), `"code":"MethodNotAllowed"`) {
			t.Errorf("%s %s: got %d %s", tc.method, tc.path, res.StatusCode, raw)
		}
		if got := res.Header.Get("Allow"); got != tc.allow {
			t.Errorf("%s %s: Allow %q, want %q", tc.method, tc.path, got, tc.allow)
		}
		if !strings.Contains(string(raw), "allowed: "+tc.allow) {
			t.Errorf("%s %s: %s does not name the allowed methods %s", tc.method, tc.path, raw, tc.allow)
		}
	}
}

// TestHostStatusAndLoadIndex_RH1_RIDX: status is evaluated at read time from
// the heartbeat age and the agent's flags; NeedsAssistance hosts still take
// sessions, Shutdown ones do not; loadIndex follows the last sample (R-IDX1).
func TestHostStatusAndLoadIndex_RH1_RIDX(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pool("rh1", map[string]any{"loadBalancerType": "LoadIndex", "loadBalancing": map[string]any{"cpuThreshold": 60, "includeSessionCount": false}})
	hosts := e.addHosts("rh1", "rh1h", 2)
	status := func(h string) *vdibroker.SessionHost {
		t.Helper()
		got, err := e.admin.GetSessionHost(ctx, "rh1", h)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	// cpu 45 % with cpuThreshold 60 → 100 × 45 / 60 = 75.
	if _, err := e.heartbeatErr(hosts[0], &vdibroker.HeartbeatRequest{Metrics: &vdibroker.Metrics{CPUPercent: 45, SampledAt: e.clock.Now()}}); err != nil {
		t.Fatal(err)
	}
	if h := status(hosts[0]); h.LoadIndex != 75 || h.Metrics == nil || h.Metrics.CPUPercent != 45 {
		t.Errorf("loadIndex %d metrics %+v, want 75", h.LoadIndex, h.Metrics)
	}
	if _, err := e.heartbeatErr(hosts[0], &vdibroker.HeartbeatRequest{HealthError: "disk 98% full"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.heartbeatErr(hosts[1], &vdibroker.HeartbeatRequest{ShuttingDown: true}); err != nil {
		t.Fatal(err)
	}
	if s := status(hosts[0]).Status; s != vdibroker.StatusNeedsAssistance {
		t.Errorf("health error: status %s, want NeedsAssistance", s)
	}
	if s := status(hosts[1]).Status; s != vdibroker.StatusShutdown {
		t.Errorf("shutting down: status %s, want Shutdown", s)
	}
	for _, u := range []string{"u1", "u2"} {
		if r := e.mustConnect("rh1", u); r.SessionHost != hosts[0] {
			t.Errorf("%s on %s, want %s (NeedsAssistance is placeable, Shutdown is not)", u, r.SessionHost, hosts[0])
		}
	}
	e.clock.Advance(91 * time.Second)
	if s := status(hosts[0]).Status; s != vdibroker.StatusUnavailable {
		t.Errorf("silent for 91 s: status %s, want Unavailable", s)
	}
	_, err := e.connect("rh1", "u3")
	wantCode(t, err, vdibroker.ENoCapacity)
}

// TestMaintenanceLoop_RS3: the server's background loop ends Pending
// sessions past their timeout without any request arriving.
func TestMaintenanceLoop_RS3(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	srv := testserver.New(testserver.Config{Store: e.store, Now: e.clock.Now, AdminToken: adminToken, MaintenanceInterval: 10 * time.Millisecond})
	defer srv.Close()
	e.pool("loop", map[string]any{"pendingTimeoutSeconds": 30})
	e.addHosts("loop", "looph", 1)
	c := e.mustConnect("loop", "alice")
	e.clock.Advance(31 * time.Second)
	// Poll (not a timed assertion: the deadline only bounds a hang).
	deadline := time.Now().Add(20 * time.Second)
	for {
		s, err := e.admin.GetUserSession(ctx, "loop", c.SessionID)
		if err != nil {
			t.Fatal(err)
		}
		if s.State == vdibroker.StateLoggedOff {
			if s.EndReason != "PendingTimeout" {
				t.Errorf("end reason %q", s.EndReason)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the maintenance loop never ended the expired Pending session")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := srv.Close(); err != nil {
		t.Error(err)
	}
}
