package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"iter"
	"time"

	"github.com/vdibroker/vdibroker"
)

// openSession is what reconciliation needs of a host's open session.
type openSession struct {
	id, user, state, agentID string
	createTime, stateTime    int64
	logoffQueued             bool
	seen                     bool
}

// ApplyHeartbeat records one heartbeat in one transaction (see
// vdibroker.Store): command results, reconciliation of the reported
// sessions (R-S2, R-S3), R-S5 logoff commands, the host's runtime fields
// and counts; it returns the queued commands, now Delivered.
func (s *DB) ApplyHeartbeat(ctx context.Context, pool, host string, hb *vdibroker.HeartbeatRequest, now time.Time) (*vdibroker.HeartbeatResult, error) {
	r, res := heartbeatReq(pool, host, hb, now)
	if err := s.groupedReq(ctx, r); err != nil {
		return nil, wrap(err, "heartbeat %s/%s", pool, host)
	}
	return *res, nil
}

// heartbeatReq is the group-commit request that applies hb; once it is
// answered without error, *res is its result.
func heartbeatReq(pool, host string, hb *vdibroker.HeartbeatRequest, now time.Time) (r *commitReq, result **vdibroker.HeartbeatResult) {
	if hb == nil {
		hb = &vdibroker.HeartbeatRequest{}
	}
	var res *vdibroker.HeartbeatResult
	// Heartbeats are group-committed like placements: 10,000 hosts beating
	// every 10 s must not cost 1,000 fsyncs a second on SQLite.
	// Atomic: its only *vdibroker.Error (the host or its pool not found)
	// comes before its first write.
	r = &commitReq{key: hostKey(pool, host), atomic: true, beat: true, pool: pool, host: host, ownHost: true,
		committed: func(seq int64) { res.Seq = seq },
		deliver:   func(cmds []vdibroker.Command) { res.Commands = cmds }}
	r.fn = func(ctx context.Context, t *tx) error {
		var cred sql.NullString
		var h *vdibroker.SessionHost
		var err error
		if t.beat != nil {
			// Read with the batch's other heartbeats, under the host's
			// lock (readAhead).
			h, cred = t.beat.host, t.beat.cred
		} else {
			h, err = t.getHostAnd(ctx, pool, host, true, &cred)
		}
		if hb.CredentialHash != "" && (vdibroker.ErrorCode(err) == vdibroker.ENotFound || (err == nil && cred.String != hb.CredentialHash)) {
			return errRevoked
		}
		if err != nil {
			return err
		}
		p, err := t.getBatchPool(ctx, pool)
		if err != nil {
			return err
		}
		if err := t.recordResults(ctx, pool, host, hb.Results); err != nil {
			return err
		}
		ds, dc, open, err := t.reconcile(ctx, p, host, hb.Sessions, now)
		if err != nil {
			return err
		}
		// R-LI6: a repeated sample changes nothing; a new one's base is
		// the sessions whose load can be in it.
		sample := vdibroker.Resample(vdibroker.MetricsSample{Metrics: h.Metrics, Sessions: h.MetricsSessions}, hb.Metrics, now, open)
		fresh := sample.Metrics != h.Metrics
		metrics, metricsSessions := sample.Metrics, sample.Sessions
		policy := h.Policy
		if hb.Policy != nil {
			policy = *hb.Policy
		}
		var metricsText *string
		if metrics != nil {
			m := jsonText(metrics)
			metricsText = &m
		}
		policyText := jsonText(policy)
		// An agent that heartbeats runs (issue 17): the rule of
		// vdibroker.PowerAfterHeartbeat, evaluated by the UPDATE on the row
		// as it is now (on PostgreSQL a start or stop may have committed
		// while this heartbeat waited for the host's lock; h may predate
		// it). Args: not shutting down, stop-or-start recorded before now
		// minus the heartbeat timeout.
		power, powerTime := vdibroker.PowerAfterHeartbeat(h, p.HeartbeatTimeout(), hb.ShuttingDown, now), h.PowerStateTime
		if power != h.PowerState {
			at := fromNS(ns(now))
			powerTime = &at
		}
		if power == h.PowerState {
			// The usual heartbeat: its row's UPDATE waits to go with the
			// batch's other heartbeats' (tx.flushBeats), after the last
			// step that can fail.
			if err := t.addCounts(ctx, pool, host, ds, dc); err != nil {
				return err
			}
			t.beats = append(t.beats, hostBeat{pool: pool, host: host, at: ns(now), metrics: metricsText,
				metricsSessions: metricsSessions, policy: policyText, shuttingDown: hb.ShuttingDown, healthError: hb.HealthError})
		} else {
			const runs = `(? AND (power_state IN ('Starting', 'Unknown') OR (power_state IN ('Stopped', 'Stopping') AND power_state_time < ?)))`
			stale := ns(now.Add(-p.HeartbeatTimeout()))
			if _, err := t.exec(ctx, `UPDATE session_hosts SET last_heartbeat = ?, metrics = ?, metrics_sessions = ?,
				policy = ?, shutting_down = ?, health_error = ?,
				power_state = CASE WHEN `+runs+` THEN 'Running' ELSE power_state END,
				power_state_time = CASE WHEN `+runs+` THEN ? ELSE power_state_time END
				WHERE host_pool = ? AND name = ?`,
				ns(now), metricsText, metricsSessions, policyText, hb.ShuttingDown, hb.HealthError,
				!hb.ShuttingDown, stale, !hb.ShuttingDown, stale, ns(now),
				pool, host); err != nil {
				return err
			}
			if err := t.addCounts(ctx, pool, host, ds, dc); err != nil {
				return err
			}
			// A stopped host that runs again takes sessions again (h is
			// the row under the host's lock, so the rule's guess is the
			// UPDATE's outcome).
			if err := t.syncNewSessionsAllowed(ctx, pool, host); err != nil {
				return err
			}
		}
		// The host as the UPDATE left it, without reading it back: the row
		// is locked (PostgreSQL) or the writer is alone (SQLite). The JSON
		// values are decoded from what was stored, as a read would.
		after := *h
		last := fromNS(ns(now))
		after.LastHeartBeat = &last
		after.Sessions, after.ConnectingSessions = h.Sessions+ds, h.ConnectingSessions+dc
		after.MetricsSessions, after.ShuttingDown, after.HealthError = metricsSessions, hb.ShuttingDown, hb.HealthError
		after.PowerState, after.PowerStateTime = power, powerTime
		if fresh {
			after.Metrics = new(vdibroker.Metrics)
			if err := json.Unmarshal([]byte(*metricsText), after.Metrics); err != nil {
				return err
			}
		}
		if hb.Policy != nil {
			after.Policy = vdibroker.HostPolicy{}
			if err := json.Unmarshal([]byte(policyText), &after.Policy); err != nil {
				return err
			}
		}
		// The next heartbeat's HostByCredential answers from memory.
		t.cacheHost(cred.String, &after)
		// The commands go out with the batch's (deliverBatch).
		res = &vdibroker.HeartbeatResult{Host: &after, Pool: p}
		return nil
	}
	return r, &res
}

