package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"slices"
	"time"

	"github.com/vdibroker/vdibroker"
)

// PutEscrows replaces replica's escrows (R-OUT2, serve
// --outage-placement), trimming each to what the host has free after its
// open sessions and the other replicas' unexpired escrows, in one
// transaction. On PostgreSQL the pool's row is locked first, so that two
// replicas renewing at once cannot both be granted the same free slot;
// SQLite has one writer.
func (s *DB) PutEscrows(ctx context.Context, replica string, want []vdibroker.Escrow, now time.Time) ([]vdibroker.Escrow, error) {
	if replica == "" {
		return nil, vdibroker.FieldError("replica", "must not be empty")
	}
	byPool := map[string][]vdibroker.Escrow{}
	for _, e := range want {
		if e.Slots <= 0 {
			continue
		}
		if !e.Expire.After(now) {
			return nil, vdibroker.FieldError("expireTime", "must be after now")
		}
		byPool[e.HostPool] = append(byPool[e.HostPool], e)
	}
	pools := make([]string, 0, len(byPool))
	for p := range byPool {
		pools = append(pools, p)
	}
	slices.Sort(pools) // lock pools in one order: no deadlock between replicas
	var granted []vdibroker.Escrow
	err := s.write(ctx, func(t *tx) error {
		granted = granted[:0]
		if _, err := t.exec(ctx, `DELETE FROM outage_escrow WHERE expire_time <= ? OR replica = ?`, ns(now), replica); err != nil {
			return err
		}
		for _, pool := range pools {
			var name string
			err := t.row(ctx, `SELECT name FROM host_pools WHERE name = ?`+t.d.forUpdate, pool).Scan(&name)
			if errors.Is(err, sql.ErrNoRows) {
				continue // deleted meanwhile: nothing to hold
			}
			if err != nil {
				return err
			}
			free, err := escrowFree(ctx, t, pool, replica, now)
			if err != nil {
				return err
			}
			for _, e := range byPool[pool] {
				n := min(e.Slots, free[e.Host])
				if n <= 0 {
					continue
				}
				if _, err := t.exec(ctx, `INSERT INTO outage_escrow (replica, host_pool, host, slots, expire_time) VALUES (?, ?, ?, ?, ?)`,
					replica, pool, e.Host, n, ns(e.Expire)); err != nil {
					return err
				}
				free[e.Host] -= n
				granted = append(granted, vdibroker.Escrow{Replica: replica, HostPool: pool, Host: e.Host, Slots: n, Expire: e.Expire.UTC()})
			}
		}
		return nil
	})
	if err != nil {
		return nil, wrap(err, "put the escrows of replica %q", replica)
	}
	return granted, nil
}

// escrowFree returns, per host of pool that takes new sessions and has a
// limit, the slots left after its open sessions and the unexpired escrows
// of replicas other than replica.
func escrowFree(ctx context.Context, t *tx, pool, replica string, now time.Time) (map[string]int, error) {
	rows, err := t.query(ctx, `SELECT c.name, p.max_session_limit, c.sessions,
			COALESCE((SELECT SUM(e.slots) FROM outage_escrow e
				WHERE e.host_pool = c.host_pool AND e.host = c.name AND e.replica <> ? AND e.expire_time > ?), 0)
		FROM host_counts c JOIN host_pools p ON p.name = c.host_pool
		WHERE c.host_pool = ? AND c.new_sessions_allowed`, replica, ns(now), pool)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	free := map[string]int{}
	for rows.Next() {
		var host string
		var limit, sessions, held int64
		if err := rows.Scan(&host, &limit, &sessions, &held); err != nil {
			return nil, err
		}
		if limit > 0 && limit-sessions-held > 0 {
			free[host] = int(limit - sessions - held)
		}
	}
	return free, rows.Err()
}

// ListEscrows returns the pool's unexpired escrows, by host then replica.
func (s *DB) ListEscrows(ctx context.Context, pool string, now time.Time) ([]vdibroker.Escrow, error) {
	var out []vdibroker.Escrow
	err := s.read(ctx, func(t *tx) error {
		rows, err := t.query(ctx, `SELECT replica, host, slots, expire_time FROM outage_escrow
			WHERE host_pool = ? AND expire_time > ?`, pool, ns(now))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			e := vdibroker.Escrow{HostPool: pool}
			var exp int64
			if err := rows.Scan(&e.Replica, &e.Host, &e.Slots, &exp); err != nil {
				return err
			}
			e.Expire = fromNS(exp)
			out = append(out, e)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, wrap(err, "list the escrows of %q", pool)
	}
	slices.SortFunc(out, func(a, b vdibroker.Escrow) int {
		return cmp.Or(cmp.Compare(a.Host, b.Host), cmp.Compare(a.Replica, b.Replica))
	})
	return out, nil
}
