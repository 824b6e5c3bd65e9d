package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/vdibroker/vdibroker"
)

const hostCols = `host_pool, name, address, protocols, standard_features, allow_new_session,
	assigned_users, last_heartbeat, sessions, connecting_sessions, metrics, metrics_sessions,
	policy, shutting_down, health_error, create_time, power_state, power_state_time, autoscale_drain, remote_apps`

// hostFrom is where hostCols are read: a host's row and its R-S1 counts,
// which live in a narrow table of their own (migration 00007) because
// every connect changes them.
const hostFrom = `session_hosts JOIN host_counts USING (host_pool, name)`

// Reads of hosts with their counts; each must find its rows by key in both
// tables, whatever the number of hosts.
const (
	hostByKeyQuery        = `SELECT ` + hostCols + ` FROM ` + hostFrom + ` WHERE host_pool = ? AND name = ?`
	hostByKeyCredQuery    = `SELECT ` + hostCols + `, credential_hash FROM ` + hostFrom + ` WHERE host_pool = ? AND name = ?`
	hostsOfPoolQuery      = `SELECT ` + hostCols + ` FROM ` + hostFrom + ` WHERE host_pool = ? ORDER BY name`
	hostByCredentialQuery = `SELECT ` + hostCols + ` FROM ` + hostFrom + ` WHERE credential_hash = ?`
	hostsPageQuery        = `SELECT ` + hostCols + ` FROM ` + hostFrom + ` WHERE host_pool = ? AND name > ? ORDER BY name LIMIT ?`
)

func scanHost(sc scanner) (*vdibroker.SessionHost, error) {
	var r hostRow
	if err := scanHostRow(sc, &r); err != nil {
		return nil, err
	}
	return r.decode()
}

// hostRow is a host as read, its JSON columns not yet decoded: a batch's
// read of its hosts locks and reads its connects' hosts too, and decodes
// only its heartbeats' (readAhead).
type hostRow struct {
	h                           vdibroker.SessionHost
	protocols, assigned, policy string
	metrics                     sql.NullString
}

func scanHostRow(sc scanner, r *hostRow) error {
	h := &r.h
	var hb sql.NullInt64
	var ct, pt int64
	if err := sc.Scan(&h.HostPool, &h.Name, &h.Address, &r.protocols, &h.StandardFeatures,
		&h.AllowNewSession, &r.assigned, &hb, &h.Sessions, &h.ConnectingSessions, &r.metrics,
		&h.MetricsSessions, &r.policy, &h.ShuttingDown, &h.HealthError, &ct,
		&h.PowerState, &pt, &h.AutoscaleDrain, &h.RemoteApps); err != nil {
		return err
	}
	if pt != 0 {
		at := fromNS(pt)
		h.PowerStateTime = &at
	}
	h.LastHeartBeat = fromNSPtr(hb)
	h.CreateTime = fromNS(ct)
	return nil
}

// decode decodes the row's JSON columns and returns the host.
func (r *hostRow) decode() (*vdibroker.SessionHost, error) {
	h := &r.h
	if err := json.Unmarshal([]byte(r.protocols), &h.Protocols); err != nil {
		return nil, fmt.Errorf("host %q: protocols: %w", h.Name, err)
	}
	if err := json.Unmarshal([]byte(r.assigned), &h.AssignedUsers); err != nil {
		return nil, fmt.Errorf("host %q: assigned_users: %w", h.Name, err)
	}
	if err := json.Unmarshal([]byte(r.policy), &h.Policy); err != nil {
		return nil, fmt.Errorf("host %q: policy: %w", h.Name, err)
	}
	if r.metrics.Valid {
		h.Metrics = new(vdibroker.Metrics)
		if err := json.Unmarshal([]byte(r.metrics.String), h.Metrics); err != nil {
			return nil, fmt.Errorf("host %q: metrics: %w", h.Name, err)
		}
	}
	if h.Protocols == nil {
		h.Protocols = []string{}
	}
	if h.AssignedUsers == nil {
		h.AssignedUsers = []string{}
	}
	return h, nil
}

