package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"iter"
	"math/bits"
	"slices"
	"strings"
	"time"

	"github.com/vdibroker/vdibroker"
)

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
	// Command results are the one thing a host reports once: a batch
	// with them is synced (commitReq.resync).
	r = &commitReq{key: hostKey(pool, host), atomic: true, beat: true, resync: len(hb.Results) == 0, pool: pool, host: host, ownHost: true,
		committed: func(seq int64) { res.Seq = seq },
		deliver:   func(cmds []vdibroker.Command) { res.Commands = cmds }}
	r.fn = func(ctx context.Context, t *tx) error {
		// Set by every run of the batch (it may run again, adopting under
		// new ids): a session it adopts is checked for a late commit as a
		// placement's is (commitReq.made).
		r.made = time.Time{}
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
		recorded, err := t.recordResults(ctx, pool, host, hb.Results)
		if err != nil {
			return err
		}
		ds, dc, open, made, err := t.reconcile(ctx, p, h, hb.Sessions, hb.SessionsUnknown, now)
		if err != nil {
			return err
		}
		r.made = made
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
		// R-E12: an agent that says nothing (older) keeps what the host had.
		remoteApps := vdibroker.RemoteAppsFrom(hb.RemoteApps, h.RemoteApps)
		// An agent that heartbeats runs (R-A4): the rule of
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
				metricsSessions: metricsSessions, policy: policyText, shuttingDown: hb.ShuttingDown, healthError: hb.HealthError,
				remoteApps: remoteApps})
		} else {
			const runs = `(? AND (power_state IN ('Starting', 'Unknown') OR (power_state IN ('Stopped', 'Stopping') AND power_state_time < ?)))`
			stale := ns(now.Add(-p.HeartbeatTimeout()))
			if _, err := t.exec(ctx, `UPDATE session_hosts SET last_heartbeat = ?, metrics = ?, metrics_sessions = ?,
				policy = ?, shutting_down = ?, health_error = ?, remote_apps = ?,
				power_state = CASE WHEN `+runs+` THEN 'Running' ELSE power_state END,
				power_state_time = CASE WHEN `+runs+` THEN ? ELSE power_state_time END
				WHERE host_pool = ? AND name = ?`,
				ns(now), metricsText, metricsSessions, policyText, hb.ShuttingDown, hb.HealthError, remoteApps,
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
		after.RemoteApps = remoteApps
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
		res = &vdibroker.HeartbeatResult{Host: &after, Pool: p, Results: recorded}
		return nil
	}
	return r, &res
}

// errRevoked refuses a heartbeat whose credential is no longer its host's
// (HeartbeatRequest.CredentialHash).
var errRevoked = vdibroker.Errorf(vdibroker.EUnauthenticated, "host credential is invalid or revoked; register the agent again")

// recordResults marks the host's commands Succeeded or Failed and returns
// the results it recorded. Results for unknown commands or other hosts'
// commands are ignored, and not returned: what a host makes up is
// nobody's command. So are results for a command whose result is
// recorded already (R-S4: a command runs once): a host's credential
// repeating one of its own commands' ids would otherwise rewrite what
// that command did, and have the broker log each repetition with a text
// of its choosing.
func (t *tx) recordResults(ctx context.Context, pool, host string, results []vdibroker.CommandResult) ([]vdibroker.CommandResult, error) {
	var recorded []vdibroker.CommandResult
	for _, r := range results {
		state := vdibroker.CommandFailed
		if r.Success {
			state = vdibroker.CommandSucceeded
		}
		n, err := t.exec(ctx, `UPDATE commands SET state = ?, result = ?
			WHERE id = ? AND host_pool = ? AND session_host = ? AND state IN (?, ?)`,
			state, r.Message, r.ID, pool, host, vdibroker.CommandQueued, vdibroker.CommandDelivered)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			continue
		}
		recorded = append(recorded, r)
		if !r.Success {
			// A failed logoff may be asked again (R-S5); reconcile waits
			// a full timeout after the last request before it does.
			if _, err := t.exec(ctx, `UPDATE user_sessions SET logoff_queued = ?
				WHERE id = (SELECT session_id FROM commands WHERE id = ? AND host_pool = ? AND session_host = ? AND type = ?)`,
				false, r.ID, pool, host, vdibroker.CommandLogoff); err != nil {
				return nil, err
			}
		}
	}
	return recorded, nil
}

