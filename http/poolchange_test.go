package http_test

import (
	"context"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestPoolChangeOnAnotherServerAppliesNext_RP1: the load balancer type
// changed through one server applies to the next placement through
// another, whose view still holds the old settings (R-P1). The commit
// refuses a decision made with settings that are no longer stored, and the
// server decides again with the new ones.
func TestPoolChangeOnAnotherServerAppliesNext_RP1(t *testing.T) {
	poolChangeOnAnotherServer(t, newEnvWith(t, envOptions{replicas: 2}))
}

// TestPoolChangeOnAnotherReplicaAppliesNext_RP1_Postgres is the same with
// two replicas on one PostgreSQL database.
func TestPoolChangeOnAnotherReplicaAppliesNext_RP1_Postgres(t *testing.T) {
	dsn := postgresDSN(t)
	poolChangeOnAnotherServer(t, newEnvWith(t, envOptions{dsn: dsn, replicas: 2}))
}

func poolChangeOnAnotherServer(t *testing.T, e *env) {
	ctx := context.Background()
	pool := uniq("rp1")
	e.pool(pool, map[string]any{"loadBalancerType": "BreadthFirst", "maxSessionLimit": 10})
	e.addHosts(pool, "h", 3)
	s1 := e.client(1, adminToken)
	algorithm := func(r *vhttp.ConnectResult) string {
		t.Helper()
		rec, err := e.admin.GetPlacement(ctx, pool, r.SessionID)
		if err != nil {
			t.Fatal(err)
		}
		return rec.Algorithm
	}
	first, err := s1.Connect(ctx, pool, vhttp.ConnectRequest{User: "u1"}) // server 1 loads its view
	if err != nil {
		t.Fatal(err)
	}
	if got := algorithm(first); got != vdibroker.BreadthFirst {
		t.Fatalf("first placement: %s, want BreadthFirst", got)
	}

	e.clock.Advance(time.Second)
	if _, err := e.admin.PatchHostPool(ctx, pool, map[string]any{"loadBalancerType": "DepthFirst"}); err != nil {
		t.Fatal(err)
	}
	second, err := s1.Connect(ctx, pool, vhttp.ConnectRequest{User: "u2"})
	if err != nil {
		t.Fatal(err)
	}
	if got := algorithm(second); got != vdibroker.DepthFirst {
		t.Errorf("placement through server 1 after the change on server 0: %s, want DepthFirst (R-P1)", got)
	}
}

// TestPoolChangeWithClockSteppedBack_RP1: a pool changed while the
// server's clock is behind the previous change (stepped back by NTP, say)
// still applies to the next placement, dry runs included (R-P1, R-C8).
// With h001 holding the only session, DepthFirst picks h001 and
// BreadthFirst never does.
func TestPoolChangeWithClockSteppedBack_RP1(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pool := uniq("rp1clock")
	e.pool(pool, map[string]any{"loadBalancerType": "BreadthFirst", "maxSessionLimit": 10})
	hosts := e.addHosts(pool, "h", 3)
	dryRun := func() string {
		t.Helper()
		r, err := e.admin.Connect(ctx, pool, vhttp.ConnectRequest{User: "u", DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		return r.SessionHost
	}
	e.clock.Advance(time.Second)
	if _, err := e.admin.PatchHostPool(ctx, pool, map[string]any{"loadBalancerType": "DepthFirst"}); err != nil {
		t.Fatal(err)
	}
	if got := e.mustConnect(pool, "a").SessionHost; got != hosts[0] {
		t.Fatalf("DepthFirst in an empty pool placed on %s, want %s (ties by name)", got, hosts[0])
	}
	if got := dryRun(); got != hosts[0] {
		t.Fatalf("DepthFirst dry run: %s, want %s (the most sessions)", got, hosts[0])
	}
	e.clock.Advance(-10 * time.Second)
	if _, err := e.admin.PatchHostPool(ctx, pool, map[string]any{"loadBalancerType": "BreadthFirst"}); err != nil {
		t.Fatal(err)
	}
	if got := dryRun(); got == hosts[0] {
		t.Errorf("dry run after the switch back to BreadthFirst with the clock 10 s behind: %s, the DepthFirst choice", got)
	}
}