// errRevoked refuses a heartbeat whose credential is no longer its host's
// (HeartbeatRequest.CredentialHash).
var errRevoked = vdibroker.Errorf(vdibroker.EUnauthenticated, "host credential is invalid or revoked; register the agent again")

// recordResults marks the host's commands Succeeded or Failed. Results for
// unknown commands or other hosts' commands are ignored.
func (t *tx) recordResults(ctx context.Context, pool, host string, results []vdibroker.CommandResult) error {
	for _, r := range results {
		state := vdibroker.CommandFailed
		if r.Success {
			state = vdibroker.CommandSucceeded
		}
		if _, err := t.exec(ctx, `UPDATE commands SET state = ?, result = ? WHERE id = ? AND host_pool = ? AND session_host = ?`,
			state, r.Message, r.ID, pool, host); err != nil {
			return err
		}
		if !r.Success {
			// A failed logoff may be asked again (R-S5); reconcile waits
			// a full timeout after the last request before it does.
			if _, err := t.exec(ctx, `UPDATE user_sessions SET logoff_queued = ?
				WHERE id = (SELECT session_id FROM commands WHERE id = ? AND host_pool = ? AND session_host = ? AND type = ?)`,
				false, r.ID, pool, host, vdibroker.CommandLogoff); err != nil {
				return err
			}
		}
	}
	return nil
}

