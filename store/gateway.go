package store

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/vdibroker/vdibroker"
)

// The RD gateways' part of the store (migration 00040): the keys access
// tokens are signed with, the admitted token ids (R-GW4) and what the
// gateways' reports do to sessions (R-GW2, R-GW3).

// GatewayKeys returns the signing keys, newest first.
func (s *DB) GatewayKeys(ctx context.Context) ([]vdibroker.GatewayKey, error) {
	var keys []vdibroker.GatewayKey
	err := s.read(ctx, func(t *tx) (err error) {
		keys, err = queryAll(ctx, t, scanGatewayKey, `SELECT kid, seed, create_time FROM gateway_keys ORDER BY create_time DESC, kid DESC`)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("gateway keys: %w", err)
	}
	return keys, nil
}

func scanGatewayKey(sc scanner) (vdibroker.GatewayKey, error) {
	var k vdibroker.GatewayKey
	var seed string
	var ct int64
	if err := sc.Scan(&k.ID, &seed, &ct); err != nil {
		return k, err
	}
	b, err := base64.StdEncoding.DecodeString(seed)
	if err != nil {
		return k, fmt.Errorf("gateway key %s: seed: %w", k.ID, err)
	}
	k.Seed, k.CreateTime = b, fromNS(ct)
	return k, nil
}

func scanKid(sc scanner) (string, error) {
	var kid string
	err := sc.Scan(&kid)
	return kid, err
}

// gatewayKeysLock is the advisory lock under which a replica adds a
// gateway key on PostgreSQL, so that of two replicas rotating at once only
// one adds a key (SQLite has one writer).
const gatewayKeysLock = `SELECT pg_advisory_xact_lock(hashtext('vdibroker gateway keys'))`

// AddGatewayKey adds k unless a key newer than notBefore exists, and keeps
// k and the newest keep-1 others. k is kept whatever its create time: a
// replica whose clock runs ahead stores keys created "later", and a
// revoke (keep 1) that kept the newest would keep such a key, perhaps the
// leaked one, and drop the key it made.
func (s *DB) AddGatewayKey(ctx context.Context, k vdibroker.GatewayKey, notBefore time.Time, keep int) (bool, error) {
	added := false
	err := s.write(ctx, func(t *tx) error {
		added = false
		if t.d == postgresDialect {
			if _, err := t.exec(ctx, gatewayKeysLock); err != nil {
				return err
			}
		}
		if !notBefore.IsZero() {
			var newer bool
			if err := t.row(ctx, `SELECT EXISTS (SELECT 1 FROM gateway_keys WHERE create_time > ?)`, ns(notBefore)).Scan(&newer); err != nil {
				return err
			}
			if newer {
				return nil
			}
		}
		if _, err := t.exec(ctx, `INSERT INTO gateway_keys (kid, seed, create_time) VALUES (?, ?, ?)`,
			k.ID, base64.StdEncoding.EncodeToString(k.Seed), ns(k.CreateTime)); err != nil {
			return err
		}
		added = true
		// k stays, and the newest keep-1 others; the keys dropped are the
		// change's "before" (a revoke names every key it took).
		dropped, err := queryAll(ctx, t, scanKid, `DELETE FROM gateway_keys WHERE kid <> ? AND kid NOT IN
			(SELECT kid FROM gateway_keys WHERE kid <> ? ORDER BY create_time DESC, kid DESC LIMIT ?) RETURNING kid`,
			k.ID, k.ID, max(keep, 1)-1)
		if err != nil {
			return err
		}
		if dropped == nil {
			dropped = []string{}
		}
		slices.Sort(dropped)
		t.audited(map[string]any{"dropped": dropped}, map[string]any{"kid": k.ID, "createTime": k.CreateTime})
		return nil
	})
	if err != nil {
		return false, wrap(err, "add gateway key %s", k.ID)
	}
	return added, nil
}

// gatewayUserLock is, on PostgreSQL, the advisory lock of one user's
// tunnels: two replicas admitting the user's tunnels at once count one
// after the other, so the limit holds across replicas.
const gatewayUserLock = `SELECT pg_advisory_xact_lock(hashtext('vdibroker gateway tunnels'), hashtext(?))`

// admitPruneBatch is how many records no longer needed an admission
// deletes on its way: the table shrinks at least as fast as it grows.
const admitPruneBatch = 16

// AdmitGatewayTunnel records an admitted tunnel (R-GW4). Its user is
// stored as vdibroker.FoldUser of the token's, the key the tunnel limit
// counts by: every spelling of a name is one user (R-E5).
//
// A replica older than that stored, and locks on PostgreSQL, the token's
// spelling, as do the rows it left, open up to a day (LiveUntil): the
// count and the locks take that spelling too, so a user's tunnels through
// older replicas, or from before an upgrade, still count when the same
// spelling comes again (one identity provider gives one).
func (s *DB) AdmitGatewayTunnel(ctx context.Context, g *vdibroker.GatewayTunnel, maxPerUser int, now time.Time) error {
	user := vdibroker.FoldUser(g.User)
	err := s.write(ctx, func(t *tx) error {
		if t.d == postgresDialect {
			// The folded key first, then the spelling: two replicas of
			// this version take them in one order, an older one the
			// spelling alone.
			for _, k := range slices.Compact([]string{user, g.User}) {
				if _, err := t.exec(ctx, gatewayUserLock, k); err != nil {
					return err
				}
			}
		}
		u, err := t.getSession(ctx, g.HostPool, g.Session)
		if vdibroker.ErrorCode(err) == vdibroker.ENotFound || (err == nil && (!u.Open() || !vdibroker.SameUser(u.User, g.User))) {
			return vdibroker.Errorf(vdibroker.ENotFound, "user session %q of %q is not open in host pool %q", g.Session, g.User, g.HostPool)
		}
		if err != nil {
			return err
		}
		n, err := t.exec(ctx, `INSERT INTO gateway_tunnels (token_id, user_name, host_pool, session_id, gateway,
			open_time, expire_time, live_until, closed) VALUES (?,?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING`,
			g.TokenID, user, g.HostPool, g.Session, g.Gateway, ns(g.Open), ns(g.Expiry), ns(g.LiveUntil), false)
		if err != nil {
			return err
		}
		if n == 0 {
			return vdibroker.ErrTokenUsed
		}
		if maxPerUser > 0 {
			var open int
			if err := t.row(ctx, `SELECT count(*) FROM gateway_tunnels WHERE user_name IN (?, ?) AND NOT closed AND live_until > ?`,
				user, g.User, ns(now)).Scan(&open); err != nil {
				return err
			}
			if open > maxPerUser {
				// Rolled back with the insert: the token may try again
				// once a tunnel closed.
				return &vdibroker.Error{Code: vdibroker.ETooManyRequests, RetryAfter: time.Minute,
					Message: fmt.Sprintf("user %q holds %d tunnels through the gateways, the most allowed (serve --gateway-max-tunnels-per-user)", g.User, maxPerUser)}
			}
		}
		t.audited(nil, g)
		_, err = pruneTunnels(ctx, t, now, admitPruneBatch)
		return err
	})
	return wrap(err, "admit gateway tunnel")
}

// tunnelOf reads an admitted tunnel's state; NotFound unless token is
// admitted for session in pool through gateway (its name in any case, a
// trailing dot or none: vdibroker.SameGateway): another gateway's
// credential neither reaches nor closes it (R-GW4), as its checks do not
// keep it open (LiveGatewayTunnels).
func (t *tx) tunnelOf(ctx context.Context, pool, session, token, gateway string) (closed, reached bool, err error) {
	var p, sid, gw string
	err = t.row(ctx, `SELECT host_pool, session_id, gateway, closed, reached FROM gateway_tunnels WHERE token_id = ?`, token).Scan(&p, &sid, &gw, &closed, &reached)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && (p != pool || sid != session || !vdibroker.SameGateway(gw, gateway))) {
		return false, false, vdibroker.Errorf(vdibroker.ENotFound, "no tunnel of user session %q in host pool %q was admitted through this gateway with this token", session, pool)
	}
	return closed, reached, err
}

