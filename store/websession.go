package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/vdibroker/vdibroker"
)

// CreateWebSession implements vdibroker.WebSessionStore: the principal's
// oldest sessions beyond lim.PerPrincipal-1 are deleted and the new one
// inserted in one transaction, unless the principal signed in
// lim.PerPrincipal times within lim.Window or the area is full.
func (s *DB) CreateWebSession(ctx context.Context, ws *vdibroker.WebSession, lim vdibroker.WebSessionLimits, now time.Time) error {
	if ws.IDHash == "" || ws.Area == "" || ws.Principal == "" || len(ws.Sealed) == 0 {
		return vdibroker.Errorf(vdibroker.EInvalid, "a web session needs an id hash, an area, a principal and a sealed token")
	}
	if !ws.ExpireTime.After(now) {
		return vdibroker.FieldError("expireTime", "must be after now")
	}
	err := s.write(ctx, func(t *tx) error {
		type row struct {
			id      string
			created int64
		}
		if t.d == postgresDialect {
			// One sign-in of an area at a time: the counts below and the
			// insert must not interleave with another replica's (READ
			// COMMITTED sees no row another transaction has yet to
			// commit). SQLite's one writer serialises them already.
			if _, err := t.exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('web_sessions'), hashtext(?))`, ws.Area); err != nil {
				return err
			}
		}
		// SQLite is told the index: without statistics its planner
		// takes web_sessions_by_expiry and reads every unexpired row of
		// the area (a quarter of a second of the one writer at 250,000
		// portal sign-ins), as listSessionsQuery says of user_sessions.
		from := "web_sessions"
		if t.d == sqliteDialect {
			from += " INDEXED BY web_sessions_by_principal"
		}
		mine, err := queryAll(ctx, t, func(sc scanner) (row, error) {
			var r row
			return r, sc.Scan(&r.id, &r.created)
		}, `SELECT id_hash, create_time FROM `+from+` WHERE area = ? AND principal = ? AND expire_time > ?
			ORDER BY create_time, id_hash`, ws.Area, ws.Principal, ns(now))
		if err != nil {
			return err
		}
		if lim.PerPrincipal > 0 && len(mine) >= lim.PerPrincipal {
			// The oldest of the sessions that would remain began within
			// the window: so did all of them.
			kept := mine[len(mine)-lim.PerPrincipal]
			if since := now.Sub(fromNS(kept.created)); lim.Window > 0 && since < lim.Window {
				return &vdibroker.Error{Code: vdibroker.ETooManyRequests, RetryAfter: lim.Window - since,
					Message: fmt.Sprintf("%d sign-ins of this user within %s; wait, or sign out elsewhere", lim.PerPrincipal, lim.Window)}
			}
			for _, r := range mine[:len(mine)-lim.PerPrincipal+1] {
				if _, err := t.exec(ctx, `DELETE FROM web_sessions WHERE id_hash = ?`, r.id); err != nil {
					return err
				}
			}
		}
		if lim.PerArea > 0 {
			// The area's rows as its triggers count them (migration
			// 00067), expired ones too until they are deleted: so a
			// full area deletes its expired rows and reads again.
			n, err := areaCount(ctx, t, ws.Area)
			if err == nil && n >= lim.PerArea {
				if _, err = t.exec(ctx, `DELETE FROM web_sessions WHERE area = ? AND expire_time <= ?`, ws.Area, ns(now)); err == nil {
					n, err = areaCount(ctx, t, ws.Area)
				}
			}
			if err != nil {
				return err
			}
			if n >= lim.PerArea {
				return vdibroker.NewAreaFull(ws.Area, lim.PerArea)
			}
		}
		_, err = t.exec(ctx, `INSERT INTO web_sessions (id_hash, area, principal, role, sealed, flash, create_time, expire_time)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			ws.IDHash, ws.Area, ws.Principal, ws.Role, ws.Sealed, ws.Flash, ns(ws.CreateTime), ns(ws.ExpireTime))
		if errors.Is(err, errUnique) {
			return vdibroker.Errorf(vdibroker.EConflict, "web session already exists")
		}
		return err
	})
	return wrap(err, "create a web session")
}

