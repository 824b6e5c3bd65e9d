package http_test

import (
	"context"
	nethttp "net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
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

// wantHostStarting connects user into pool through the first replica and
// wants 503 HostStarting with Retry-After 30 naming the host starting,
// then waits for the driver's call (made in the background).
func wantHostStarting(t *testing.T, e *env, pool, user, starting string) {
	t.Helper()
	resp, ve, raw := rawDoAt(t, e.urls[0], "POST", "/api/v1/hostpools/"+pool+"/connect", adminToken, `{"user": "`+user+`"}`)
	if resp.StatusCode != 503 || ve == nil || ve.Code != vdibroker.EHostStarting || resp.Header.Get("Retry-After") != "30" {
		t.Fatalf("%s: %d Retry-After %q %s, want 503 HostStarting", user, resp.StatusCode, resp.Header.Get("Retry-After"), raw)
	}
	if !strings.Contains(ve.Message, `"`+starting+`"`) {
		t.Fatalf("%s: %q does not name %s", user, ve.Message, starting)
	}
	e.srvs[0].Broker.Power().Wait()
}

// TestStartVMOnConnectUnknownHosts_RA4: a new administrator registers
// hosts and turns their machines off outside the broker; their agents
// fall silent, and the broker never asked their driver, so they read
// Unknown. A connect that finds no capacity starts them anyway: a
// Stopped host first, then the Unknown ones by name, one per
// maxSessionLimit waiting users, never a drained one; each start is
// audited as the broker's (principal broker, id connect). Once a started
// host heartbeats, the connect lands on it.
func TestStartVMOnConnectUnknownHosts_RA4(t *testing.T) {
	e, sim, pool, hosts := powerEnv(t) // limit 1; pwh001, pwh002
	ctx := context.Background()
	hosts = append(hosts, e.addHosts(pool, "pwx", 2)...) // pwx001, pwx002
	if _, err := e.admin.StopSessionHost(ctx, pool, hosts[1], false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.UpdateSessionHost(ctx, pool, hosts[3], map[string]any{"allowNewSession": false}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Minute) // past heartbeatTimeoutSeconds (90): every agent is silent
	for _, i := range []int{0, 2, 3} {
		h, err := e.admin.GetSessionHost(ctx, pool, hosts[i])
		if err != nil || h.PowerState != vdibroker.PowerUnknown || h.Status != vdibroker.StatusUnavailable {
			t.Fatalf("%s: %+v, %v; want Unknown and Unavailable", hosts[i], h, err)
		}
	}
	connect := func(user, starting string) { t.Helper(); wantHostStarting(t, e, pool, user, starting) }
	connect("bob", hosts[1])   // pwh002, Stopped, before pwh001 (Unknown)
	connect("carol", hosts[0]) // 2 waiting, limit 1: a second host, the first Unknown
	connect("dave", hosts[2])  // a third: pwx001 (pwx002 is drained)
	connect("erin", hosts[0])  // none left: erin waits for those starting
	want := map[string]int{hosts[0]: 1, hosts[1]: 1, hosts[2]: 1, hosts[3]: 0}
	for h, n := range want {
		if got := sim.Calls("start", pool, h); got != n {
			t.Errorf("%s started %d times, want %d", h, got, n)
		}
		hr, err := e.admin.GetSessionHost(ctx, pool, h)
		if wantState := map[bool]string{true: vdibroker.PowerStarting, false: vdibroker.PowerUnknown}[n == 1]; err != nil || hr.PowerState != wantState {
			t.Errorf("%s: %+v, %v; want %s", h, hr, err, wantState)
		}
	}
	list, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Target: "hostpools/" + pool + "/sessionhosts/" + hosts[0] + "/"})
	if err != nil {
		t.Fatal(err)
	}
	var starts []string
	for _, a := range list {
		if a.Action == "sessionhost.start" {
			starts = append(starts, a.Principal.Kind+"/"+a.Principal.ID+":"+a.Outcome)
		}
	}
	if len(starts) != 1 || starts[0] != power.PrincipalBroker+"/connect:ok" {
		t.Fatalf("audited starts of %s: %v, want one by broker/connect", hosts[0], starts)
	}
	e.heartbeat(hosts[0])
	if r := e.mustConnect(pool, "carol"); r.SessionHost != hosts[0] {
		t.Fatalf("carol after %s's heartbeat: on %s", hosts[0], r.SessionHost)
	}
}