// scanMore scans the columns a scanner's caller expects, then more.
type scanMore struct {
	sc   scanner
	more []any
}

func (s scanMore) Scan(dest ...any) error { return s.sc.Scan(append(dest, s.more...)...) }

// list encodes a string list as JSON, never "null" (the empty list is "[]",
// which CommitPlacement's assignment condition relies on).
func list(l []string) string {
	if len(l) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(l)
	return string(b)
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only domain structs of plain fields are encoded
	}
	return string(b)
}

// getHost reads a host; lock takes its row lock (PostgreSQL), which every
// transaction changing the host's sessions takes first.
func (t *tx) getHost(ctx context.Context, pool, name string, lock bool) (*vdibroker.SessionHost, error) {
	return t.getHostAnd(ctx, pool, name, lock)
}

// getHostAnd is getHost that also reads the credential hash into cred, if
// given (a *sql.NullString).
func (t *tx) getHostAnd(ctx context.Context, pool, name string, lock bool, cred ...any) (*vdibroker.SessionHost, error) {
	q := hostByKeyQuery
	if len(cred) > 0 {
		q = hostByKeyCredQuery
	}
	if lock && t.d.forUpdate != "" {
		// The host's lock is its counts row (see lockHost); every writer
		// of the host's row takes it first. The read takes it, and the
		// host's row after it (FOR UPDATE locks in the order the clause
		// names them: counts, row, as everywhere). Both are locked, so a
		// read that had to wait returns both rows as the other writer
		// left them: PostgreSQL re-reads after a wait only the rows it
		// locks, and a read that locked only the counts would return the
		// host's row as it was before the wait (an UpdateSessionHost
		// behind another replica's change would write the old address
		// back). One statement, not a lock and then a read: a heartbeat
		// is a few round trips, and this was one of them.
		q += ` FOR UPDATE OF host_counts, session_hosts`
	}
	var sc scanner = t.row(ctx, q, pool, name)
	if len(cred) > 0 {
		sc = scanMore{sc, cred}
	}
	h, err := scanHost(sc)
	if errors.Is(err, sql.ErrNoRows) {
		// Look-ups are by the name as written, which is unique; one that
		// misses names a host whose name differs only in case or a
		// trailing dot, which is the machine the caller likely meant
		// (the creates refuse such a name, sameNameConflict).
		other, err := t.sameNameHost(ctx, pool, name)
		if err != nil {
			return nil, fmt.Errorf("get host %s/%s: %w", pool, name, err)
		}
		if other != "" {
			return nil, &hostNotFound{vdibroker.Errorf(vdibroker.ENotFound,
				"session host %q not found in host pool %q, which has %q (host names are unique ignoring case and a trailing dot; a look-up takes the name as written)",
				name, pool, other), other}
		}
		return nil, notFound("session host %q not found in host pool %q", name, pool)
	}
	if err != nil {
		return nil, fmt.Errorf("get host %s/%s: %w", pool, name, err)
	}
	return h, nil
}

// hostNameKeySQL is vdibroker.HostNameKey in SQL, written exactly as in
// the expression of the unique index session_hosts_name_key (migration
// 00077), so that both engines find a host by it with that index.
const hostNameKeySQL = `lower(CASE WHEN substr(name, length(name), 1) = '.' THEN substr(name, 1, length(name) - 1) ELSE name END)`

// sameNameQuery finds another host of a pool whose name has the given
// key (R-D3: the index holds one per key, but for the twins a store held
// before 00077): the one that kept the key (an empty tiebreak), else the first
// by name of those kept apart (whose tiebreak is their name). Ordered by
// the index's own last column, so that the order takes no other index.
const sameNameQuery = `SELECT name FROM session_hosts WHERE host_pool = ? AND ` + hostNameKeySQL + ` = ? AND name <> ?
	ORDER BY name_key_tiebreak LIMIT 1`

