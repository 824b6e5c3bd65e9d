package store

import (
	"context"

	"github.com/vdibroker/vdibroker"
)

// Who drained a host and when (migration 00010). The record lives in a
// table of its own, read only by the admin reads (GetSessionHost,
// ListSessionHosts), so the hot paths (connect, heartbeat) read and write
// exactly what they did before.
//
// A row is written when an admin write drains the host and says by whom
// (SessionHost.DrainTime set while AllowNewSession is false), and deleted
// when a write lets the host take sessions again. A drained host written
// without DrainTime (an address change, say) keeps its record. A row older
// than its host (left by a host deleted and made again under the same name)
// is ignored.

// writeDrain keeps h's drain record in step with its admin fields; the
// caller holds the host's lock (writeAdminFields).
func (t *tx) writeDrain(ctx context.Context, h *vdibroker.SessionHost) error {
	switch {
	case h.AllowNewSession:
		_, err := t.exec(ctx, `DELETE FROM host_drains WHERE host_pool = ? AND name = ?`, h.HostPool, h.Name)
		return err
	case h.DrainTime != nil:
		_, err := t.exec(ctx, `INSERT INTO host_drains (host_pool, name, drained_by, drain_time) VALUES (?, ?, ?, ?)
			ON CONFLICT (host_pool, name) DO UPDATE SET drained_by = excluded.drained_by, drain_time = excluded.drain_time`,
			h.HostPool, h.Name, h.DrainedBy, ns(*h.DrainTime))
		return err
	}
	return nil
}

// fillDrains sets DrainedBy and DrainTime of the drained hosts among hosts
// (all of one pool): one read by key for one host, one range of the
// pool's records for several.
func (t *tx) fillDrains(ctx context.Context, hosts ...*vdibroker.SessionHost) error {
	drained := map[string]*vdibroker.SessionHost{}
	for _, h := range hosts {
		if !h.AllowNewSession {
			drained[h.Name] = h
		}
	}
	if len(drained) == 0 {
		return nil
	}
	q, args := `SELECT name, drained_by, drain_time FROM host_drains WHERE host_pool = ?`, []any{hosts[0].HostPool}
	if len(hosts) == 1 {
		q, args = q+` AND name = ?`, append(args, hosts[0].Name)
	}
	rows, err := t.query(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var name, by string
		var at int64
		if err := rows.Scan(&name, &by, &at); err != nil {
			return err
		}
		h := drained[name]
		if h == nil {
			continue
		}
		when := fromNS(at)
		if when.Before(h.CreateTime) {
			continue // a record of an earlier host of that name
		}
		h.DrainedBy, h.DrainTime = by, &when
	}
	return rows.Err()
}
