package main

import (
	"encoding/json"
	"net/url"
	"regexp"
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
func TestDemoPortalUserReachesHost(t *testing.T) {
	t.Setenv("VDIBROKER_ADMIN_TOKEN", "demo-portal-admin")
	d := startDemo(t)
	ctx := t.Context()
	admin := vhttp.NewClient(d.Main.URL(), "demo-portal-admin")
	c := jarClient()
	base := d.Main.URL()
	csrfRe := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)
	csrf := func(path string) string {
		t.Helper()
		_, page := getBody(t, c, base+path)
		m := csrfRe.FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("GET %s: no CSRF token in\n%s", path, page)
		}
		return m[1]
	}
	res, err := c.PostForm(base+"/portal/signin", url.Values{"csrf": {csrf("/portal/signin")}, "next": {"/portal/"}, "token": {d.UserToken}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	// launch opens a desktop and waits for the launch's end: false when
	// it failed (no capacity there).
	launch := func(resource string) bool {
		t.Helper()
		res, err := c.PostForm(base+"/portal/launch", url.Values{"csrf": {csrf("/portal/")}, "resource": {resource}})
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
	// await is the demo user's one open session once it is in state.
	await := func(state string) *vdibroker.UserSession {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			list, err := admin.UserSessions(ctx, DemoUser)
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
				t.Fatalf("the demo user's sessions %v: want one %s", states, state)
			}
		}
	}
	opened := ""
	for _, r := range []string{"desktop:office-breadth", "desktop:rds-loadindex", "desktop:dev-depth"} {
		if launch(r) {
			opened = r
			break
		}
	}
	if opened == "" {
		t.Fatal("no demo desktop could be opened")
	}
	s := await(vdibroker.StateActive)
	if _, err := admin.Disconnect(ctx, s.HostPool, s.ID); err != nil {
		t.Fatal(err)
	}
	await(vdibroker.StateDisconnected)
	if !launch(opened) {
		t.Fatalf("reconnect through %s failed", opened)
	}
	if again := await(vdibroker.StateActive); again.ID != s.ID {
		t.Errorf("reconnected to %s, want her session %s", again.ID, s.ID)
	}
}
