package http_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// sayRemoteApps sends host's heartbeat saying whether it can run
// RemoteApps (R-E12).
func (e *env) sayRemoteApps(host string, can bool) {
	e.t.Helper()
	if _, err := e.heartbeatErr(host, &vdibroker.HeartbeatRequest{RemoteApps: &can}); err != nil {
		e.t.Fatalf("heartbeat %s: %v", host, err)
	}
}

// appGroup publishes application app in a RemoteApp group of pool for
// all users.
func (e *env) appGroup(group, pool, app string) {
	e.t.Helper()
	ctx := context.Background()
	if _, err := e.admin.PutApplicationGroup(ctx, group, map[string]any{"hostPool": pool, "applicationGroupType": "RemoteApp",
		"assignments": map[string]any{"allUsers": true}}); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.admin.PutApplication(ctx, group, app, map[string]any{"filePath": `C:\Windows\system32\mspaint.exe`}); err != nil {
		e.t.Fatal(err)
	}
}

// TestApplicationPlacedWhereItRuns_RE12: in a pool of an xrdp host and a
// Windows host, every application connect lands on the Windows one and
// its decision record says why the other was skipped; the hosts show
// what their agents said; a pool of xrdp hosts only refuses the
// application with 409 RemoteAppUnsupported naming the pool, and stores
// no session.
func TestApplicationPlacedWhereItRuns_RE12(t *testing.T) {
	e := newEnvWith(t, envOptions{maintenance: time.Hour})
	ctx := context.Background()
	e.pool("mixed", nil) // BreadthFirst: a desktop draws among both
	hosts := e.addHosts("mixed", "mx", 3)
	lin, win, old := hosts[0], hosts[1], hosts[2]
	e.sayRemoteApps(lin, false)
	e.sayRemoteApps(win, true)
	e.appGroup("mixed-apps", "mixed", "paint")

	// The host resource shows it: "No", "Yes", and "Unknown" for an
	// agent that said nothing.
	for host, want := range map[string]string{lin: "No", win: "Yes", old: "Unknown"} {
		status, _, body := rawDo(t, e, "GET", "/api/v1/hostpools/mixed/sessionhosts/"+host, adminToken, "")
		var got map[string]any
		if err := json.Unmarshal(body, &got); status != 200 || err != nil || got["remoteApps"] != want {
			t.Errorf("GET %s: %d remoteApps %v, want %s (%s)", host, status, got["remoteApps"], want, body)
		}
	}
	// The old host is left out by draining it: this test is about the
	// other two.
	if _, err := e.admin.PatchSessionHost(ctx, "mixed", old, map[string]any{"allowNewSession": false}); err != nil {
		t.Fatal(err)
	}

	for i := range 8 {
		user := fmt.Sprintf("user%d", i)
		a, err := e.admin.ConnectApplication(ctx, "mixed-apps", vdibroker.AppConnectRequest{User: user, Application: "paint"})
		if err != nil {
			t.Fatalf("%s: %v", user, err)
		}
		if a.SessionHost != win {
			t.Fatalf("%s's application placed on %s, want %s", user, a.SessionHost, win)
		}
		rec, err := e.admin.GetPlacement(ctx, "mixed", a.SessionID)
		if err != nil {
			t.Fatal(err)
		}
		if rec.ExcludedCounts["RemoteAppUnsupported"] != 1 || len(rec.Excluded) == 0 || rec.Excluded[0].Host != lin ||
			!strings.Contains(rec.Excluded[0].Detail, "cannot run RemoteApps") {
			t.Fatalf("decision record excludes %+v (counts %v), want %s as RemoteAppUnsupported", rec.Excluded, rec.ExcludedCounts, lin)
		}
	}

	// A pool of xrdp hosts only.
	e.pool("linux", nil)
	for _, h := range e.addHosts("linux", "lx", 2) {
		e.sayRemoteApps(h, false)
	}
	e.appGroup("linux-apps", "linux", "paint")
	status, ve, body := rawDo(t, e, "POST", "/api/v1/applicationgroups/linux-apps/connect", adminToken, `{"user": "ann", "application": "paint"}`)
	if status != http.StatusConflict || ve == nil || ve.Code != vdibroker.ERemoteAppUnsupported || !strings.Contains(ve.Message, `"linux"`) ||
		!strings.Contains(ve.Message, "RemoteApps") {
		t.Fatalf("application connect in a Linux pool: %d %s, want 409 RemoteAppUnsupported naming the pool", status, body)
	}
	if got := e.openSessions("linux"); len(got) != 0 {
		t.Fatalf("refused connect stored sessions: %+v", got)
	}
	// Her desktop there is unaffected.
	if _, err := e.connect("linux", "ann"); err != nil {
		t.Fatalf("desktop connect: %v", err)
	}
}

