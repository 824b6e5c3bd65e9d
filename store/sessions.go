package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/vdibroker/vdibroker"
)

const sessionCols = `id, user_name, host_pool, session_host, state, create_time, state_time,
	agent_session_id, end_reason, adopted, gateway, gateway_time`

func scanSession(sc scanner) (*vdibroker.UserSession, error) {
	var u vdibroker.UserSession
	var ct, st, gt int64
	if err := sc.Scan(&u.ID, &u.User, &u.HostPool, &u.SessionHost, &u.State, &ct, &st,
		&u.AgentSessionID, &u.EndReason, &u.Adopted, &u.Gateway, &gt); err != nil {
		return nil, err
	}
	u.CreateTime, u.StateTime = fromNS(ct), fromNS(st)
	if gt != 0 {
		at := fromNS(gt)
		u.GatewayTime = &at
	}
	return &u, nil
}

func (t *tx) getSession(ctx context.Context, pool, id string) (*vdibroker.UserSession, error) {
	u, err := scanSession(t.row(ctx, `SELECT `+sessionCols+` FROM user_sessions WHERE id = ? AND host_pool = ?`, id, pool))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("user session %q not found in host pool %q", id, pool)
	}
	if err != nil {
		return nil, fmt.Errorf("get session %s: %w", id, err)
	}
	return u, nil
}

// countsOf is what a session in state adds to its host's counts (R-S1):
// an open one is a session, and a connecting one while its host's agent
// has not reported it (agentID empty: Pending, or turned Active or
// Disconnected by a gateway's report first, R-GW2).
func countsOf(state, agentID string) (sessions, connecting int) {
	switch {
	case state == vdibroker.StateLoggedOff || state == "":
		return 0, 0
	case state == vdibroker.StatePending || agentID == "":
		return 1, 1
	}
	return 1, 0
}

// openSQL and endedSQL are the conditions of an open and of an ended
// session in a query. ended (00060) is state = 'LoggedOff' in a column
// that only the end of a session sets: SQLite's open and ended partial
// indexes are conditioned on it, so a change between open states (a
// logon, a disconnection) leaves them alone, and SQLite uses a partial
// index only when the query names its condition's terms. PostgreSQL's
// indexes are conditioned on state: there dialect.q rewrites these to the
// state terms alone (onState).
const (
	openSQL  = `state <> 'LoggedOff' AND NOT ended`
	endedSQL = `state = 'LoggedOff' AND ended`
)

// transitionQuery moves a session between open states; endQuery ends it
// (ended is set only there, so that a change between open states leaves
// SQLite's indexes on ended alone). Args: the new state, its time, the
// end reason, logoff_queued, the id, the state it must be in.
const (
	transitionQuery = `UPDATE user_sessions SET state = ?, state_time = ?, end_reason = ?, logoff_queued = ?
		WHERE id = ? AND state = ? RETURNING agent_session_id`
	endQuery = `UPDATE user_sessions SET state = ?, ended = TRUE, state_time = ?, end_reason = ?, logoff_queued = ?
		WHERE id = ? AND state = ? RETURNING agent_session_id`
)

// transition moves a session from state from to state to, only if it is
// still in from, and returns the host count deltas it caused (zero when the
// session had moved on). The caller holds the host's lock and applies the
// deltas in the same transaction; the session's agent id, which says
// whether it is connecting, changes only under that lock too.
func (t *tx) transition(ctx context.Context, id, from, to, reason string, now time.Time) (ds, dc int, err error) {
	var agentID string
	q := transitionQuery
	if to == vdibroker.StateLoggedOff {
		q = endQuery
	}
	err = t.row(ctx, q, to, ns(now), reason, false, id, from).Scan(&agentID)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	s0, c0 := countsOf(from, agentID)
	s1, c1 := countsOf(to, agentID)
	return s1 - s0, c1 - c0, nil
}

