package store

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/vdibroker/vdibroker"
)

// warnSameNameHosts logs, at every start, the hosts a store held before
// migration 00077 beside another host of the same name ignoring case and
// a trailing dot (OFFICE-01 beside office-01): the migration kept them
// all, apart by their name_key_tiebreak, and an admin decides which is
// the machine and deletes the other (docs/operations.md). A store
// without them costs one probe of an index that is empty.
func (s *DB) warnSameNameHosts(ctx context.Context) error {
	groups, err := s.SameNameHosts(ctx)
	if err != nil {
		return fmt.Errorf("find session hosts of one name: %w", err)
	}
	for _, g := range groups {
		s.log.Warn("session hosts whose names differ only in case or a trailing dot, which Windows and DNS take for one machine: "+
			"delete the ones that are not it (vdibroker sessionhost delete)",
			"pool", g[0], "hosts", strings.Join(g[1:], ", "))
	}
	return nil
}

// SameNameHosts lists the groups of hosts of one pool whose names are one
// ignoring case and a trailing dot, which only a store written before
// migration 00077 holds: each group is its pool, then its hosts' names in
// query order. A group whose other hosts were deleted since is not one.
func (s *DB) SameNameHosts(ctx context.Context) ([][]string, error) {
	type host struct{ pool, name string }
	rows, err := s.w.QueryContext(ctx, s.d.q(`SELECT host_pool, name FROM session_hosts WHERE name_key_tiebreak <> '' ORDER BY host_pool, name`))
	if err != nil {
		return nil, err
	}
	var apart []host
	for rows.Next() {
		var h host
		if err := rows.Scan(&h.pool, &h.name); err != nil {
			rows.Close()
			return nil, err
		}
		apart = append(apart, h)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var groups [][]string
	seen := map[host]bool{}
	for _, h := range apart {
		if seen[h] {
			continue
		}
		names, err := s.sameNameGroup(ctx, h.pool, h.name)
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			seen[host{h.pool, n}] = true
		}
		if len(names) > 1 {
			groups = append(groups, append([]string{h.pool}, names...))
		}
	}
	slices.SortFunc(groups, slices.Compare)
	return groups, nil
}

// sameNameGroup lists the hosts of pool whose names are name's ignoring
// case and a trailing dot, name's own among them.
func (s *DB) sameNameGroup(ctx context.Context, pool, name string) ([]string, error) {
	rows, err := s.w.QueryContext(ctx, s.d.q(`SELECT name FROM session_hosts WHERE host_pool = ? AND `+hostNameKeySQL+` = ? ORDER BY name`),
		pool, vdibroker.HostNameKey(name))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		names = append(names, n)
	}
	return names, rows.Err()
}
