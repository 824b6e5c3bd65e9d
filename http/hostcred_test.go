package http_test

import (
	"context"
	"testing"

	"github.com/vdibroker/vdibroker"
)

// TestOutageStateGoesWithItsHost_RSEC (R-SEC, R-OUT1): what a replica
// keeps of a host for a store outage (the users of its last report, its
// held heartbeat) is the host's agent's word. A host deleted, or whose
// registration an admin reset (a new machine takes its name), takes it
// with it, and a deleted pool takes its hosts'; before, it stayed until
// the map reset at 131,072 hosts, each holding up to some 4.5 MB.
func TestOutageStateGoesWithItsHost_RSEC(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pa, pb := uniq("oa"), uniq("ob")
	e.pool(pa, nil)
	e.pool(pb, nil)
	hosts := e.addHosts(pa, "oah", 3)
	other := e.addHosts(pb, "obh", 2)
	for _, h := range append(hosts, other...) {
		e.heartbeat(h, vdibroker.AgentSession{ID: "1", User: "user-of-" + h, State: vdibroker.StateActive})
	}
	svc := e.srvs[0].Broker
	state := func() int {
		t.Helper()
		st := svc.OutageState()
		if st.ReportedHosts > 0 && st.ReportBytes <= 0 {
			t.Errorf("%d hosts' reports hold %d bytes", st.ReportedHosts, st.ReportBytes)
		}
		return st.ReportedHosts
	}
	if got := state(); got != 5 {
		t.Fatalf("%d hosts' reports kept, want 5", got)
	}
	// Deleted (it has an adopted session: forced).
	if err := e.admin.DeleteSessionHost(ctx, pa, hosts[0], true); err != nil {
		t.Fatal(err)
	}
	if got := state(); got != 4 {
		t.Errorf("after %s's delete %d hosts' reports kept, want 4", hosts[0], got)
	}
	// Its registration reset: the next machine to register the name is
	// another.
	if err := e.admin.ResetRegistration(ctx, pa, hosts[1]); err != nil {
		t.Fatal(err)
	}
	if got := state(); got != 3 {
		t.Errorf("after %s's reset %d hosts' reports kept, want 3", hosts[1], got)
	}
	// Its old credential is refused and writes nothing.
	if _, err := e.heartbeatErr(hosts[1], &vdibroker.HeartbeatRequest{Sessions: []vdibroker.AgentSession{{ID: "2", User: "x", State: vdibroker.StateActive}}}); vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated {
		t.Errorf("the reset host's old credential: %v, want Unauthenticated", err)
	}
	if got := state(); got != 3 {
		t.Errorf("after the old credential's heartbeat %d hosts' reports kept, want 3", got)
	}
	if _, err := e.admin.DeleteHostPool(ctx, pb, true); err != nil {
		t.Fatal(err)
	}
	if got := state(); got != 1 {
		t.Errorf("after the other pool's delete %d hosts' reports kept, want %s's alone", got, hosts[2])
	}
}
