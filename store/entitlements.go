package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/vdibroker/vdibroker"
)

// Application groups, their assignments and applications (R-E1..R-E7,
// migration 00030). A group's row holds its settings; its assignments are
// rows of application_group_assignments keyed by the folded user or group
// name (vdibroker.FoldUser, R-E5), so "which groups is alice assigned
// to" is one range of an index whatever the number of assignments; its
// applications are rows of applications. Deleting a host pool deletes its
// groups (DeleteHostPool).

const appGroupCols = `name, host_pool, type, friendly_name, description, all_users, create_time, update_time`

// Kinds of assignment rows.
const (
	assignUser  = "user"
	assignGroup = "group"
)

func scanAppGroup(sc scanner) (*vdibroker.ApplicationGroup, error) {
	var g vdibroker.ApplicationGroup
	var ct, ut int64
	if err := sc.Scan(&g.Name, &g.HostPool, &g.ApplicationGroupType, &g.FriendlyName, &g.Description,
		&g.Assignments.AllUsers, &ct, &ut); err != nil {
		return nil, err
	}
	g.CreateTime, g.UpdateTime = fromNS(ct), fromNS(ut)
	g.FillDefaults()
	return &g, nil
}

// getAppGroup reads one group with its assignments; lock locks its row
// (PostgreSQL) against a concurrent write or delete.
func (t *tx) getAppGroup(ctx context.Context, name string, lock bool) (*vdibroker.ApplicationGroup, error) {
	q := `SELECT ` + appGroupCols + ` FROM application_groups WHERE name = ?`
	if lock {
		q += t.d.forUpdate
	}
	g, err := scanAppGroup(t.row(ctx, q, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("application group %q not found", name)
	}
	if err != nil {
		return nil, fmt.Errorf("get application group %q: %w", name, err)
	}
	if err := t.assignmentsOf(ctx, map[string]*vdibroker.ApplicationGroup{name: g}, `WHERE application_group = ?`, name); err != nil {
		return nil, err
	}
	return g, nil
}

// assignmentsOf fills the assignments of groups (by name) from the rows
// where says, in the order they were given.
func (t *tx) assignmentsOf(ctx context.Context, groups map[string]*vdibroker.ApplicationGroup, where string, args ...any) error {
	rows, err := t.query(ctx, `SELECT application_group, kind, principal FROM application_group_assignments `+
		where+` ORDER BY application_group, kind, position`, args...)
	if err != nil {
		return fmt.Errorf("application group assignments: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var group, kind, principal string
		if err := rows.Scan(&group, &kind, &principal); err != nil {
			return err
		}
		if g := groups[group]; g != nil {
			addAssignment(&g.Assignments, kind, principal)
		}
	}
	return rows.Err()
}

// addAssignment adds an assignment row's user or group to a.
func addAssignment(a *vdibroker.Assignments, kind, principal string) {
	switch kind {
	case assignUser:
		a.Users = append(a.Users, principal)
	case assignGroup:
		a.Groups = append(a.Groups, principal)
	}
}

// PutApplicationGroup implements vdibroker.EntitlementStore. The
// precondition is checked on the group as this transaction reads it,
// its row locked (PostgreSQL) and its update conditional on the update
// time read (R-E13): no write of another replica comes in between.
func (s *DB) PutApplicationGroup(ctx context.Context, g *vdibroker.ApplicationGroup, pre vdibroker.Precondition) (created bool, err error) {
	err = s.write(ctx, func(t *tx) error {
		if err := t.lockGroupPool(ctx, g.HostPool); err != nil {
			return err
		}
		old, err := t.getAppGroup(ctx, g.Name, true)
		switch {
		case vdibroker.ErrorCode(err) == vdibroker.ENotFound:
			old = nil
		case err != nil:
			return err
		}
		if err := checkPre(pre, fmt.Sprintf("application group %q", g.Name), old != nil, func() time.Time { return old.UpdateTime }); err != nil {
			return err
		}
		switch {
		case old == nil:
		case old.HostPool != g.HostPool:
			return vdibroker.FieldError("hostPool", "cannot be changed after creation (R-E1): application group %q publishes host pool %q; create another group", g.Name, old.HostPool)
		case old.ApplicationGroupType != g.ApplicationGroupType:
			return vdibroker.FieldError("applicationGroupType", "cannot be changed after creation (R-E1): application group %q is a %s group; create another group", g.Name, old.ApplicationGroupType)
		}
		created = old == nil
		if created && g.ApplicationGroupType == vdibroker.AppGroupDesktop {
			if err := t.checkOneDesktop(ctx, g); err != nil {
				return err
			}
		}
		if err := t.writeAppGroup(ctx, g, old); err != nil {
			return err
		}
		t.audited(old, g) // a nil old is written as null
		return nil
	})
	if err != nil {
		return false, wrap(err, "put application group %q", g.Name)
	}
	return created, nil
}

// lockGroupPool refuses a pool that does not exist (400 on hostPool) and
// locks its row (PostgreSQL): a concurrent DeleteHostPool either commits
// first, and the pool is not found, or waits for this write and then
// deletes the group with the pool; and two writers of the pool's Desktop
// group take turns, so the second sees the first (checkOneDesktop).
func (t *tx) lockGroupPool(ctx context.Context, pool string) error {
	var name string
	err := t.row(ctx, `SELECT name FROM host_pools WHERE name = ?`+t.d.forUpdate, pool).Scan(&name)
	if errors.Is(err, sql.ErrNoRows) {
		return vdibroker.FieldError("hostPool", "host pool %q does not exist", pool)
	}
	return err
}

// checkOneDesktop refuses a second Desktop group in a pool (R-E1; the
// unique index application_groups_one_desktop is the backstop).
func (t *tx) checkOneDesktop(ctx context.Context, g *vdibroker.ApplicationGroup) error {
	var other string
	err := t.row(ctx, `SELECT name FROM application_groups WHERE host_pool = ? AND type = ? AND name <> ?`,
		g.HostPool, vdibroker.AppGroupDesktop, g.Name).Scan(&other)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return err
	}
	return &vdibroker.Error{Code: vdibroker.EConflict, Field: "applicationGroupType",
		Message: fmt.Sprintf("host pool %q has a Desktop application group already, %q; a pool has at most one (R-E1): assign users to that one", g.HostPool, other)}
}

// writeAppGroup inserts g (old nil) or updates it, and writes its
// assignments anew. On replace CreateTime is kept and UpdateTime moves on.
func (t *tx) writeAppGroup(ctx context.Context, g *vdibroker.ApplicationGroup, old *vdibroker.ApplicationGroup) error {
	var after time.Time
	if old != nil {
		after = old.UpdateTime
	}
	ut, err := t.issueTime(ctx, g.UpdateTime, after)
	if err != nil {
		return err
	}
	if old == nil {
		g.CreateTime, g.UpdateTime = ut, ut
		_, err = t.exec(ctx, `INSERT INTO application_groups (`+appGroupCols+`) VALUES (?,?,?,?,?,?,?,?)`,
			g.Name, g.HostPool, g.ApplicationGroupType, g.FriendlyName, g.Description, g.Assignments.AllUsers,
			ns(g.CreateTime), ns(g.UpdateTime))
		if errors.Is(err, errUnique) {
			return errRaced // created meanwhile: run again, as a replace or refused
		}
	} else {
		g.CreateTime, g.UpdateTime = old.CreateTime, ut
		var n int64
		n, err = t.exec(ctx, `UPDATE application_groups SET friendly_name = ?, description = ?, all_users = ?, update_time = ?
			WHERE name = ? AND update_time = ?`, g.FriendlyName, g.Description, g.Assignments.AllUsers, ns(g.UpdateTime),
			g.Name, ns(old.UpdateTime))
		if err == nil && n == 0 {
			return errRaced // written or deleted since it was read: run again on what it is now (R-E13)
		}
		if err == nil {
			_, err = t.exec(ctx, `DELETE FROM application_group_assignments WHERE application_group = ?`, g.Name)
		}
	}
	if err != nil {
		return err
	}
	for _, a := range []struct {
		kind  string
		names []string
	}{{assignUser, g.Assignments.Users}, {assignGroup, g.Assignments.Groups}} {
		for i, name := range a.names {
			if _, err := t.exec(ctx, `INSERT INTO application_group_assignments
				(application_group, kind, principal_key, principal, position) VALUES (?,?,?,?,?)`,
				g.Name, a.kind, vdibroker.FoldUser(name), name, i); err != nil {
				return err
			}
		}
	}
	return nil
}

// GetApplicationGroup implements vdibroker.EntitlementStore.
func (s *DB) GetApplicationGroup(ctx context.Context, name string) (*vdibroker.ApplicationGroup, error) {
	var g *vdibroker.ApplicationGroup
	err := s.read(ctx, func(t *tx) (err error) {
		g, err = t.getAppGroup(ctx, name, false)
		return err
	})
	return g, err
}

// ListApplicationGroups implements vdibroker.EntitlementStore.
func (s *DB) ListApplicationGroups(ctx context.Context, pool string) ([]*vdibroker.ApplicationGroup, error) {
	where, assignWhere, args := ``, ``, []any{}
	if pool != "" {
		where = ` WHERE host_pool = ?`
		assignWhere = `WHERE application_group IN (SELECT name FROM application_groups WHERE host_pool = ?)`
		args = append(args, pool)
	}
	var out []*vdibroker.ApplicationGroup
	err := s.read(ctx, func(t *tx) (err error) {
		out, err = queryAll(ctx, t, scanAppGroup, `SELECT `+appGroupCols+` FROM application_groups`+where+` ORDER BY name`, args...)
		if err != nil || len(out) == 0 {
			return err
		}
		byName := make(map[string]*vdibroker.ApplicationGroup, len(out))
		for _, g := range out {
			byName[g.Name] = g
		}
		return t.assignmentsOf(ctx, byName, assignWhere, args...)
	})
	if err != nil {
		return nil, fmt.Errorf("list application groups: %w", err)
	}
	return out, nil
}

// DeleteApplicationGroup implements vdibroker.EntitlementStore. pre
// (a DELETE's If-Match) is checked on the group as this transaction reads
// it, locked (PostgreSQL), and the delete is conditional on the update
// time read (R-E13), which an application's create or delete moves on
// (appsChanged): the If-Match of a read before another administrator
// added an application does not delete it unseen.
func (s *DB) DeleteApplicationGroup(ctx context.Context, name string, pre vdibroker.Precondition) error {
	err := s.write(ctx, func(t *tx) error {
		what := fmt.Sprintf("application group %q", name)
		old, err := t.getAppGroup(ctx, name, true)
		if vdibroker.ErrorCode(err) == vdibroker.ENotFound {
			return missing(pre, what, err)
		}
		if err != nil {
			return err
		}
		if err := pre.Check(what, true, old.UpdateTime); err != nil {
			return err
		}
		for _, q := range []string{
			`DELETE FROM applications WHERE application_group = ?`,
			`DELETE FROM application_group_assignments WHERE application_group = ?`,
		} {
			if _, err := t.exec(ctx, q, name); err != nil {
				return err
			}
		}
		n, err := t.exec(ctx, `DELETE FROM application_groups WHERE name = ? AND update_time = ?`, name, ns(old.UpdateTime))
		if err != nil {
			return err
		}
		if n == 0 {
			return errRaced // written or deleted since it was read: run again on what it is now (R-E13)
		}
		t.audited(old, nil)
		return nil
	})
	return wrap(err, "delete application group %q", name)
}

const appCols = `application_group, name, file_path, command_line_setting, command_line_arguments,
	friendly_name, show_in_portal, icon_path, create_time, update_time`

func scanApp(sc scanner) (*vdibroker.Application, error) {
	var a vdibroker.Application
	var ct, ut int64
	if err := sc.Scan(&a.ApplicationGroup, &a.Name, &a.FilePath, &a.CommandLineSetting, &a.CommandLineArguments,
		&a.FriendlyName, &a.ShowInPortal, &a.IconPath, &ct, &ut); err != nil {
		return nil, err
	}
	a.CreateTime, a.UpdateTime = fromNS(ct), fromNS(ut)
	return &a, nil
}

func (t *tx) getApp(ctx context.Context, group, name string) (*vdibroker.Application, error) {
	a, err := scanApp(t.row(ctx, `SELECT `+appCols+` FROM applications WHERE application_group = ? AND name = ?`, group, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("application %q not found in application group %q", name, group)
	}
	if err != nil {
		return nil, fmt.Errorf("get application %q: %w", name, err)
	}
	return a, nil
}

// remoteAppGroup locks group's row (PostgreSQL: a concurrent delete of
// the group waits) and checks that it is a RemoteApp group; it answers
// the group's update time, which an application's create moves on
// (appsChanged).
func (t *tx) remoteAppGroup(ctx context.Context, group string) (time.Time, error) {
	var typ string
	var ut int64
	err := t.row(ctx, `SELECT type, update_time FROM application_groups WHERE name = ?`+t.d.forUpdate, group).Scan(&typ, &ut)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return time.Time{}, notFound("application group %q not found", group)
	case err != nil:
		return time.Time{}, err
	case typ != vdibroker.AppGroupRemoteApp:
		return time.Time{}, vdibroker.FieldError("applicationGroup", "application group %q is a %s group: applications are published by RemoteApp groups only (R-E1)", group, typ)
	}
	return fromNS(ut), nil
}

// appsChanged moves the update time of group, read as was (its row
// locked by remoteAppGroup), past now and was: an application of it was
// created or deleted in this transaction. The group's ETag covers its
// set of applications (R-E13): a DELETE of the group, which takes its
// applications with it, or a PUT of it, with the If-Match of a read
// before another administrator added or removed one, is refused and
// deletes nothing unseen. A change of an application keeps its group's
// ETag: the group's writes act on which applications it has, not on
// their settings, which each application's own ETag covers.
func (t *tx) appsChanged(ctx context.Context, group string, was, now time.Time) error {
	ut, err := t.issueTime(ctx, now, was)
	if err != nil {
		return err
	}
	n, err := t.exec(ctx, `UPDATE application_groups SET update_time = ? WHERE name = ? AND update_time = ?`, ns(ut), group, ns(was))
	if err != nil {
		return fmt.Errorf("move application group %q's update time: %w", group, err)
	}
	if n == 0 {
		return errRaced // written or deleted since it was read: run again on what it is now (R-E13)
	}
	return nil
}

// PutApplication implements vdibroker.EntitlementStore; the
// precondition is checked as PutApplicationGroup's (R-E13). A create
// moves its group's update time too, in this transaction (appsChanged).
func (s *DB) PutApplication(ctx context.Context, a *vdibroker.Application, pre vdibroker.Precondition) (created bool, err error) {
	err = s.write(ctx, func(t *tx) error {
		groupTime, err := t.remoteAppGroup(ctx, a.ApplicationGroup)
		if err != nil {
			return err
		}
		old, err := t.getApp(ctx, a.ApplicationGroup, a.Name)
		switch {
		case vdibroker.ErrorCode(err) == vdibroker.ENotFound:
			old = nil
		case err != nil:
			return err
		}
		if err := checkPre(pre, fmt.Sprintf("application %q of application group %q", a.Name, a.ApplicationGroup), old != nil,
			func() time.Time { return old.UpdateTime }); err != nil {
			return err
		}
		created = old == nil
		var after time.Time
		if old != nil {
			after = old.UpdateTime
		}
		ut, err := t.issueTime(ctx, a.UpdateTime, after)
		if err != nil {
			return err
		}
		if created {
			a.CreateTime, a.UpdateTime = ut, ut
			_, err = t.exec(ctx, `INSERT INTO applications (`+appCols+`) VALUES (?,?,?,?,?,?,?,?,?,?)`,
				a.ApplicationGroup, a.Name, a.FilePath, a.CommandLineSetting, a.CommandLineArguments,
				a.FriendlyName, a.ShowInPortal, a.IconPath, ns(a.CreateTime), ns(a.UpdateTime))
			if errors.Is(err, errUnique) {
				return errRaced
			}
			if err != nil {
				return err
			}
			if err := t.appsChanged(ctx, a.ApplicationGroup, groupTime, a.UpdateTime); err != nil {
				return err
			}
			t.audited(nil, a)
			return nil
		}
		a.CreateTime, a.UpdateTime = old.CreateTime, ut
		n, err := t.exec(ctx, `UPDATE applications SET file_path = ?, command_line_setting = ?, command_line_arguments = ?,
			friendly_name = ?, show_in_portal = ?, icon_path = ?, update_time = ?
			WHERE application_group = ? AND name = ? AND update_time = ?`,
			a.FilePath, a.CommandLineSetting, a.CommandLineArguments, a.FriendlyName, a.ShowInPortal, a.IconPath,
			ns(a.UpdateTime), a.ApplicationGroup, a.Name, ns(old.UpdateTime))
		if err != nil {
			return err
		}
		if n == 0 {
			return errRaced // written or deleted since it was read: run again on what it is now (R-E13)
		}
		t.audited(old, a)
		return nil
	})
	if err != nil {
		return false, wrap(err, "put application %q", a.Name)
	}
	return created, nil
}

// GetApplication implements vdibroker.EntitlementStore.
func (s *DB) GetApplication(ctx context.Context, group, name string) (*vdibroker.Application, error) {
	var a *vdibroker.Application
	err := s.read(ctx, func(t *tx) (err error) {
		a, err = t.getApp(ctx, group, name)
		return err
	})
	return a, err
}

// ListApplications implements vdibroker.EntitlementStore.
func (s *DB) ListApplications(ctx context.Context, group string) ([]*vdibroker.Application, error) {
	var out []*vdibroker.Application
	err := s.read(ctx, func(t *tx) error {
		var n int
		if err := t.row(ctx, `SELECT count(*) FROM application_groups WHERE name = ?`, group).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return notFound("application group %q not found", group)
		}
		var err error
		out, err = queryAll(ctx, t, scanApp, `SELECT `+appCols+` FROM applications WHERE application_group = ? ORDER BY name`, group)
		return err
	})
	return out, wrap(err, "list applications of %q", group)
}

