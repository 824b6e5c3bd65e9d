package console_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestAutoscalePage: a Reader sees the pool's evaluations with their
// figures, actions and reasons, newest first, and the pool page links to
// them; a Reader scoped to another pool does not see them.
func TestAutoscalePage(t *testing.T) {
	e := newEnv(t)
	e.seed("alice")
	ctx := context.Background()
	t0 := time.Date(2026, 11, 30, 19, 0, 0, 0, time.UTC)
	max := 2
	for i, host := range []string{"host-2", "host-3"} {
		if err := e.store.AppendAutoscaleEvaluation(ctx, &vdibroker.AutoscaleEvaluation{
			HostPool: "pool-a", Time: t0.Add(time.Duration(i) * time.Minute), Holder: "replica-1", Plan: "office", Schedule: "weekdays",
			Phase: vdibroker.PhaseRampDown, Hosts: 3, RunningHosts: 3 - i, Sessions: 1, AvailableCapacity: 12, UsedCapacityPct: 8.3,
			ThresholdPct: 90, MinimumHosts: 1, MaximumHosts: &max,
			Actions: []vdibroker.AutoscaleAction{{Action: vdibroker.ActionDrain, Host: host, Reason: "fewest sessions (R-A3)"}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	b := e.browser()
	b.signin(e.token(vdibroker.RoleReader))
	wantContains(t, b.get("/pools/pool-a"), `href="/pools/pool-a/autoscale"`)
	a := b.get("/pools/pool-a/autoscale")
	wantStatus(t, a, http.StatusOK)
	wantContains(t, a, "Autoscale of pool-a", "office", "weekdays", "RampDown", `data-action="Drain"`,
		`href="/pools/pool-a/hosts/host-3"`, `href="/rules#R-A3"`, "90%", "1 · 2", "replica-1")
	// Newest first: host-3's drain (the later one) comes before host-2's.
	if i, j := indexOf(a.body, "/hosts/host-3"), indexOf(a.body, "/hosts/host-2"); i < 0 || j < 0 || i > j {
		t.Errorf("evaluations not newest first (host-3 at %d, host-2 at %d)", i, j)
	}
	wantContains(t, b.get("/pools/nope/autoscale"), "not found")

	// A Reader scoped to another pool does not see this one.
	tok, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: vdibroker.RoleReader, Subject: "other", HostPools: []string{"pool-b"}})
	if err != nil {
		t.Fatal(err)
	}
	o := e.browser()
	o.signin(tok.Secret)
	a = o.get("/pools/pool-a/autoscale")
	wantStatus(t, a, http.StatusNotFound)
	if indexOf(a.body, "replica-1") >= 0 {
		t.Error("an out-of-scope Reader sees the evaluations")
	}
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}