// openSessionsQuery reads a host's open sessions for reconcile, every
// heartbeat, from the covering index user_sessions_open_by_host_covering
// (migration 00003): no table read per session and no sort.
const openSessionsQuery = `SELECT id, user_name, state, agent_session_id, create_time, state_time, logoff_queued
	FROM user_sessions WHERE host_pool = ? AND session_host = ? AND state <> 'LoggedOff'
	ORDER BY create_time, id`

// reconcile applies R-S2, R-S3 and R-S5 to the host's sessions and returns
// the count deltas and the host's open sessions after it (for R-LI6). The
// caller holds the host's lock.
//
// Matching: a reported session matches the open session carrying its agent
// id and user; else the oldest Pending session of its user not yet seen (the agent's
// ids are its own, so a placed session is matched by user, SPEC §9); else
// it is adopted.
func (t *tx) reconcile(ctx context.Context, p *vdibroker.HostPool, host string, reported []vdibroker.AgentSession, now time.Time) (ds, dc int, after iter.Seq[vdibroker.SampleSession], err error) {
	ds, dc, open, err := t.reconcileSessions(ctx, p, host, reported, now)
	if err != nil {
		return 0, 0, nil, err
	}
	after = func(yield func(vdibroker.SampleSession) bool) {
		for _, o := range open {
			if o.state != vdibroker.StateLoggedOff &&
				!yield(vdibroker.SampleSession{Pending: o.state == vdibroker.StatePending, Since: fromNS(o.createTime)}) {
				return
			}
		}
	}
	return ds, dc, after, nil
}