// openSessionsQuery reads a host's open sessions for reconcile, every
// heartbeat, from the covering index user_sessions_open_by_host_covering
// (migration 00003): no table read per session and no sort.
const openSessionsQuery = `SELECT id, user_name, state, agent_session_id, create_time, state_time, logoff_queued
	FROM user_sessions WHERE host_pool = ? AND session_host = ? AND ` + openSQL + `
	ORDER BY create_time, id`

// reconcile applies R-S2, R-S3 and R-S5 (vdibroker.Reconcile decides) to
// the host's sessions and returns the count deltas, the host's open
// sessions after it (for R-LI6), and when the id of the first session it
// adopted was made (vdibroker.IDTime; zero when none): a session adopted
// in a batch that commits LateCommit or more after that is a late write
// (countLateWrites), as a placement's. The caller holds the host's lock.
func (t *tx) reconcile(ctx context.Context, p *vdibroker.HostPool, h *vdibroker.SessionHost, reported []vdibroker.AgentSession, unknown bool, now time.Time) (ds, dc int, after iter.Seq[vdibroker.SampleSession], made time.Time, err error) {
	host := h.Name
	in := vdibroker.HostReport{Pool: p, Reported: reported, Unknown: unknown, Now: now}
	if t.beat != nil {
		in.Open = t.beat.open // read with the batch's other heartbeats (readAhead)
	} else if in.Open, err = t.openSessions(ctx, p.Name, host, h.Sessions); err != nil {
		return 0, 0, nil, time.Time{}, err
	}
	rec := vdibroker.Reconcile(in)
	// The facts of other rows, looked up only for the steps that depend
	// on them (rarely any: adoptions and R-S5 logoffs), then decided again.
	// The first decision adopts at most the budget without the window's
	// adoptions, so a report of 2,000 strangers looks up a bounded few.
	if users, asks, ended := stepsNeedingFacts(rec.Steps); len(users) > 0 || len(asks) > 0 || len(ended) > 0 {
		if in.PlacedElsewhere, err = t.placedElsewhere(ctx, p.Name, host, users); err != nil {
			return 0, 0, nil, time.Time{}, err
		}
		if in.LastLogoff, err = t.lastLogoffs(ctx, asks); err != nil {
			return 0, 0, nil, time.Time{}, err
		}
		if in.LoggedOff, err = t.loggedOff(ctx, ended); err != nil {
			return 0, 0, nil, time.Time{}, err
		}
		if len(users) > 0 {
			if in.RecentAdoptions, err = t.recentAdoptions(ctx, p.Name, host, now); err != nil {
				return 0, 0, nil, time.Time{}, err
			}
		}
		in.FactsKnown = true
		rec = vdibroker.Reconcile(in)
	}
	var notAdopted map[string]bool // adoptions the database refused
	var adoptions, logons []vdibroker.SessionStep
	logon := map[string]bool{} // the sessions of logons
	writeLogons := func() error {
		s1, c1, err := t.logons(ctx, logons, now)
		ds, dc, logons = ds+s1, dc+c1, logons[:0]
		clear(logon)
		return err
	}
	for _, st := range rec.Steps {
		var s1, c1 int
		adopted := true
		if st.Kind == vdibroker.StepLogon {
			// Written together (logons), before any later step of the
			// same session (Reconcile gives none) and after the others.
			logons = append(logons, st)
			logon[st.SessionID] = true
			continue
		}
		if logon[st.SessionID] {
			if err := writeLogons(); err != nil {
				return 0, 0, nil, time.Time{}, err
			}
		}
		if st.Kind == vdibroker.StepAdopt {
			s1, c1, adopted, err = t.adopt(ctx, p.Name, host, st, now)
		} else {
			s1, c1, err = t.applyStep(ctx, p.Name, host, st, now)
		}
		if err != nil {
			return 0, 0, nil, time.Time{}, err
		}
		switch {
		case !adopted:
			if notAdopted == nil {
				notAdopted = map[string]bool{}
			}
			notAdopted[st.SessionID] = true
		case st.Kind == vdibroker.StepAdopt:
			adoptions = append(adoptions, st)
		}
		ds, dc = ds+s1, dc+c1
	}
	if err := writeLogons(); err != nil {
		return 0, 0, nil, time.Time{}, err
	}
	if err := t.auditAdoptions(ctx, p.Name, host, adoptions, rec.NotAdopted, now); err != nil {
		return 0, 0, nil, time.Time{}, err
	}
	after = func(yield func(vdibroker.SampleSession) bool) {
		for _, o := range rec.After {
			// Unreported sessions (Pending, or moved by a gateway first,
			// R-GW2) are outside any sample the host took (R-LI6).
			if !notAdopted[o.ID] && !yield(vdibroker.SampleSession{Pending: o.AgentSessionID == "", Since: o.CreateTime}) {
				return
			}
		}
	}
	for _, st := range adoptions {
		if at, ok := vdibroker.IDTime(st.SessionID); ok && (made.IsZero() || at.Before(made)) {
			made = at
		}
	}
	return ds, dc, after, made, nil
}

