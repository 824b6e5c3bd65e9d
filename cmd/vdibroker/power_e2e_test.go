//go:build unix

package main

// End-to-end tests of the power drivers (R-A4): the real binary
// serves with --power-config; an exec driver's start launches a real
// `vdibroker agent` for the host (through a script the test writes; the
// driver runs it as a program, without a shell of its own) and its stop
// sends that agent SIGTERM. A webhook driver calls an HTTP server of the
// test.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/autoscale"
	"github.com/vdibroker/vdibroker/broker"
)

// The services have the actions the autoscaler drives (serve starts it
// only if so: serve_autoscale.go).
var _ autoscale.Actions = broker.AutoscaleActions{}

// e2eScript writes an executable script.
func e2eScript(tb testing.TB, path, body string) {
	tb.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		tb.Fatal(err)
	}
}

// e2eConnect posts a connect as the admin and returns the status, the
// Retry-After header and the body.
func e2eConnect(tb testing.TB, api e2eAPI, pool, user string) (int, string, map[string]any) {
	tb.Helper()
	req, _ := http.NewRequest("POST", api.base+"/api/v1/hostpools/"+pool+"/connect", strings.NewReader(`{"user": "`+user+`"}`))
	req.Header.Set("Authorization", "Bearer "+api.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	var body map[string]any
	json.NewDecoder(res.Body).Decode(&body)
	return res.StatusCode, res.Header.Get("Retry-After"), body
}

// TestPowerExecE2E: start VM on connect with a real exec driver and real
// agents. Both hosts are stopped; alice's connect starts the first by name
// and answers 503 HostStarting with Retry-After 30; bob's connect meanwhile
// starts no second host; once the started agent heartbeats, connects
// answer 201 on it; a stop with sessions is refused, a forced one
// SIGTERMs the agent and the host is Stopped and Shutdown.
func TestPowerExecE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds the binary and runs agents")
	}
	dir := t.TempDir()
	bin := e2eBuild(t, dir)
	lab := e2eNewLab(t, dir)
	cfg := lab.cfg

	// A bad config: serve refuses to start, naming the flag and the field.
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("drivers:\n  - {name: lab, type: exec, start: [vm]}\n"), 0o600)
	for _, tc := range []struct{ file, want string }{
		{bad, `driver "lab": start: the program "vm" must be an absolute path`},
		{filepath.Join(dir, "missing.yaml"), "--power-config: power config: open"},
	} {
		p := e2eStart(t, bin, []string{"VDIBROKER_ADMIN_TOKEN=vdb_admin_e2e_power_test_0123456789"}, io.Discard,
			"serve", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "bad-broker"), "--power-config", tc.file)
		if code := p.wait(t); code == 0 || !strings.Contains(p.stderr.String(), tc.want) {
			t.Errorf("serve with %s: exit %d, stderr %q; want a failure naming %q", tc.file, code, p.stderr.String(), tc.want)
		}
	}

	const admin = "vdb_admin_e2e_power_test_0123456789"
	_, base := e2eServeAt(t, bin, filepath.Join(dir, "broker"), admin, "127.0.0.1:0", "--power-config", cfg)
	api := e2eAPI{tb: t, base: base, token: admin}
	const pool = "e2e-power"
	api.call("PUT", "/hostpools/"+pool, map[string]any{"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
		"heartbeatTimeoutSeconds": 10, "maxSessionLimit": 5, "powerDriver": "lab", "startVMOnConnect": true}, 201, nil)
	var tok struct {
		Token string `json:"token"`
	}
	api.call("POST", "/hostpools/"+pool+"/registrationtoken", map[string]any{"expiresInSeconds": 3600}, 201, &tok)
	lab.token(pool, tok.Token)
	lab.install(bin, base)

	hosts := []string{"e2e-pw-01", "e2e-pw-02"}
	for _, h := range hosts {
		api.call("PUT", "/hostpools/"+pool+"/sessionhosts/"+h, map[string]any{"address": "127.0.0.1:3389"}, 201, nil)
		var got vdibroker.SessionHost
		api.call("POST", "/hostpools/"+pool+"/sessionhosts/"+h+"/stop", nil, 202, &got)
		if got.PowerState != vdibroker.PowerStopped || got.Status != vdibroker.StatusShutdown {
			t.Fatalf("%s after stop: powerState %s status %s, want Stopped and Shutdown", h, got.PowerState, got.Status)
		}
	}

	// R-A4: start VM on connect.
	code, retry, body := e2eConnect(t, api, pool, "alice")
	errBody, _ := body["error"].(map[string]any)
	if code != 503 || retry != "30" || errBody["code"] != vdibroker.EHostStarting || !strings.Contains(fmt.Sprint(errBody["message"]), hosts[0]) {
		t.Fatalf("alice's connect: %d Retry-After %q %v; want 503 HostStarting naming %s with Retry-After 30", code, retry, body, hosts[0])
	}
	// Meanwhile bob: no second host for one host's worth of demand.
	if code, retry, body := e2eConnect(t, api, pool, "bob"); code != 503 || retry != "30" {
		t.Fatalf("bob's connect while %s starts: %d %q %v", hosts[0], code, retry, body)
	}
	e2eEventually(t, hosts[0]+" Available (its agent heartbeats)", 60*time.Second, func() bool {
		h := api.host(pool, hosts[0])
		return h.Status == vdibroker.StatusAvailable && h.PowerState == vdibroker.PowerRunning
	})
	if h := api.host(pool, hosts[1]); h.PowerState != vdibroker.PowerStopped {
		t.Fatalf("%s is %s, want still Stopped", hosts[1], h.PowerState)
	}
	for _, u := range []string{"alice", "bob"} {
		code, _, body := e2eConnect(t, api, pool, u)
		if code != 201 || body["sessionHost"] != hosts[0] {
			t.Fatalf("%s's connect after the start: %d %v, want 201 on %s", u, code, body, hosts[0])
		}
	}
	if got, want := lab.actions(), "stop e2e-pw-01\nstop e2e-pw-02\nstart e2e-pw-01 e2e-power\n"; got != want {
		t.Fatalf("driver actions %q, want %q", got, want)
	}

	// Stop: refused with sessions, forced it SIGTERMs the agent.
	api.call("POST", "/hostpools/"+pool+"/sessionhosts/"+hosts[0]+"/stop", nil, 409, nil)
	pid := lab.pid(hosts[0])
	var got vdibroker.SessionHost
	api.call("POST", "/hostpools/"+pool+"/sessionhosts/"+hosts[0]+"/stop?force=true", nil, 202, &got)
	if got.PowerState != vdibroker.PowerStopped || got.Status != vdibroker.StatusShutdown {
		t.Fatalf("after the forced stop: powerState %s status %s", got.PowerState, got.Status)
	}
	if !e2eGone(pid) {
		t.Fatalf("agent %d still runs after the stop", pid)
	}
}