// deletedHostQuery finds the last delete of a host of a pool whose name
// has the given key (R-SEC: a registration token issued before it does
// not bring the machine back under any case of its name), in the index
// deleted_hosts_name_key (migration 00077).
const deletedHostQuery = `SELECT name, delete_time FROM deleted_hosts WHERE host_pool = ? AND ` + hostNameKeySQL + ` = ?
	ORDER BY delete_time DESC LIMIT 1`

// sameNameHost is the name of a host of pool other than name whose name
// is name's ignoring case and a trailing dot, or "" when there is none.
func (t *tx) sameNameHost(ctx context.Context, pool, name string) (string, error) {
	var other string
	err := t.row(ctx, sameNameQuery, pool, vdibroker.HostNameKey(name), name).Scan(&other)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return other, err
}

// hostNotFound is the NotFound of a host whose name, ignoring case and a
// trailing dot, is another host's (sameName).
type hostNotFound struct {
	err      *vdibroker.Error
	sameName string
}

func (e *hostNotFound) Error() string { return e.err.Error() }
func (e *hostNotFound) Unwrap() error { return e.err }

// sameNameOf is the name of the host that a getHost's NotFound err found
// under the same name ignoring case and a trailing dot, or "".
func sameNameOf(err error) string {
	var nf *hostNotFound
	if errors.As(err, &nf) {
		return nf.sameName
	}
	return ""
}

// sameNameConflict refuses to create host name in pool beside other, the
// same name ignoring case and one trailing dot (R-SEC): Windows and DNS
// take both for one machine. It is the 409 of registering a name that is
// registered already, naming the request's field.
func sameNameConflict(field, pool, name, other string) error {
	return &vdibroker.Error{Code: vdibroker.EConflict, Field: field, Message: fmt.Sprintf(
		"session host name %q is taken in host pool %q by session host %q (host names are compared ignoring case and one trailing dot, "+
			"as Windows and DNS compare them): register the machine as %q, or delete that host first", name, pool, other, other)}
}

// sameNameTokenConflict refuses a registration token for one session
// host, name, in pool beside other, the same name ignoring case and one
// trailing dot: every registration it allows would be refused
// (sameNameConflict). It is the same 409, naming the request's field.
func sameNameTokenConflict(pool, name, other string) error {
	return &vdibroker.Error{Code: vdibroker.EConflict, Field: "sessionHost", Message: fmt.Sprintf(
		"session host name %q is taken in host pool %q by session host %q (host names are compared ignoring case and one trailing dot, "+
			"as Windows and DNS compare them), so a token for it would register nothing: issue the token for %q, or delete that host first", name, pool, other, other)}
}

// lockHost takes a host's lock, the row lock of its counts (a no-op on
// SQLite, whose writers are serialised). Every transaction that changes a
// host's sessions, counts or row takes it first; a connect takes it with
// its conditional increment (takeSlotQuery). Lock order everywhere: the
// host's counts, its row, then its sessions.
func (t *tx) lockHost(ctx context.Context, pool, name string) error {
	if t.d.forUpdate == "" {
		return nil
	}
	_, err := t.exec(ctx, `SELECT name FROM host_counts WHERE host_pool = ? AND name = ?`+t.d.forUpdate, pool, name)
	return err
}

// addCounts changes a host's R-S1 counts by the given deltas.
func (t *tx) addCounts(ctx context.Context, pool, name string, sessions, connecting int) error {
	if sessions == 0 && connecting == 0 {
		return nil
	}
	t.touch(pool, name)
	_, err := t.exec(ctx, `UPDATE host_counts SET sessions = sessions + ?, connecting_sessions = connecting_sessions + ?
		WHERE host_pool = ? AND name = ?`, sessions, connecting, pool, name)
	return err
}