// endSession ends an open session and keeps its host's counts current.
// Ending an ended session is a no-op.
func (t *tx) endSession(ctx context.Context, pool, id, reason string, now time.Time) error {
	u, err := t.getSession(ctx, pool, id)
	if err != nil || !u.Open() {
		return err
	}
	// Host lock first, then read the state again: every state change takes
	// the host lock, so the state read now is stable until commit.
	if err := t.lockHost(ctx, pool, u.SessionHost); err != nil {
		return err
	}
	if u, err = t.getSession(ctx, pool, id); err != nil || !u.Open() {
		return err
	}
	ds, dc, err := t.transition(ctx, id, u.State, vdibroker.StateLoggedOff, reason, now)
	if err != nil {
		return err
	}
	return t.addCounts(ctx, pool, u.SessionHost, ds, dc)
}

// GetPlacement returns a session's decision record (R-C7); NotFound for a
// session without one (adopted sessions were not placed).
func (s *DB) GetPlacement(ctx context.Context, pool, sessionID string) ([]byte, error) {
	var rec []byte
	err := s.read(ctx, func(t *tx) error {
		err := t.row(ctx, `SELECT placement FROM user_sessions WHERE id = ? AND host_pool = ?`, sessionID, pool).Scan(&rec)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("user session %q not found in host pool %q", sessionID, pool)
		}
		if err != nil {
			return err
		}
		if rec == nil {
			return notFound("user session %q has no placement record: it was not placed by the broker", sessionID)
		}
		return nil
	})
	if err != nil {
		return nil, wrap(err, "get placement %s", sessionID)
	}
	return rec, nil
}

// GetUserSession returns one session.
func (s *DB) GetUserSession(ctx context.Context, pool, id string) (*vdibroker.UserSession, error) {
	var u *vdibroker.UserSession
	err := s.read(ctx, func(t *tx) (err error) {
		u, err = t.getSession(ctx, pool, id)
		return err
	})
	return u, err
}

