package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"slices"
	"strings"

	"github.com/vdibroker/vdibroker"
)

// A batch's heartbeats read what they need in two statements for the
// whole batch, their hosts' rows are written in a third and their queued
// commands delivered in a fourth, instead of four statements each.
// On PostgreSQL every statement is a round trip, and a full pod's
// 1,000 heartbeats a second at four statements each kept the committers
// so busy that under a load of dry runs heartbeats waited a second, and
// the connects after them with them. What is left per heartbeat is the
// writes of its counts and sessions when they change.

// beatRead is what a heartbeat reads before it writes: its host under the
// host's lock, the host's credential, and the host's open sessions.
type beatRead struct {
	host *vdibroker.SessionHost
	cred sql.NullString
	open []vdibroker.OpenSession
}

// readsAhead says which of the batch's requests (in the order they run)
// may use what the batch read before its first request ran: the heartbeats
// whose host no earlier request of the batch can have written. A heartbeat
// writes only its own host, and so does the common connect (simpleCommit);
// any other write may write any host, so the heartbeats after it read for
// themselves.
func readsAhead(live []*commitReq) []bool {
	use := make([]bool, len(live))
	seen := map[string]bool{}
	clean := true
	for i, r := range live {
		if r.beat && clean && !seen[r.key] {
			use[i] = true
		}
		seen[r.key] = true
		if !r.beat && !r.ownHost {
			clean = false
		}
	}
	return use
}