// reconcileSessions is reconcile; it returns every session that was open
// or adopted, in its state after reconciliation.
func (t *tx) reconcileSessions(ctx context.Context, p *vdibroker.HostPool, host string, reported []vdibroker.AgentSession, now time.Time) (ds, dc int, open []*openSession, err error) {
	if t.beat != nil {
		open = t.beat.open // read with the batch's other heartbeats (readAhead)
	} else if open, err = t.openSessions(ctx, p.Name, host); err != nil {
		return 0, 0, nil, err
	}

	// Agent session ids are the host's own and may be reused (Windows
	// numbers sessions 1, 2, 3...): a report matches by id and user, so
	// bob on alice's old id is not taken for alice.
	agentKey := func(id, user string) string { return id + "\x00" + user }
	byAgent := map[string]*openSession{}
	pendingByUser := map[string][]*openSession{}
	for _, o := range open {
		if o.agentID != "" {
			byAgent[agentKey(o.agentID, o.user)] = o
		} else if o.state == vdibroker.StatePending {
			pendingByUser[o.user] = append(pendingByUser[o.user], o)
		}
	}
	move := func(o *openSession, to, reason string) error {
		s1, c1, err := t.transition(ctx, o.id, o.state, to, reason, now)
		ds, dc = ds+s1, dc+c1
		o.state, o.stateTime, o.logoffQueued = to, ns(now), false
		return err
	}

	reportedIDs := map[string]bool{}
	for _, r := range reported {
		if r.ID == "" || reportedIDs[r.ID] {
			continue
		}
		reportedIDs[r.ID] = true
		want := vdibroker.StateActive
		if r.State == vdibroker.StateDisconnected {
			want = vdibroker.StateDisconnected
		}
		o := byAgent[agentKey(r.ID, r.User)]
		if l := pendingByUser[r.User]; o != nil && len(l) > 0 && l[0].createTime < o.createTime {
			// Two open sessions of one user on one host: the logon was
			// adopted from this report on one replica while another wrote
			// the session it placed for it during a store outage (issue
			// 19, R-OUT3). The one acknowledged first stays; the twin ends.
			if err := move(o, vdibroker.StateLoggedOff, vdibroker.EndOutagePlacementWritten); err != nil {
				return 0, 0, nil, err
			}
			o.seen = true
			o = nil
		}
		if o == nil {
			if l := pendingByUser[r.User]; len(l) > 0 {
				o, pendingByUser[r.User] = l[0], l[1:]
				o.agentID = r.ID
				// The logon: its agent id and its new state in one
				// statement (a logon storm is thousands a second).
				n, err := t.exec(ctx, `UPDATE user_sessions SET agent_session_id = ?, state = ?, state_time = ?, end_reason = ?, logoff_queued = ?
					WHERE id = ? AND state = ?`, r.ID, want, ns(now), "", false, o.id, o.state)
				if err != nil {
					return 0, 0, nil, err
				}
				if n > 0 {
					s0, c0 := countsOf(o.state)
					s1, c1 := countsOf(want)
					ds, dc = ds+s1-s0, dc+c1-c0
					o.state, o.stateTime, o.logoffQueued = want, ns(now), false
				} else if _, err := t.exec(ctx, `UPDATE user_sessions SET agent_session_id = ? WHERE id = ?`, r.ID, o.id); err != nil {
					return 0, 0, nil, err
				}
			}
		}
		if o == nil {
			// R-S2: a session the broker did not place (a user who logged
			// on directly) is adopted, unless the broker placed that user
			// on another host of the pool: a host's word does not move a
			// user off the session the broker gave them (issue 14: a rogue
			// host cannot capture users by reporting their names).
			placed, err := t.placedElsewhere(ctx, p.Name, host, r.User)
			if err != nil {
				return 0, 0, nil, err
			}
			if placed {
				continue
			}
			o = &openSession{id: vdibroker.NewID(), user: r.User, state: want, agentID: r.ID, createTime: ns(now), stateTime: ns(now)}
			// Not over a pooled session committed since this transaction
			// read the host's (on PostgreSQL another replica may have
			// written one meanwhile: a session placed during an outage
			// whose user logged on before it was written, issue 19); the
			// next heartbeat matches that one instead.
			n, err := t.exec(ctx, `INSERT INTO user_sessions (id, host_pool, session_host, user_name, state,
				create_time, state_time, agent_session_id, end_reason, pooled, logoff_queued, adopted)
				SELECT ?,?,?,?,?,?,?,?,?,?,?,? WHERE NOT EXISTS (SELECT 1 FROM user_sessions
					WHERE host_pool = ? AND user_name = ? AND pooled AND state <> 'LoggedOff')`,
				o.id, p.Name, host, r.User, want, ns(now), ns(now), r.ID, "", false, false, true, p.Name, r.User)
			if err != nil {
				return 0, 0, nil, err
			}
			if n == 0 {
				continue
			}
			// The audit trail says a host's report, not the broker, put
			// this session there (issue 14).
			if _, err := insertAuditRow(ctx, t, &vdibroker.AuditEntry{Time: now,
				Principal: vdibroker.AuditPrincipal{Kind: vdibroker.PrincipalHost, ID: host},
				Action:    "usersession.adopt", Target: "hostpools/" + p.Name + "/usersessions/" + o.id, HostPool: p.Name,
				After: auditJSON(map[string]string{"user": r.User, "sessionHost": host, "state": want, "agentSessionId": r.ID})}); err != nil {
				return 0, 0, nil, err
			}
			s1, c1 := countsOf(want)
			ds, dc = ds+s1, dc+c1
			open = append(open, o)
		}
		o.seen = true
		if o.state != want {
			if err := move(o, want, ""); err != nil {
				return 0, 0, nil, err
			}
		}
	}

	pendingTimeout := int64(p.PendingTimeout())
	for _, o := range open {
		switch {
		case o.seen:
		case o.state == vdibroker.StatePending && o.agentID == "":
			// Not yet seen: the user may still be logging on (R-S3).
			if ns(now)-o.stateTime > pendingTimeout {
				if err := move(o, vdibroker.StateLoggedOff, vdibroker.EndPendingTimeout); err != nil {
					return 0, 0, nil, err
				}
			}
		default:
			if err := move(o, vdibroker.StateLoggedOff, vdibroker.EndNotReported); err != nil {
				return 0, 0, nil, err
			}
		}
	}

	// R-S5: ask the agent, once per disconnection, to log off sessions
	// disconnected longer than the pool allows.
	if p.DisconnectedSessionTimeoutMinutes > 0 {
		limit := int64(p.DisconnectedSessionTimeoutMinutes) * int64(time.Minute)
		for _, o := range open {
			if o.state != vdibroker.StateDisconnected || o.logoffQueued || ns(now)-o.stateTime < limit {
				continue
			}
			// After a failed logoff, ask again only a full timeout after
			// the last request, not on every heartbeat.
			var last sql.NullInt64
			if err := t.row(ctx, `SELECT max(create_time) FROM commands WHERE session_id = ? AND type = ?`,
				o.id, vdibroker.CommandLogoff).Scan(&last); err != nil {
				return 0, 0, nil, err
			}
			if last.Valid && ns(now)-last.Int64 < limit {
				continue
			}
			c := &vdibroker.Command{ID: vdibroker.NewID(), HostPool: p.Name, SessionHost: host, Type: vdibroker.CommandLogoff,
				SessionID: o.id, AgentSessionID: o.agentID, User: o.user, State: vdibroker.CommandQueued,
				Message: "disconnected longer than disconnectedSessionTimeoutMinutes", CreateTime: now}
			if err := t.insertCommand(ctx, c); err != nil {
				return 0, 0, nil, err
			}
			if _, err := t.exec(ctx, `UPDATE user_sessions SET logoff_queued = ? WHERE id = ?`, true, o.id); err != nil {
				return 0, 0, nil, err
			}
			o.logoffQueued = true
		}
	}
	return ds, dc, open, nil
}