// GatewayReached records that a tunnel reached the session's host (R-GW2).
func (s *DB) GatewayReached(ctx context.Context, pool, session, token, gateway string, at time.Time) (*vdibroker.UserSession, error) {
	var out *vdibroker.UserSession
	err := s.write(ctx, func(t *tx) error {
		closed, reached, err := t.tunnelOf(ctx, pool, session, token, gateway)
		if err != nil {
			return err
		}
		// A tunnel reaches its host once: a gateway that says so again
		// changes nothing and writes no audit entry, however often it
		// repeats (R-GW4). A closed tunnel reaches nothing. Claimed in
		// one statement, which a repeat written at the same time waits
		// for and then finds reached (on PostgreSQL two reads of "not
		// reached" both went on), before the host's row, as
		// GatewayClosed takes them.
		var n int64
		if !reached && !closed {
			if n, err = t.exec(ctx, `UPDATE gateway_tunnels SET reached = ? WHERE token_id = ? AND NOT reached AND NOT closed`, true, token); err != nil {
				return err
			}
		}
		if n == 0 {
			t.audit = nil
			out, err = t.getSession(ctx, pool, session)
			return err
		}
		u, err := t.lockedSession(ctx, pool, session)
		if err != nil {
			return err
		}
		out = u
		if !u.Open() {
			t.audited(u, u)
			return nil // an ended session stays ended
		}
		before := *u
		stateTime := u.StateTime
		if u.State != vdibroker.StateActive {
			stateTime = at
		}
		// The state moves between open states only, and the agent id not
		// at all: the host's counts stay (R-S1, R-GW2).
		// An R-S5 logoff asked for the disconnection is for a disconnection
		// that ended.
		if _, err := t.exec(ctx, `UPDATE user_sessions SET state = ?, state_time = ?,
			logoff_queued = CASE WHEN state = ? THEN logoff_queued ELSE ? END,
			gateway = ?, gateway_time = ?, gateway_tunnel = ? WHERE id = ?`,
			vdibroker.StateActive, ns(stateTime), vdibroker.StateActive, false, gateway, ns(at), token, session); err != nil {
			return err
		}
		after := *u
		after.State, after.StateTime, after.Gateway = vdibroker.StateActive, stateTime, gateway
		reachedAt := at.UTC()
		after.GatewayTime = &reachedAt
		out = &after
		t.audited(&before, &after)
		return nil
	})
	if err != nil {
		return nil, wrap(err, "gateway reached session %s", session)
	}
	return out, nil
}