// TestHostSaysOnlyForItself_RE12: a host credential is its host's only: a
// heartbeat has no field that names another host (refused as unknown),
// and registering another host's name with it is refused, so one host's
// credential cannot make another host take or lose applications.
func TestHostSaysOnlyForItself_RE12(t *testing.T) {
	e := newEnvWith(t, envOptions{maintenance: time.Hour})
	ctx := context.Background()
	e.pool("pool-p", nil)
	hosts := e.addHosts("pool-p", "h", 2)
	mine, other := hosts[0], hosts[1]
	e.sayRemoteApps(other, true)
	e.mu.Lock()
	cred := e.agents[mine]
	e.mu.Unlock()

	for _, body := range []string{
		`{"remoteApps": false, "hostName": "` + other + `"}`,
		`{"remoteApps": false, "sessionHost": "` + other + `"}`,
		`{"remoteApps": false, "hostPool": "pool-p", "name": "` + other + `"}`,
	} {
		if status, ve, raw := rawDo(t, e, "POST", "/api/v1/agent/heartbeat", cred, body); status != http.StatusBadRequest || ve == nil || ve.Code != vdibroker.EInvalid {
			t.Errorf("heartbeat %s: %d %s, want 400", body, status, raw)
		}
	}
	// Its own heartbeat changes its own host only.
	if status, _, raw := rawDo(t, e, "POST", "/api/v1/agent/heartbeat", cred, `{"remoteApps": false}`); status != 200 {
		t.Fatalf("own heartbeat: %d %s", status, raw)
	}
	// Re-keying another host's name with a new registration token and
	// this host's credential is refused (R-SEC).
	rt, err := e.admin.CreateRegistrationToken(ctx, "pool-p", vhttp.RegistrationTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	status, ve, raw := rawDo(t, e, "POST", "/api/v1/agent/register", cred,
		`{"token": "`+rt.Token+`", "hostName": "`+other+`", "address": "x:3389", "protocols": ["RDP"], "remoteApps": false}`)
	if status != http.StatusConflict || ve == nil {
		t.Errorf("register %s with %s's credential: %d %s, want 409", other, mine, status, raw)
	}
	for host, want := range map[string]string{mine: vdibroker.RemoteAppsNo, other: vdibroker.RemoteAppsYes} {
		h, err := e.admin.GetSessionHost(ctx, "pool-p", host)
		if err != nil {
			t.Fatal(err)
		}
		if h.RemoteApps != want {
			t.Errorf("%s remoteApps %q, want %s", host, h.RemoteApps, want)
		}
	}
}

// TestRemoteAppsWarning_RE12: publishing a RemoteApp group or an
// application in a pool whose hosts all say they cannot run RemoteApps is
// allowed (a host that can may be added later) and answered with a
// warning, in the body and a Warning header; a pool with a host that can,
// or that did not say, gets none, nor does a Desktop group.
func TestRemoteAppsWarning_RE12(t *testing.T) {
	e := newEnvWith(t, envOptions{maintenance: time.Hour})
	ctx := context.Background()
	e.pool("linux", nil)
	for _, h := range e.addHosts("linux", "lx", 2) {
		e.sayRemoteApps(h, false)
	}
	e.pool("mixed", nil)
	mixed := e.addHosts("mixed", "mx", 2)
	e.sayRemoteApps(mixed[0], false) // mx002 says nothing

	g, err := e.admin.PutApplicationGroup(ctx, "linux-apps", map[string]any{"hostPool": "linux", "applicationGroupType": "RemoteApp"})
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Warnings) != 1 || !strings.Contains(g.Warnings[0], `"linux"`) || !strings.Contains(g.Warnings[0], "RemoteApps") {
		t.Errorf("group's warnings %q, want one naming the pool", g.Warnings)
	}
	resp, _, body := rawDoAt(t, e.urls[0], "PUT", "/api/v1/applicationgroups/linux-apps/applications/paint", adminToken, `{"filePath": "C:\\paint.exe"}`)
	if resp.StatusCode != http.StatusCreated || !strings.Contains(resp.Header.Get("Warning"), "can run RemoteApps") || !strings.Contains(string(body), `"warnings":["none of the 2 session hosts`) {
		t.Errorf("application PUT: %d Warning %q %s", resp.StatusCode, resp.Header.Get("Warning"), body)
	}
	// Not stored: a read has none.
	if a, err := e.admin.GetApplication(ctx, "linux-apps", "paint"); err != nil || len(a.Warnings) != 0 {
		t.Errorf("GET application: %+v %v", a, err)
	}

	for _, body := range []map[string]any{
		{"hostPool": "mixed", "applicationGroupType": "RemoteApp"},
		{"hostPool": "linux", "applicationGroupType": "Desktop"},
	} {
		g, err := e.admin.PutApplicationGroup(ctx, fmt.Sprintf("%s-%s", body["hostPool"], body["applicationGroupType"]), body)
		if err != nil {
			t.Fatal(err)
		}
		if len(g.Warnings) != 0 {
			t.Errorf("%v: warnings %q, want none", body, g.Warnings)
		}
	}
}

