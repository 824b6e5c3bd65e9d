package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/vdibroker/vdibroker"
)

// CreatePortalLaunch implements vdibroker.PortalLaunchStore. Deleting the
// expired launches here keeps the table within max rows without a sweep:
// every row was counted against max when it was made.
func (s *DB) CreatePortalLaunch(ctx context.Context, l *vdibroker.PortalLaunch, perOwner, max int, now time.Time) error {
	if l.IDHash == "" || l.Owner == "" || l.State == "" {
		return vdibroker.Errorf(vdibroker.EInvalid, "a portal launch needs an id hash, an owner and a state")
	}
	if !l.ExpireTime.After(now) {
		return vdibroker.FieldError("expireTime", "must be after now")
	}
	err := s.write(ctx, func(t *tx) error {
		if t.d == postgresDialect {
			// The counts and the insert must not interleave with another
			// replica's (as CreateWebSession).
			if _, err := t.exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('portal_launches'), 0)`); err != nil {
				return err
			}
		}
		if _, err := t.exec(ctx, `DELETE FROM portal_launches WHERE expire_time <= ?`, ns(now)); err != nil {
			return err
		}
		// A failed launch is over: it holds none of the owner's launches at
		// once (a user told to try again is not refused for launches
		// under way while none is, R-U7). Its row stays for its page, the
		// perOwner-1 that failed last of them (a failed launch expires
		// launchTTL after it ended, so by expire_time: a desktop waited
		// for minutes while a host started, which failed after quicker
		// failures begun since, keeps its page): with those at once, an
		// owner's rows stay under 2*perOwner.
		if perOwner > 0 {
			if _, err := t.exec(ctx, `DELETE FROM portal_launches WHERE owner = ? AND state = 'failed' AND id_hash NOT IN
				(SELECT id_hash FROM portal_launches WHERE owner = ? AND state = 'failed' ORDER BY expire_time DESC, id_hash LIMIT ?)`,
				l.Owner, l.Owner, perOwner-1); err != nil {
				return err
			}
		}
		var mine, all int
		if err := t.row(ctx, `SELECT count(*) FROM portal_launches WHERE owner = ? AND state <> 'failed'`, l.Owner).Scan(&mine); err != nil {
			return err
		}
		// As its triggers count them (migration 00068).
		if err := t.row(ctx, `SELECT n FROM portal_launch_count WHERE id = 1`).Scan(&all); err != nil {
			return err
		}
		if (perOwner > 0 && mine >= perOwner) || (max > 0 && all >= max) {
			return &vdibroker.Error{Code: vdibroker.ETooManyRequests, Message: "too many launches under way", RetryAfter: 10 * time.Second}
		}
		_, err := t.exec(ctx, `INSERT INTO portal_launches (id_hash, owner, name, state, starting, host, until_time, sealed, message, create_time, expire_time)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			l.IDHash, l.Owner, l.Name, l.State, l.Starting, l.Host, ns(l.Until), sealedBytes(l.Sealed), l.Message, ns(l.CreateTime), ns(l.ExpireTime))
		if errors.Is(err, errUnique) {
			return vdibroker.Errorf(vdibroker.EConflict, "portal launch already exists")
		}
		return err
	})
	return wrap(err, "create a portal launch")
}

const portalLaunchCols = `owner, name, state, starting, host, until_time, sealed, message, create_time, expire_time`

func scanPortalLaunch(sc scanner, idHash string) (*vdibroker.PortalLaunch, error) {
	l := &vdibroker.PortalLaunch{IDHash: idHash}
	var until, created, expires int64
	if err := sc.Scan(&l.Owner, &l.Name, &l.State, &l.Starting, &l.Host, &until, &l.Sealed, &l.Message, &created, &expires); err != nil {
		return nil, err
	}
	if until != 0 {
		l.Until = fromNS(until)
	}
	l.CreateTime, l.ExpireTime = fromNS(created), fromNS(expires)
	return l, nil
}

// PortalLaunch implements vdibroker.PortalLaunchStore.
func (s *DB) PortalLaunch(ctx context.Context, idHash, owner string, now time.Time) (*vdibroker.PortalLaunch, error) {
	var l *vdibroker.PortalLaunch
	err := s.read(ctx, func(t *tx) (err error) {
		l, err = scanPortalLaunch(t.row(ctx, `SELECT `+portalLaunchCols+` FROM portal_launches
			WHERE id_hash = ? AND owner = ? AND expire_time > ?`, idHash, owner, ns(now)), idHash)
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("no such portal launch")
	}
	if err != nil {
		return nil, fmt.Errorf("portal launch: %w", err)
	}
	return l, nil
}

// UpdatePortalLaunch implements vdibroker.PortalLaunchStore.
func (s *DB) UpdatePortalLaunch(ctx context.Context, l *vdibroker.PortalLaunch) error {
	err := s.write(ctx, func(t *tx) error {
		_, err := t.exec(ctx, `UPDATE portal_launches SET state = ?, starting = ?, host = ?, until_time = ?, sealed = ?, message = ?, expire_time = ?
			WHERE id_hash = ?`, l.State, l.Starting, l.Host, ns(l.Until), sealedBytes(l.Sealed), l.Message, ns(l.ExpireTime), l.IDHash)
		return err
	})
	return wrap(err, "update a portal launch")
}

// TakePortalLaunch implements vdibroker.PortalLaunchStore: one DELETE …
// RETURNING, so two replicas handing the same file cannot both have it.
func (s *DB) TakePortalLaunch(ctx context.Context, idHash, owner string, now time.Time) (*vdibroker.PortalLaunch, error) {
	var l *vdibroker.PortalLaunch
	err := s.write(ctx, func(t *tx) (err error) {
		l, err = scanPortalLaunch(t.row(ctx, `DELETE FROM portal_launches
			WHERE id_hash = ? AND owner = ? AND state = 'ready' AND expire_time > ?
			RETURNING `+portalLaunchCols, idHash, owner, ns(now)), idHash)
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("no such portal launch ready")
	}
	if err != nil {
		return nil, fmt.Errorf("take a portal launch: %w", err)
	}
	return l, nil
}

// sealedBytes is b, never nil (the column is NOT NULL).
func sealedBytes(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