// TestStartVMOnConnectSilentRunningHosts_RA4: hosts the broker started
// and heard from are recorded Running; one is then turned off outside
// the broker (deallocated in the cloud portal) and its agent falls
// silent. Past heartbeatTimeoutSeconds the API reads it Unknown, and a
// connect that finds no capacity starts it, after the Stopped host and
// the Unknown one never heard of, audited as the broker's (principal
// broker, id connect); the host whose agent heartbeats reads Running and
// is never started. Once the started host heartbeats, the connect lands
// on it.
func TestStartVMOnConnectSilentRunningHosts_RA4(t *testing.T) {
	e, sim, pool, hosts := powerEnv(t) // limit 1; pwh001, pwh002
	ctx := context.Background()
	hosts = append(hosts, e.addHosts(pool, "pwx", 2)...) // pwx001, pwx002
	// pwh001 and pwh002: stopped, started by an admin, heard from: Running.
	for _, h := range hosts[:2] {
		if _, err := e.admin.StopSessionHost(ctx, pool, h, false); err != nil {
			t.Fatal(err)
		}
		if _, err := e.admin.StartSessionHost(ctx, pool, h); err != nil {
			t.Fatal(err)
		}
		e.heartbeat(h)
	}
	if _, err := e.admin.StopSessionHost(ctx, pool, hosts[3], false); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Minute) // past heartbeatTimeoutSeconds (90)
	e.heartbeat(hosts[0])            // pwh001's agent heartbeats; pwh002's and pwx001's are silent
	for i, want := range []string{vdibroker.PowerRunning, vdibroker.PowerUnknown, vdibroker.PowerUnknown, vdibroker.PowerStopped} {
		if h, err := e.admin.GetSessionHost(ctx, pool, hosts[i]); err != nil || h.PowerState != want {
			t.Fatalf("%s: %+v, %v; want powerState %s", hosts[i], h, err, want)
		}
	}
	if r := e.mustConnect(pool, "alice"); r.SessionHost != hosts[0] {
		t.Fatalf("alice on %s, want %s", r.SessionHost, hosts[0])
	}
	connect := func(user, starting string) { t.Helper(); wantHostStarting(t, e, pool, user, starting) }
	connect("bob", hosts[3])   // pwx002, Stopped
	connect("carol", hosts[2]) // pwx001, Unknown, never heard of since
	connect("dave", hosts[1])  // pwh002, Running until its agent fell silent
	connect("erin", hosts[1])  // none left (pwh001 runs): erin waits, told of the first starting by name
	for i, n := range []int{0, 1, 1, 1} {
		// pwh001 and pwh002 were started once by the admin.
		if i < 2 {
			n++
		}
		if got := sim.Calls("start", pool, hosts[i]); got != n {
			t.Errorf("%s started %d times, want %d", hosts[i], got, n)
		}
	}
	list, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Target: "hostpools/" + pool + "/sessionhosts/" + hosts[1] + "/"})
	if err != nil {
		t.Fatal(err)
	}
	var starts []string
	for _, a := range list {
		if a.Action == "sessionhost.start" {
			starts = append(starts, a.Principal.Kind+"/"+a.Principal.ID)
		}
	}
	if !slices.Contains(starts, power.PrincipalBroker+"/connect") || len(starts) != 2 {
		t.Fatalf("audited starts of %s: %v, want the admin's and one by broker/connect", hosts[1], starts)
	}
	e.heartbeat(hosts[1])
	if r := e.mustConnect(pool, "dave"); r.SessionHost != hosts[1] {
		t.Fatalf("dave after %s's heartbeat: on %s", hosts[1], r.SessionHost)
	}
}