// TestStartOnConnectForApplications_RE12_RA4: an application's connect
// that finds no capacity starts a stopped host that can run RemoteApps,
// never one that cannot (which placement would not give it), though that
// one is first by name.
func TestStartOnConnectForApplications_RE12_RA4(t *testing.T) {
	e, sim, pool, hosts := powerEnv(t)
	ctx := context.Background()
	lin, win := hosts[0], hosts[1]
	e.sayRemoteApps(lin, false)
	e.sayRemoteApps(win, true)
	for _, h := range hosts {
		if _, err := e.admin.StopSessionHost(ctx, pool, h, true); err != nil {
			t.Fatal(err)
		}
	}
	e.appGroup(pool+"-apps", pool, "paint")
	resp, ve, raw := rawDoAt(t, e.urls[0], "POST", "/api/v1/applicationgroups/"+pool+"-apps/connect", adminToken, `{"user": "bob", "application": "paint"}`)
	if resp.StatusCode != 503 || ve == nil || ve.Code != vdibroker.EHostStarting || !strings.Contains(ve.Message, win) {
		t.Fatalf("application connect with every host stopped: %d %s; want HostStarting naming %s", resp.StatusCode, raw, win)
	}
	for host, want := range map[string]string{lin: vdibroker.PowerStopped, win: vdibroker.PowerStarting} {
		if h, err := e.admin.GetSessionHost(ctx, pool, host); err != nil || h.PowerState != want {
			t.Errorf("%s: %+v %v; want %s", host, h, err, want)
		}
	}
	if n := sim.Calls("start", pool, lin); n != 0 {
		t.Errorf("%s, which cannot run RemoteApps, was started %d times", lin, n)
	}
}

// TestFeedSaysRemoteAppUnsupported_RE12_RU5: a RemoteApp whose pool's
// hosts all say they cannot run RemoteApps is in the feed marked
// "unavailable": "RemoteAppUnsupported", so a client need not offer what
// its connect refuses; one in a pool with a host that can, or did not say
// (Unknown), or with no host at all has no "unavailable" (its absence
// means it can be opened), nor has the desktop of the pool whose
// applications cannot be. A connect made anyway is refused as before, and
// a host that comes to say it can makes the application available again.
func TestFeedSaysRemoteAppUnsupported_RE12_RU5(t *testing.T) {
	e := newEnvWith(t, envOptions{maintenance: time.Hour})
	ctx := context.Background()
	for pool, said := range map[string][]*bool{"linux": {new(false), new(false)}, "mixed": {new(false), nil}, "bare": nil, "windows": {new(true)}} {
		e.pool(pool, nil)
		for i, h := range e.addHosts(pool, pool+"h", len(said)) {
			if said[i] != nil {
				e.sayRemoteApps(h, *said[i])
			}
		}
		if _, err := e.admin.PutApplicationGroup(ctx, pool+"-apps", map[string]any{"hostPool": pool, "applicationGroupType": "RemoteApp",
			"assignments": map[string]any{"allUsers": true}}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.admin.PutApplication(ctx, pool+"-apps", "paint", map[string]any{"filePath": `C:\Windows\system32\mspaint.exe`,
			"friendlyName": "Paint on " + pool, "showInPortal": true}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.admin.PutApplicationGroup(ctx, "linux-desk", map[string]any{"hostPool": "linux", "applicationGroupType": "Desktop",
		"assignments": map[string]any{"allUsers": true}}); err != nil {
		t.Fatal(err)
	}
	ann := e.userToken("ann", nil)
	feed := func(step string, unavailable ...string) {
		t.Helper()
		status, _, raw := rawDo(t, e, "GET", "/api/v1/feed", ann, "")
		var f struct {
			Resources []map[string]any `json:"resources"`
		}
		if err := json.Unmarshal(raw, &f); status != http.StatusOK || err != nil || len(f.Resources) != 5 {
			t.Fatalf("%s: feed %d %s, want 5 resources", step, status, raw)
		}
		for _, r := range f.Resources {
			id := r["id"].(string)
			// Absent when it can be opened: a client that does not know
			// the field, or reads a feed without it, offers everything.
			got, has := r["unavailable"]
			if want := slices.Contains(unavailable, id); want != has || want && got != vdibroker.ERemoteAppUnsupported {
				t.Errorf("%s: %s has unavailable %v (%v), want %v", step, id, got, has, want)
			}
			if _, ok := r["available"]; ok {
				t.Errorf("%s: %s has an available field: %v", step, id, r)
			}
		}
	}
	feed("linux of xrdp hosts only", "app:linux-apps/paint")

	// Opened anyway (a page read before): refused as before.
	status, ve, raw := rawDo(t, e, "POST", "/api/v1/applicationgroups/linux-apps/connect", ann, `{"user": "ann", "application": "paint"}`)
	if status != http.StatusConflict || ve == nil || ve.Code != vdibroker.ERemoteAppUnsupported {
		t.Fatalf("connect to the unavailable application: %d %s, want 409 RemoteAppUnsupported", status, raw)
	}

	e.sayRemoteApps("linuxh001", true)
	feed("a linux host says it can")
}
