package store_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// plan is a valid Pooled plan over pools.
func plan(name string, pools ...string) *vdibroker.ScalingPlan {
	peak := 30
	p := &vdibroker.ScalingPlan{Name: name, TimeZone: "Europe/Berlin", HostPools: pools, CreateTime: t0, UpdateTime: t0,
		Schedules: []vdibroker.ScalingSchedule{{
			Name: "workweek", DaysOfWeek: []string{"Monday", "Friday"},
			RampUpStartTime: "07:00", RampUpMinimumHostsPct: 20, RampUpCapacityThresholdPct: 60,
			PeakStartTime: "09:00", PeakMinimumHostsPct: &peak,
			RampDownStartTime: "17:00", RampDownMinimumHostsPct: 10, RampDownCapacityThresholdPct: 90,
			RampDownForceLogoffUsers: true, RampDownWaitTimeMinutes: 30, RampDownNotificationMessage: "Save your work.\nBye.",
			OffPeakStartTime: "19:00",
		}}}
	p.FillDefaults()
	if err := p.Validate(); err != nil {
		panic(err)
	}
	return p
}

func mustPlan(t testing.TB, s *store.DB, p *vdibroker.ScalingPlan) {
	t.Helper()
	if _, err := s.PutScalingPlan(t.Context(), p, vdibroker.Precondition{}); err != nil {
		t.Fatalf("put plan %s: %v", p.Name, err)
	}
}

func getPlan(t testing.TB, s *store.DB, name string) *vdibroker.ScalingPlan {
	t.Helper()
	p, err := s.GetScalingPlan(t.Context(), name)
	if err != nil {
		t.Fatalf("get plan %s: %v", name, err)
	}
	return p
}

// TestScalingPlanCRUD: a plan reads back as written (schedules, optional
// fields, pools in order); a replace keeps createTime and moves
// updateTime; list is by name; delete frees the pools.
func TestScalingPlanCRUD(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		for _, n := range []string{"pool-a", "pool-b", "pool-c"} {
			mustPool(t, s, pool(n, vdibroker.Pooled))
		}
		p := plan("plan-b", "pool-b", "pool-a")
		created, err := s.PutScalingPlan(ctx, p, vdibroker.Precondition{})
		if err != nil || !created {
			t.Fatalf("create: created=%v err=%v", created, err)
		}
		got := getPlan(t, s, "plan-b")
		if diff := cmp.Diff(p, got); diff != "" {
			t.Errorf("read back (-put +got):\n%s", diff)
		}

		q := plan("plan-b", "pool-c")
		q.Description = "replaced"
		q.CreateTime, q.UpdateTime = t0.Add(time.Hour), t0.Add(time.Hour)
		if created, err := s.PutScalingPlan(ctx, q, vdibroker.Precondition{}); err != nil || created {
			t.Fatalf("replace: created=%v err=%v", created, err)
		}
		got = getPlan(t, s, "plan-b")
		// (p was created at t0 after the pools, so a few ns past it, R-E13.)
		if !got.CreateTime.Equal(p.CreateTime) || !got.UpdateTime.Equal(t0.Add(time.Hour)) || got.Description != "replaced" {
			t.Errorf("replace: createTime %v (want %v kept), updateTime %v, description %q", got.CreateTime, p.CreateTime, got.UpdateTime, got.Description)
		}
		if diff := cmp.Diff([]string{"pool-c"}, got.HostPools); diff != "" {
			t.Errorf("replace: pools (-want +got):\n%s", diff)
		}
		// pool-a and pool-b left plan-b with the replace: another plan
		// may take them.
		mustPlan(t, s, plan("plan-a", "pool-a", "pool-b"))
		list, err := s.ListScalingPlans(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range list {
			names = append(names, fmt.Sprint(p.Name, p.HostPools))
		}
		if diff := cmp.Diff([]string{"plan-a[pool-a pool-b]", "plan-b[pool-c]"}, names); diff != "" {
			t.Errorf("list (-want +got):\n%s", diff)
		}

		forPool, err := s.ScalingPlanForPool(ctx, "pool-b")
		if err != nil || forPool.Name != "plan-a" {
			t.Errorf("plan for pool-b: got %v, %v; want plan-a", forPool, err)
		}

		if err := s.DeleteScalingPlan(ctx, "plan-a", vdibroker.Precondition{}); err != nil {
			t.Fatal(err)
		}
		_, err = s.GetScalingPlan(ctx, "plan-a")
		wantCode(t, err, vdibroker.ENotFound)
		_, err = s.ScalingPlanForPool(ctx, "pool-b")
		wantCode(t, err, vdibroker.ENotFound)
		wantCode(t, s.DeleteScalingPlan(ctx, "plan-a", vdibroker.Precondition{}), vdibroker.ENotFound)
		mustPlan(t, s, plan("plan-c", "pool-a")) // freed by the delete
	})
}