// insertCounts adds a new host's counts row: no sessions, and drain mode
// as allowNew says. A row left behind by a host deleted by an older
// version (which did not know host_counts) is replaced.
func (t *tx) insertCounts(ctx context.Context, pool, name string, allowNew bool) error {
	_, err := t.exec(ctx, `INSERT INTO host_counts (host_pool, name, sessions, connecting_sessions, new_sessions_allowed)
		VALUES (?, ?, 0, 0, ?) ON CONFLICT (host_pool, name) DO UPDATE
		SET sessions = 0, connecting_sessions = 0, new_sessions_allowed = excluded.new_sessions_allowed`,
		pool, name, allowNew)
	return err
}

// writeAdminFields writes a host's admin fields; the caller holds the
// host's lock.
func (t *tx) writeAdminFields(ctx context.Context, h *vdibroker.SessionHost) error {
	t.touch(h.HostPool, h.Name)
	_, err := t.exec(ctx, `UPDATE session_hosts SET address = ?, protocols = ?, standard_features = ?,
		allow_new_session = ?, assigned_users = ? WHERE host_pool = ? AND name = ?`,
		h.Address, list(h.Protocols), h.StandardFeatures, h.AllowNewSession, list(h.AssignedUsers),
		h.HostPool, h.Name)
	if err != nil {
		return err
	}
	if err := t.writeDrain(ctx, h); err != nil { // store/drain.go
		return err
	}
	return t.syncNewSessionsAllowed(ctx, h.HostPool, h.Name)
}

// syncNewSessionsAllowed writes the copy of the host's drains the
// connect's conditional increment checks (takeSlotQuery): new sessions
// are allowed unless an admin (allow_new_session) or the autoscaler
// (autoscale_drain, R-A3) drained the host, or it is being stopped or was
// stopped (power_state Stopping or Stopped, R-H1 Shutdown), so a connect
// decided on a view from before a stop cannot land on the host the stop
// is taking down. The caller holds its lock.
func (t *tx) syncNewSessionsAllowed(ctx context.Context, pool, name string) error {
	_, err := t.exec(ctx, `UPDATE host_counts SET new_sessions_allowed = (SELECT allow_new_session AND NOT autoscale_drain
		AND power_state NOT IN ('Stopping', 'Stopped')
		FROM session_hosts WHERE session_hosts.host_pool = host_counts.host_pool AND session_hosts.name = host_counts.name)
		WHERE host_pool = ? AND name = ?`, pool, name)
	return err
}

// PutSessionHost creates or replaces a host's admin fields.
func (s *DB) PutSessionHost(ctx context.Context, h *vdibroker.SessionHost) (created bool, err error) {
	err = s.write(ctx, func(t *tx) error {
		pool, err := t.getPool(ctx, h.HostPool)
		if err != nil {
			return err
		}
		old, err := t.getHost(ctx, h.HostPool, h.Name, true)
		switch {
		case sameNameOf(err) != "":
			return sameNameConflict("name", h.HostPool, h.Name, sameNameOf(err))
		case vdibroker.ErrorCode(err) == vdibroker.ENotFound:
			created = true
			t.touch(h.HostPool, h.Name)
			// A personal desktop awaits a registration token issued for
			// it (R-SEC): its name carries its users.
			_, err = t.exec(ctx, `INSERT INTO session_hosts (host_pool, name, address, protocols,
				standard_features, allow_new_session, assigned_users, policy, create_time, awaits_host_token)
				VALUES (?,?,?,?,?,?,?,?,?,?)`,
				h.HostPool, h.Name, h.Address, list(h.Protocols), h.StandardFeatures,
				h.AllowNewSession, list(h.AssignedUsers), jsonText(h.Policy), ns(h.CreateTime), pool.HostPoolType == vdibroker.Personal)
			if err == nil {
				err = t.insertCounts(ctx, h.HostPool, h.Name, h.AllowNewSession)
			}
			if err != nil && errors.Is(err, errUnique) {
				return errRaced
			}
			// The audit entry's host has its status (R-H1), evaluated
			// as a read would: one never heard from.
			after := *h // the caller's host keeps what it had
			after.Status = vdibroker.HostStatus(h, pool.HeartbeatTimeout(), s.now())
			t.audited(nil, &after)
			return err
		case err != nil:
			return err
		}
		created = false
		h.CreateTime = old.CreateTime
		// A replace keeps the host's heartbeat and power: its status,
		// before and after, is the one it had (R-H1).
		old.Status = vdibroker.HostStatus(old, pool.HeartbeatTimeout(), s.now())
		after := *h
		after.Status = old.Status
		t.audited(old, &after)
		return t.writeAdminFields(ctx, h)
	})
	if err != nil {
		return false, wrap(err, "put session host %s/%s", h.HostPool, h.Name)
	}
	return created, nil
}