// TestPowerWebhookE2E: a webhook driver calls the test's HTTP server
// (TLS with a CA file is power_test.go's) with the action's JSON body and the bearer secret of its
// secretFile; start records Starting, stop records Stopped once the
// hook's status says so.
func TestPowerWebhookE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds the binary")
	}
	type call struct {
		Action, Pool, Host, Address, Auth string
	}
	var mu sync.Mutex
	var calls []call
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var c call
		json.NewDecoder(r.Body).Decode(&c)
		c.Auth = r.Header.Get("Authorization")
		mu.Lock()
		calls = append(calls, c)
		mu.Unlock()
		if c.Action == "status" {
			w.Write([]byte(`{"powerState": "Stopped"}`))
		}
	}))
	defer hook.Close()
	dir := t.TempDir()
	bin := e2eBuild(t, dir)
	secret := filepath.Join(dir, "hook.secret")
	os.WriteFile(secret, []byte("hook-s3cret\n"), 0o600)
	cfg := filepath.Join(dir, "power.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("drivers:\n  - name: cloud\n    type: webhook\n    url: %s/hooks/vdi\n    secretFile: %s\n", hook.URL, secret)), 0o600)
	const admin = "vdb_admin_e2e_webhook_test_0123456789"
	_, base := e2eServeAt(t, bin, filepath.Join(dir, "broker"), admin, "127.0.0.1:0", "--power-config", cfg)
	api := e2eAPI{tb: t, base: base, token: admin}
	const pool = "e2e-hook"
	api.call("PUT", "/hostpools/"+pool, map[string]any{"powerDriver": "cloud"}, 201, nil)
	api.call("PUT", "/hostpools/"+pool+"/sessionhosts/vm-1", map[string]any{"address": "10.1.2.3:3389"}, 201, nil)
	var h vdibroker.SessionHost
	api.call("POST", "/hostpools/"+pool+"/sessionhosts/vm-1/start", nil, 202, &h)
	if h.PowerState != vdibroker.PowerStarting {
		t.Fatalf("after start: %s", h.PowerState)
	}
	api.call("POST", "/hostpools/"+pool+"/sessionhosts/vm-1/stop", nil, 202, &h)
	if h.PowerState != vdibroker.PowerStopped {
		t.Fatalf("after stop: %s", h.PowerState)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []call{
		{"start", pool, "vm-1", "10.1.2.3:3389", "Bearer hook-s3cret"},
		{"stop", pool, "vm-1", "10.1.2.3:3389", "Bearer hook-s3cret"},
		{"status", pool, "vm-1", "10.1.2.3:3389", "Bearer hook-s3cret"},
	}
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Fatalf("hook calls %v, want %v", calls, want)
	}
}