// TestNoRestartOfHostShuttingDown_RA4: an admin's start of a host whose
// start timed out is refused with 409 while its agent, since that start,
// heartbeated within the pool's heartbeat timeout saying it shuts down
// (such a heartbeat leaves the host Starting): its machine is going down,
// and the driver's start would reach a machine shutting down. The 409
// says so and from when a start is accepted; the driver is not asked.
// Once the agent has been silent for the heartbeat timeout the start is
// accepted. A heartbeat before the start counts for nothing: the host
// whose agent last reported just before it was stopped and started is
// started again at the start timeout, within the heartbeat timeout.
func TestNoRestartOfHostShuttingDown_RA4(t *testing.T) {
	sim := &power.Simulated{}
	e := newEnvWith(t, envOptions{power: power.Set{"sim": sim}, maintenance: time.Hour})
	e.clock.Freeze()
	ctx := context.Background()
	pool := uniq("sd")
	const timeout = 30 * time.Minute
	e.pool(pool, map[string]any{"powerDriver": "sim", "maxSessionLimit": 1, "heartbeatTimeoutSeconds": int(timeout / time.Second)})
	host := e.addHosts(pool, "sdh", 1)[0] // its agent heartbeats now
	e.clock.Advance(time.Second)
	if _, err := e.admin.StopSessionHost(ctx, pool, host, false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.StartSessionHost(ctx, pool, host); err != nil || sim.Calls("start", pool, host) != 1 {
		t.Fatalf("first start: %v, %d starts", err, sim.Calls("start", pool, host))
	}
	// Its start timed out; the agent's last heartbeat, a second before
	// the stop, is within the heartbeat timeout but before the start.
	e.clock.Advance(vdibroker.HostStartTimeout)
	again, err := e.admin.StartSessionHost(ctx, pool, host)
	if err != nil || sim.Calls("start", pool, host) != 2 {
		t.Fatalf("start after the start timeout, the last heartbeat before the start: %+v, %v; %d starts, want 2", again, err, sim.Calls("start", pool, host))
	}
	started := again.PowerStateTime.UTC()

	// Its agent comes up and at once says it shuts down (the machine
	// goes down again): the host stays Starting.
	e.clock.Advance(vdibroker.HostStartTimeout - 30*time.Second)
	if _, err := e.heartbeatErr(host, &vdibroker.HeartbeatRequest{ShuttingDown: true}); err != nil {
		t.Fatal(err)
	}
	said := e.clock.Now().UTC()
	from := said.Add(timeout).Truncate(time.Second).Add(time.Second) // the first whole second after
	if h, err := e.admin.GetSessionHost(ctx, pool, host); err != nil || h.PowerState != vdibroker.PowerStarting {
		t.Fatalf("after a heartbeat saying it shuts down: %+v, %v; want Starting", h, err)
	}
	// Within the start timeout the 409 says so too, not that the agent
	// has not heartbeated, and the start is accepted from the later of
	// the start timeout and the agent's silence (30 minutes and up to a
	// second more, so "in 31 minutes").
	_, err = e.admin.StartSessionHost(ctx, pool, host)
	wantCode(t, err, vdibroker.EConflict, "is Starting since "+started.Format(time.RFC3339),
		"its agent said at "+said.Format(time.RFC3339)+" (0 seconds ago) only that it is shutting down",
		"a start is accepted again from "+from.Format(time.RFC3339)+" (in 31 minutes; the start timeout is 10 minutes), if it is still Starting then and its agent silent for longer than the pool's heartbeat timeout (1800 seconds)")
	e.clock.Advance(30 * time.Second) // its start timed out
	_, err = e.admin.StartSessionHost(ctx, pool, host)
	wantCode(t, err, vdibroker.EConflict, "is Starting since "+started.Format(time.RFC3339),
		"its agent said at "+said.Format(time.RFC3339)+" (30 seconds ago) that it is shutting down",
		"a start is accepted from "+from.Format(time.RFC3339)+" (in 30 minutes), once its agent has been silent for longer than the pool's heartbeat timeout (1800 seconds)",
		"if it keeps saying it shuts down, stop the host, then start it")
	// The heartbeat timeout to the instant: still heard (as PowerStateOf
	// reads it), so refused, and the start is accepted at the whole
	// second shown, in 1 second, not "in 0 seconds" at a time shown
	// truncated to one before the instant.
	e.clock.Advance(timeout - 30*time.Second)
	_, err = e.admin.StartSessionHost(ctx, pool, host)
	wantCode(t, err, vdibroker.EConflict, "that it is shutting down", "a start is accepted from "+from.Format(time.RFC3339)+" (in 1 second)")
	if n := sim.Calls("start", pool, host); n != 2 {
		t.Fatalf("a refused start asked the driver: %d starts, want 2", n)
	}
	e.clock.Advance(from.Sub(e.clock.Now())) // the time the 409 said
	h, err := e.admin.StartSessionHost(ctx, pool, host)
	if err != nil || h.PowerState != vdibroker.PowerStarting || !h.PowerStateTime.Equal(e.clock.Now()) || sim.Calls("start", pool, host) != 3 {
		t.Fatalf("start once its agent is silent: %+v, %v; %d starts, want Starting since now and 3 starts", h, err, sim.Calls("start", pool, host))
	}
}

// TestStopThenStartOfHostShuttingDown_RA4: an agent that keeps saying it
// shuts down (a machine stuck in its shutdown, or a caller holding the
// host's credential) keeps an admin's start of its host refused; the
// 409 tells the admin to stop the host and then start it, and that
// works: the stop is accepted for the Starting host, the agent's
// heartbeats leave it Stopped, and the start from Stopped is accepted.
func TestStopThenStartOfHostShuttingDown_RA4(t *testing.T) {
	sim := &power.Simulated{}
	e := newEnvWith(t, envOptions{power: power.Set{"sim": sim}, maintenance: time.Hour})
	e.clock.Freeze()
	ctx := context.Background()
	pool := uniq("ss")
	e.pool(pool, map[string]any{"powerDriver": "sim", "maxSessionLimit": 1, "heartbeatTimeoutSeconds": 1800})
	host := e.addHosts(pool, "ssh", 1)[0]
	e.clock.Advance(time.Second)
	if _, err := e.admin.StopSessionHost(ctx, pool, host, false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.StartSessionHost(ctx, pool, host); err != nil {
		t.Fatal(err)
	}
	shuttingDown := func() {
		t.Helper()
		if _, err := e.heartbeatErr(host, &vdibroker.HeartbeatRequest{ShuttingDown: true}); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Advance(vdibroker.HostStartTimeout)
	shuttingDown()
	_, err := e.admin.StartSessionHost(ctx, pool, host)
	wantCode(t, err, vdibroker.EConflict, "if it keeps saying it shuts down, stop the host, then start it")
	if _, err := e.admin.StopSessionHost(ctx, pool, host, false); err != nil {
		t.Fatalf("stop of the Starting host: %v", err)
	}
	// Longer than the heartbeat timeout after the stop, when a heartbeat
	// that runs would record it Running (started outside the broker).
	e.clock.Advance(31 * time.Minute)
	shuttingDown()
	if h, err := e.admin.GetSessionHost(ctx, pool, host); err != nil || h.PowerState != vdibroker.PowerStopped {
		t.Fatalf("after the stop and a heartbeat saying it shuts down: %+v, %v; want Stopped", h, err)
	}
	h, err := e.admin.StartSessionHost(ctx, pool, host)
	if err != nil || h.PowerState != vdibroker.PowerStarting || !h.PowerStateTime.Equal(e.clock.Now()) || sim.Calls("start", pool, host) != 2 {
		t.Fatalf("start after the stop: %+v, %v; %d starts, want Starting since now and 2 starts", h, err, sim.Calls("start", pool, host))
	}
}

// TestAdminRestartsTimedOutStart_RA4: a host an admin started whose agent
// never came back (its driver's start did nothing) stays Starting. Within
// the start timeout (10 minutes) another start is 409, saying since when
// it starts and from when a start is accepted again, and the driver is
// not asked. From 10 minutes on an admin's start is accepted (202): the
// host is Starting again since now, the driver is asked once more and the
// start is audited. Two admins starting it at once on two replicas ask
// the driver once, the other gets 409. A connect that finds no capacity
// never starts such a host (start VM on connect leaves it to the admin).
func TestAdminRestartsTimedOutStart_RA4(t *testing.T) {
	sim := &power.Simulated{}
	e := newEnvWith(t, envOptions{power: power.Set{"sim": sim}, maintenance: time.Hour, replicas: 2})
	e.clock.Freeze()
	ctx := context.Background()
	pool := uniq("stuck")
	e.pool(pool, map[string]any{"powerDriver": "sim", "startVMOnConnect": true, "maxSessionLimit": 1})
	hosts := e.addHosts(pool, "sth", 2)
	host := hosts[0]
	// The other host is drained, so a connect has nothing but host to start.
	if _, err := e.admin.UpdateSessionHost(ctx, pool, hosts[1], map[string]any{"allowNewSession": false}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.StopSessionHost(ctx, pool, host, false); err != nil {
		t.Fatal(err)
	}
	first, err := e.admin.StartSessionHost(ctx, pool, host)
	if err != nil || first.PowerState != vdibroker.PowerStarting || first.PowerStateTime == nil || sim.Calls("start", pool, host) != 1 {
		t.Fatalf("first start: %+v, %v", first, err)
	}
	t0 := first.PowerStateTime.UTC()

	e.clock.Advance(vdibroker.HostStartTimeout - time.Minute)
	_, err = e.admin.StartSessionHost(ctx, pool, host)
	// From when, at its whole second (the start's time has a fraction).
	from := t0.Add(vdibroker.HostStartTimeout)
	if c := from.Truncate(time.Second); !c.Equal(from) {
		from = c.Add(time.Second)
	}
	wantCode(t, err, vdibroker.EConflict, "is Starting since "+t0.Format(time.RFC3339)+" (9 minutes ago)",
		"a start is accepted again from "+from.Format(time.RFC3339)+" (in 1 minute;")
	if n := sim.Calls("start", pool, host); n != 1 {
		t.Fatalf("a refused start asked the driver: %d starts", n)
	}

	e.clock.Advance(time.Minute) // Starting for the start timeout
	// A connect finds no capacity and starts nothing: the host whose
	// start timed out is not started again on connect.
	resp, ve, raw := rawDoAt(t, e.urls[0], "POST", "/api/v1/hostpools/"+pool+"/connect", adminToken, `{"user": "bob"}`)
	if resp.StatusCode != 503 || ve == nil || ve.Code == vdibroker.EHostStarting {
		t.Fatalf("connect: %d %s, want 503 without HostStarting", resp.StatusCode, raw)
	}
	e.srvs[0].Broker.Power().Wait()
	if n := sim.Calls("start", pool, host); n != 1 {
		t.Fatalf("start VM on connect started a host whose start timed out: %d starts", n)
	}
	again, err := e.admin.StartSessionHost(ctx, pool, host)
	if err != nil || again.PowerState != vdibroker.PowerStarting || again.PowerStateTime == nil ||
		!again.PowerStateTime.Equal(t0.Add(vdibroker.HostStartTimeout)) || sim.Calls("start", pool, host) != 2 {
		t.Fatalf("start after the start timeout: %+v, %v; %d starts, want Starting since %s and 2 starts",
			again, err, sim.Calls("start", pool, host), t0.Add(vdibroker.HostStartTimeout))
	}
	// It starts anew: another start is 409 for 10 more minutes.
	_, err = e.admin.StartSessionHost(ctx, pool, host)
	wantCode(t, err, vdibroker.EConflict, "is Starting since "+again.PowerStateTime.UTC().Format(time.RFC3339)+" (0 seconds ago)", "(in 10 minutes;")

	// Ten minutes later, two admins on two replicas at once: one start.
	e.clock.Advance(vdibroker.HostStartTimeout)
	codes := make(chan int, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			resp, _, _ := rawDoAt(t, e.urls[i], "POST", "/api/v1/hostpools/"+pool+"/sessionhosts/"+host+"/start", adminToken, "")
			codes <- resp.StatusCode
		})
	}
	wg.Wait()
	close(codes)
	var got []int
	for c := range codes {
		got = append(got, c)
	}
	slices.Sort(got)
	if !slices.Equal(got, []int{202, 409}) || sim.Calls("start", pool, host) != 3 {
		t.Fatalf("two concurrent starts: %v, %d starts; want [202 409] and 3 starts", got, sim.Calls("start", pool, host))
	}
	list, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Target: "hostpools/" + pool + "/sessionhosts/" + host + "/start"})
	if err != nil {
		t.Fatal(err)
	}
	ok := 0
	for _, a := range list {
		if a.Action == "sessionhost.start" && a.Outcome == "ok" {
			ok++
		}
	}
	if ok != 3 {
		t.Fatalf("%d audited starts, want 3: %+v", ok, list)
	}
	// Its agent comes back: Running.
	e.heartbeat(host)
	if h, err := e.admin.GetSessionHost(ctx, pool, host); err != nil || h.PowerState != vdibroker.PowerRunning {
		t.Fatalf("after its heartbeat: %+v, %v", h, err)
	}
}