// GatewayClosed records the end of a tunnel (R-GW3).
func (s *DB) GatewayClosed(ctx context.Context, pool, session, token, gateway string, at time.Time, late bool) (*vdibroker.UserSession, error) {
	var out *vdibroker.UserSession
	err := s.write(ctx, func(t *tx) error {
		closed, _, err := t.tunnelOf(ctx, pool, session, token, gateway)
		if err != nil {
			return err
		}
		// Closed once: a repeated close changes nothing and writes no
		// audit entry (R-GW3, R-GW4). Claimed in one statement, so a
		// repeat written at the same time finds it closed.
		var n int64
		if !closed {
			if n, err = t.exec(ctx, `UPDATE gateway_tunnels SET closed = ? WHERE token_id = ? AND NOT closed`, true, token); err != nil {
				return err
			}
		}
		if n == 0 {
			t.audit = nil
			out, err = t.getSession(ctx, pool, session)
			return err
		}
		u, err := t.lockedSession(ctx, pool, session)
		if err != nil {
			return err
		}
		out = u
		var last string
		if err := t.row(ctx, `SELECT gateway_tunnel FROM user_sessions WHERE id = ?`, session).Scan(&last); err != nil {
			return err
		}
		// Another tunnel reached the session since (the user connected
		// again, through this gateway or another): its close decides.
		// A late close (R-GW3) moves nothing either: the user may have
		// come back through a tunnel this broker did not hear of (its
		// store was down), which the agent has reported since.
		if u.State != vdibroker.StateActive || last != token || late {
			t.audited(u, u)
			return nil
		}
		ds, dc, err := t.transition(ctx, session, vdibroker.StateActive, vdibroker.StateDisconnected, "", at)
		if err != nil {
			return err
		}
		if err := t.addCounts(ctx, pool, u.SessionHost, ds, dc); err != nil {
			return err
		}
		after := *u
		after.State, after.StateTime = vdibroker.StateDisconnected, at.UTC()
		out = &after
		t.audited(u, &after)
		return nil
	})
	if err != nil {
		return nil, wrap(err, "gateway closed session %s", session)
	}
	return out, nil
}

