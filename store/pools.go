package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/vdibroker/vdibroker"
)

const poolCols = `name, host_pool_type, load_balancer_type, max_session_limit,
	personal_desktop_assignment_type, load_balancing, heartbeat_timeout_seconds,
	pending_timeout_seconds, disconnected_session_timeout_minutes, description,
	friendly_name, create_time, update_time, power_driver, start_vm_on_connect,
	gateway_usage, gateway_host_name, idle_session_limit_minutes, active_session_limit_minutes, custom_rdp_property`

type scanner interface{ Scan(dest ...any) error }

// queryAll runs q and returns every row, each read with scan.
func queryAll[T any](ctx context.Context, t *tx, scan func(scanner) (T, error), q string, args ...any) ([]T, error) {
	rows, err := t.query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func scanPool(sc scanner) (*vdibroker.HostPool, error) {
	var p vdibroker.HostPool
	var lb string
	var ct, ut int64
	if err := sc.Scan(&p.Name, &p.HostPoolType, &p.LoadBalancerType, &p.MaxSessionLimit,
		&p.PersonalDesktopAssignmentType, &lb, &p.HeartbeatTimeoutSeconds,
		&p.PendingTimeoutSeconds, &p.DisconnectedSessionTimeoutMinutes, &p.Description,
		&p.FriendlyName, &ct, &ut, &p.PowerDriver, &p.StartVMOnConnect,
		&p.GatewayUsage, &p.GatewayHostName, &p.IdleSessionLimitMinutes, &p.ActiveSessionLimitMinutes, &p.CustomRdpProperty); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(lb), &p.LoadBalancing); err != nil {
		return nil, fmt.Errorf("pool %q: load_balancing: %w", p.Name, err)
	}
	p.CreateTime, p.UpdateTime = fromNS(ct), fromNS(ut)
	return &p, nil
}

