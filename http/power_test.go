package http_test

import (
	"context"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/power"
)

// powerEnv is a server with one simulated power driver "sim" and a pool of
// two registered, heartbeating hosts that uses it.
func powerEnv(t *testing.T) (*env, *power.Simulated, string, []string) {
	t.Helper()
	sim := &power.Simulated{}
	e := newEnvWith(t, envOptions{power: power.Set{"sim": sim}, maintenance: time.Hour})
	pool := uniq("pw")
	e.pool(pool, map[string]any{"powerDriver": "sim", "startVMOnConnect": true, "maxSessionLimit": 1})
	return e, sim, pool, e.addHosts(pool, "pwh", 2)
}

// TestPowerAPI (R-A4): start and stop through the API, the
// recorded power state in the host's JSON, 409 on a stop with sessions,
// the audit entries, and start VM on connect's 503 with Retry-After.
func TestPowerAPI(t *testing.T) {
	e, sim, pool, hosts := powerEnv(t)
	ctx := context.Background()
	ops, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: vdibroker.RoleContributor, Subject: "ops", HostPools: []string{pool}})
	if err != nil {
		t.Fatal(err)
	}
	c := e.client(0, ops.Secret)
	h, err := c.GetSessionHost(ctx, pool, hosts[0])
	if err != nil || h.PowerState != vdibroker.PowerRunning || h.AutoscaleDrain {
		t.Fatalf("a heartbeating host: %+v, %v; want powerState Running", h, err)
	}
	e.mustConnect(pool, "alice") // on pwh001 (limit 1)
	_, err = c.StopSessionHost(ctx, pool, hosts[0], false)
	wantCode(t, err, vdibroker.EConflict, "open sessions")
	if sim.Calls("stop", pool, hosts[0]) != 0 {
		t.Fatal("a refused stop reached the driver")
	}
	h, err = c.StopSessionHost(ctx, pool, hosts[0], true)
	if err != nil || h.PowerState != vdibroker.PowerStopped || h.Status != vdibroker.StatusShutdown {
		t.Fatalf("forced stop: %+v, %v; want Stopped and Shutdown (R-H1)", h, err)
	}
	h, err = c.StopSessionHost(ctx, pool, hosts[1], false)
	if err != nil || h.PowerState != vdibroker.PowerStopped {
		t.Fatalf("stop of an idle host: %+v, %v", h, err)
	}
	// Both stopped: a connect starts the first by name and says when to retry.
	resp, ve, raw := rawDoAt(t, e.urls[0], "POST", "/api/v1/hostpools/"+pool+"/connect", adminToken, `{"user": "bob"}`)
	if resp.StatusCode != 503 || ve == nil || ve.Code != vdibroker.EHostStarting || resp.Header.Get("Retry-After") != "30" {
		t.Fatalf("connect with every host stopped: %d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), raw)
	}
	if h, _ := c.GetSessionHost(ctx, pool, hosts[0]); h.PowerState != vdibroker.PowerStarting {
		t.Fatalf("after start on connect: %s", h.PowerState)
	}
	_, err = c.StartSessionHost(ctx, pool, hosts[0])
	wantCode(t, err, vdibroker.EConflict, "Starting")
	h, err = c.StartSessionHost(ctx, pool, hosts[1])
	if err != nil || h.PowerState != vdibroker.PowerStarting || sim.Calls("start", pool, hosts[1]) != 1 {
		t.Fatalf("start: %+v, %v", h, err)
	}
	list, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Target: "hostpools/" + pool + "/sessionhosts/" + hosts[1] + "/"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range list {
		got = append(got, a.Action+":"+a.Outcome+":"+a.Principal.Name)
	}
	want := []string{"sessionhost.stop:ok:ops", "sessionhost.start:ok:ops"}
	if len(got) < 2 || got[len(got)-2] != want[0] || got[len(got)-1] != want[1] {
		t.Fatalf("audit %v, want it to end with %v", got, want)
	}
}

// TestPowerAPIRefusals: read as an attacker. No token, a User, a Reader,
// a host credential, a registration token and a Contributor scoped to
// another pool are refused start and stop, and the driver is never asked.
// A pool naming a driver the broker has not loaded is a 400 on the field,
// and nothing is stored.
func TestPowerAPIRefusals(t *testing.T) {
	e, sim, pool, hosts := powerEnv(t)
	ctx := context.Background()
	tok := func(role, subject string, pools ...string) string {
		tr, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: role, Subject: subject, HostPools: pools})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Secret
	}
	e.pool("otherpool", nil)
	rt, err := e.admin.CreateRegistrationToken(ctx, pool, vhttp.RegistrationTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []struct {
		name, secret string
		want         int
	}{
		{"no token", "", 401},
		{"User", tok(vdibroker.RoleUser, "alice"), 403},
		{"Reader", tok(vdibroker.RoleReader, "auditor"), 403},
		{"host credential", e.agents[hosts[0]], 401},
		{"registration token", rt.Token, 401},
		{"Contributor of another pool", tok(vdibroker.RoleContributor, "other-ops", "otherpool"), 403},
	} {
		for _, action := range []string{"start", "stop?force=true"} {
			status, ve, raw := rawDo(t, e, "POST", "/api/v1/hostpools/"+pool+"/sessionhosts/"+hosts[0]+"/"+action, k.secret, "")
			if status != k.want || ve == nil {
				t.Errorf("%s: %s: %d %s, want %d with an error body", k.name, action, status, raw, k.want)
			}
		}
	}
	if sim.Calls("start", pool, hosts[0])+sim.Calls("stop", pool, hosts[0]) != 0 {
		t.Fatal("a refused caller reached the power driver")
	}
	// The driver is the broker's to choose (serve --power-config).
	status, ve, raw := rawDo(t, e, "PATCH", "/api/v1/hostpools/"+pool, adminToken, `{"powerDriver": "/bin/sh"}`)
	if status != 400 || ve == nil || ve.Field != "powerDriver" {
		t.Fatalf("unknown driver: %d %s, want 400 on powerDriver", status, raw)
	}
	status, ve, raw = rawDo(t, e, "PUT", "/api/v1/hostpools/newpool", adminToken, `{"startVMOnConnect": true}`)
	if status != 400 || ve == nil || ve.Field != "startVMOnConnect" {
		t.Fatalf("start on connect without a driver: %d %s, want 400 on startVMOnConnect", status, raw)
	}
	if p, err := e.admin.GetHostPool(ctx, pool); err != nil || p.PowerDriver != "sim" {
		t.Fatalf("after the refused PATCH: %+v, %v", p, err)
	}
	if _, err := e.admin.GetHostPool(ctx, "newpool"); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
		t.Fatalf("refused PUT stored the pool: %v", err)
	}
}