// stepsNeedingFacts returns the users of steps' adoptions, the sessions
// of its R-S5 logoffs and the sessions it ends as NotReported: the steps
// that HostReport's PlacedElsewhere and LastLogoff may take away, and
// whose reason its LoggedOff may name.
func stepsNeedingFacts(steps []vdibroker.SessionStep) (users, sessions, ended []string) {
	for _, st := range steps {
		switch {
		case st.Kind == vdibroker.StepAdopt:
			if !slices.Contains(users, st.User) {
				users = append(users, st.User)
			}
		case st.Kind == vdibroker.StepAskLogoff:
			sessions = append(sessions, st.SessionID)
		case st.Kind == vdibroker.StepMove && st.Reason == vdibroker.EndNotReported:
			ended = append(ended, st.SessionID)
		}
	}
	return users, sessions, ended
}

// applyStep writes one step of vdibroker.Reconcile other than an adoption
// and returns the host count deltas it caused: none when the session had
// moved on since it was read (it is no longer in the step's From).
func (t *tx) applyStep(ctx context.Context, pool, host string, st vdibroker.SessionStep, now time.Time) (ds, dc int, err error) {
	switch st.Kind {
	case vdibroker.StepMove:
		return t.transition(ctx, st.SessionID, st.From, st.To, st.Reason, now)
	case vdibroker.StepAskLogoff:
		c := &vdibroker.Command{ID: vdibroker.NewID(), HostPool: pool, SessionHost: host, Type: vdibroker.CommandLogoff,
			SessionID: st.SessionID, AgentSessionID: st.AgentSessionID, User: st.User, State: vdibroker.CommandQueued,
			Message: "disconnected longer than disconnectedSessionTimeoutMinutes", CreateTime: now}
		if err := t.insertCommand(ctx, c); err != nil {
			return 0, 0, err
		}
		_, err = t.exec(ctx, `UPDATE user_sessions SET logoff_queued = ? WHERE id = ?`, true, st.SessionID)
		return 0, 0, err
	}
	return 0, 0, fmt.Errorf("reconcile: no such step %q", st.Kind)
}