// DeleteApplication implements vdibroker.EntitlementStore; pre as
// DeleteApplicationGroup's (R-E13). It moves its group's update time
// too, in this transaction (appsChanged).
func (s *DB) DeleteApplication(ctx context.Context, group, name string, pre vdibroker.Precondition) error {
	err := s.write(ctx, func(t *tx) error {
		what := fmt.Sprintf("application %q of application group %q", name, group)
		// The group first, locked (PostgreSQL), as PutApplication and
		// DeleteHostPool take it before the ETag clock.
		var groupTime int64
		err := t.row(ctx, `SELECT update_time FROM application_groups WHERE name = ?`+t.d.forUpdate, group).Scan(&groupTime)
		if errors.Is(err, sql.ErrNoRows) {
			return missing(pre, what, notFound("application %q not found in application group %q", name, group))
		}
		if err != nil {
			return err
		}
		old, err := t.getApp(ctx, group, name)
		if vdibroker.ErrorCode(err) == vdibroker.ENotFound {
			return missing(pre, what, err)
		}
		if err != nil {
			return err
		}
		if err := pre.Check(what, true, old.UpdateTime); err != nil {
			return err
		}
		n, err := t.exec(ctx, `DELETE FROM applications WHERE application_group = ? AND name = ? AND update_time = ?`, group, name, ns(old.UpdateTime))
		if err != nil {
			return err
		}
		if n == 0 {
			return errRaced // written or deleted since it was read: run again (R-E13)
		}
		if err := t.appsChanged(ctx, group, fromNS(groupTime), s.now()); err != nil {
			return err
		}
		t.audited(old, nil)
		return nil
	})
	return wrap(err, "delete application %q", name)
}