func (t *tx) getPool(ctx context.Context, name string) (*vdibroker.HostPool, error) {
	p, err := scanPool(t.row(ctx, `SELECT `+poolCols+` FROM host_pools WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("host pool %q not found", name)
	}
	if err != nil {
		return nil, fmt.Errorf("get pool %q: %w", name, err)
	}
	return p, nil
}

// getBatchPool is getPool for the writes of a group-commit batch, which
// never change a pool: the pool is read once per batch, not once per
// heartbeat. Each caller gets its own copy (HostPool has no reference
// fields).
func (t *tx) getBatchPool(ctx context.Context, name string) (*vdibroker.HostPool, error) {
	p, ok := t.pools[name]
	if !ok {
		var err error
		if p, err = t.getPool(ctx, name); err != nil {
			return nil, err
		}
		if t.pools == nil {
			t.pools = map[string]*vdibroker.HostPool{}
		}
		t.pools[name] = p
	}
	c := *p
	return &c, nil
}

// insertPool inserts a new pool; errRaced when the name is taken.
func (t *tx) insertPool(ctx context.Context, p *vdibroker.HostPool, lb []byte) error {
	_, err := t.exec(ctx, `INSERT INTO host_pools (`+poolCols+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		p.Name, p.HostPoolType, p.LoadBalancerType, p.MaxSessionLimit,
		p.PersonalDesktopAssignmentType, string(lb), p.HeartbeatTimeoutSeconds,
		p.PendingTimeoutSeconds, p.DisconnectedSessionTimeoutMinutes, p.Description,
		p.FriendlyName, ns(p.CreateTime), ns(p.UpdateTime), p.PowerDriver, p.StartVMOnConnect,
		p.GatewayUsage, p.GatewayHostName, p.IdleSessionLimitMinutes, p.ActiveSessionLimitMinutes, p.CustomRdpProperty)
	if err != nil && errors.Is(err, errUnique) {
		return errRaced
	}
	return err
}

// getPoolForWrite reads pool name for a write of it: its row locked
// (PostgreSQL) until the write commits, so what a precondition is
// checked on is what the write replaces (R-E13).
func (t *tx) getPoolForWrite(ctx context.Context, name string) (*vdibroker.HostPool, error) {
	p, err := scanPool(t.row(ctx, `SELECT `+poolCols+` FROM host_pools WHERE name = ?`+t.d.forUpdate, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("host pool %q not found", name)
	}
	if err != nil {
		return nil, fmt.Errorf("get pool %q: %w", name, err)
	}
	return p, nil
}

// PutHostPool creates or replaces a pool (R-P1: the type cannot change).
// pre (the PUT's If-Match or If-None-Match) is checked on the pool as
// this transaction reads it, locked (PostgreSQL), and its update is
// conditional on the update time read (R-E13): two creates with
// If-None-Match never replace each other.
func (s *DB) PutHostPool(ctx context.Context, p *vdibroker.HostPool, pre vdibroker.Precondition) (created bool, err error) {
	lb, err := json.Marshal(p.LoadBalancing)
	if err != nil {
		return false, err
	}
	err = s.write(ctx, func(t *tx) error {
		old, err := t.getPoolForWrite(ctx, p.Name)
		switch {
		case vdibroker.ErrorCode(err) == vdibroker.ENotFound:
			old = nil
		case err != nil:
			return err
		}
		if err := checkPre(pre, fmt.Sprintf("host pool %q", p.Name), old != nil, func() time.Time { return old.UpdateTime }); err != nil {
			return err
		}
		created = old == nil
		if !created {
			return t.replacePool(ctx, old, p, lb)
		}
		ut, err := t.issueTime(ctx, p.UpdateTime, time.Time{})
		if err != nil {
			return err
		}
		p.CreateTime, p.UpdateTime = ut, ut
		if err := t.insertPool(ctx, p, lb); err != nil {
			return err // errRaced: created meanwhile, run again as a replace or refused
		}
		t.audited(nil, p)
		return nil
	})
	if err != nil {
		return false, wrap(err, "put host pool %q", p.Name)
	}
	return created, nil
}

// UpdateHostPool implements vdibroker.Store: the pool read and locked
// (PostgreSQL) in the write's transaction, pre checked on it, fn applied
// to a copy and the copy written conditionally on the update time read
// (R-E13), so no other write comes in between and no change of the
// fields fn leaves is lost. fn may run more than once (a race runs the
// transaction again) and must not block.
func (s *DB) UpdateHostPool(ctx context.Context, name string, fn func(*vdibroker.HostPool) error, pre vdibroker.Precondition) (*vdibroker.HostPool, error) {
	var out *vdibroker.HostPool
	err := s.write(ctx, func(t *tx) error {
		what := fmt.Sprintf("host pool %q", name)
		old, err := t.getPoolForWrite(ctx, name)
		if vdibroker.ErrorCode(err) == vdibroker.ENotFound {
			return missing(pre, what, err)
		}
		if err != nil {
			return err
		}
		if err := pre.Check(what, true, old.UpdateTime); err != nil {
			return err
		}
		p := *old // HostPool has no reference fields
		if err := fn(&p); err != nil {
			return err
		}
		p.Name = name // not fn's to change
		lb, err := json.Marshal(p.LoadBalancing)
		if err != nil {
			return err
		}
		if err := t.replacePool(ctx, old, &p, lb); err != nil {
			return err
		}
		out = &p
		return nil
	})
	if err != nil {
		return nil, wrap(err, "update host pool %q", name)
	}
	return out, nil
}

// replacePool writes p over old, the pool as this transaction read it:
// its type kept (R-P1), its creation time kept, its update time issued
// past old's (R-E13) and the update conditional on old's.
func (t *tx) replacePool(ctx context.Context, old, p *vdibroker.HostPool, lb []byte) error {
	if old.HostPoolType != p.HostPoolType {
		return vdibroker.FieldError("hostPoolType", "cannot change from %s to %s after creation (R-P1)", old.HostPoolType, p.HostPoolType)
	}
	// updateTime identifies the settings a placement was decided with
	// (PlacementCommit.PoolUpdateTime) and is the pool's ETag: it must
	// change with every write, even when the writer's clock is behind
	// the last writer's (another replica, a clock stepped back).
	ut, err := t.issueTime(ctx, p.UpdateTime, old.UpdateTime)
	if err != nil {
		return err
	}
	p.CreateTime, p.UpdateTime = old.CreateTime, ut
	n, err := t.exec(ctx, `UPDATE host_pools SET load_balancer_type = ?, max_session_limit = ?,
		personal_desktop_assignment_type = ?, load_balancing = ?, heartbeat_timeout_seconds = ?,
		pending_timeout_seconds = ?, disconnected_session_timeout_minutes = ?, description = ?,
		friendly_name = ?, update_time = ?, power_driver = ?, start_vm_on_connect = ?,
		gateway_usage = ?, gateway_host_name = ?, idle_session_limit_minutes = ?, active_session_limit_minutes = ?, custom_rdp_property = ?
		WHERE name = ? AND update_time = ?`,
		p.LoadBalancerType, p.MaxSessionLimit, p.PersonalDesktopAssignmentType, string(lb),
		p.HeartbeatTimeoutSeconds, p.PendingTimeoutSeconds, p.DisconnectedSessionTimeoutMinutes,
		p.Description, p.FriendlyName, ns(p.UpdateTime), p.PowerDriver, p.StartVMOnConnect,
		p.GatewayUsage, p.GatewayHostName, p.IdleSessionLimitMinutes, p.ActiveSessionLimitMinutes, p.CustomRdpProperty,
		p.Name, ns(old.UpdateTime))
	if err != nil {
		return err
	}
	if n == 0 {
		return errRaced // written or deleted since it was read: run again on what it is now (R-E13)
	}
	t.audited(old, p)
	return nil
}

// GetHostPool returns one pool.
func (s *DB) GetHostPool(ctx context.Context, name string) (*vdibroker.HostPool, error) {
	var p *vdibroker.HostPool
	err := s.read(ctx, func(t *tx) (err error) {
		p, err = t.getPool(ctx, name)
		return err
	})
	return p, err
}

// ListHostPools lists pools by name.
func (s *DB) ListHostPools(ctx context.Context) ([]*vdibroker.HostPool, error) {
	var out []*vdibroker.HostPool
	err := s.read(ctx, func(t *tx) (err error) {
		out, err = queryAll(ctx, t, scanPool, `SELECT `+poolCols+` FROM host_pools ORDER BY name`)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list host pools: %w", err)
	}
	return out, nil
}

// DeleteHostPool deletes a pool with its hosts, sessions, commands and
// registration tokens, and takes it out of its scaling plan, and returns
// what went. While the pool has hosts or open sessions it is refused with
// Conflict, naming what would go, unless force (SPEC §9): a registered
// host's agent would lose its credential, and a plan its pool, unseen.
//
// pre (the DELETE's If-Match) is checked on the pool as this transaction
// reads it, locked, and the delete is conditional on the update time read
// (R-E13).
func (s *DB) DeleteHostPool(ctx context.Context, name string, force bool, pre vdibroker.Precondition) (*vdibroker.PoolDeletion, error) {
	var del *vdibroker.PoolDeletion
	err := s.write(ctx, func(t *tx) error {
		// Lock the pool's row, then its hosts, so a concurrent placement
		// either commits before us (and is counted below) or finds no
		// host, and a plan taking the pool waits for us (R-SP4); then
		// its application groups and the etag clock (PostgreSQL: the
		// order every admin write takes them in, R-E13).
		what := fmt.Sprintf("host pool %q", name)
		old, err := t.getPoolForWrite(ctx, name)
		if vdibroker.ErrorCode(err) == vdibroker.ENotFound {
			return missing(pre, what, err)
		}
		if err != nil {
			return err
		}
		if err := pre.Check(what, true, old.UpdateTime); err != nil {
			return err
		}
		t.audited(old, nil)
		if s.d.forUpdate != "" {
			for _, q := range []string{
				`SELECT name FROM host_counts WHERE host_pool = ?`,
				// Its application groups before the etag clock: a
				// PutApplication locks its group, then the clock.
				`SELECT name FROM application_groups WHERE host_pool = ? ORDER BY name`,
				// The etag clock, when the pool is in a plan (leavePlan
				// issues the plan's update time; R-E13), before the
				// plan's rows: a PutScalingPlan takes the clock, then
				// its plan's row and pool rows. No plan takes the pool
				// meanwhile: that locks the pool's row first.
				`SELECT last FROM etag_clock WHERE id = 1 AND EXISTS (SELECT 1 FROM scaling_plan_pools WHERE host_pool = ?)`,
			} {
				if _, err := t.exec(ctx, q+s.d.forUpdate, name); err != nil {
					return err
				}
			}
		}
		if del, err = t.poolDeletion(ctx, name, s.now()); err != nil {
			return err
		}
		if del.Blocks() && !force {
			return &vdibroker.Error{Code: vdibroker.EConflict, Field: "force", Message: del.Refusal()}
		}
		if del.ScalingPlan != "" {
			if err := t.leavePlan(ctx, del.ScalingPlan, name, s.now()); err != nil {
				return err
			}
		}
		t.touchPool(name) // revokes its hosts' credentials
		for _, q := range []string{
			`DELETE FROM user_sessions WHERE host_pool = ?`,
			`DELETE FROM commands WHERE host_pool = ?`,
			`DELETE FROM registration_tokens WHERE host_pool = ?`,
			`DELETE FROM pool_cursors WHERE host_pool = ?`,
			`DELETE FROM deleted_hosts WHERE host_pool = ?`,
			`DELETE FROM host_counts WHERE host_pool = ?`,
			`DELETE FROM session_hosts WHERE host_pool = ?`,
			// Only the pool read: conditional on its update time (R-E13).
			`DELETE FROM host_pools WHERE name = ? AND update_time = ?`,
			// Its application groups, with their assignments and
			// applications (R-E1); an application group written
			// meanwhile locked the pool's row first (lockGroupPool).
			`DELETE FROM applications WHERE application_group IN (SELECT name FROM application_groups WHERE host_pool = ?)`,
			`DELETE FROM application_group_assignments WHERE application_group IN (SELECT name FROM application_groups WHERE host_pool = ?)`,
			`DELETE FROM application_groups WHERE host_pool = ?`,
		} {
			args := []any{name}
			if strings.HasPrefix(q, `DELETE FROM host_pools`) {
				args = append(args, ns(old.UpdateTime))
			}
			n, err := t.exec(ctx, q, args...)
			if err != nil {
				return err
			}
			if n == 0 && len(args) > 1 {
				return errRaced // written or deleted since it was read: run again (R-E13)
			}
		}
		return nil
	})
	if err != nil {
		return nil, wrap(err, "delete host pool %q", name)
	}
	return del, nil
}

// poolDeletion reads what deleting pool would remove: its hosts (the
// first by name), open sessions, usable registration tokens and plan.
func (t *tx) poolDeletion(ctx context.Context, pool string, now time.Time) (*vdibroker.PoolDeletion, error) {
	d := &vdibroker.PoolDeletion{HostPool: pool}
	for q, n := range map[string]*int{
		`SELECT count(*) FROM session_hosts WHERE host_pool = ?`:                &d.SessionHosts,
		`SELECT count(*) FROM user_sessions WHERE host_pool = ? AND ` + openSQL: &d.OpenSessions,
	} {
		if err := t.row(ctx, q, pool).Scan(n); err != nil {
			return nil, err
		}
	}
	if err := t.row(ctx, `SELECT count(*) FROM registration_tokens WHERE host_pool = ? AND expire_time > ?
		AND (max_hosts = 0 OR hosts < max_hosts)`, pool, ns(now)).Scan(&d.RegistrationTokens); err != nil {
		return nil, err
	}
	rows, err := t.query(ctx, `SELECT name FROM session_hosts WHERE host_pool = ? ORDER BY name LIMIT ?`, pool, vdibroker.MaxDeletionNames)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		d.HostNames = append(d.HostNames, n)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	err = t.row(ctx, `SELECT plan FROM scaling_plan_pools WHERE host_pool = ?`, pool).Scan(&d.ScalingPlan)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	return d, nil
}

// leavePlan takes pool out of plan (deleting the pool): the plan keeps its
// other pools. An audited request records the plan's change as an entry of
// its own, scalingplan.update by the same principal, beside the pool's
// deletion, so the plan's history says where its pool went. The plan's
// update time moves on to now (past its last), so its ETag changes and a
// PUT of what was read before it lost the pool is refused (R-E13).
func (t *tx) leavePlan(ctx context.Context, plan, pool string, now time.Time) error {
	var before *vdibroker.ScalingPlan
	if t.audit != nil {
		var err error
		if before, err = t.getPlan(ctx, plan); err != nil {
			return err
		}
	}
	if _, err := t.exec(ctx, `DELETE FROM scaling_plan_pools WHERE host_pool = ?`, pool); err != nil {
		return err
	}
	var was int64
	if err := t.row(ctx, `SELECT update_time FROM scaling_plans WHERE name = ?`, plan).Scan(&was); err != nil {
		return err
	}
	ut, err := t.issueTime(ctx, now, fromNS(was))
	if err != nil {
		return err
	}
	if _, err = t.exec(ctx, `UPDATE scaling_plans SET update_time = ? WHERE name = ?`, ns(ut), plan); err != nil {
		return err
	}
	if before == nil {
		return nil
	}
	after := *before
	after.HostPools = slices.DeleteFunc(slices.Clone(before.HostPools), func(p string) bool { return p == pool })
	e := *t.audit
	e.Seq, e.Action, e.Target, e.HostPool = 0, "scalingplan.update", "scalingplans/"+plan, pool
	e.Before, e.After = auditJSON(before), auditJSON(&after)
	_, err = insertAuditRow(ctx, t, &e)
	return err
}

// wrap adds context to internal errors and passes domain errors through
// unchanged (their message is what the caller sees).
func wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	var e *vdibroker.Error
	if errors.As(err, &e) {
		return err
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}