// TestStartVMOnConnectPassesOverHostShuttingDown_RA4: a connect starts a
// stopped host for bob, and that host's agent then says, after the
// start, that it shuts down (its machine was still going down when the
// driver's start reached it): the host stays Starting, but it is going
// down, not capacity to come. Bob's next connect is not told to wait for
// it: the next stopped host is started for him and named, and the host
// going down is not started again (its start would reach it shutting
// down).
func TestStartVMOnConnectPassesOverHostShuttingDown_RA4(t *testing.T) {
	e, sim, pool, hosts := powerEnv(t) // limit 1; pwh001, pwh002; heartbeatTimeoutSeconds 90
	e.clock.Freeze()
	ctx := context.Background()
	for _, h := range hosts {
		if _, err := e.admin.StopSessionHost(ctx, pool, h, false); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Advance(2 * time.Minute) // the machines are off, their agents silent
	wantHostStarting(t, e, pool, "bob", hosts[0])
	e.clock.Advance(time.Second)
	if _, err := e.heartbeatErr(hosts[0], &vdibroker.HeartbeatRequest{ShuttingDown: true}); err != nil {
		t.Fatal(err)
	}
	if h, err := e.admin.GetSessionHost(ctx, pool, hosts[0]); err != nil || h.PowerState != vdibroker.PowerStarting {
		t.Fatalf("%s after its agent said it shuts down: %+v, %v; want Starting", hosts[0], h, err)
	}
	// Bob, the one user waiting, again: the host going down has no room
	// for him; the other stopped host is started.
	wantHostStarting(t, e, pool, "bob", hosts[1])
	if got := []int{sim.Calls("start", pool, hosts[0]), sim.Calls("start", pool, hosts[1])}; got[0] != 1 || got[1] != 1 {
		t.Fatalf("starts of %s, %s: %v, want [1 1]", hosts[0], hosts[1], got)
	}
	// Carol, a second user: the host that starts has room for one (limit
	// 1) and none is left to start; she waits for that one, not for the
	// host going down.
	wantHostStarting(t, e, pool, "carol", hosts[1])
	e.heartbeat(hosts[1])
	if r := e.mustConnect(pool, "bob"); r.SessionHost != hosts[1] {
		t.Fatalf("bob after %s's heartbeat: on %s", hosts[1], r.SessionHost)
	}
}

// TestStartVMOnConnectPersonalDesktopShuttingDown_RA4: in a Personal
// pool dana's own host is started on connect, and its agent then says,
// after the start, that it shuts down. Her connect is not told her
// desktop is starting (503 HostStarting, on which she would wait for a
// machine going down): it is 503 NoCapacity saying her desktop is
// shutting down, since when, and from when to try again (the first whole
// second after its agent has been silent for heartbeatTimeoutSeconds, as
// the admin's 409 says, and as the Retry-After); the unassigned stopped
// host is not started for her. When she tries again then and her machine
// came back up (its agent heartbeats), she lands on it. A shutdown said
// late in the start, so that the start will have timed out by then, has
// the same Retry-After (a reboot is back by then) and says that, if it
// does not come back, an administrator can start it again; her retry,
// if it did not, says so (ReasonStartByAdministrator).
func TestStartVMOnConnectPersonalDesktopShuttingDown_RA4(t *testing.T) {
	sim := &power.Simulated{}
	e := newEnvWith(t, envOptions{power: power.Set{"sim": sim}, maintenance: time.Hour})
	e.clock.Freeze()
	ctx := context.Background()
	pool := uniq("pd")
	const timeout = 90 * time.Second
	e.pool(pool, map[string]any{"hostPoolType": "Personal", "personalDesktopAssignmentType": "Automatic",
		"powerDriver": "sim", "startVMOnConnect": true, "heartbeatTimeoutSeconds": int(timeout / time.Second)})
	hosts := e.addHosts(pool, "pdh", 3) // pdh001 dana's, pdh002 erin's, pdh003 no one's
	for i, u := range []string{"dana", "erin"} {
		if _, err := e.admin.PatchSessionHost(ctx, pool, hosts[i], map[string]any{"assignedUsers": []string{u}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range hosts {
		if _, err := e.admin.StopSessionHost(ctx, pool, h, false); err != nil {
			t.Fatal(err)
		}
	}
	connect := func(user string) (*nethttp.Response, *vdibroker.Error, []byte) {
		t.Helper()
		resp, ve, raw := rawDoAt(t, e.urls[0], "POST", "/api/v1/hostpools/"+pool+"/connect", adminToken, `{"user": "`+user+`"}`)
		e.srvs[0].Broker.Power().Wait()
		return resp, ve, raw
	}
	wantHostStarting(t, e, pool, "dana", hosts[0])
	started := e.clock.Now().UTC()
	e.clock.Advance(time.Second)
	if _, err := e.heartbeatErr(hosts[0], &vdibroker.HeartbeatRequest{ShuttingDown: true}); err != nil {
		t.Fatal(err)
	}
	said := e.clock.Now().UTC()
	from := said.Add(timeout).Truncate(time.Second).Add(time.Second)
	// 90 s and a fraction until from, but at most 30 s (R-A4).
	retry := min(int((from.Sub(said)+time.Second-1)/time.Second), 30)
	resp, ve, raw := connect("dana")
	if resp.StatusCode != 503 || ve == nil || ve.Code != vdibroker.ENoCapacity || ve.Reason != vdibroker.ReasonDesktopGoingDown || resp.Header.Get("Retry-After") != strconv.Itoa(retry) {
		t.Fatalf("dana, her desktop shutting down: %d Retry-After %q %s; want 503 NoCapacity, reason %s, Retry-After %d", resp.StatusCode, resp.Header.Get("Retry-After"), raw, vdibroker.ReasonDesktopGoingDown, retry)
	}
	for _, want := range []string{`session host "` + hosts[0] + `", assigned to dana, is shutting down`,
		"started at " + started.Format(time.RFC3339), "its agent said at " + said.Format(time.RFC3339) + " (0 seconds ago)",
		"no other host is started for you"} {
		if !strings.Contains(ve.Message, want) {
			t.Errorf("dana's answer %q does not say %q", ve.Message, want)
		}
	}
	// The wait is said once, by the Retry-After: the message ends with
	// the time, which the CLI's " (try again in 30 s)" follows.
	if want := "After the pool's heartbeat timeout (90 seconds) of silence from its agent, it is down from " + from.Format(time.RFC3339); !strings.HasSuffix(ve.Message, want) ||
		strings.Contains(ve.Message, "try again") || strings.Contains(ve.Message, "(in ") {
		t.Errorf("dana's answer %q: want it to end %q, the wait not in its words", ve.Message, want)
	}
	if got := []int{sim.Calls("start", pool, hosts[0]), sim.Calls("start", pool, hosts[1]), sim.Calls("start", pool, hosts[2])}; !slices.Equal(got, []int{1, 0, 0}) {
		t.Fatalf("starts of %v: %v, want [1 0 0]", hosts, got)
	}
	// She tries again when it is down, as she is told at each retry
	// until then; her machine came back up.
	e.clock.Advance(from.Sub(e.clock.Now()))
	e.heartbeat(hosts[0])
	if r := e.mustConnect(pool, "dana"); r.SessionHost != hosts[0] {
		t.Fatalf("dana once her desktop is back: on %s", r.SessionHost)
	}

	// Erin's host says it shuts down 9 minutes into its start: by the
	// time it is down, its start timed out, and connects never start it
	// again. But a reboot says the same and is back by then: she is told
	// to try again (the Retry-After, until it is down), and what happens if
	// it does not come back; not at once to ask her helpdesk.
	wantHostStarting(t, e, pool, "erin", hosts[1])
	e.clock.Advance(vdibroker.HostStartTimeout - time.Minute)
	if _, err := e.heartbeatErr(hosts[1], &vdibroker.HeartbeatRequest{ShuttingDown: true}); err != nil {
		t.Fatal(err)
	}
	erinFrom := e.clock.Now().UTC().Add(timeout).Truncate(time.Second).Add(time.Second)
	erinRetry := min(int((erinFrom.Sub(e.clock.Now())+time.Second-1)/time.Second), 30)
	resp, ve, raw = connect("erin")
	if want := "unless it comes back by itself (a reboot), it is down from " + erinFrom.Format(time.RFC3339) + " and, its start timed out by then (connects do not start it again), needs an administrator, who can start it again (vdibroker sessionhost start) then"; resp.StatusCode != 503 || ve == nil || ve.Code != vdibroker.ENoCapacity ||
		!strings.Contains(ve.Message, "is shutting down") || !strings.HasSuffix(ve.Message, want) || strings.Contains(ve.Message, "try again") {
		t.Fatalf("erin, her desktop shutting down late in its start: %d %s; want 503 NoCapacity ending %q", resp.StatusCode, raw, want)
	}
	if ra := resp.Header.Get("Retry-After"); ra != strconv.Itoa(erinRetry) || ve.Reason != vdibroker.ReasonDesktopGoingDown {
		t.Errorf("erin's answer: Retry-After %q, reason %q; want %d and %s, not yet for an administrator", ra, ve.Reason, erinRetry, vdibroker.ReasonDesktopGoingDown)
	}
	if got := []int{sim.Calls("start", pool, hosts[1]), sim.Calls("start", pool, hosts[2])}; !slices.Equal(got, []int{1, 0}) {
		t.Fatalf("starts of %s, %s: %v, want [1 0]", hosts[1], hosts[2], got)
	}
	// She tries again when it is down; her machine did not come back: her
	// connect starts nothing (its start timed out; connects never start
	// it again) and says that it needs an administrator, without a wait.
	// An administrator's start then is accepted, and her next connect
	// waits for it (HostStarting, a wait that ends).
	e.clock.Advance(erinFrom.Sub(e.clock.Now()))
	resp, ve, raw = connect("erin")
	if resp.StatusCode != 503 || ve == nil || ve.Code != vdibroker.ENoCapacity || ve.Reason != vdibroker.ReasonStartByAdministrator ||
		resp.Header.Get("Retry-After") != "" || !strings.Contains(ve.Message, "an administrator can start it again") {
		t.Fatalf("erin after the wait: %d Retry-After %q %s; want 503 NoCapacity for an administrator, no Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"), raw)
	}
	if got := []int{sim.Calls("start", pool, hosts[1]), sim.Calls("start", pool, hosts[2])}; !slices.Equal(got, []int{1, 0}) {
		t.Fatalf("starts of %s, %s after the wait: %v, want [1 0]: her connect started nothing", hosts[1], hosts[2], got)
	}
	if _, err := e.admin.StartSessionHost(ctx, pool, hosts[1]); err != nil || sim.Calls("start", pool, hosts[1]) != 2 {
		t.Fatalf("the administrator's start from then: %v, %d starts", err, sim.Calls("start", pool, hosts[1]))
	}
	resp, ve, raw = connect("erin")
	if resp.StatusCode != 503 || ve == nil || ve.Code != vdibroker.EHostStarting || resp.Header.Get("Retry-After") != "30" || ve.Reason != "" {
		t.Fatalf("erin once an administrator started it: %d Retry-After %q %s; want 503 HostStarting, Retry-After 30", resp.StatusCode, resp.Header.Get("Retry-After"), raw)
	}
}

// TestStartVMOnConnectPersonalAnswers_RA4: what a Personal user's
// connect is answered about her own host, which her first connect
// started (start VM on connect, heartbeat timeout 90 s), by when its
// agent said that its machine shuts down (if it did), whether its agent
// heartbeats again (its machine came up, or back from a reboot), and
// when she connects; and that each answer holds when she follows it, on
// the real HTTP server: a Retry-After sends her back when her desktop is
// up (she lands on it), or to a wait that may still end with it
// (HostStarting), or, only once its start has timed out and its machine
// is taken for down, to the answer for an administrator
// (ReasonStartByAdministrator, no Retry-After), which every later connect
// of hers says too; none starts it again. A HostStarting's Retry-After is
// 30 s, or less when the start times out sooner (then it sends her back
// at the timeout, not past it). An agent's word that its machine goes
// down is no answer for an administrator while the heartbeat timeout
// runs: a reboot says the same and is back by itself. Her host's start
// is at S = a whole second W plus 0.3 s, so it times out at T = S + 10
// min = W + 600.3 s; its machine is down from D, the first whole second
// after the shutdown's heartbeat plus 90 s.
func TestStartVMOnConnectPersonalAnswers_RA4(t *testing.T) {
	sim := &power.Simulated{}
	e := newEnvWith(t, envOptions{power: power.Set{"sim": sim}, maintenance: time.Hour})
	e.clock.Freeze()
	const timeout = 90 * time.Second
	never := time.Duration(-1)
	const admin = "admin" // then: NoCapacity for an administrator
	for i, tc := range []struct {
		name string
		said time.Duration // after S, when its agent says it shuts down; never
		up   time.Duration // after S, when its agent heartbeats as it runs; never
		at   time.Duration // after S, her connect
		code string
		ra   int // the Retry-After, 0 for none
		// byAdmin: the answer's reason is ReasonStartByAdministrator.
		byAdmin bool
		// then: the answer to her connect after the Retry-After: a
		// code, admin, or "" (she lands on her desktop).
		then string
	}{
		// T - at = 1 s: 1, not 30, which sent her to T + 29 s told to
		// try again for a start timed out 29 s before.
		{"starting, within its start", never, never, 9*time.Minute + 59*time.Second, vdibroker.EHostStarting, 1, false, admin},
		// T - at = 20 s: her retry at T, when its start has timed out.
		{"starting, 20 s before its start times out", never, never, 9*time.Minute + 40*time.Second, vdibroker.EHostStarting, 20, false, admin},
		// T - at = 19.7 s, 20 up: her retry at T + 0.3 s.
		{"starting, 19.7 s before its start times out", never, never, 9*time.Minute + 40*time.Second + 300*time.Millisecond, vdibroker.EHostStarting, 20, false, admin},
		{"starting, up before her retry", never, 9*time.Minute + 50*time.Second, 9*time.Minute + 40*time.Second, vdibroker.EHostStarting, 20, false, ""},
		{"starting, its start timed out", never, never, 10 * time.Minute, vdibroker.ENoCapacity, 0, true, admin},
		// D = W + 151 (W + 60.3 + 90 = W + 150.3): 90.7 s, at most 30:
		// at W + 90.3 and W + 120.3 the same, then 30.7 s, 31 up, to
		// W + 151.3.
		{"shutting down early in its start", time.Minute, never, time.Minute, vdibroker.ENoCapacity, 30, false, vdibroker.EHostStarting},
		// Past D and before T: it waits for its start.
		{"down, early in its start", time.Minute, never, 151 * time.Second, vdibroker.EHostStarting, 30, false, vdibroker.EHostStarting},
		// D = W + 631, past T: still the wait until D, as a reboot is
		// back by then; if it is not, her retry is for an
		// administrator. (Before, she was told at once to ask her
		// helpdesk.)
		{"shutting down late in its start", 9 * time.Minute, never, 9 * time.Minute, vdibroker.ENoCapacity, 30, false, admin},
		{"rebooting late in its start, back within the heartbeat timeout", 9 * time.Minute, 10 * time.Minute, 9 * time.Minute, vdibroker.ENoCapacity, 30, false, ""},
		// D - at = 0.7 s, 1 up.
		{"shutting down, its start timed out meanwhile", 9 * time.Minute, never, 10*time.Minute + 30*time.Second, vdibroker.ENoCapacity, 1, false, admin},
		{"down, its start timed out", 9 * time.Minute, never, 11 * time.Minute, vdibroker.ENoCapacity, 0, true, admin},
		// Said at W + 508.3: D = W + 599, her retries (30 s from W +
		// 508.3, twice, then 30.7 s, 31 up) at W + 599.3, before T: the
		// wait may end with her desktop.
		{"shutting down, down 1.3 s before its start times out", 508 * time.Second, never, 508 * time.Second, vdibroker.ENoCapacity, 30, false, vdibroker.EHostStarting},
		// Said at W + 509.3: D = W + 600, before T, but the Retry-After
		// (30 s twice, then 30.7 s, 31 up) sends her back at W + 600.3
		// = T, when its start has timed out.
		{"shutting down, down 0.3 s before its start times out", 509 * time.Second, never, 509 * time.Second, vdibroker.ENoCapacity, 30, false, admin},
		// Said at W + 509.3 too, she connects at W + 509.9: D - 90.1 s;
		// 30 s twice, then at W + 569.9 not 30 s (to W + 599.9, after
		// its agent's word at W + 599.3 and before D) but 29 s, then 1.1
		// s, 2 up: at W + 600.9, past T, as 91 s would have.
		{"shutting down, asked 0.6 s after", 509 * time.Second, never, 509*time.Second + 600*time.Millisecond, vdibroker.ENoCapacity, 30, false, admin},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			pool := uniq("pa")
			e.pool(pool, map[string]any{"hostPoolType": "Personal", "personalDesktopAssignmentType": "Automatic",
				"powerDriver": "sim", "startVMOnConnect": true, "heartbeatTimeoutSeconds": int(timeout / time.Second)})
			host := e.addHosts(pool, "pa"+strconv.Itoa(i)+"h", 1)[0]
			if _, err := e.admin.PatchSessionHost(ctx, pool, host, map[string]any{"assignedUsers": []string{"ann"}}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.admin.StopSessionHost(ctx, pool, host, false); err != nil {
				t.Fatal(err)
			}
			connect := func() (*nethttp.Response, *vdibroker.Error, []byte) {
				t.Helper()
				resp, ve, raw := rawDoAt(t, e.urls[0], "POST", "/api/v1/hostpools/"+pool+"/connect", adminToken, `{"user": "ann"}`)
				e.srvs[0].Broker.Power().Wait()
				return resp, ve, raw
			}
			// S: a whole second and 0.3 s.
			now := e.clock.Now()
			s := now.Truncate(time.Second).Add(time.Second + 300*time.Millisecond)
			e.clock.Advance(s.Sub(now))
			wantHostStarting(t, e, pool, "ann", host)
			// The agent's heartbeats at their times, in order, up to d.
			type beat struct {
				at   time.Duration
				down bool
			}
			var beats []beat
			if tc.said >= 0 {
				beats = append(beats, beat{tc.said, true})
			}
			if tc.up >= 0 {
				beats = append(beats, beat{tc.up, false})
			}
			until := func(d time.Duration) {
				t.Helper()
				for len(beats) > 0 && beats[0].at <= d {
					e.clock.Advance(s.Add(beats[0].at).Sub(e.clock.Now()))
					if _, err := e.heartbeatErr(host, &vdibroker.HeartbeatRequest{ShuttingDown: beats[0].down}); err != nil {
						t.Fatal(err)
					}
					beats = beats[1:]
				}
				e.clock.Advance(s.Add(d).Sub(e.clock.Now()))
			}
			until(tc.at)
			resp, ve, raw := connect()
			ra := resp.Header.Get("Retry-After")
			wantReason := ""
			switch {
			case tc.byAdmin:
				wantReason = vdibroker.ReasonStartByAdministrator
			case tc.code == vdibroker.ENoCapacity && tc.said >= 0 && tc.ra > 0:
				wantReason = vdibroker.ReasonDesktopGoingDown // her desktop shutting down
			}
			if resp.StatusCode != 503 || ve == nil || ve.Code != tc.code || ra != strconv.Itoa(tc.ra) && (tc.ra != 0 || ra != "") || ve.Reason != wantReason {
				t.Fatalf("her connect: %d Retry-After %q %s; want 503 %s, Retry-After %d, reason %q", resp.StatusCode, ra, raw, tc.code, tc.ra, wantReason)
			}
			if tc.code == vdibroker.ENoCapacity && tc.said >= 0 && tc.ra > 0 {
				// Her desktop shutting down: the wait said once, by the
				// Retry-After; when its start will have timed out by
				// then, what happens if it does not come back.
				d := s.Add(tc.said).Add(timeout).Truncate(time.Second).Add(time.Second).UTC()
				if want := "it is down from " + d.Format(time.RFC3339); !strings.Contains(ve.Message, "is shutting down") || !strings.Contains(ve.Message, want) ||
					strings.Contains(ve.Message, "try again") || strings.Contains(ve.Message, "(in ") {
					t.Errorf("her connect: %q; want it to say it shuts down and %q, the wait not in its words", ve.Message, want)
				}
				if late := tc.then == admin || tc.up >= 0; late != strings.Contains(ve.Message, "unless it comes back by itself (a reboot)") {
					t.Errorf("her connect: %q; want it to say what happens if it does not come back by itself: %v", ve.Message, late)
				}
			}
			// Where the answer sends her: after its Retry-After, or,
			// for an administrator, from when their start is accepted
			// (D, or T at a whole second if later), and a minute later.
			var later []time.Duration
			if tc.ra > 0 {
				later = []time.Duration{time.Duration(tc.ra) * time.Second}
			} else {
				d := s.Add(10 * time.Minute)
				if tc.said >= 0 {
					d = s.Add(10 * time.Minute).Truncate(time.Second).Add(time.Second)
					if down := s.Add(tc.said).Add(timeout).Truncate(time.Second).Add(time.Second); down.After(d) {
						d = down
					}
				}
				// A second before (when that is to come), an
				// administrator's start is still refused.
				if before := d.Add(-time.Second); !before.Before(e.clock.Now()) {
					e.clock.Advance(before.Sub(e.clock.Now()))
					if _, err := e.admin.StartSessionHost(ctx, pool, host); vdibroker.ErrorCode(err) != vdibroker.EConflict {
						t.Errorf("an administrator's start a second before %s: %v, want Conflict", d.UTC().Format(time.RFC3339), err)
					}
				}
				later = []time.Duration{max(d.Sub(e.clock.Now()), 0), time.Minute}
			}
			for _, wait := range later {
				until(e.clock.Now().Add(wait).Sub(s))
				resp, ve, raw := connect()
				// While her desktop goes down, each retry is told so,
				// with at most 30 s, until the one that finds it down
				// (or back), which comes when a single wait until D
				// would have brought her (the whole seconds up from her
				// connect).
				for resp.StatusCode == 503 && ve != nil && ve.Code == vdibroker.ENoCapacity && ve.Reason == vdibroker.ReasonDesktopGoingDown && strings.Contains(ve.Message, "is shutting down") {
					n, err := strconv.Atoi(resp.Header.Get("Retry-After"))
					if err != nil || n < 1 || n > 30 {
						t.Fatalf("her retry at S + %s: Retry-After %q %s; want 1 to 30", e.clock.Now().Sub(s), resp.Header.Get("Retry-After"), raw)
					}
					until(e.clock.Now().Add(time.Duration(n) * time.Second).Sub(s))
					resp, ve, raw = connect()
				}
				if d := s.Add(tc.said).Add(timeout).Truncate(time.Second).Add(time.Second); tc.said >= 0 && tc.up < 0 && tc.ra > 0 && wait == later[0] {
					if at, want := e.clock.Now(), s.Add(tc.at).Add((d.Sub(s.Add(tc.at))+time.Second-1)/time.Second*time.Second); d.After(s.Add(tc.at)) && !at.Equal(want) {
						t.Errorf("her last retry at S + %s, want S + %s", at.Sub(s), want.Sub(s))
					}
				}
				switch tc.then {
				case "":
					if resp.StatusCode != 201 {
						t.Fatalf("her connect %s later: %d %s; want 201, a session on her desktop, back", wait, resp.StatusCode, raw)
					}
				case admin:
					if ve == nil || ve.Code != vdibroker.ENoCapacity || ve.Reason != vdibroker.ReasonStartByAdministrator || resp.Header.Get("Retry-After") != "" ||
						!strings.Contains(ve.Message, "an administrator can start it again") {
						t.Errorf("her connect %s later: %d Retry-After %q %s; want NoCapacity for an administrator", wait, resp.StatusCode, resp.Header.Get("Retry-After"), raw)
					}
				default:
					if ve == nil || ve.Code != tc.then || ve.Reason != "" {
						t.Errorf("her connect after the Retry-After (%s): %d %s; want %s, a wait that may end with her desktop", wait, resp.StatusCode, raw, tc.then)
					}
				}
				if tc.then != admin {
					break // the next answer is another wait's
				}
			}
			if n := sim.Calls("start", pool, host); n != 1 {
				t.Errorf("%s started %d times, want once (her first connect)", host, n)
			}
			if tc.then == admin {
				// An administrator's start then is accepted, and
				// her next connect waits for it.
				if _, err := e.admin.StartSessionHost(ctx, pool, host); err != nil || sim.Calls("start", pool, host) != 2 {
					t.Fatalf("the administrator's start: %v, %d starts", err, sim.Calls("start", pool, host))
				}
				wantHostStarting(t, e, pool, "ann", host)
			}
		})
	}
}