// lockedSession reads a session under its host's lock (every change of a
// session's state holds it), NotFound when there is none.
func (t *tx) lockedSession(ctx context.Context, pool, id string) (*vdibroker.UserSession, error) {
	u, err := t.getSession(ctx, pool, id)
	if err != nil {
		return nil, err
	}
	if err := t.lockHost(ctx, pool, u.SessionHost); err != nil {
		return nil, err
	}
	return t.getSession(ctx, pool, id)
}

// PruneGatewayTunnels deletes up to limit tunnel records no longer needed.
func (s *DB) PruneGatewayTunnels(ctx context.Context, now time.Time, limit int) (int, error) {
	var n int64
	err := s.write(ctx, func(t *tx) (err error) {
		n, err = pruneTunnels(ctx, t, now, limit)
		return err
	})
	if err != nil {
		return 0, wrap(err, "prune gateway tunnels")
	}
	return int(n), nil
}

// pruneTunnels deletes up to limit records whose token expired and whose
// tunnel is closed or past its lifetime, oldest tokens first (the expiry
// index).
func pruneTunnels(ctx context.Context, t *tx, now time.Time, limit int) (int64, error) {
	return t.exec(ctx, `DELETE FROM gateway_tunnels WHERE token_id IN (SELECT token_id FROM gateway_tunnels
		WHERE expire_time < ? AND (closed OR live_until < ?) ORDER BY expire_time LIMIT ?)`, ns(now), ns(now), limit)
}

// LiveGatewayTunnels answers a gateway's check of its open tunnels
// (R-GW4): the ids among tunnels admitted through gateway (by
// vdibroker.SameGateway: a Gateway token rotated to one spelling its
// name in other case keeps them) for their session, not closed, whose session is open and the token's user's.
// Their records' lifetime is renewed when it ends before renewBefore.
func (s *DB) LiveGatewayTunnels(ctx context.Context, gateway string, tunnels []vdibroker.GatewayTunnel, renewBefore, liveUntil time.Time) ([]string, error) {
	if len(tunnels) == 0 {
		return nil, nil
	}
	want := make(map[string]vdibroker.GatewayTunnel, len(tunnels))
	ids := make([]string, 0, len(tunnels))
	for _, g := range tunnels {
		if _, dup := want[g.TokenID]; !dup {
			want[g.TokenID] = g
			ids = append(ids, g.TokenID)
		}
	}
	var live []string
	err := s.write(ctx, func(t *tx) error {
		live = live[:0]
		in, args := idList(t.d, ids)
		rows, err := t.query(ctx, `SELECT g.token_id, g.host_pool, g.session_id, g.gateway, g.live_until, u.user_name, u.state
			FROM gateway_tunnels g JOIN user_sessions u ON u.id = g.session_id AND u.host_pool = g.host_pool
			WHERE NOT g.closed AND g.token_id `+in, args...)
		if err != nil {
			return err
		}
		var renew []string
		for rows.Next() {
			var tok, pool, session, gw, user, state string
			var until int64
			if err := rows.Scan(&tok, &pool, &session, &gw, &until, &user, &state); err != nil {
				rows.Close()
				return err
			}
			w := want[tok]
			// The tunnel is this gateway's, of the session and user its
			// token names, and the session has not ended.
			if pool != w.HostPool || session != w.Session || !vdibroker.SameGateway(gw, gateway) ||
				state == vdibroker.StateLoggedOff || !vdibroker.SameUser(user, w.User) {
				continue
			}
			live = append(live, tok)
			if until < ns(renewBefore) {
				renew = append(renew, tok)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(renew) > 0 {
			in, args := idList(t.d, renew)
			if _, err := t.exec(ctx, `UPDATE gateway_tunnels SET live_until = ? WHERE token_id `+in,
				append([]any{ns(liveUntil)}, args...)...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, wrap(err, "check gateway tunnels")
	}
	return live, nil
}

// idList is the condition and arguments of "one of ids" (oneOf).
func idList(d *dialect, ids []string) (string, []any) {
	if d == postgresDialect {
		return oneOf(d, len(ids)), []any{ids}
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	return oneOf(d, len(ids)), args
}
