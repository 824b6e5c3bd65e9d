package outage

import (
	"fmt"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
)

// TestOutagePlacementOfApplications_RE12_ROUT3: during a store outage an
// application is placed within the escrow only on a host that can run
// RemoteApps, as placement would; a desktop may go to the other one.
func TestOutagePlacementOfApplications_RE12_ROUT3(t *testing.T) {
	ctx, now := t.Context(), time.Now().UTC()
	raw, health, st, views, m := newPlacingMode(t, now)
	no := false
	for _, name := range []string{"a-xrdp", "z-windows"} {
		if _, err := st.PutSessionHost(ctx, &vdibroker.SessionHost{HostPool: "out", Name: name, Address: name + ":3389",
			Protocols: []string{"RDP"}, StandardFeatures: true, AllowNewSession: true, CreateTime: now}); err != nil {
			t.Fatal(err)
		}
		hb := &vdibroker.HeartbeatRequest{}
		if name == "a-xrdp" {
			hb.RemoteApps = &no
		}
		if _, err := st.ApplyHeartbeat(ctx, "out", name, hb, now); err != nil {
			t.Fatal(err)
		}
	}
	m.escrow.renewOnce()
	m.escrow.renewOnce()

	raw.down.Store(true)
	health.fail("test outage")
	v := views.Get("out")
	app := &vdibroker.RemoteApp{Program: "paint", Name: "Paint"}
	placed := map[string]int{}
	for i := range 4 {
		a, err := m.Connect(ctx, v, vdibroker.ConnectRequest{User: fmt.Sprintf("u%d", i), RemoteApp: app}, nil)
		if err != nil {
			if code := vdibroker.ErrorCode(err); code != vdibroker.EStoreUnavailable {
				t.Fatalf("connect: %v; want placed or StoreUnavailable", err)
			}
			continue
		}
		placed[a.SessionHost]++
	}
	// z-windows' escrow holds 2; a-xrdp's 2 are not for applications.
	if len(placed) != 1 || placed["z-windows"] != 2 {
		t.Errorf("applications placed during the outage: %v; want 2 on z-windows, none on a-xrdp", placed)
	}
	a, err := m.Connect(ctx, v, vdibroker.ConnectRequest{User: "desk"}, nil)
	if err != nil || a.SessionHost != "a-xrdp" {
		t.Errorf("a desktop during the outage: %+v %v; want a-xrdp's escrow", a, err)
	}
}