// logons writes a heartbeat's StepLogon steps, each session's agent id
// and new state if it is still in its From and unreported, and returns
// the host count deltas. One statement for many logons (logonsQuery): a
// connect storm's heartbeats carry one logon per connect, and a statement
// each was an UPDATE's fixed cost (on PostgreSQL a round trip) per
// session on the writer. A session that moved on gets its agent id alone.
func (t *tx) logons(ctx context.Context, steps []vdibroker.SessionStep, now time.Time) (ds, dc int, err error) {
	for len(steps) > 0 {
		chunk := steps[:min(len(steps), maxLogonsPerStatement)]
		steps = steps[len(chunk):]
		done, err := t.logonChunk(ctx, chunk, now)
		if err != nil {
			return 0, 0, err
		}
		for _, st := range chunk {
			if !done[st.SessionID] {
				if _, err := t.exec(ctx, `UPDATE user_sessions SET agent_session_id = ? WHERE id = ?`, st.AgentSessionID, st.SessionID); err != nil {
					return 0, 0, err
				}
				continue
			}
			// It was unreported, so connecting, whatever its state (R-GW2).
			s0, c0 := countsOf(st.From, "")
			s1, c1 := countsOf(st.To, st.AgentSessionID)
			ds, dc = ds+s1-s0, dc+c1-c0
		}
	}
	return ds, dc, nil
}

// maxLogonsPerStatement bounds one logonsQuery (on SQLite 4 arguments a
// logon, well inside its limit of arguments).
const maxLogonsPerStatement = 64

// logonChunk runs logonsQuery for steps and returns the sessions it
// changed.
func (t *tx) logonChunk(ctx context.Context, steps []vdibroker.SessionStep, now time.Time) (map[string]bool, error) {
	n := len(steps)
	var args []any
	if t.d == postgresDialect {
		ids, agents, to, from := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		for i, st := range steps {
			ids[i], agents[i], to[i], from[i] = st.SessionID, st.AgentSessionID, st.To, st.From
		}
		args = []any{ns(now), false, ids, agents, to, from}
	} else {
		// Padded to a power of two with rows no session matches (no id
		// and no state is empty), so the statements are a few texts, each
		// prepared once.
		n = 1 << bits.Len(uint(n-1))
		args = []any{ns(now), false}
		for i := range n {
			if i < len(steps) {
				st := steps[i]
				args = append(args, st.SessionID, st.AgentSessionID, st.To, st.From)
			} else {
				args = append(args, "", "", "", "")
			}
		}
	}
	rows, err := t.query(ctx, logonsQuery(t.d, n), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	done := make(map[string]bool, len(steps))
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		done[id] = true
	}
	return done, rows.Err()
}

// logonsQuery records n logons: each session (by key) gets its agent id
// and its new state if it is still in its From state and unreported, and
// the statement returns the ids it changed. Args: the time, false (no
// logoff queued), then on SQLite per logon the session id, agent id, To,
// From (a VALUES list, its values cast: a VALUES list has no column types
// of its own), on PostgreSQL each one array of all the logons' values.
// On SQLite it is UPDATE OR FAIL: a statement that may write several rows
// and abort on a constraint (the unique index of R-C6, whose entry a
// logon deletes and inserts again) copies every page it changes into a
// statement journal first (a sixth of the statement's CPU in a 2,000-host
// pod's connect phases); no logon can break a constraint (it changes no key of a unique
// index), and any error fails the batch, which runs again.
func logonsQuery(d *dialect, n int) string {
	const set = ` user_sessions SET agent_session_id = v.agent, state = v.state_to, state_time = ?, end_reason = '', logoff_queued = ? FROM `
	const where = ` WHERE user_sessions.id = v.id AND user_sessions.state = v.state_from AND user_sessions.agent_session_id = ''
		RETURNING user_sessions.id`
	if d == postgresDialect {
		return `UPDATE` + set + `unnest(CAST(? AS TEXT[]), CAST(? AS TEXT[]), CAST(? AS TEXT[]), CAST(? AS TEXT[])) AS v(id, agent, state_to, state_from)` + where
	}
	const row = `(CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT))`
	return `UPDATE OR FAIL` + set + `(SELECT column1 AS id, column2 AS agent, column3 AS state_to, column4 AS state_from FROM (VALUES ` +
		strings.TrimSuffix(strings.Repeat(row+",", n), ",") + `)) AS v` + where
}