// TestScalingPlanPoolRules_RSP4: a plan's pools must exist and have its
// type (400 on hostPools naming the pool) and be in no other plan (409
// naming that plan); a refused put changes nothing.
func TestScalingPlanPoolRules_RSP4(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("pooled1", vdibroker.Pooled))
		mustPool(t, s, pool("pooled2", vdibroker.Pooled))
		mustPool(t, s, pool("personal1", vdibroker.Personal))
		mustPlan(t, s, plan("first", "pooled1"))

		for _, tc := range []struct {
			name      string
			p         *vdibroker.ScalingPlan
			code      string
			inMessage string
		}{
			{"missing pool", plan("second", "pooled2", "nope"), vdibroker.EInvalid, `host pool "nope" does not exist`},
			{"wrong type", plan("second", "pooled2", "personal1"), vdibroker.EInvalid, `host pool "personal1" is Personal`},
			{"pool of another plan", plan("second", "pooled2", "pooled1"), vdibroker.EConflict, `already in scaling plan "first"`},
		} {
			_, err := s.PutScalingPlan(ctx, tc.p, vdibroker.Precondition{})
			if vdibroker.ErrorCode(err) != tc.code || vdibroker.ErrorField(err) != "hostPools" || !strings.Contains(vdibroker.ErrorMessage(err), tc.inMessage) {
				t.Errorf("%s: got %v, want %s on hostPools saying %q", tc.name, err, tc.code, tc.inMessage)
			}
			if _, err := s.GetScalingPlan(ctx, "second"); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
				t.Errorf("%s: the refused plan was stored (%v)", tc.name, err)
			}
			if p, err := s.ScalingPlanForPool(ctx, "pooled2"); err == nil {
				t.Errorf("%s: pooled2 joined plan %s although the put was refused", tc.name, p.Name)
			}
		}
		// Replacing a plan with its own pools is no conflict.
		mustPlan(t, s, plan("first", "pooled1"))
	})
}

// TestDeletePoolLeavesPlan_RSP4: deleting a host pool takes it out of its
// plan (the plan and its other pools stay), so the name may be reused and
// given to another plan.
func TestDeletePoolLeavesPlan_RSP4(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("keep", vdibroker.Pooled))
		mustPool(t, s, pool("gone", vdibroker.Pooled))
		mustPlan(t, s, plan("office", "keep", "gone"))
		if _, err := s.DeleteHostPool(ctx, "gone", false, vdibroker.Precondition{}); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"keep"}, getPlan(t, s, "office").HostPools); diff != "" {
			t.Errorf("plan pools after deleting pool gone (-want +got):\n%s", diff)
		}
		mustPool(t, s, pool("gone", vdibroker.Pooled))
		mustPlan(t, s, plan("other", "gone"))
	})
}

// TestConcurrentPlansOnePool_RSP4: plans racing for one pool from two
// stores on one database (two replicas) - exactly one gets it, every
// other is refused with Conflict, and the pool is in one plan afterwards.
func TestConcurrentPlansOnePool_RSP4(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		a, b := tg.open(t, store.Options{}), tg.open(t, store.Options{})
		mustPool(t, a, pool("shared", vdibroker.Pooled))
		const n = 8
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := a
				if i%2 == 1 {
					s = b
				}
				_, errs[i] = s.PutScalingPlan(t.Context(), plan(fmt.Sprintf("plan-%d", i), "shared"), vdibroker.Precondition{})
			}()
		}
		wg.Wait()
		won := 0
		for i, err := range errs {
			switch vdibroker.ErrorCode(err) {
			case "":
				won++
			case vdibroker.EConflict:
			default:
				t.Errorf("plan-%d: %v", i, err)
			}
		}
		if won != 1 {
			t.Errorf("%d plans took the pool, want 1 (errors %v)", won, errs)
		}
		list, err := a.ListScalingPlans(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 {
			t.Errorf("%d plans stored, want 1: a refused put must store nothing", len(list))
		}
	})
}