// AssignedApplicationGroups implements vdibroker.EntitlementStore: the
// assignment rows of the user's key and of its groups' keys (one range of
// application_group_assignments_by_principal each), and the groups for all
// users, narrowed by q's pool, group and type.
func (s *DB) AssignedApplicationGroups(ctx context.Context, q vdibroker.AssignmentQuery) ([]*vdibroker.ApplicationGroup, error) {
	groupKeys := make([]string, 0, len(q.Groups))
	for _, g := range q.Groups {
		groupKeys = append(groupKeys, vdibroker.FoldUser(g))
	}
	var narrow []string
	var nargs []any
	for _, f := range []struct{ col, v string }{{"g.host_pool", q.HostPool}, {"g.name", q.ApplicationGroup}, {"g.type", q.Type}} {
		if f.v != "" {
			narrow = append(narrow, " AND "+f.col+" = ?")
			nargs = append(nargs, f.v)
		}
	}
	and := strings.Join(narrow, "")
	var cols []string
	for _, c := range strings.Split(appGroupCols, ", ") {
		cols = append(cols, "g."+c)
	}
	gcols := strings.Join(cols, ", ")
	query := `SELECT ` + gcols + `, a.kind, a.principal FROM application_group_assignments a
		JOIN application_groups g ON g.name = a.application_group
		WHERE a.kind = ? AND a.principal_key = ?` + and
	args := append([]any{assignUser, vdibroker.FoldUser(q.User)}, nargs...)
	if len(groupKeys) > 0 {
		query += ` UNION ALL SELECT ` + gcols + `, a.kind, a.principal FROM application_group_assignments a
		JOIN application_groups g ON g.name = a.application_group
		WHERE a.kind = ? AND a.principal_key IN (` + s.d.jsonStrings + `)` + and
		args = append(append(args, assignGroup, list(groupKeys)), nargs...)
	}
	query += ` UNION ALL SELECT ` + gcols + `, '', '' FROM application_groups g WHERE g.all_users` + and
	args = append(args, nargs...)
	query += ` ORDER BY 1`

	var out []*vdibroker.ApplicationGroup
	err := s.read(ctx, func(t *tx) error {
		rows, err := t.query(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		byName := map[string]*vdibroker.ApplicationGroup{}
		for rows.Next() {
			var kind, principal string
			g, err := scanAppGroup(scanMore{rows, []any{&kind, &principal}})
			if err != nil {
				return err
			}
			if have := byName[g.Name]; have != nil {
				g = have
			} else {
				// Only the assignments that match are answered.
				g.Assignments = vdibroker.Assignments{Users: []string{}, Groups: []string{}}
				byName[g.Name] = g
				out = append(out, g)
			}
			if kind == "" { // the row of a group for all users
				g.Assignments.AllUsers = true
			}
			addAssignment(&g.Assignments, kind, principal)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("assigned application groups of %q: %w", q.User, err)
	}
	return out, nil
}