// adopt writes an adopted session (R-S2) and returns the host count
// deltas; adopted is false when the database refused it.
func (t *tx) adopt(ctx context.Context, pool, host string, st vdibroker.SessionStep, now time.Time) (ds, dc int, adopted bool, err error) {
	// Not over a pooled session of the user committed since this
	// transaction read the host's (on PostgreSQL another replica may have
	// written one meanwhile: a session placed during an outage whose user
	// logged on before it was written, R-OUT3); the next heartbeat matches
	// that one instead.
	key := vdibroker.FoldUser(st.User) // R-E5
	// adopt_time is the broker's own time, which the adoption budget
	// counts by (recentAdoptions): create_time is the host's word.
	n, err := t.exec(ctx, `INSERT INTO user_sessions (id, host_pool, session_host, user_name, user_key, state,
		create_time, state_time, agent_session_id, end_reason, pooled, logoff_queued, adopted, adopt_time)
		SELECT ?,?,?,?,?,?,?,?,?,?,?,?,?,? WHERE NOT EXISTS (SELECT 1 FROM user_sessions
			WHERE host_pool = ? AND user_key = ? AND pooled AND `+openSQL+`)`,
		st.SessionID, pool, host, st.User, key, st.To, ns(cmp.Or(st.CreateTime, now)), ns(now), st.AgentSessionID, "", false, false, true, ns(now), pool, key)
	if err != nil || n == 0 {
		return 0, 0, false, err
	}
	ds, dc = countsOf(st.To, st.AgentSessionID)
	return ds, dc, true, nil
}

// auditedAdoptions is how many adopted sessions one heartbeat's audit
// entry lists; it counts them all.
const auditedAdoptions = 20

// auditAdoptions writes one heartbeat's adoptions (R-S2) as one audit
// entry: the audit trail (SPEC §9, Audit) says a host's report, not the
// broker, put these sessions there. One entry per heartbeat with a count
// and the first auditedAdoptions sessions, not one per session, and none
// for a heartbeat that adopted nothing: a host reporting thousands of
// strangers writes a bounded entry (notAdopted counts those the adoption
// budget left out).
func (t *tx) auditAdoptions(ctx context.Context, pool, host string, adopted []vdibroker.SessionStep, notAdopted int, now time.Time) error {
	if len(adopted) == 0 {
		return nil
	}
	type session struct {
		ID             string `json:"id"`
		User           string `json:"user"`
		State          string `json:"state"`
		AgentSessionID string `json:"agentSessionId"`
	}
	list := make([]session, 0, min(len(adopted), auditedAdoptions))
	for _, st := range adopted[:min(len(adopted), auditedAdoptions)] {
		list = append(list, session{st.SessionID, st.User, st.To, st.AgentSessionID})
	}
	_, err := insertAuditRow(ctx, t, &vdibroker.AuditEntry{Time: now,
		Principal: vdibroker.AuditPrincipal{Kind: vdibroker.PrincipalHost, ID: host},
		Action:    "usersession.adopt", Target: "hostpools/" + pool + "/sessionhosts/" + host, HostPool: pool,
		After: auditJSON(map[string]any{"sessionHost": host, "adopted": len(adopted), "notAdopted": notAdopted, "sessions": list})})
	return err
}

// recentAdoptions counts the sessions host adopted in the
// vdibroker.AdoptionWindow before now, ended ones included, by when the
// broker adopted them (the index user_sessions_adopted_by_host_time,
// migration 00079): not by create_time, the logon time the host reported,
// which a host's credential dates as far back as it likes (R-SEC).
func (t *tx) recentAdoptions(ctx context.Context, pool, host string, now time.Time) (int, error) {
	var n int
	err := t.row(ctx, recentAdoptionsQuery, pool, host, ns(now.Add(-vdibroker.AdoptionWindow))).Scan(&n)
	return n, err
}

// recentAdoptionsQuery is recentAdoptions' count: pool, host, start of the
// window (ns).
const recentAdoptionsQuery = `SELECT count(*) FROM user_sessions WHERE host_pool = ? AND session_host = ? AND adopted AND adopt_time > ?`