// UpdateSessionHost reads a host, lets fn change it and writes its admin
// fields back, in one transaction. An error from fn changes nothing.
func (s *DB) UpdateSessionHost(ctx context.Context, pool, name string, fn func(*vdibroker.SessionHost) error) (*vdibroker.SessionHost, error) {
	var out *vdibroker.SessionHost
	err := s.write(ctx, func(t *tx) error {
		h, err := t.getHost(ctx, pool, name, true)
		if err != nil {
			return err
		}
		before := *h
		if err := fn(h); err != nil {
			return err
		}
		// The key is not fn's to change.
		h.HostPool, h.Name = pool, name
		if err := t.writeAdminFields(ctx, h); err != nil {
			return err
		}
		if out, err = t.getHost(ctx, pool, name, false); err != nil {
			return err
		}
		// The status fn evaluated, which no admin field changes (the
		// audit entry's before.status was empty).
		before.Status, out.Status = h.Status, h.Status
		t.audited(&before, out)
		return nil
	})
	if err != nil {
		return nil, wrap(err, "update session host %s/%s", pool, name)
	}
	return out, nil
}

// GetSessionHost returns one host with its current counts.
func (s *DB) GetSessionHost(ctx context.Context, pool, name string) (*vdibroker.SessionHost, error) {
	var h *vdibroker.SessionHost
	err := s.read(ctx, func(t *tx) (err error) {
		if h, err = t.getHost(ctx, pool, name, false); err == nil {
			err = t.fillDrains(ctx, h) // store/drain.go
		}
		return err
	})
	return h, err
}

// ListSessionHosts lists a pool's hosts in query order (NotFound when the
// pool does not exist).
func (s *DB) ListSessionHosts(ctx context.Context, pool string) ([]*vdibroker.SessionHost, error) {
	out, err := s.hostsOf(ctx, pool, hostsOfPoolQuery, pool)
	return out, wrap(err, "list session hosts of %q", pool)
}

// hostStatesQuery reads what ListHostStates fills: no JSON column, so a
// 10,000-host pool's summary decodes no metrics, policies or protocols.
const hostStatesQuery = `SELECT host_pool, name, allow_new_session, last_heartbeat, sessions, connecting_sessions,
	shutting_down, health_error, power_state, autoscale_drain, remote_apps FROM ` + hostFrom + ` WHERE host_pool = ? ORDER BY name`

// ListHostStates implements vdibroker.Store.
func (s *DB) ListHostStates(ctx context.Context, pool string) ([]*vdibroker.SessionHost, error) {
	out, err := s.hostRowsOf(ctx, pool, func(sc scanner) (*vdibroker.SessionHost, error) {
		h := new(vdibroker.SessionHost)
		var hb sql.NullInt64
		if err := sc.Scan(&h.HostPool, &h.Name, &h.AllowNewSession, &hb, &h.Sessions, &h.ConnectingSessions,
			&h.ShuttingDown, &h.HealthError, &h.PowerState, &h.AutoscaleDrain, &h.RemoteApps); err != nil {
			return nil, err
		}
		h.LastHeartBeat = fromNSPtr(hb)
		return h, nil
	}, hostStatesQuery, pool)
	return out, wrap(err, "list host states of %q", pool)
}