// readAhead runs the batch's reads for its heartbeats (use, readsAhead):
// one statement for their hosts and one for the hosts' open sessions per
// pool of the batch (almost always one). On PostgreSQL the first also
// takes the lock of every host the batch's heartbeats and connects write,
// in key order (live is sorted by key: pool by pool, each pool's hosts by
// name): a batch that took its heartbeats' locks first and its connects'
// after could close a cycle with another batch. (PostgreSQL's heartbeats
// have committers of their own, so there its batches with heartbeats have
// no connects; SQLite's one committer mixes them, and takes no locks.)
func readAhead(ctx context.Context, t *tx, live []*commitReq, use []bool) (map[string]*beatRead, error) {
	if !slices.Contains(use, true) {
		return nil, nil
	}
	// SQLite takes no locks: only the hosts read for are read.
	var take func(i int) bool
	if t.d.forUpdate == "" {
		take = func(i int) bool { return use[i] }
	}
	got := map[string]*beatRead{}
	for _, g := range byPool(live, take) {
		want := map[string]bool{}
		for _, i := range g.reqs {
			if use[i] {
				want[live[i].host] = true
			}
		}
		rows, err := t.query(ctx, beatHostsQuery(t.d, len(g.hosts)), g.args(t.d, 2)...)
		if err != nil {
			return nil, err
		}
		var found []string
		for rows.Next() {
			b := new(beatRead)
			var row hostRow
			if err := scanHostRow(scanMore{rows, []any{&b.cred}}, &row); err != nil {
				rows.Close()
				return nil, err
			}
			if !want[row.h.Name] {
				continue // a connect's host: locked, not needed
			}
			h, err := row.decode()
			if err != nil {
				rows.Close()
				return nil, err
			}
			b.host = h
			got[hostKey(g.pool, h.Name)] = b
			found = append(found, h.Name)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		if len(found) == 0 {
			continue
		}
		// Their open sessions, each host a range of the covering index of
		// openSessionsQuery, in its order.
		rows, err = t.query(ctx, beatSessionsQuery(t.d, len(found)), (&poolHosts{pool: g.pool, hosts: found}).args(t.d, 1)...)
		if err != nil {
			return nil, err
		}
		var host string
		sc := newOpenSessionScanner(&host)
		for rows.Next() {
			o, err := sc.scan(rows)
			if err != nil {
				rows.Close()
				return nil, err
			}
			if b := got[hostKey(g.pool, host)]; b != nil {
				if b.open == nil {
					b.open = make([]vdibroker.OpenSession, 0, max(b.host.Sessions, 1)) // the host's count of them
				}
				b.open = append(b.open, o)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return got, nil
}

// poolHosts is one pool's hosts of a batch, in the batch's order, and the
// requests (their places in the batch) that write them.
type poolHosts struct {
	pool  string
	hosts []string
	reqs  []int
}

// args is the pool, then its hosts (times times): the arguments of the
// queries below. On PostgreSQL the hosts are one array argument (each
// time), so each query is one statement text whatever the number of
// hosts: a statement is prepared and planned once per connection, not
// once per number of hosts (a restarted broker prepared hundreds).
func (g *poolHosts) args(d *dialect, times int) []any {
	a := []any{g.pool}
	for range times {
		if d == postgresDialect {
			a = append(a, g.hosts)
			continue
		}
		for _, h := range g.hosts {
			a = append(a, h)
		}
	}
	return a
}

// byPool groups the hosts of the batch's requests that have one (take
// nil: all of them) by pool, in the batch's order, each host once.
func byPool(live []*commitReq, take func(i int) bool) []*poolHosts {
	var out []*poolHosts
	seen := map[string]bool{}
	for i, r := range live {
		if r.host == "" || (take != nil && !take(i)) {
			continue
		}
		if len(out) == 0 || out[len(out)-1].pool != r.pool {
			out = append(out, &poolHosts{pool: r.pool})
		}
		g := out[len(out)-1]
		g.reqs = append(g.reqs, i)
		if k := r.key; !seen[k] {
			seen[k] = true
			g.hosts = append(g.hosts, r.host)
		}
	}
	return out
}

// deliverBatch marks the queued commands of the batch's heartbeats that
// succeeded Delivered, in one statement per pool after every request of
// the batch ran, and gives each heartbeat its host's commands
// (commitReq.deliver) in the order they were queued, with the agent's
// session id filled in where the session got one after the command was
// queued. A command queued in the batch (an R-S5 logoff of the heartbeat
// itself) goes out with it.
func deliverBatch(ctx context.Context, t *tx, live []*commitReq, results []error) error {
	type seqCmd struct {
		seq int64
		c   vdibroker.Command
	}
	for _, g := range byPool(live, func(i int) bool { return live[i].deliver != nil && results[i] == nil }) {
		rows, err := t.query(ctx, deliverQuery(t.d, len(g.hosts)),
			append(append([]any{vdibroker.CommandDelivered}, g.args(t.d, 1)...), vdibroker.CommandQueued)...)
		if err != nil {
			return err
		}
		var l []seqCmd
		for rows.Next() {
			var sc seqCmd
			if sc.c, err = scanCommand(rows, &sc.seq); err != nil {
				rows.Close()
				return err
			}
			l = append(l, sc)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		slices.SortFunc(l, func(a, b seqCmd) int { return int(a.seq - b.seq) })
		cmds := map[string][]vdibroker.Command{}
		var superseded []string
		for _, sc := range l {
			c := sc.c
			if c.AgentSessionID == "" && c.SessionID != "" {
				var agentID string
				var ended bool
				if err := t.row(ctx, `SELECT agent_session_id, `+endedSQL+` FROM user_sessions WHERE id = ?`, c.SessionID).Scan(&agentID, &ended); err == nil {
					c.AgentSessionID = agentID
				}
				if c.Type == vdibroker.CommandLogoff && c.AgentSessionID == "" && ended {
					again, err := connectedAgain(ctx, t, &c)
					if err != nil {
						return err
					}
					if again {
						superseded = append(superseded, c.ID)
						continue
					}
				}
			}
			cmds[c.SessionHost] = append(cmds[c.SessionHost], c)
		}
		if err := markSuperseded(ctx, t, superseded); err != nil {
			return err
		}
		// What does not fit one answer waits, queued, for the next.
		var later []string
		for host, l := range cmds {
			keep, rest := withinAnswer(l)
			cmds[host] = keep
			for _, c := range rest {
				later = append(later, c.ID)
			}
		}
		if err := requeue(ctx, t, later); err != nil {
			return err
		}
		// Two heartbeats of one host in one batch: the last one carries the
		// commands (both are answered after the commit).
		last := map[string]int{}
		for _, i := range g.reqs {
			last[live[i].host] = i
		}
		for _, i := range g.reqs {
			r := live[i]
			if last[r.host] == i {
				r.deliver(cmds[r.host])
			} else {
				r.deliver(nil)
			}
		}
	}
	return nil
}

// maxAnswerCommands is how many bytes of commands, as JSON, one heartbeat
// answer carries (R-S4): the agent reads at most 8 MiB of an answer
// (agent.maxResponse) and fails one longer whole, the commands in it
// lost, marked delivered. A host's messages (up to 4,096 characters each,
// one a session) reach that in a few messages to a full host.
const maxAnswerCommands = 4 << 20

// withinAnswer splits a host's commands, in the order queued, into those
// one answer carries (maxAnswerCommands; the first always) and the rest.
func withinAnswer(l []vdibroker.Command) (keep, rest []vdibroker.Command) {
	n := 0
	for i, c := range l {
		b, _ := json.Marshal(c)
		if n += len(b) + 1; n > maxAnswerCommands && i > 0 {
			return l[:i], l[i:]
		}
	}
	return l, nil
}

// connectedAgain reports whether the user of c, a logoff of a session the
// host's agent never reported (a Pending session, ended at the logoff,
// R-S4), has an open session on that host the broker placed since c was
// queued. The agent finds such a logoff's session by its user: delivered,
// it would log off the session she connected to again (her logon on a
// host that was starting when she logged off, R-GW5). An adopted session
// (R-S2) is no connect again: it is the logon the logoff was queued for,
// completed after it was asked and reported with the heartbeat that is
// to carry the logoff (its Pending session ended, nothing matched it).
// "Since" is by the times, which two replicas' clocks wrote, so it
// allows for the replicas' tolerance (vdibroker.LateCommit): a connect
// again through a replica whose clock is behind still counts. The times
// are needed: an open placed session of the user on the host is not
// always a later connect. A session placed during a replica's outage is
// written when its store is back (R-OUT3), after a logoff she asked
// through another replica later than that connect, and a personal
// pool's user may hold two placed sessions on one host (R-C6 binds
// pooled pools only): neither is a connect again.
func connectedAgain(ctx context.Context, t *tx, c *vdibroker.Command) (bool, error) {
	var n int
	err := t.row(ctx, `SELECT count(*) FROM (SELECT 1 FROM user_sessions
		WHERE host_pool = ? AND session_host = ? AND user_key = ? AND create_time > ? AND NOT adopted AND `+openSQL+` LIMIT 1) s`,
		c.HostPool, c.SessionHost, vdibroker.FoldUser(c.User), ns(c.CreateTime.Add(-vdibroker.LateCommit))).Scan(&n)
	return n > 0, err
}

// markSuperseded marks Failed the logoffs of ids, not delivered because
// their user connected again (connectedAgain).
func markSuperseded(ctx context.Context, t *tx, ids []string) error {
	for _, id := range ids {
		if _, err := t.exec(ctx, `UPDATE commands SET state = ?, result = ? WHERE id = ?`, vdibroker.CommandFailed,
			"not delivered: the user connected to this host again after the logoff was asked", id); err != nil {
			return err
		}
	}
	return nil
}

// requeue puts the commands of ids back in the queue, for the next
// heartbeat (withinAnswer).
func requeue(ctx context.Context, t *tx, ids []string) error {
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), 500)]
		ids = ids[len(chunk):]
		args := []any{vdibroker.CommandQueued}
		if t.d == postgresDialect {
			args = append(args, chunk)
		} else {
			for _, id := range chunk {
				args = append(args, id)
			}
		}
		if _, err := t.exec(ctx, `UPDATE commands SET state = ? WHERE id `+oneOf(t.d, len(chunk)), args...); err != nil {
			return err
		}
	}
	return nil
}

// beatHostsQuery reads n hosts of one pool (args: poolHosts.args, twice)
// with their counts and credentials, by key in both tables (the list is
// given for each table: PostgreSQL does not carry it across the join, and
// read all the pool's counts instead), and on PostgreSQL locks them in
// name order (counts, then row, as getHostAnd).
func beatHostsQuery(d *dialect, n int) string {
	q := `SELECT ` + hostCols + `, credential_hash FROM ` + hostFrom + `
		WHERE host_pool = ? AND session_hosts.name ` + oneOf(d, n) + ` AND host_counts.name ` + oneOf(d, n) + ` ORDER BY name`
	if d.forUpdate != "" {
		q += ` FOR UPDATE OF host_counts, session_hosts`
	}
	return q
}

// beatSessionsQuery is openSessionsQuery for n hosts of one pool at once
// (args: poolHosts.args), each host a range of
// user_sessions_open_by_host_covering.
func beatSessionsQuery(d *dialect, n int) string {
	return `SELECT session_host, id, user_name, state, agent_session_id, create_time, state_time, logoff_queued
		FROM user_sessions WHERE host_pool = ? AND session_host ` + oneOf(d, n) + ` AND ` + openSQL + `
		ORDER BY create_time, id`
}

// deliverQuery marks the queued commands of n hosts of one pool Delivered
// (args: the Delivered state, poolHosts.args, the Queued state), each host
// a range of commands_by_host.
func deliverQuery(d *dialect, n int) string {
	return `UPDATE commands SET state = ?
		WHERE host_pool = ? AND session_host ` + oneOf(d, n) + ` AND state = ?
		RETURNING ` + commandCols + `, seq`
}

// oneOf is the condition that a value is one of n arguments: "= ANY(?)"
// of one array argument on PostgreSQL, "IN (?,?,?)" on SQLite.
func oneOf(d *dialect, n int) string {
	if d == postgresDialect {
		return `= ANY(?)`
	}
	return `IN ` + params(n)
}

// params is a list of n placeholders: "(?,?,?)".
func params(n int) string {
	return "(" + strings.TrimSuffix(strings.Repeat("?,", n), ",") + ")"
}

// hostBeat is a heartbeat's write of its host's row, waiting in tx.beats
// for flushBeats. The power state is not in it: a heartbeat that changes
// it writes its row at once (ApplyHeartbeat).
type hostBeat struct {
	pool, host      string
	at              int64
	metrics         *string
	metricsSessions int
	policy          string
	shuttingDown    bool
	healthError     string
	remoteApps      string
}

// flushBeats writes the rows of the heartbeats waiting in t.beats, in one
// statement. The batch calls it before any request that may read a host's
// row (every request but a heartbeat with the batch's reads and a
// simpleCommit, which reads no host's row) and before it delivers the
// commands.
func (t *tx) flushBeats(ctx context.Context) error {
	if len(t.beats) == 0 {
		return nil
	}
	var args []any
	if t.d == postgresDialect {
		// One array a column (beatsUpdateQuery).
		n := len(t.beats)
		pools, hosts, policies, errs, apps := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		at, sessions := make([]int64, n), make([]int64, n)
		metrics, down := make([]*string, n), make([]bool, n)
		for i, b := range t.beats {
			pools[i], hosts[i], at[i], metrics[i] = b.pool, b.host, b.at, b.metrics
			sessions[i], policies[i], down[i], errs[i] = int64(b.metricsSessions), b.policy, b.shuttingDown, b.healthError
			apps[i] = b.remoteApps
		}
		args = []any{pools, hosts, at, metrics, sessions, policies, down, errs, apps}
	} else {
		for _, b := range t.beats {
			args = append(args, b.pool, b.host, b.at, b.metrics, b.metricsSessions, b.policy, b.shuttingDown, b.healthError, b.remoteApps)
		}
	}
	_, err := t.exec(ctx, beatsUpdateQuery(t.d, len(t.beats)), args...)
	t.beats = t.beats[:0]
	return err
}

// beatsUpdateQuery writes n heartbeats' host rows, each found by key.
// Args: pool, host, time, metrics, metrics sessions, policy, shutting
// down, health error, remote apps (R-E12); on SQLite for each heartbeat (a VALUES list, its
// values cast: a VALUES list has no column types of its own), on
// PostgreSQL each one array of all the heartbeats' values (unnest).
func beatsUpdateQuery(d *dialect, n int) string {
	if d == postgresDialect {
		return `UPDATE session_hosts SET last_heartbeat = v.at, metrics = v.metrics, metrics_sessions = v.metrics_sessions,
		policy = v.policy, shutting_down = v.shutting_down, health_error = v.health_error, remote_apps = v.remote_apps
		FROM unnest(CAST(? AS TEXT[]), CAST(? AS TEXT[]), CAST(? AS BIGINT[]), CAST(? AS TEXT[]), CAST(? AS BIGINT[]),
			CAST(? AS TEXT[]), CAST(? AS BOOLEAN[]), CAST(? AS TEXT[]), CAST(? AS TEXT[]))
			AS v(host_pool, name, at, metrics, metrics_sessions, policy, shutting_down, health_error, remote_apps)
		WHERE session_hosts.host_pool = v.host_pool AND session_hosts.name = v.name`
	}
	const row = `(CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS BIGINT), CAST(? AS TEXT), CAST(? AS BIGINT), CAST(? AS TEXT), CAST(? AS BOOLEAN), CAST(? AS TEXT), CAST(? AS TEXT))`
	return `UPDATE session_hosts SET last_heartbeat = v.column3, metrics = v.column4, metrics_sessions = v.column5,
		policy = v.column6, shutting_down = v.column7, health_error = v.column8, remote_apps = v.column9
		FROM (VALUES ` + strings.TrimSuffix(strings.Repeat(row+",", n), ",") + `) AS v
		WHERE session_hosts.host_pool = v.column1 AND session_hosts.name = v.column2`
}
