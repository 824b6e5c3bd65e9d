package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"testing"

	"github.com/vdibroker/vdibroker"
)

// TestPlanWritesNamingPoolsInOppositeOrders_RSP4 (PostgreSQL): two
// replicas' writes of scaling plans that name the same host pools in
// opposite orders (R-SP4: each write locks the row of every pool it names,
// so a delete of the pool waits for it) do not deadlock. Each write locked
// the pools in the order its hostPools gave them: one held pool-a and
// waited for pool-b, the other held pool-b and waited for pool-a, a cycle
// PostgreSQL broke only after its deadlock_timeout (a second), running one
// of them again. Every plan write now locks its pools by name, in one
// order, so the second waits for the first.
//
// Each of 50 rounds holds both pools' rows in a transaction of the test's
// own until both writes wait for them, so the two overlap every round;
// even rounds write two plans (R-SP4: the second is refused, the pools are
// the first's), odd rounds the same plan twice with its pools reordered
// (both land, one after the other).
func TestPlanWritesNamingPoolsInOppositeOrders_RSP4(t *testing.T) {
	dsn := postgresSchemaDSN(t)
	a, b, retries := twoReplicasOn(t, dsn)
	ctx := t.Context()
	none := vdibroker.Precondition{}
	raw, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for round := range 50 {
		// Plan A names the pools in the store's order (bytes), plan B the other way.
		pa, pb := fmt.Sprintf("pool-%02d-a", round), fmt.Sprintf("pool-%02d-b", round)
		mustPool(t, a, pool(pa, vdibroker.Pooled))
		mustPool(t, a, pool(pb, vdibroker.Pooled))
		planA, planB := fmt.Sprintf("plan-%02d-x", round), fmt.Sprintf("plan-%02d-y", round)
		samePlan := round%2 == 1
		if samePlan {
			planB = planA
			mustPlan(t, a, plan(planA, pa, pb))
		}
		hold, err := raw.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := hold.ExecContext(ctx, `SELECT name FROM host_pools WHERE name IN ($1, $2) FOR UPDATE`, pa, pb); err != nil {
			t.Fatal(err)
		}
		errA, errB := make(chan error, 1), make(chan error, 1)
		go func() {
			_, err := a.PutScalingPlan(context.WithoutCancel(ctx), plan(planA, pa, pb), none)
			errA <- err
		}()
		waitForLockWaiter(t, a, fmt.Sprintf("round %d: %s naming [%s %s]", round, planA, pa, pb))
		go func() {
			_, err := b.PutScalingPlan(context.WithoutCancel(ctx), plan(planB, pb, pa), none)
			errB <- err
		}()
		waitForLockWaiters(t, a, 2, fmt.Sprintf("round %d: %s naming [%s %s], beside the other", round, planB, pb, pa))
		if err := hold.Commit(); err != nil {
			t.Fatal(err)
		}
		ea, eb := <-errA, <-errB
		if samePlan {
			if ea != nil || eb != nil {
				t.Errorf("round %d: the two writes of %s: %v, %v; want both to land", round, planA, ea, eb)
			}
			got := getPlan(t, a, planA).HostPools
			if !slices.Equal(got, []string{pa, pb}) && !slices.Equal(got, []string{pb, pa}) {
				t.Errorf("round %d: %s has pools %v, want one write's", round, planA, got)
			}
			continue
		}
		// One plan has both pools, in its own order; the other was
		// refused naming it, and is not stored (R-SP4).
		won, lost, order, errLost := planA, planB, []string{pa, pb}, eb
		if ea != nil {
			won, lost, order, errLost = planB, planA, []string{pb, pa}, ea
			if eb != nil {
				t.Errorf("round %d: both plans refused: %v; %v", round, ea, eb)
				continue
			}
		}
		if vdibroker.ErrorCode(errLost) != vdibroker.EConflict {
			t.Errorf("round %d: %s, written second: %v, want Conflict naming %s", round, lost, errLost, won)
		}
		if got := getPlan(t, a, won).HostPools; !slices.Equal(got, order) {
			t.Errorf("round %d: %s has pools %v, want %v", round, won, got, order)
		}
		if _, err := a.GetScalingPlan(ctx, lost); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
			t.Errorf("round %d: the refused %s: %v, want NotFound", round, lost, err)
		}
	}
	if n := retries.locks.Load(); n != 0 {
		t.Errorf("%d plan writes were run again after a deadlock or serialization failure, want none: %s", n, retries.first.Load())
	}
}

// TestPlanDeleteBesidePlanWrite_RSP4 (PostgreSQL): a delete of a
// scaling plan (which frees its pools, R-SP4) beside a write of the same
// plan on another replica does not deadlock. The write takes the etag
// clock, then the plan's row, then its pool rows (scaling_plan_pools);
// the delete took the pool rows, then the plan's row: with the write
// queued first for the plan's row, each then waited for what the other
// held, until PostgreSQL broke the cycle after its deadlock_timeout. The
// delete now takes the etag clock first, as every write of a plan does,
// and waits for the write.
func TestPlanDeleteBesidePlanWrite_RSP4(t *testing.T) {
	dsn := postgresSchemaDSN(t)
	a, b, retries := twoReplicasOn(t, dsn)
	ctx := t.Context()
	none := vdibroker.Precondition{}
	for _, n := range []string{"pool-a", "pool-b"} {
		mustPool(t, a, pool(n, vdibroker.Pooled))
	}
	mustPlan(t, a, plan("plan-x", "pool-a", "pool-b"))
	raw, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	// Another transaction holds the plan's row until both wait for it
	// or, after this fix, the delete waits for the write's etag clock.
	hold, err := raw.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback()
	if _, err := hold.ExecContext(ctx, `SELECT name FROM scaling_plans WHERE name = 'plan-x' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	put, del := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := a.PutScalingPlan(context.WithoutCancel(ctx), plan("plan-x", "pool-b", "pool-a"), none)
		put <- err
	}()
	waitForLockWaiter(t, a, "the write of plan-x, for its row")
	go func() { del <- b.DeleteScalingPlan(context.WithoutCancel(ctx), "plan-x", none) }()
	waitForLockWaiters(t, a, 2, "the delete of plan-x, beside its write")
	if err := hold.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-put; err != nil {
		t.Errorf("the write of plan-x: %v", err)
	}
	if err := <-del; err != nil {
		t.Errorf("the delete of plan-x: %v", err)
	}
	if n := retries.locks.Load(); n != 0 {
		t.Errorf("%d writes were run again after a deadlock or serialization failure, want none: %s", n, retries.first.Load())
	}
	// The delete came second: the plan is gone and its pools are free.
	if _, err := a.GetScalingPlan(ctx, "plan-x"); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
		t.Errorf("plan-x after its delete: %v, want NotFound", err)
	}
	mustPlan(t, a, plan("plan-y", "pool-a", "pool-b"))
}