// sharedHostsQuery reads what ListSharedHosts fills, of the hosts of a
// pool (%s: the dialect's assignedCount) whose list has more than one
// entry. A list of two entries or more has a comma between them, so the
// LIKE leaves out, unparsed, the hosts of one user or none that a
// Persistent pool is mostly made of; the count decides for the rest (a
// comma may be inside a user's name). Only session_hosts is read: no
// counts, metrics or drains.
const sharedHostsQuery = `SELECT host_pool, name, assigned_users FROM session_hosts
	WHERE host_pool = ? AND assigned_users LIKE '%%,%%' AND %s > 1 ORDER BY name`

// ListSharedHosts implements vdibroker.Store.
func (s *DB) ListSharedHosts(ctx context.Context, pool string) ([]*vdibroker.SessionHost, error) {
	out, err := s.hostRowsOf(ctx, pool, func(sc scanner) (*vdibroker.SessionHost, error) {
		h := new(vdibroker.SessionHost)
		var assigned string
		if err := sc.Scan(&h.HostPool, &h.Name, &assigned); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(assigned), &h.AssignedUsers); err != nil {
			return nil, fmt.Errorf("host %q: assigned_users: %w", h.Name, err)
		}
		return h, nil
	}, fmt.Sprintf(sharedHostsQuery, s.d.assignedCount), pool)
	return out, wrap(err, "list the shared hosts of %q", pool)
}

// hostRowsOf runs a query of some of pool's columns over its hosts, each
// row read by scan; NotFound when the pool is not. hostsOf reads hosts
// in full.
func (s *DB) hostRowsOf(ctx context.Context, pool string, scan func(scanner) (*vdibroker.SessionHost, error), q string, args ...any) ([]*vdibroker.SessionHost, error) {
	var out []*vdibroker.SessionHost
	err := s.read(ctx, func(t *tx) error {
		if err := t.poolExists(ctx, pool); err != nil {
			return err
		}
		var err error
		out, err = queryAll(ctx, t, scan, q, args...)
		return err
	})
	return out, err
}

// poolsWithoutRemoteAppsQuery names, of the pools of a JSON list, those
// with a host and none whose agent did not say No (R-E12). It starts from
// the list, not from host_pools: a pool not asked about is not read (a
// store of pools of Linux hosts that all say No, none in this feed, costs
// nothing). Each pool is two scalar subqueries, each a probe of
// session_hosts' primary key (host_pool, name) that stops at its first
// row: the first host of a pool that can, or did not say, answers the
// second; only a pool whose hosts all say No is read to its end. Scalar
// subqueries, not EXISTS: PostgreSQL turns an EXISTS into a join it may
// plan as a walk of every pool's hosts. A pool that does not exist has
// no host.
const poolsWithoutRemoteAppsQuery = `WITH asked(name) AS (%s)
	SELECT DISTINCT a.name FROM asked a
	WHERE (SELECT 1 FROM session_hosts h WHERE h.host_pool = a.name ORDER BY h.name LIMIT 1) IS NOT NULL
	AND (SELECT 1 FROM session_hosts h WHERE h.host_pool = a.name AND h.remote_apps <> '` + vdibroker.RemoteAppsNo + `' ORDER BY h.name LIMIT 1) IS NULL
	ORDER BY a.name`

// PoolsWithoutRemoteApps implements vdibroker.Store.
func (s *DB) PoolsWithoutRemoteApps(ctx context.Context, pools []string) ([]string, error) {
	if len(pools) == 0 {
		return nil, nil
	}
	var out []string
	err := s.read(ctx, func(t *tx) (err error) {
		out, err = queryAll(ctx, t, func(sc scanner) (name string, err error) {
			err = sc.Scan(&name)
			return name, err
		}, fmt.Sprintf(poolsWithoutRemoteAppsQuery, s.d.jsonStrings), list(pools))
		return err
	})
	return out, wrap(err, "list the pools whose hosts cannot run RemoteApps")
}