// openSessions reads a host's open sessions (openSessionsQuery); n, the
// host's count of them, sizes the slice.
func (t *tx) openSessions(ctx context.Context, pool, host string, n int) ([]vdibroker.OpenSession, error) {
	rows, err := t.query(ctx, openSessionsQuery, pool, host)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	open := make([]vdibroker.OpenSession, 0, max(n, 0))
	sc := newOpenSessionScanner()
	for rows.Next() {
		o, err := sc.scan(rows)
		if err != nil {
			return nil, err
		}
		open = append(open, o)
	}
	return open, rows.Err()
}

// openSessionScanner reads rows of openSessionsQuery's columns, after the
// ones of lead, through one set of destinations for every row (the open
// sessions of every host are read on every heartbeat).
type openSessionScanner struct {
	o      vdibroker.OpenSession
	ct, st int64
	dest   []any
}

func newOpenSessionScanner(lead ...any) *openSessionScanner {
	s := new(openSessionScanner)
	s.dest = append(lead, &s.o.ID, &s.o.User, &s.o.State, &s.o.AgentSessionID, &s.ct, &s.st, &s.o.LogoffQueued)
	return s
}

// scan reads the row sc is on.
func (s *openSessionScanner) scan(sc scanner) (vdibroker.OpenSession, error) {
	if err := sc.Scan(s.dest...); err != nil {
		return vdibroker.OpenSession{}, err
	}
	o := s.o
	o.CreateTime, o.StateTime = fromNS(s.ct), fromNS(s.st)
	return o, nil
}

// placedElsewhere returns, for each of users, whether they have an open
// session the broker placed (not adopted) in pool on a host other than
// host, in any case (R-E5). Both halves are served by the (host_pool,
// user_key) partial
// indexes of open sessions.
func (t *tx) placedElsewhere(ctx context.Context, pool, host string, users []string) (map[string]bool, error) {
	placed := map[string]bool{}
	for _, user := range users {
		var n int
		key := vdibroker.FoldUser(user)
		err := t.row(ctx, `SELECT count(*) FROM (
			SELECT 1 FROM user_sessions WHERE host_pool = ? AND user_key = ? AND pooled AND `+openSQL+` AND session_host <> ?
			UNION ALL
			SELECT 1 FROM user_sessions WHERE host_pool = ? AND user_key = ? AND NOT pooled AND `+openSQL+` AND session_host <> ? AND NOT adopted
		) AS placed`, pool, key, host, pool, key, host).Scan(&n)
		if err != nil {
			return nil, err
		}
		placed[user] = n > 0
	}
	return placed, nil
}

// loggedOffQuery counts a session's logoffs given to its agent and not
// reported failed.
const loggedOffQuery = `SELECT count(*) FROM commands WHERE session_id = ? AND type = ? AND state IN (?, ?)`

// loggedOff returns which of sessions had a logoff delivered to their
// agent that it did not report failed (HostReport.LoggedOff), one lookup
// of commands_by_session each (migration 00045): only for sessions that
// end unreported.
func (t *tx) loggedOff(ctx context.Context, sessions []string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, id := range sessions {
		var n int
		if err := t.row(ctx, loggedOffQuery, id, vdibroker.CommandLogoff, vdibroker.CommandDelivered, vdibroker.CommandSucceeded).Scan(&n); err != nil {
			return nil, err
		}
		if n > 0 {
			out[id] = true
		}
	}
	return out, nil
}

// lastLogoffs returns, for each of sessions that has one, when a logoff of
// it was last asked (R-S5 asks again only a full timeout after).
func (t *tx) lastLogoffs(ctx context.Context, sessions []string) (map[string]time.Time, error) {
	last := map[string]time.Time{}
	for _, id := range sessions {
		var at sql.NullInt64
		if err := t.row(ctx, `SELECT max(create_time) FROM commands WHERE session_id = ? AND type = ?`,
			id, vdibroker.CommandLogoff).Scan(&at); err != nil {
			return nil, err
		}
		if at.Valid {
			last[id] = fromNS(at.Int64)
		}
	}
	return last, nil
}