// WebSession implements vdibroker.WebSessionStore.
func (s *DB) WebSession(ctx context.Context, idHash string, now time.Time) (*vdibroker.WebSession, error) {
	ws := &vdibroker.WebSession{IDHash: idHash}
	var created, expires int64
	err := s.read(ctx, func(t *tx) error {
		return t.row(ctx, `SELECT area, principal, role, sealed, flash, create_time, expire_time FROM web_sessions
			WHERE id_hash = ? AND expire_time > ?`, idHash, ns(now)).
			Scan(&ws.Area, &ws.Principal, &ws.Role, &ws.Sealed, &ws.Flash, &created, &expires)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("no such web session")
	}
	if err != nil {
		return nil, fmt.Errorf("web session: %w", err)
	}
	ws.CreateTime, ws.ExpireTime = fromNS(created), fromNS(expires)
	return ws, nil
}

// DeleteWebSession implements vdibroker.WebSessionStore.
func (s *DB) DeleteWebSession(ctx context.Context, idHash string) error {
	err := s.write(ctx, func(t *tx) error {
		if t.d == postgresDialect {
			// The area's lock before the row, as a sign-in takes them: a
			// sign-in into a full area holds the area's count (after
			// replacing the user's oldest session) when it deletes the
			// area's expired rows, and a sign-out holding one of them
			// while it waited for the count was a deadlock.
			if _, err := t.exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('web_sessions'), hashtext(area))
				FROM web_sessions WHERE id_hash = ?`, idHash); err != nil {
				return err
			}
		}
		_, err := t.exec(ctx, `DELETE FROM web_sessions WHERE id_hash = ?`, idHash)
		return err
	})
	return wrap(err, "delete a web session")
}

// SetWebSessionFlash implements vdibroker.WebSessionStore.
func (s *DB) SetWebSessionFlash(ctx context.Context, idHash, flash string) error {
	err := s.write(ctx, func(t *tx) error {
		_, err := t.exec(ctx, `UPDATE web_sessions SET flash = ? WHERE id_hash = ?`, flash, idHash)
		return err
	})
	return wrap(err, "set a web session's message")
}

// DeleteExpiredWebSessions implements vdibroker.WebSessionStore.
func (s *DB) DeleteExpiredWebSessions(ctx context.Context, now time.Time) (int, error) {
	var n int64
	err := s.write(ctx, func(t *tx) (err error) {
		if t.d == postgresDialect {
			// Each area's lock, as a sign-in takes it, in one order:
			// a sign-in into a full area deletes that area's expired
			// rows too, and the two would otherwise lock them (and the
			// area's count) in different orders.
			if _, err := t.exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('web_sessions'), hashtext(area))
				FROM (SELECT area FROM web_session_counts ORDER BY area) a`); err != nil {
				return err
			}
		}
		n, err = t.exec(ctx, sweepWebSessionsQuery, ns(now))
		return err
	})
	return int(n), wrap(err, "delete expired web sessions")
}

// sweepWebSessionsQuery deletes the expired web sessions area by area
// (every area with rows has its count, migration 00067), through
// web_sessions_by_expiry (area, expire_time) as a range: expire_time
// alone is no prefix of it, and SQLite then scanned the whole index (or
// table), an entry for each of the portal's 250,000 sign-ins, in its one
// writer every 10 minutes, as PostgreSQL may while the sweep holds every
// area's lock.
const sweepWebSessionsQuery = `DELETE FROM web_sessions
	WHERE area IN (SELECT area FROM web_session_counts) AND expire_time <= ?`

// areaCount is how many rows of web_sessions are area's, expired or not.
func areaCount(ctx context.Context, t *tx, area string) (int, error) {
	var n int
	err := t.row(ctx, `SELECT n FROM web_session_counts WHERE area = ?`, area).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

// SharedValue implements vdibroker.SharedStore.
func (s *DB) SharedValue(ctx context.Context, name string) (string, error) {
	var v string
	err := s.read(ctx, func(t *tx) error {
		return t.row(ctx, `SELECT value FROM shared_values WHERE name = ?`, name).Scan(&v)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return "", notFound("no shared value %q", name)
	}
	if err != nil {
		return "", fmt.Errorf("shared value %q: %w", name, err)
	}
	return v, nil
}

// InitSharedValue implements vdibroker.SharedStore.
func (s *DB) InitSharedValue(ctx context.Context, name, value string, now time.Time) (string, error) {
	var stored string
	err := s.write(ctx, func(t *tx) error {
		if _, err := t.exec(ctx, `INSERT INTO shared_values (name, value, update_time) VALUES (?, ?, ?)
			ON CONFLICT (name) DO NOTHING`, name, value, ns(now)); err != nil {
			return err
		}
		return t.row(ctx, `SELECT value FROM shared_values WHERE name = ?`, name).Scan(&stored)
	})
	return stored, wrap(err, "initialise shared value %q", name)
}

// SetSharedValue implements vdibroker.SharedStore.
func (s *DB) SetSharedValue(ctx context.Context, name, value string, now time.Time) error {
	err := s.write(ctx, func(t *tx) error {
		_, err := t.exec(ctx, `INSERT INTO shared_values (name, value, update_time) VALUES (?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET value = excluded.value, update_time = excluded.update_time`, name, value, ns(now))
		return err
	})
	return wrap(err, "set shared value %q", name)
}
