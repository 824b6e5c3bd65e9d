package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestDemoPortalUserReachesHost: the demo user's desktop opened in the
// portal is logged on at its simulated host, as when her Remote Desktop
// client arrives with the file (the agent reports it: Active, R-S2),
// not left Starting until its pending timeout; disconnected (R-S4), her
// Reconnect (the desktop opened again, R-C1) brings the same session
// back to Active. So the demo shows what docs/portal.md says it does.
// Another user's launch through the portal (eve, a User token an
// administrator made) is not the demo's to act on: opened before the
// demo user's, which the demo reads after it, her session is still
// Starting after her host reported once more since the demo user's
// was logged on.
func TestDemoPortalUserReachesHost(t *testing.T) {
	t.Setenv("VDIBROKER_ADMIN_TOKEN", "demo-portal-admin")
	d := startDemo(t)
	ctx := t.Context()
	admin := vhttp.NewClient(d.Main.URL(), "demo-portal-admin")
	base := d.Main.URL()
	csrf := func(c *http.Client, path string) string { return pageCSRF(t, c, base+path) }
	// signIn is a browser signed in to the portal with a User token.
	signIn := func(token string) *http.Client {
		t.Helper()
		c := jarClient()
		res, err := c.PostForm(base+"/portal/signin", url.Values{"csrf": {csrf(c, "/portal/signin")}, "next": {"/portal/"}, "token": {token}})
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return c
	}
	// launch opens a desktop and waits for the launch's end: false when
	// it failed (no capacity there).
	launch := func(c *http.Client, resource string) bool {
		t.Helper()
		res, err := c.PostForm(base+"/portal/launch", url.Values{"csrf": {csrf(c, "/portal/")}, "resource": {resource}})
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		status := res.Request.URL.Path + "/status"
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			res, err := c.Get(base + status)
			if err != nil {
				t.Fatal(err)
			}
			var s struct{ State string }
			err = json.NewDecoder(res.Body).Decode(&s)
			res.Body.Close()
			if err != nil {
				t.Fatalf("%s: %v", status, err)
			}
			switch s.State {
			case "ready":
				return true
			case "failed":
				return false
			}
		}
		t.Fatalf("the launch of %s did not end", resource)
		return false
	}
	desktops := []string{"desktop:office-breadth", "desktop:rds-loadindex", "desktop:dev-depth"}
	// launchAny opens the first desktop that has room.
	launchAny := func(c *http.Client) string {
		t.Helper()
		for _, r := range desktops {
			if launch(c, r) {
				return r
			}
		}
		t.Fatal("no demo desktop could be opened")
		return ""
	}
	// await is user's one open session once it is in state.
	await := func(user, state string) *vdibroker.UserSession {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			list, err := admin.UserSessions(ctx, user)
			if err != nil {
				t.Fatal(err)
			}
			if len(list) == 1 && list[0].State == state {
				return list[0]
			}
			if time.Now().After(deadline) {
				var states []string
				for _, s := range list {
					states = append(states, s.ID+" "+s.State)
				}
				t.Fatalf("%s's sessions %v: want one %s", user, states, state)
			}
		}
	}
	// lastHeartbeat is when host last reported.
	lastHeartbeat := func(pool, host string) time.Time {
		t.Helper()
		h, err := admin.GetSessionHost(ctx, pool, host)
		if err != nil {
			t.Fatal(err)
		}
		if h.LastHeartBeat == nil {
			t.Fatalf("%s/%s has not reported", pool, host)
		}
		return *h.LastHeartBeat
	}

	const eve = "eve@contoso.com"
	tok, err := admin.CreateToken(ctx, vhttp.TokenRequest{Role: vdibroker.RoleUser, Subject: eve, ExpiresInSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}
	launchAny(signIn(tok.Secret))
	hers := await(eve, vdibroker.StatePending)

	demoUser := signIn(d.UserToken)
	opened := launchAny(demoUser)
	s := await(DemoUser, vdibroker.StateActive)
	// The demo read eve's launch before the demo user's: had it logged
	// her on, her host's next report would say so.
	before := lastHeartbeat(hers.HostPool, hers.SessionHost)
	for deadline := time.Now().Add(30 * time.Second); lastHeartbeat(hers.HostPool, hers.SessionHost).Equal(before); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s/%s did not report again", hers.HostPool, hers.SessionHost)
		}
	}
	list, err := admin.UserSessions(ctx, eve)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != hers.ID || list[0].State != vdibroker.StatePending {
		var states []string
		for _, s := range list {
			states = append(states, s.ID+" "+s.State)
		}
		t.Errorf("eve's sessions after her host reported again: %v; want her %s still Pending (Starting): the demo logged on another user's launch", states, hers.ID)
	}

	if _, err := admin.Disconnect(ctx, s.HostPool, s.ID); err != nil {
		t.Fatal(err)
	}
	await(DemoUser, vdibroker.StateDisconnected)
	if !launch(demoUser, opened) {
		t.Fatalf("reconnect through %s failed", opened)
	}
	if again := await(DemoUser, vdibroker.StateActive); again.ID != s.ID {
		t.Errorf("reconnected to %s, want her session %s", again.ID, s.ID)
	}
}