// ListSessionHostsPage implements vdibroker.Store.
func (s *DB) ListSessionHostsPage(ctx context.Context, pool, after string, limit int) ([]*vdibroker.SessionHost, error) {
	if limit <= 0 {
		return nil, vdibroker.Errorf(vdibroker.EInvalid, "limit must be positive")
	}
	out, err := s.hostsOf(ctx, pool, hostsPageQuery, pool, after, limit)
	return out, wrap(err, "list session hosts of %q after %q", pool, after)
}

// poolExists is NotFound unless the pool exists: a read of its hosts that
// finds none tells an empty pool from a missing one.
func (t *tx) poolExists(ctx context.Context, pool string) error {
	var n int
	if err := t.row(ctx, `SELECT count(*) FROM host_pools WHERE name = ?`, pool).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return notFound("host pool %q not found", pool)
	}
	return nil
}

// hostsOf runs a query of pool's hosts; NotFound when the pool is not.
func (s *DB) hostsOf(ctx context.Context, pool, q string, args ...any) ([]*vdibroker.SessionHost, error) {
	var out []*vdibroker.SessionHost
	err := s.read(ctx, func(t *tx) error {
		if err := t.poolExists(ctx, pool); err != nil {
			return err
		}
		var err error
		if out, err = queryAll(ctx, t, scanHost, q, args...); err == nil {
			err = t.fillDrains(ctx, out...) // store/drain.go
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteSessionHost deletes a host, which revokes its credential (it lives
// in the host's row). Open sessions refuse the delete unless force, which
// ends them (reason HostDeleted).
func (s *DB) DeleteSessionHost(ctx context.Context, pool, name string, force bool) error {
	err := s.write(ctx, func(t *tx) error {
		h, err := t.getHost(ctx, pool, name, true)
		if err != nil {
			return err
		}
		// The host's credential is revoked when this commits (R-SEC).
		t.touch(pool, name)
		t.audited(h, nil)
		if h.Sessions > 0 && !force {
			them := "them"
			if h.Sessions == 1 {
				them = "it"
			}
			return vdibroker.Errorf(vdibroker.EConflict, "session host %q has %s; deleting it would end %s. Delete with force (?force=true, vdibroker sessionhost delete --force) to do so",
				name, plural(int64(h.Sessions), "open session"), them)
		}
		if _, err := t.exec(ctx, `UPDATE user_sessions SET state = 'LoggedOff', ended = TRUE, end_reason = 'HostDeleted', state_time = ?
			WHERE host_pool = ? AND session_host = ? AND `+openSQL, ns(s.now()), pool, name); err != nil {
			return err
		}
		if _, err := t.exec(ctx, `DELETE FROM commands WHERE host_pool = ? AND session_host = ?`, pool, name); err != nil {
			return err
		}
		if _, err := t.exec(ctx, `DELETE FROM host_counts WHERE host_pool = ? AND name = ?`, pool, name); err != nil {
			return err
		}
		if _, err = t.exec(ctx, `DELETE FROM session_hosts WHERE host_pool = ? AND name = ?`, pool, name); err != nil {
			return err
		}
		// Its agent cannot bring it back with a token issued before now.
		if _, err := t.exec(ctx, `DELETE FROM deleted_hosts WHERE host_pool = ? AND name = ?`, pool, name); err != nil {
			return err
		}
		_, err = t.exec(ctx, `INSERT INTO deleted_hosts (host_pool, name, delete_time) VALUES (?,?,?)`, pool, name, ns(s.now()))
		return err
	})
	return wrap(err, "delete session host %s/%s", pool, name)
}
