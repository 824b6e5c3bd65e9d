package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/vdibroker/vdibroker"
)

// Scaling plans (R-SP, SPEC §8, migration 00016). A plan's row holds
// its schedules as JSON; its pools are rows of scaling_plan_pools, keyed
// by the pool, so the database itself keeps a pool in at most one plan
// (R-SP4) however many replicas write at once. Deleting a host pool
// deletes its row there (DeleteHostPool): the plan stays, without the pool.

const planCols = `name, description, time_zone, host_pool_type, schedules, create_time, update_time`

func scanPlan(sc scanner) (*vdibroker.ScalingPlan, error) {
	var p vdibroker.ScalingPlan
	var sched string
	var ct, ut int64
	if err := sc.Scan(&p.Name, &p.Description, &p.TimeZone, &p.HostPoolType, &sched, &ct, &ut); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(sched), &p.Schedules); err != nil {
		return nil, fmt.Errorf("scaling plan %q: schedules: %w", p.Name, err)
	}
	p.CreateTime, p.UpdateTime = fromNS(ct), fromNS(ut)
	p.HostPools = []string{}
	return &p, nil
}

func (t *tx) getPlan(ctx context.Context, name string) (*vdibroker.ScalingPlan, error) {
	p, err := scanPlan(t.row(ctx, `SELECT `+planCols+` FROM scaling_plans WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("scaling plan %q not found", name)
	}
	if err != nil {
		return nil, fmt.Errorf("get scaling plan %q: %w", name, err)
	}
	if err := t.planPools(ctx, map[string]*vdibroker.ScalingPlan{p.Name: p}, `WHERE plan = ?`, name); err != nil {
		return nil, err
	}
	return p, nil
}

// planPools fills the HostPools of plans (by name) from the rows where
// says, in the plans' order.
func (t *tx) planPools(ctx context.Context, plans map[string]*vdibroker.ScalingPlan, where string, args ...any) error {
	rows, err := t.query(ctx, `SELECT plan, host_pool FROM scaling_plan_pools `+where+` ORDER BY plan, position`, args...)
	if err != nil {
		return fmt.Errorf("scaling plan pools: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var plan, pool string
		if err := rows.Scan(&plan, &pool); err != nil {
			return err
		}
		if p := plans[plan]; p != nil {
			p.HostPools = append(p.HostPools, pool)
		}
	}
	return rows.Err()
}

// PutScalingPlan implements vdibroker.ScalingStore: it creates or replaces
// p, checking in the same transaction that each of its pools exists, has
// the plan's type, and is in no other plan (R-SP4). On replace CreateTime
// is kept and UpdateTime moves forward. The caller validated p.
//
// pre is checked on the plan as this transaction reads it, and its update
// is conditional on the update time read (R-E13): a write of another
// replica in between runs this one again, on what the plan is now. The
// plan's row is not locked before its pools are checked: a pool's delete
// locks the pool, then the etag clock, then its plan, and another order
// could deadlock on PostgreSQL; the conditional update alone keeps two
// writers apart. On PostgreSQL every write of a plan takes its locks in
// one order: the named pools' rows by name (lockPlanPools), the etag
// clock, the plan's row, its rows of scaling_plan_pools (R-SP4).
func (s *DB) PutScalingPlan(ctx context.Context, p *vdibroker.ScalingPlan, pre vdibroker.Precondition) (created bool, err error) {
	sched, err := json.Marshal(p.Schedules)
	if err != nil {
		return false, err
	}
	err = s.write(ctx, func(t *tx) error {
		old, err := t.getPlan(ctx, p.Name)
		switch {
		case vdibroker.ErrorCode(err) == vdibroker.ENotFound:
			old = nil
		case err != nil:
			return err
		}
		if err := checkPre(pre, fmt.Sprintf("scaling plan %q", p.Name), old != nil, func() time.Time { return old.UpdateTime }); err != nil {
			return err
		}
		created = old == nil
		types, err := t.lockPlanPools(ctx, p.HostPools)
		if err != nil {
			return err
		}
		for _, pool := range p.HostPools {
			if err := t.checkPlanPool(ctx, p, pool, types); err != nil {
				return err
			}
		}
		var after time.Time
		if old != nil {
			after = old.UpdateTime
		}
		ut, err := t.issueTime(ctx, p.UpdateTime, after)
		if err != nil {
			return err
		}
		if created {
			p.CreateTime, p.UpdateTime = ut, ut
			_, err = t.exec(ctx, `INSERT INTO scaling_plans (`+planCols+`) VALUES (?,?,?,?,?,?,?)`,
				p.Name, p.Description, p.TimeZone, p.HostPoolType, string(sched), ns(p.CreateTime), ns(p.UpdateTime))
			if errors.Is(err, errUnique) {
				return errRaced // created meanwhile: run again as a replace
			}
		} else {
			p.CreateTime, p.UpdateTime = old.CreateTime, ut
			var n int64
			n, err = t.exec(ctx, `UPDATE scaling_plans SET description = ?, time_zone = ?, host_pool_type = ?,
				schedules = ?, update_time = ? WHERE name = ? AND update_time = ?`,
				p.Description, p.TimeZone, p.HostPoolType, string(sched), ns(p.UpdateTime), p.Name, ns(old.UpdateTime))
			if err == nil && n == 0 {
				return errRaced // written or deleted since it was read: run again (R-E13)
			}
			if err == nil {
				_, err = t.exec(ctx, `DELETE FROM scaling_plan_pools WHERE plan = ?`, p.Name)
			}
		}
		if err != nil {
			return err
		}
		for i, pool := range p.HostPools {
			_, err := t.exec(ctx, `INSERT INTO scaling_plan_pools (host_pool, plan, position) VALUES (?,?,?)`, pool, p.Name, i)
			if errors.Is(err, errUnique) {
				// Another plan took the pool after checkPlanPool read it
				// (PostgreSQL, two replicas): run again, and the check
				// names that plan.
				return errRaced
			}
			if err != nil {
				return err
			}
		}
		if created {
			t.audited(nil, p)
		} else {
			t.audited(old, p)
		}
		return nil
	})
	if err != nil {
		return false, wrap(err, "put scaling plan %q", p.Name)
	}
	return created, nil
}

// lockPlanPools locks the rows of pools (PostgreSQL) and returns the type
// of each that exists. A plan's write locks them in one order whatever
// the order of its hostPools, by name as the store compares names
// (bytes, COLLATE "C"), so two writes naming the same pools in opposite
// orders take turns instead of each holding one and waiting for the
// other: a deadlock PostgreSQL breaks only after its deadlock_timeout,
// running one of them again (R-SP4). A concurrent DeleteHostPool either
// commits first (and the pool is not found) or waits for this plan and
// then removes the pool from it.
func (t *tx) lockPlanPools(ctx context.Context, pools []string) (map[string]string, error) {
	sorted := slices.Clone(pools)
	slices.Sort(sorted)
	types := make(map[string]string, len(sorted))
	for _, pool := range slices.Compact(sorted) {
		var typ string
		err := t.row(ctx, `SELECT host_pool_type FROM host_pools WHERE name = ?`+t.d.forUpdate, pool).Scan(&typ)
		if errors.Is(err, sql.ErrNoRows) {
			continue // checkPlanPool refuses it, in the plan's order
		}
		if err != nil {
			return nil, fmt.Errorf("scaling plan pool %q: %w", pool, err)
		}
		types[pool] = typ
	}
	return types, nil
}

// checkPlanPool refuses a pool that does not exist or has another type
// (400 on hostPools) or is in another plan (409); types are the pools'
// as lockPlanPools read them.
func (t *tx) checkPlanPool(ctx context.Context, p *vdibroker.ScalingPlan, pool string, types map[string]string) error {
	typ, ok := types[pool]
	if !ok {
		return vdibroker.FieldError("hostPools", "host pool %q does not exist", pool)
	}
	if typ != p.HostPoolType {
		return vdibroker.FieldError("hostPools", "host pool %q is %s; a %s scaling plan takes %s host pools only", pool, typ, p.HostPoolType, p.HostPoolType)
	}
	var other string
	err := t.row(ctx, `SELECT plan FROM scaling_plan_pools WHERE host_pool = ?`, pool).Scan(&other)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("scaling plan pool %q: %w", pool, err)
	case other != p.Name:
		return &vdibroker.Error{Code: vdibroker.EConflict, Field: "hostPools",
			Message: fmt.Sprintf("host pool %q is already in scaling plan %q; a host pool is in at most one plan (R-SP4)", pool, other)}
	}
	return nil
}

// GetScalingPlan implements vdibroker.ScalingStore.
func (s *DB) GetScalingPlan(ctx context.Context, name string) (*vdibroker.ScalingPlan, error) {
	var p *vdibroker.ScalingPlan
	err := s.read(ctx, func(t *tx) (err error) {
		p, err = t.getPlan(ctx, name)
		return err
	})
	return p, err
}

// ListScalingPlans implements vdibroker.ScalingStore: plans by name.
func (s *DB) ListScalingPlans(ctx context.Context) ([]*vdibroker.ScalingPlan, error) {
	var out []*vdibroker.ScalingPlan
	err := s.read(ctx, func(t *tx) (err error) {
		out, err = queryAll(ctx, t, scanPlan, `SELECT `+planCols+` FROM scaling_plans ORDER BY name`)
		if err != nil {
			return err
		}
		byName := make(map[string]*vdibroker.ScalingPlan, len(out))
		for _, p := range out {
			byName[p.Name] = p
		}
		return t.planPools(ctx, byName, ``)
	})
	if err != nil {
		return nil, fmt.Errorf("list scaling plans: %w", err)
	}
	return out, nil
}

// DeleteScalingPlan implements vdibroker.ScalingStore; NotFound when there
// is no such plan. Its pools are free for another plan afterwards.
//
// On PostgreSQL it takes the etag clock first, as every other write of a
// plan's rows does before them (PutScalingPlan, and DeleteHostPool's
// leavePlan), so it waits for them rather than close a cycle: it deletes
// the plan's pool rows before its row, while a PutScalingPlan updates
// the row before it deletes the pool rows, and without the clock each
// could hold what the other waits for, a deadlock PostgreSQL breaks only
// after its deadlock_timeout, running one again (R-SP4).
func (s *DB) DeleteScalingPlan(ctx context.Context, name string, pre vdibroker.Precondition) error {
	err := s.write(ctx, func(t *tx) error {
		if t.d.forUpdate != "" {
			if _, err := t.exec(ctx, `SELECT last FROM etag_clock WHERE id = 1`+t.d.forUpdate); err != nil {
				return err
			}
		}
		what := fmt.Sprintf("scaling plan %q", name)
		old, err := t.getPlan(ctx, name)
		if vdibroker.ErrorCode(err) == vdibroker.ENotFound {
			return missing(pre, what, err)
		}
		if err != nil {
			return err
		}
		if err := pre.Check(what, true, old.UpdateTime); err != nil {
			return err
		}
		if _, err := t.exec(ctx, `DELETE FROM scaling_plan_pools WHERE plan = ?`, name); err != nil {
			return err
		}
		n, err := t.exec(ctx, `DELETE FROM scaling_plans WHERE name = ? AND update_time = ?`, name, ns(old.UpdateTime))
		if err != nil {
			return err
		}
		if n == 0 {
			return errRaced // written or deleted since it was read: run again (R-E13)
		}
		t.audited(old, nil)
		return nil
	})
	return wrap(err, "delete scaling plan %q", name)
}

// ScalingPlanForPool implements vdibroker.ScalingStore.
func (s *DB) ScalingPlanForPool(ctx context.Context, pool string) (*vdibroker.ScalingPlan, error) {
	var p *vdibroker.ScalingPlan
	err := s.read(ctx, func(t *tx) error {
		var plan string
		err := t.row(ctx, `SELECT plan FROM scaling_plan_pools WHERE host_pool = ?`, pool).Scan(&plan)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("host pool %q is in no scaling plan", pool)
		}
		if err != nil {
			return err
		}
		p, err = t.getPlan(ctx, plan)
		return err
	})
	if err != nil {
		return nil, wrap(err, "scaling plan for pool %q", pool)
	}
	return p, nil
}
