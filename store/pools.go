package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/vdibroker/vdibroker"
)

const poolCols = `name, host_pool_type, load_balancer_type, max_session_limit,
	personal_desktop_assignment_type, load_balancing, heartbeat_timeout_seconds,
	pending_timeout_seconds, disconnected_session_timeout_minutes, description,
	friendly_name, create_time, update_time, power_driver, start_vm_on_connect, custom_rdp_property`

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
		&p.FriendlyName, &ct, &ut, &p.PowerDriver, &p.StartVMOnConnect, &p.CustomRdpProperty); err != nil {
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

// CreateHostPool creates a pool; Conflict if the name is taken.
func (s *DB) CreateHostPool(ctx context.Context, p *vdibroker.HostPool) error {
	lb, err := json.Marshal(p.LoadBalancing)
	if err != nil {
		return err
	}
	err = s.write(ctx, func(t *tx) error {
		err := t.insertPool(ctx, p, lb)
		if errors.Is(err, errRaced) {
			return vdibroker.Errorf(vdibroker.EConflict, "host pool %q already exists", p.Name)
		}
		t.audited(nil, p)
		return err
	})
	return wrap(err, "create host pool %q", p.Name)
}

// insertPool inserts a new pool; errRaced when the name is taken.
func (t *tx) insertPool(ctx context.Context, p *vdibroker.HostPool, lb []byte) error {
	_, err := t.exec(ctx, `INSERT INTO host_pools (`+poolCols+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		p.Name, p.HostPoolType, p.LoadBalancerType, p.MaxSessionLimit,
		p.PersonalDesktopAssignmentType, string(lb), p.HeartbeatTimeoutSeconds,
		p.PendingTimeoutSeconds, p.DisconnectedSessionTimeoutMinutes, p.Description,
		p.FriendlyName, ns(p.CreateTime), ns(p.UpdateTime), p.PowerDriver, p.StartVMOnConnect, p.CustomRdpProperty)
	if err != nil && errors.Is(err, errUnique) {
		return errRaced
	}
	return err
}

// PutHostPool creates or replaces a pool (R-P1: the type cannot change).
func (s *DB) PutHostPool(ctx context.Context, p *vdibroker.HostPool) (created bool, err error) {
	lb, err := json.Marshal(p.LoadBalancing)
	if err != nil {
		return false, err
	}
	err = s.write(ctx, func(t *tx) error {
		old, err := t.getPool(ctx, p.Name)
		switch {
		case vdibroker.ErrorCode(err) == vdibroker.ENotFound:
			created = true
			t.audited(nil, p)
			return t.insertPool(ctx, p, lb)
		case err != nil:
			return err
		}
		created = false
		if old.HostPoolType != p.HostPoolType {
			return vdibroker.FieldError("hostPoolType", "cannot change from %s to %s after creation (R-P1)", old.HostPoolType, p.HostPoolType)
		}
		// updateTime identifies the settings a placement was decided with
		// (PlacementCommit.PoolUpdateTime): it must change with every
		// write, even when the writer's clock is behind the last writer's
		// (another replica, a clock stepped back).
		if !p.UpdateTime.After(old.UpdateTime) {
			p.UpdateTime = old.UpdateTime.Add(time.Nanosecond)
		}
		_, err = t.exec(ctx, `UPDATE host_pools SET load_balancer_type = ?, max_session_limit = ?,
			personal_desktop_assignment_type = ?, load_balancing = ?, heartbeat_timeout_seconds = ?,
			pending_timeout_seconds = ?, disconnected_session_timeout_minutes = ?, description = ?,
			friendly_name = ?, update_time = ?, power_driver = ?, start_vm_on_connect = ?, custom_rdp_property = ? WHERE name = ?`,
			p.LoadBalancerType, p.MaxSessionLimit, p.PersonalDesktopAssignmentType, string(lb),
			p.HeartbeatTimeoutSeconds, p.PendingTimeoutSeconds, p.DisconnectedSessionTimeoutMinutes,
			p.Description, p.FriendlyName, ns(p.UpdateTime), p.PowerDriver, p.StartVMOnConnect, p.CustomRdpProperty, p.Name)
		if err == nil {
			p.CreateTime = old.CreateTime
			t.audited(old, p)
		}
		return err
	})
	if err != nil {
		return false, wrap(err, "put host pool %q", p.Name)
	}
	return created, nil
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
// registration tokens; refused with Conflict while sessions are open unless
// force.
func (s *DB) DeleteHostPool(ctx context.Context, name string, force bool) error {
	err := s.write(ctx, func(t *tx) error {
		old, err := t.getPool(ctx, name)
		if err != nil {
			return err
		}
		t.audited(old, nil)
		// Lock the pool's hosts first, so a concurrent placement either
		// commits before us (and is counted below) or finds no host.
		if s.d.forUpdate != "" {
			if _, err := t.exec(ctx, `SELECT name FROM host_counts WHERE host_pool = ?`+s.d.forUpdate, name); err != nil {
				return err
			}
		}
		var open int
		if err := t.row(ctx, `SELECT count(*) FROM user_sessions WHERE host_pool = ? AND state <> 'LoggedOff'`, name).Scan(&open); err != nil {
			return err
		}
		if open > 0 && !force {
			return vdibroker.Errorf(vdibroker.EConflict, "host pool %q has %d open sessions; delete with force to end them", name, open)
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
			`DELETE FROM host_pools WHERE name = ?`,
			// Last, after the pool's row is locked: a scaling plan that
			// took the pool meanwhile has committed (R-SP4).
			`DELETE FROM scaling_plan_pools WHERE host_pool = ?`,
			// Its application groups, with their assignments and
			// applications (R-E1); an application group written
			// meanwhile locked the pool's row first (lockGroupPool).
			`DELETE FROM applications WHERE application_group IN (SELECT name FROM application_groups WHERE host_pool = ?)`,
			`DELETE FROM application_group_assignments WHERE application_group IN (SELECT name FROM application_groups WHERE host_pool = ?)`,
			`DELETE FROM application_groups WHERE host_pool = ?`,
		} {
			if _, err := t.exec(ctx, q, name); err != nil {
				return err
			}
		}
		return nil
	})
	return wrap(err, "delete host pool %q", name)
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