// ListUserSessions lists sessions by ID ascending (a UserPrefix search by
// folded user name, then ID), after f.After, at most f.Limit.
func (s *DB) ListUserSessions(ctx context.Context, f vdibroker.SessionFilter) ([]*vdibroker.UserSession, error) {
	var out []*vdibroker.UserSession
	err := s.read(ctx, func(t *tx) error {
		var us *userSearch
		if f.UserPrefix != "" {
			var err error
			if us, err = t.userSearch(ctx, f); err != nil || us == nil {
				return err // nil: the cursor's session is gone, nothing after it
			}
		}
		q, args := listSessionsQuery(s.d, f, us)
		var err error
		out, err = queryAll(ctx, t, scanSession, q, args...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list user sessions: %w", err)
	}
	return out, nil
}

// listSessionsQuery is ListUserSessions' query for f. Whatever the pool's
// history, a filter by user or by host reads one index range, never every
// session the pool ever had (a dry run once read them all):
//   - the state is a literal, never a parameter, so that both engines'
//     planners can use the partial indexes, open (openSQL) or ended
//     (endedSQL); a named open state is an extra term;
//   - a user's open sessions are the pooled ones (the R-C6 unique index
//     user_sessions_one_per_pooled_user) and the others (adopted sessions,
//     personal pools: user_sessions_open_unpooled_by_user), one half of a
//     UNION ALL each, as neither index holds the other's rows;
//   - a host's open sessions come from user_sessions_open_by_host_covering;
//   - ended sessions by user or host from user_sessions_ended_by_user and
//     user_sessions_ended_by_host (migration 00008);
//   - a pool's open sessions from user_sessions_open_by_pool (00019);
//   - a user's open sessions in every pool (no HostPool) from
//     user_sessions_open_by_user (00050, R-U3);
//   - a user search (UserPrefix) from user_sessions_open_by_user_key
//     (00046) or user_sessions_ended_by_user (00030): one range of the
//     folded names (user_key), read in the order it lists, so a page stops at its limit
//     however many names share the prefix.
//
// SQLite is told the index (INDEXED BY): without statistics its planner
// prefers user_sessions_by_pool, whose (host_pool, id) order saves the sort
// of a few rows, and walks the pool's history; and should the index go, the
// query fails rather than walk it. PostgreSQL's planner, with the
// statistics autovacuum keeps, chooses these indexes itself.
func listSessionsQuery(d *dialect, f vdibroker.SessionFilter, us *userSearch) (string, []any) {
	var where []string
	var args []any
	add := func(cond string, arg any) {
		where = append(where, cond)
		args = append(args, arg)
	}
	if f.HostPool != "" {
		add("host_pool = ?", f.HostPool)
	}
	if f.User != "" {
		add("user_key = ?", vdibroker.FoldUser(f.User)) // any case finds the user's sessions (R-E5)
	}
	key := userKey(d)
	if us != nil {
		// A page after the first starts at its cursor's key, itself in
		// the range: SQLite takes no row value as an index bound, so the
		// key alone starts the range there and the row value below
		// skips the few rows of that key before the cursor.
		if f.After == "" {
			add(key+" >= ?", us.from)
		} else {
			add(key+" >= ?", us.afterKey)
		}
		if us.to != "" {
			add(key+" < ?", us.to)
		}
	}
	ended := f.State == vdibroker.StateLoggedOff
	if ended {
		where = append(where, endedSQL)
	} else {
		where = append(where, openSQL)
		if f.State != "" {
			add("state = ?", f.State)
		}
	}
	if f.SessionHost != "" {
		add("session_host = ?", f.SessionHost)
	}
	switch {
	case us != nil && f.After != "":
		where = append(where, "("+key+", id) > (?, ?)")
		args = append(args, us.afterKey, f.After)
	case f.After != "":
		add("id > ?", f.After)
	}
	from := func(index string) string {
		if d != sqliteDialect || index == "" || (f.HostPool == "" && index != "user_sessions_open_by_user") {
			return `SELECT ` + sessionCols + ` FROM user_sessions WHERE ` + strings.Join(where, " AND ")
		}
		return `SELECT ` + sessionCols + ` FROM user_sessions INDEXED BY ` + index + ` WHERE ` + strings.Join(where, " AND ")
	}
	var q string
	order := ` ORDER BY id`
	switch {
	case us != nil && ended:
		q, order = from("user_sessions_ended_by_user"), ` ORDER BY `+key+`, id`
	case us != nil:
		q, order = from("user_sessions_open_by_user_key"), ` ORDER BY `+key+`, id`
	case f.User != "" && ended:
		q = from("user_sessions_ended_by_user")
	case f.User != "" && f.HostPool == "":
		q = from("user_sessions_open_by_user")
	case f.User != "":
		q = from("user_sessions_one_per_pooled_user") + ` AND pooled UNION ALL ` +
			from("user_sessions_open_unpooled_by_user") + ` AND NOT pooled`
		args = append(args, args...)
	case f.SessionHost != "" && ended:
		q = from("user_sessions_ended_by_host")
	case f.SessionHost != "":
		q = from("user_sessions_open_by_host_covering")
	case !ended:
		// A pool's open sessions in id order (the views' catch-up, paged
		// listings): user_sessions_open_by_pool (migration 00019), so the
		// pool's history is never walked.
		q = from("user_sessions_open_by_pool")
	default:
		q = from("")
	}
	q += order
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	return q, args
}

// userKey is the key of a user search: the user's folded name
// (vdibroker.FoldUser, R-E5), compared in byte order (PostgreSQL's column
// is COLLATE "C"), which the indexes of 00030 and 00046 hold.
func userKey(*dialect) string { return "user_key" }

// userSearch is a prefix search's bounds as the database folds them: the
// folded prefix (from), the first key past every key starting with it (to,
// "" for none) and the key of the paging cursor's session.
type userSearch struct{ from, to, afterKey string }

// userSearch folds f's prefix as the stored keys are folded, and reads
// the cursor's key; nil when the cursor's session is not in the pool.
func (t *tx) userSearch(ctx context.Context, f vdibroker.SessionFilter) (*userSearch, error) {
	us := &userSearch{from: vdibroker.FoldUser(f.UserPrefix)}
	us.to = prefixEnd(us.from)
	if f.After == "" {
		return us, nil
	}
	err := t.row(ctx, `SELECT user_key FROM user_sessions WHERE host_pool = ? AND id = ?`, f.HostPool, f.After).Scan(&us.afterKey)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return us, err
}

// prefixEnd is the least string after every string that starts with p, in
// byte order (which is code point order for UTF-8): p with its last
// character one code point on ("al" → "am"), past the surrogates, and
// shorter when that character is the last code point; "" when there is
// none.
func prefixEnd(p string) string {
	r := []rune(p)
	for i := len(r) - 1; i >= 0; i-- {
		switch {
		case r[i] == utf8.MaxRune:
			continue
		case r[i] == 0xD7FF:
			r[i] = 0xE000 // the surrogates are no characters
		default:
			r[i]++
		}
		return string(r[:i+1])
	}
	return ""
}

// openCountsQuery counts every pool's open sessions by state in one
// statement (one snapshot): the R-S1 counts of its hosts in host_counts
// (sessions), its Pending sessions from the partial index
// user_sessions_pending_by_time (migration 00005: the connecting count
// also holds the sessions a gateway turned Active before their agent
// reported them, R-GW2) and its Disconnected sessions from the partial
// index user_sessions_disconnected (migration 00008). Active is the rest.
// Neither reads a session row: counting the index of open sessions
// instead took 0.4 s at 250,000 on SQLite. The join leaves out a counts
// row whose host is gone.
const openCountsQuery = `SELECT c.host_pool, sum(c.sessions), 0, 0
	FROM host_counts c JOIN session_hosts h ON h.host_pool = c.host_pool AND h.name = c.name GROUP BY c.host_pool
	UNION ALL
	SELECT host_pool, 0, count(*), 0 FROM user_sessions WHERE state = 'Pending' AND agent_session_id = '' GROUP BY host_pool
	UNION ALL
	SELECT host_pool, 0, 0, count(*) FROM user_sessions WHERE state = 'Disconnected' GROUP BY host_pool`

// CountOpenSessions returns every pool's open sessions by state; a pool
// without open sessions is absent.
func (s *DB) CountOpenSessions(ctx context.Context) (map[string]vdibroker.OpenSessionCounts, error) {
	type sums struct{ sessions, pending, disconnected int }
	by := map[string]sums{}
	err := s.read(ctx, func(t *tx) error {
		rows, err := t.query(ctx, openCountsQuery)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var pool string
			var n sums
			if err := rows.Scan(&pool, &n.sessions, &n.pending, &n.disconnected); err != nil {
				return err
			}
			b := by[pool]
			by[pool] = sums{b.sessions + n.sessions, b.pending + n.pending, b.disconnected + n.disconnected}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("count open sessions: %w", err)
	}
	out := make(map[string]vdibroker.OpenSessionCounts, len(by))
	for pool, n := range by {
		if n.sessions == 0 {
			continue
		}
		out[pool] = vdibroker.OpenSessionCounts{Pending: n.pending, Active: n.sessions - n.pending - n.disconnected, Disconnected: n.disconnected}
	}
	return out, nil
}

// EndSession marks a session LoggedOff with reason (no-op if ended).
func (s *DB) EndSession(ctx context.Context, pool, id, reason string, now time.Time) error {
	err := s.write(ctx, func(t *tx) error {
		before, _ := t.getSession(ctx, pool, id)
		if err := t.endSession(ctx, pool, id, reason, now); err != nil {
			return err
		}
		if t.audit != nil {
			after, err := t.getSession(ctx, pool, id)
			if err != nil {
				return err
			}
			t.audited(before, after)
		}
		return nil
	})
	return wrap(err, "end session %s", id)
}

// expirePendingQuery lists the expired Pending sessions. The state is a
// literal, not a parameter: only then can either engine's planner use the
// partial index user_sessions_pending_by_time (migration 00005) instead of
// reading every open session; CROSS JOIN makes SQLite loop over the pools
// outside, so each pool's expired sessions are one range of that index.
const expirePendingQuery = `SELECT u.host_pool, u.session_host, u.id FROM host_pools p CROSS JOIN user_sessions u
	WHERE u.host_pool = p.name AND u.state = 'Pending' AND u.agent_session_id = ''
	AND u.state_time < ? - p.pending_timeout_seconds * 1000000000`

// ExpirePending ends Pending sessions never seen by their agent within
// their pool's pendingTimeoutSeconds (R-S3).
func (s *DB) ExpirePending(ctx context.Context, now time.Time) (int, error) {
	type cand struct{ pool, host, id string }
	candidates := func(t *tx) ([]cand, error) {
		rows, err := t.query(ctx, expirePendingQuery, ns(now))
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var cands []cand
		for rows.Next() {
			var c cand
			if err := rows.Scan(&c.pool, &c.host, &c.id); err != nil {
				return nil, err
			}
			cands = append(cands, c)
		}
		// Host by host below; few expire at a time, so sorting here is
		// cheaper than an index kept in host order.
		slices.SortFunc(cands, func(a, b cand) int {
			return cmp.Or(cmp.Compare(a.pool, b.pool), cmp.Compare(a.host, b.host), cmp.Compare(a.id, b.id))
		})
		return cands, rows.Err()
	}
	// Usually nothing has expired: find out without taking the writer.
	var found bool
	err := s.read(ctx, func(t *tx) error {
		cands, err := candidates(t)
		found = len(cands) > 0
		return err
	})
	if err != nil || !found {
		return 0, wrap(err, "expire pending sessions")
	}
	var ended int
	err = s.write(ctx, func(t *tx) error {
		ended = 0
		cands, err := candidates(t)
		if err != nil {
			return err
		}
		for i := 0; i < len(cands); {
			// One host at a time: lock it, end its expired sessions, fix
			// its counts once. transition is conditional on Pending, so a
			// session a heartbeat just matched is left alone.
			j := i
			for j < len(cands) && cands[j].pool == cands[i].pool && cands[j].host == cands[i].host {
				j++
			}
			c := cands[i]
			if err := t.lockHost(ctx, c.pool, c.host); err != nil {
				return err
			}
			var ds, dc int
			for _, c := range cands[i:j] {
				s1, c1, err := t.transition(ctx, c.id, vdibroker.StatePending, vdibroker.StateLoggedOff, vdibroker.EndPendingTimeout, now)
				if err != nil {
					return err
				}
				ds, dc = ds+s1, dc+c1
				if s1 != 0 {
					ended++
				}
			}
			if err := t.addCounts(ctx, c.pool, c.host, ds, dc); err != nil {
				return err
			}
			i = j
		}
		return nil
	})
	if err != nil {
		return 0, wrap(err, "expire pending sessions")
	}
	return ended, nil
}

const commandCols = `id, host_pool, session_host, type, session_id, agent_session_id, user_name,
	message, state, result, create_time`

func scanCommand(sc scanner, seq *int64) (vdibroker.Command, error) {
	var c vdibroker.Command
	var ct int64
	err := sc.Scan(&c.ID, &c.HostPool, &c.SessionHost, &c.Type, &c.SessionID, &c.AgentSessionID,
		&c.User, &c.Message, &c.State, &c.Result, &ct, seq)
	c.CreateTime = fromNS(ct)
	return c, err
}

func (t *tx) insertCommand(ctx context.Context, c *vdibroker.Command) error {
	_, err := t.exec(ctx, `INSERT INTO commands (`+commandCols+`) VALUES (?,?,?,?,?,?,?,?,?,?,?)`,
		c.ID, c.HostPool, c.SessionHost, c.Type, c.SessionID, c.AgentSessionID, c.User,
		c.Message, c.State, c.Result, ns(c.CreateTime))
	return err
}

// QueueCommand stores a command for a host's agent (R-S4). An empty ID is
// generated; the state is Queued.
func (s *DB) QueueCommand(ctx context.Context, c *vdibroker.Command) error {
	if c.ID == "" {
		c.ID = vdibroker.NewID()
	}
	if c.CreateTime.IsZero() {
		c.CreateTime = s.now()
	}
	c.State, c.Result = vdibroker.CommandQueued, ""
	err := s.write(ctx, func(t *tx) error {
		// Under the host's lock: two logoffs asked at once queue one.
		if _, err := t.getHost(ctx, c.HostPool, c.SessionHost, true); err != nil {
			return err
		}
		if c.SessionID != "" {
			u, err := t.getSession(ctx, c.HostPool, c.SessionID)
			if err != nil {
				return err
			}
			if u.SessionHost != c.SessionHost {
				return vdibroker.FieldError("sessionHost", "session %q is on host %q, not %q", u.ID, u.SessionHost, c.SessionHost)
			}
			if c.User == "" {
				c.User = u.User
			}
			if c.AgentSessionID == "" {
				c.AgentSessionID = u.AgentSessionID
			}
			if c.Type == vdibroker.CommandLogoff || c.Type == vdibroker.CommandDisconnect || c.Type == vdibroker.CommandSendMessage {
				// The same command still queued for the session is the
				// answer (R-S4, R-SEC): an end user may ask for her own
				// sessions' (R-U3), and each asked again was a row never
				// pruned while queued and one more command in the host's
				// next heartbeat answer. Each asker still has her audit
				// entry, the command before and after alike (nothing
				// queued): a helpdesk reading the trail sees who asked
				// for it, and when; an end user's asks are bounded by
				// her write budget (R-SEC).
				// A message is the same when its text is: the same
				// notice sent twice (a second click, a script run
				// again) is shown once. A logoff or disconnect is the
				// same whatever its text (the logoff the heartbeat
				// queues for a session disconnected too long has one).
				q, args := `SELECT `+commandCols+`, seq FROM commands
					WHERE session_id = ? AND type = ? AND state = ?`, []any{c.SessionID, c.Type, vdibroker.CommandQueued}
				if c.Type == vdibroker.CommandSendMessage {
					q, args = q+` AND message = ?`, append(args, c.Message)
				}
				row := t.row(ctx, q+` ORDER BY seq LIMIT 1`, args...)
				var seq int64
				queued, err := scanCommand(row, &seq)
				if err == nil {
					*c = queued
					t.audited(c, c)
					return nil
				}
				if !errors.Is(err, sql.ErrNoRows) {
					return err
				}
			}
		}
		if c.Type == vdibroker.CommandLogoff && c.SessionID != "" && c.AgentSessionID == "" {
			if err := t.supersedeUnseenLogoffs(ctx, c); err != nil {
				return err
			}
		}
		// A logoff or a disconnect of a session is never refused by the
		// bound: it is queued once per session (above), so the host's
		// sessions bound them, and messages (a Helpdesk's, say, to a
		// host that is down) must not keep a session from being logged
		// off: its user's own logoff (R-U3), an admin's, the
		// autoscaler's forced one (R-A3), which it does not ask again.
		if c.SessionID == "" || (c.Type != vdibroker.CommandLogoff && c.Type != vdibroker.CommandDisconnect) {
			if err := t.roomForCommands(ctx, c.HostPool, c.SessionHost, 1); err != nil {
				return err
			}
		}
		t.audited(nil, c)
		return t.insertCommand(ctx, c)
	})
	return wrap(err, "queue command for %s/%s", c.HostPool, c.SessionHost)
}

// supersedeUnseenLogoffs marks Failed the logoffs still queued on c's
// host of the user's other sessions its agent never reported (ended at
// the logoff: a Pending session the agent had not seen, R-S4): the agent
// finds such a logoff's session by its user, so c, queued now, does what
// each of them would. Without it a user who connected and logged off in a
// loop while her host was starting (R-GW5) left a queued row per round,
// never pruned while queued and past the host's bound (logoffs are not
// refused by it): one a host never reporting again kept for ever.
func (t *tx) supersedeUnseenLogoffs(ctx context.Context, c *vdibroker.Command) error {
	_, err := t.exec(ctx, `UPDATE commands SET state = ?, result = ?
		WHERE host_pool = ? AND session_host = ? AND type = ? AND state = ? AND agent_session_id = '' AND session_id IN
			(SELECT id FROM user_sessions WHERE host_pool = ? AND session_host = ? AND user_key = ? AND agent_session_id = '' AND `+endedSQL+`)`,
		vdibroker.CommandFailed, "superseded by command "+c.ID+", a logoff of the same user's later session",
		c.HostPool, c.SessionHost, vdibroker.CommandLogoff, vdibroker.CommandQueued,
		c.HostPool, c.SessionHost, vdibroker.FoldUser(c.User))
	return err
}

// MaxQueuedCommands bounds the commands queued for one host that its
// agent has not fetched (R-S4, R-SEC): a queued command is never pruned,
// and a host that never reports again (switched off, not deleted) would
// keep every message asked of it. A host's heartbeat answer carries its
// queued commands, so a host that reports holds few. Only messages are
// refused past it: a session's logoff and disconnect are queued once
// each (QueueCommand), whatever the host holds.
const MaxQueuedCommands = 1000

// roomForCommands refuses n more commands for host when it would then hold
// more than MaxQueuedCommands queued (Conflict, naming the host).
func (t *tx) roomForCommands(ctx context.Context, pool, host string, n int) error {
	var queued int
	err := t.row(ctx, `SELECT count(*) FROM (SELECT 1 FROM commands
		WHERE host_pool = ? AND session_host = ? AND state = ? LIMIT `+strconv.Itoa(MaxQueuedCommands)+`) q`,
		pool, host, vdibroker.CommandQueued).Scan(&queued)
	if err != nil {
		return err
	}
	if queued+n > MaxQueuedCommands {
		return vdibroker.Errorf(vdibroker.EConflict, "session host %s holds %d commands its agent has not fetched (at most %d): no more are queued until it reports again and fetches them, or is deleted",
			host, queued, MaxQueuedCommands)
	}
	return nil
}

// auditedMessages is how many sessions the audit entry of a host's
// message lists; it counts them all.
const auditedMessages = 20

// QueueHostMessage queues a SendMessage of message for each Active and
// Disconnected session of host (R-S4), in one transaction: Pending
// sessions have no logon to show it in yet. The request's audit entry is
// one for the host, bounded: the message, the count, and the first
// auditedMessages sessions.
func (s *DB) QueueHostMessage(ctx context.Context, pool, host, message string, now time.Time) (queued, already int, err error) {
	type session struct {
		ID    string `json:"id"`
		User  string `json:"user"`
		State string `json:"state"`
	}
	err = s.write(ctx, func(t *tx) error {
		queued, already = 0, 0
		// Under the host's lock, as QueueCommand: two host messages at
		// once (PostgreSQL) would each read none of the other's queued,
		// queue the same text twice and together pass the bound.
		h, err := t.getHost(ctx, pool, host, true)
		if err != nil {
			return err
		}
		open, err := t.openSessions(ctx, pool, host, h.Sessions)
		if err != nil {
			return err
		}
		listed := []session{}
		var to []vdibroker.OpenSession
		for _, o := range open {
			if o.State == vdibroker.StateActive || o.State == vdibroker.StateDisconnected {
				to = append(to, o)
			}
		}
		// The same message still queued for a session is not queued
		// again (a second click, a script run again): the session is
		// counted, as it will be shown the message.
		has := map[string]bool{}
		rows, err := t.query(ctx, `SELECT session_id FROM commands
			WHERE host_pool = ? AND session_host = ? AND state = ? AND type = ? AND message = ?`,
			pool, host, vdibroker.CommandQueued, vdibroker.CommandSendMessage, message)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			has[id] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		fresh := 0
		for _, o := range to {
			if !has[o.ID] {
				fresh++
			}
		}
		if err := t.roomForCommands(ctx, pool, host, fresh); err != nil {
			return err
		}
		wasQueued := 0
		for _, o := range to {
			if has[o.ID] {
				if wasQueued++; len(listed) < auditedMessages {
					listed = append(listed, session{o.ID, o.User, o.State})
				}
				continue
			}
			c := &vdibroker.Command{ID: vdibroker.NewID(), HostPool: pool, SessionHost: host, Type: vdibroker.CommandSendMessage,
				SessionID: o.ID, AgentSessionID: o.AgentSessionID, User: o.User, Message: message,
				State: vdibroker.CommandQueued, CreateTime: now}
			if err := t.insertCommand(ctx, c); err != nil {
				return err
			}
			if queued++; len(listed) < auditedMessages {
				listed = append(listed, session{o.ID, o.User, o.State})
			}
		}
		t.audited(nil, map[string]any{"sessionHost": host, "message": message, "queued": queued + wasQueued, "alreadyQueued": wasQueued, "sessions": listed})
		queued, already = queued+wasQueued, wasQueued
		return nil
	})
	if err != nil {
		return 0, 0, wrap(err, "queue messages for %s/%s", pool, host)
	}
	return queued, already, nil
}

// PruneHistory deletes what is older than before: ended sessions (by the
// time they ended), commands no longer queued, expired API tokens and
// registration tokens, revoked tokens' hashes, and audit entries. It
// deletes each in batches of pruneBatch rows, each its own short write, so
// a week of history does not hold the single writer (and every connect
// behind it) for seconds. It returns the sessions deleted.
func (s *DB) PruneHistory(ctx context.Context, before time.Time) (int, error) {
	total := 0
	// Each query deletes at most LIMIT ? (pruneBatch) rows older than ?.
	for _, q := range []string{
		`DELETE FROM user_sessions WHERE id IN (SELECT id FROM user_sessions WHERE ` + endedSQL + ` AND state_time < ? LIMIT ?)`,
		`DELETE FROM commands WHERE id IN (SELECT id FROM commands WHERE create_time < ? AND state <> 'Queued' LIMIT ?)`,
		// Expired API tokens and registration tokens, read by their
		// expiry's index (migration 00074).
		pruneTokensQuery,
		// Revoked tokens are told apart from unknown ones as long as
		// history is kept (R-SEC), no longer; read by revoke_time's
		// index (migration 00071).
		`DELETE FROM revoked_tokens WHERE hash IN (SELECT hash FROM revoked_tokens WHERE revoke_time < ? LIMIT ?)`,
		pruneRegistrationTokensQuery,
		// The audit trail is kept as long as history.
		`DELETE FROM audit_log WHERE seq IN (SELECT seq FROM audit_log WHERE time < ? LIMIT ?)`,
		// Autoscale evaluations too.
		`DELETE FROM autoscale_evaluations WHERE seq IN (SELECT seq FROM autoscale_evaluations WHERE time < ? LIMIT ?)`,
	} {
		for {
			var n int64
			err := s.write(ctx, func(t *tx) (err error) {
				n, err = t.exec(ctx, q, ns(before), pruneBatch)
				return err
			})
			if err != nil {
				return total, wrap(err, "prune history")
			}
			if strings.HasPrefix(q, "DELETE FROM user_sessions") {
				total += int(n)
			}
			if n < int64(pruneBatch) {
				break
			}
		}
	}
	return total, nil
}

// pruneTokensQuery and pruneRegistrationTokensQuery delete a batch of
// the tokens expired before ? (a token without expiry never is).
const (
	pruneTokensQuery             = `DELETE FROM tokens WHERE id IN (SELECT id FROM tokens WHERE expire_time < ? LIMIT ?)`
	pruneRegistrationTokensQuery = `DELETE FROM registration_tokens WHERE id IN (SELECT id FROM registration_tokens WHERE expire_time < ? LIMIT ?)`
)

// pruneBatch is how many rows one prune write deletes (a test lowers it).
var pruneBatch = 5000