// openSessions reads a host's open sessions (openSessionsQuery).
func (t *tx) openSessions(ctx context.Context, pool, host string) ([]*openSession, error) {
	rows, err := t.query(ctx, openSessionsQuery, pool, host)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var open []*openSession
	for rows.Next() {
		o := new(openSession)
		if err := rows.Scan(&o.id, &o.user, &o.state, &o.agentID, &o.createTime, &o.stateTime, &o.logoffQueued); err != nil {
			return nil, err
		}
		open = append(open, o)
	}
	return open, rows.Err()
}

// placedElsewhere reports whether user has an open session the broker
// placed (not adopted) in pool on a host other than host. Both halves are
// served by the (host_pool, user_name) partial indexes of open sessions.
func (t *tx) placedElsewhere(ctx context.Context, pool, host, user string) (bool, error) {
	var n int
	err := t.row(ctx, `SELECT count(*) FROM (
		SELECT 1 FROM user_sessions WHERE host_pool = ? AND user_name = ? AND pooled AND state <> 'LoggedOff' AND session_host <> ?
		UNION ALL
		SELECT 1 FROM user_sessions WHERE host_pool = ? AND user_name = ? AND NOT pooled AND state <> 'LoggedOff' AND session_host <> ? AND NOT adopted
	) AS placed`, pool, user, host, pool, user, host).Scan(&n)
	return n > 0, err
}
