package autoscale_test

import (
	"context"
	"errors"
	"github.com/vdibroker/vdibroker/internal/pgtest"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/autoscale"
	"github.com/vdibroker/vdibroker/broker"
	"github.com/vdibroker/vdibroker/store"
)

// The loop on the real store, SQLite and PostgreSQL: the scaling plan as
// stored, the lease between two replicas, the evaluation records, and the
// state another replica carries on with. The power actions are in memory
// here (the power service is the power work's).

const pgEnv = "VDIBROKER_TEST_POSTGRES_DSN"

// openers returns, per engine, a function opening a store handle on one
// fresh database (each handle a replica).
func engines(t *testing.T) map[string]func(t *testing.T) *store.DB {
	dir := t.TempDir()
	out := map[string]func(t *testing.T) *store.DB{
		"sqlite": func(t *testing.T) *store.DB { return open(t, "", dir) },
	}
	out["postgres"] = func(t *testing.T) *store.DB {
		return open(t, postgresSchemaDSN(t), "")
	}
	return out
}

func open(t *testing.T, dsn, dir string) *store.DB {
	t.Helper()
	s, err := store.OpenWith(t.Context(), dsn, dir, nil, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var schemaOnce = map[*testing.T]string{}
var schemaMu sync.Mutex

// postgresSchemaDSN creates a schema for the test (one per test, shared by
// its handles), dropped when it ends; it skips without PostgreSQL.
func postgresSchemaDSN(t *testing.T) string {
	t.Helper()
	schemaMu.Lock()
	defer schemaMu.Unlock()
	if dsn, ok := schemaOnce[t]; ok {
		return dsn
	}
	dsn := pgtest.SchemaDSN(t, "vdibroker_autoscale_", "PostgreSQL test")
	schemaOnce[t] = dsn
	return dsn
}

// power is the hosts' power state and autoscale drain, which the power
// work keeps in the store; here shared by the replicas in memory.
type power struct {
	mu    sync.Mutex
	now   time.Time
	state map[string]string
	drain map[string]bool
	stops []string
}

type actions struct {
	db *store.DB
	p  *power
}

func (a actions) SessionHosts(ctx context.Context, pool string) (*vdibroker.HostPool, []*vdibroker.SessionHost, error) {
	p, err := a.db.GetHostPool(ctx, pool)
	if err != nil {
		return nil, nil, err
	}
	// The store keeps powerDriver once the power work lands.
	p.PowerDriver = "sim"
	hs, err := a.db.ListSessionHosts(ctx, pool)
	a.p.mu.Lock()
	defer a.p.mu.Unlock()
	for _, h := range hs {
		h.PowerState, h.AutoscaleDrain = a.p.state[h.Name], a.p.drain[h.Name]
		if h.PowerState == vdibroker.PowerRunning {
			hb := a.p.now
			h.LastHeartBeat = &hb
		}
	}
	return p, hs, err
}

func (a actions) SetLoadBalancer(ctx context.Context, pool, from, to string) (*vdibroker.HostPool, bool, error) {
	p, err := a.db.UpdateHostPool(ctx, pool, func(p *vdibroker.HostPool) error {
		if p.LoadBalancerType != from {
			return errNotFrom
		}
		p.LoadBalancerType = to
		return nil
	}, vdibroker.Precondition{})
	if errors.Is(err, errNotFrom) {
		return nil, false, nil
	}
	return p, err == nil, err
}

var errNotFrom = errors.New("load balancer changed")

func (a actions) StartHost(ctx context.Context, pool, host, by string) error {
	a.p.mu.Lock()
	defer a.p.mu.Unlock()
	a.p.state[host] = vdibroker.PowerStarting
	return nil
}

func (a actions) StopHost(ctx context.Context, pool, host string, force bool, by string) error {
	a.p.mu.Lock()
	defer a.p.mu.Unlock()
	a.p.state[host] = vdibroker.PowerStopped
	a.p.stops = append(a.p.stops, host)
	return nil
}

func (a actions) SetAutoscaleDrain(ctx context.Context, pool, host string, on bool) error {
	a.p.mu.Lock()
	defer a.p.mu.Unlock()
	a.p.drain[host] = on
	return nil
}

// TestTwoReplicasOnTheStore: two autoscalers on one database
// (R-A3): only the lease holder evaluates and records; it drains a host and
// keeps the drain's start in the store; killed (it stops renewing), the
// other replica takes over once the lease expired and carries the same
// drain on: the forced logoff comes when the wait that began under the
// first replica ends, not a wait later.
func TestTwoReplicasOnTheStore(t *testing.T) {
	for name, opener := range engines(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			dbA, dbB := opener(t), opener(t)
			pool := vdibroker.NewHostPool("office")
			pool.HostPoolType, pool.LoadBalancerType, pool.MaxSessionLimit, pool.PowerDriver = vdibroker.Pooled, vdibroker.BreadthFirst, 10, "sim"
			t0 := time.Date(2026, 11, 30, 19, 0, 0, 0, time.UTC) // Monday, ramp-down
			pool.CreateTime, pool.UpdateTime = t0, t0
			if _, err := dbA.PutHostPool(ctx, pool, vdibroker.Precondition{}); err != nil {
				t.Fatal(err)
			}
			pw := &power{now: t0, state: map[string]string{}, drain: map[string]bool{}}
			for _, h := range []string{"h1", "h2"} {
				if _, err := dbA.PutSessionHost(ctx, &vdibroker.SessionHost{HostPool: "office", Name: h, Address: h + ":3389",
					Protocols: []string{"RDP"}, AllowNewSession: true, CreateTime: t0}); err != nil {
					t.Fatal(err)
				}
				pw.state[h] = vdibroker.PowerRunning
			}
			// h1: one session, h2: three; ramp-down 90%: drain h1.
			for i, h := range []string{"h1", "h2", "h2", "h2"} {
				c := &vdibroker.PlacementCommit{Session: &vdibroker.UserSession{ID: vdibroker.NewID(), User: string(rune('a' + i)), HostPool: "office",
					SessionHost: h, State: vdibroker.StatePending, CreateTime: t0, StateTime: t0}, MaxSessionLimit: 10, Pooled: true, Record: []byte(`{}`)}
				if err := dbA.CommitPlacement(ctx, c); err != nil {
					t.Fatal(err)
				}
			}
			plan := &vdibroker.ScalingPlan{Name: "plan", TimeZone: "UTC", HostPoolType: vdibroker.Pooled, HostPools: []string{"office"}, Schedules: []vdibroker.ScalingSchedule{{
				Name: "weekdays", DaysOfWeek: []string{"Monday"}, RampUpStartTime: "07:00", PeakStartTime: "09:00",
				RampDownStartTime: "18:00", OffPeakStartTime: "22:00", RampUpCapacityThresholdPct: 60, RampDownCapacityThresholdPct: 90,
				RampDownForceLogoffUsers: true, RampDownWaitTimeMinutes: 15, RampDownStopHostsWhen: vdibroker.StopWhenZeroSessions,
			}}}
			plan.FillDefaults()
			if err := plan.Validate(); err != nil {
				t.Fatal(err)
			}
			if _, err := dbA.PutScalingPlan(ctx, plan, vdibroker.Precondition{}); err != nil {
				t.Fatal(err)
			}
			now := t0
			clock := func() time.Time { return now }
			mk := func(db *store.DB, holder string) *autoscale.Autoscaler {
				return autoscale.New(autoscale.Config{Store: db, Actions: actions{db, pw},
					Holder: holder, Interval: time.Minute, Now: clock})
			}
			a, b := mk(dbA, "a"), mk(dbB, "b")
			step := func(r *autoscale.Autoscaler, wantHeld bool) {
				t.Helper()
				held, err := r.Evaluate(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if held != wantHeld {
					t.Fatalf("%s at %s: held=%v, want %v", r.Holder(), now.Format("15:04"), held, wantHeld)
				}
			}
			step(a, true)
			step(b, false)
			evals, err := dbB.ListAutoscaleEvaluations(ctx, "office", 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			// The plan's ramp-down load balancer (DepthFirst, AVD's default)
			// is set on the stored pool; h1 is drained and notified.
			if len(evals) != 1 || evals[0].Holder != "a" || len(evals[0].Actions) != 3 ||
				evals[0].Actions[0].Action != vdibroker.ActionSetLoadBalancer ||
				evals[0].Actions[1].Action != vdibroker.ActionDrain || evals[0].Actions[1].Host != "h1" ||
				evals[0].Phase != vdibroker.PhaseRampDown || evals[0].AvailableCapacity != 20 || evals[0].UsedCapacityPct != 20 {
				t.Fatalf("evaluations after a's first: %d, %+v", len(evals), *evals[0])
			}
			if p, err := dbB.GetHostPool(ctx, "office"); err != nil || p.LoadBalancerType != vdibroker.DepthFirst {
				t.Fatalf("stored pool: %v, %v", p, err)
			}
			// a is killed at 19:01 (its last renewal was at 19:00, the lease
			// runs to 19:02). b tries each minute.
			now = t0.Add(time.Minute)
			pw.now = now
			step(b, false)
			now = t0.Add(2 * time.Minute)
			pw.now = now
			step(b, true)
			// The wait began at 19:00 under a: b logs off at 19:15.
			now = t0.Add(14 * time.Minute)
			pw.now = now
			step(b, true)
			logoffs := func() int {
				evals, err := dbB.ListAutoscaleEvaluations(ctx, "office", 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for _, e := range evals {
					for _, ac := range e.Actions {
						if ac.Action == vdibroker.ActionLogoff {
							n++
						}
					}
				}
				return n
			}
			if n := logoffs(); n != 0 {
				t.Fatalf("logged off before the wait ended")
			}
			now = t0.Add(15 * time.Minute)
			pw.now = now
			step(b, true)
			if n := logoffs(); n != 1 {
				t.Fatalf("%d logoffs at the end of the wait begun under a, want 1", n)
			}
			evals, err = dbA.ListAutoscaleEvaluations(ctx, "office", 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if evals[0].Holder != "b" || evals[len(evals)-1].Holder != "a" {
				t.Errorf("holders newest %s, oldest %s", evals[0].Holder, evals[len(evals)-1].Holder)
			}
			states, err := dbA.ListAutoscaleStates(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(states) != 1 || states[0].Hosts["h1"] == nil || !states[0].Hosts["h1"].DrainTime.Equal(t0) || !states[0].Hosts["h1"].LoggedOff {
				t.Errorf("state: %+v", states)
			}
		})
	}
}

// patchBetween is the broker's autoscale actions with an administrator's
// PATCH landing between the autoscaler's read of the pool (SessionHosts)
// and its write of the load balancer: patch runs once, after the read.
type patchBetween struct {
	broker.AutoscaleActions
	patch func(ctx context.Context)
}

func (a *patchBetween) SessionHosts(ctx context.Context, pool string) (*vdibroker.HostPool, []*vdibroker.SessionHost, error) {
	p, hs, err := a.AutoscaleActions.SessionHosts(ctx, pool)
	if f := a.patch; f != nil {
		a.patch = nil
		f(ctx)
	}
	return p, hs, err
}

// TestAutoscalerKeepsAdminPatch_RA2: the autoscaler changes only the
// load balancer of a pool (R-A2, R-E13): an administrator's PATCH that
// lands between its read of the pool and its write is kept, when a phase
// sets the plan's load balancer and when the release restores the
// admin's; and a load balancer the administrator set in between is not
// overwritten by the release's restore, nor recorded as the one to
// restore when the phase's was set over an older one. On the broker
// service and the real store, both engines.
func TestAutoscalerKeepsAdminPatch_RA2(t *testing.T) {
	for name, opener := range engines(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			db := opener(t)
			svc := broker.New(broker.Config{Store: db, MaintenanceInterval: time.Hour, PowerPollInterval: time.Hour})
			t.Cleanup(func() { svc.Close() })
			p := vdibroker.NewHostPool("office")
			p.LoadBalancerType, p.MaxSessionLimit = vdibroker.BreadthFirst, 10
			if _, _, err := svc.PutPool(ctx, "office", p, vdibroker.Precondition{}); err != nil {
				t.Fatal(err)
			}
			t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) // Monday, peak
			plan := &vdibroker.ScalingPlan{Name: "plan", TimeZone: "UTC", HostPoolType: vdibroker.Pooled, HostPools: []string{"office"}, Schedules: []vdibroker.ScalingSchedule{{
				Name: "weekdays", DaysOfWeek: []string{"Monday"}, RampUpStartTime: "07:00", PeakStartTime: "09:00",
				RampDownStartTime: "18:00", OffPeakStartTime: "22:00", RampUpCapacityThresholdPct: 60, RampDownCapacityThresholdPct: 90,
				PeakLoadBalancingAlgorithm: vdibroker.DepthFirst,
			}}}
			plan.FillDefaults()
			if err := plan.Validate(); err != nil {
				t.Fatal(err)
			}
			if _, err := db.PutScalingPlan(ctx, plan, vdibroker.Precondition{}); err != nil {
				t.Fatal(err)
			}
			patch := func(change func(*vdibroker.HostPool)) func(ctx context.Context) {
				return func(ctx context.Context) {
					if _, err := svc.UpdatePool(ctx, "office", func(p *vdibroker.HostPool) error { change(p); return nil }, vdibroker.Precondition{}); err != nil {
						t.Errorf("the admin's PATCH: %v", err)
					}
				}
			}
			act := &patchBetween{AutoscaleActions: broker.AutoscaleActions{Service: svc}}
			a := autoscale.New(autoscale.Config{Store: db, Actions: act, Holder: "a", Interval: time.Minute, Now: func() time.Time { return t0 }})
			evaluate := func() *vdibroker.HostPool {
				t.Helper()
				if _, err := a.Evaluate(ctx); err != nil {
					t.Fatal(err)
				}
				got, err := db.GetHostPool(ctx, "office")
				if err != nil {
					t.Fatal(err)
				}
				return got
			}

			// Peak: the plan's DepthFirst set, the admin's limit and
			// description of the same moment kept.
			act.patch = patch(func(p *vdibroker.HostPool) { p.MaxSessionLimit, p.Description = 7, "admin's" })
			if got := evaluate(); got.LoadBalancerType != vdibroker.DepthFirst || got.MaxSessionLimit != 7 || got.Description != "admin's" {
				t.Errorf("after the phase's load balancer: %s, limit %d, %q; want DepthFirst with the admin's limit 7 and description",
					got.LoadBalancerType, got.MaxSessionLimit, got.Description)
			}

			// The plan no longer covers the pool: the release restores
			// BreadthFirst and keeps the admin's limit of the same moment.
			if err := db.DeleteScalingPlan(ctx, "plan", vdibroker.Precondition{}); err != nil {
				t.Fatal(err)
			}
			act.patch = patch(func(p *vdibroker.HostPool) { p.MaxSessionLimit = 8 })
			if got := evaluate(); got.LoadBalancerType != vdibroker.BreadthFirst || got.MaxSessionLimit != 8 {
				t.Errorf("after the release: %s, limit %d; want BreadthFirst restored with the admin's limit 8", got.LoadBalancerType, got.MaxSessionLimit)
			}

			// Covered again; the admin sets LoadIndex between the read
			// and the write: kept (the phase's is set at the next
			// evaluation, over LoadIndex, which the release restores).
			if _, err := db.PutScalingPlan(ctx, plan, vdibroker.Precondition{}); err != nil {
				t.Fatal(err)
			}
			act.patch = patch(func(p *vdibroker.HostPool) { p.LoadBalancerType = vdibroker.LoadIndex })
			if got := evaluate(); got.LoadBalancerType != vdibroker.LoadIndex {
				t.Errorf("the admin's load balancer set between the read and the write: %s, want LoadIndex kept", got.LoadBalancerType)
			}
			if got := evaluate(); got.LoadBalancerType != vdibroker.DepthFirst {
				t.Errorf("the next evaluation: %s, want the phase's DepthFirst", got.LoadBalancerType)
			}
			if err := db.DeleteScalingPlan(ctx, "plan", vdibroker.Precondition{}); err != nil {
				t.Fatal(err)
			}
			if got := evaluate(); got.LoadBalancerType != vdibroker.LoadIndex {
				t.Errorf("after the release: %s, want the admin's LoadIndex restored", got.LoadBalancerType)
			}

			// Covered again, DepthFirst set; the admin sets RoundRobin
			// between the release's read and write: not overwritten.
			if _, err := db.PutScalingPlan(ctx, plan, vdibroker.Precondition{}); err != nil {
				t.Fatal(err)
			}
			if got := evaluate(); got.LoadBalancerType != vdibroker.DepthFirst {
				t.Fatalf("covered again: %s, want DepthFirst", got.LoadBalancerType)
			}
			if err := db.DeleteScalingPlan(ctx, "plan", vdibroker.Precondition{}); err != nil {
				t.Fatal(err)
			}
			act.patch = patch(func(p *vdibroker.HostPool) { p.LoadBalancerType = vdibroker.BreadthFirst })
			if got := evaluate(); got.LoadBalancerType != vdibroker.BreadthFirst {
				t.Errorf("the admin's load balancer set between the release's read and write: %s, want BreadthFirst kept", got.LoadBalancerType)
			}
		})
	}
}
