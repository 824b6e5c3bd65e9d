package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/vdibroker/vdibroker"
)

// The audit trail (migration 00014). A write serving an audited
// request (vdibroker.WithAudit) inserts the request's entry in its own
// transaction (writeOnce), after the method's changes: the change and its
// entry commit together or not at all. Only the first write of a request
// records it (a request that writes twice records its first change).

// pendingAudit returns ctx's entry if no write has recorded it yet.
func pendingAudit(ctx context.Context) *vdibroker.AuditEntry {
	e := vdibroker.AuditFrom(ctx)
	if e == nil || e.Seq != 0 {
		return nil
	}
	return e
}

// audited records what the write changed: before and after (nil: none) as
// JSON. A no-op outside an audited request.
func (t *tx) audited(before, after any) {
	if t.audit == nil {
		return
	}
	t.audit.Before, t.audit.After = auditJSON(before), auditJSON(after)
}

func auditJSON(v any) json.RawMessage {
	if v == nil {
		return json.RawMessage("null")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}

// insertAudit inserts the transaction's entry (none: 0, nil).
func (t *tx) insertAudit(ctx context.Context) (int64, error) {
	if t.audit == nil {
		return 0, nil
	}
	return insertAuditRow(ctx, t, t.audit)
}

func insertAuditRow(ctx context.Context, t *tx, e *vdibroker.AuditEntry) (int64, error) {
	e.Bound() // every text a caller chose, cut (R-SEC)
	if e.Outcome == "" {
		e.Outcome = vdibroker.AuditOK
	}
	if len(e.Before) == 0 {
		e.Before = json.RawMessage("null")
	}
	if len(e.After) == 0 {
		e.After = json.RawMessage("null")
	}
	var seq int64
	err := t.row(ctx, `INSERT INTO audit_log (time, principal_kind, principal_id, principal_name, principal_role,
		principal_scope, remote_addr, request_id, action, target, host_pool, outcome, error, before, after)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) RETURNING seq`,
		ns(e.Time), e.Principal.Kind, e.Principal.ID, e.Principal.Name, e.Principal.Role,
		list(e.Principal.HostPools), e.RemoteAddr, e.RequestID, e.Action, e.Target, e.HostPool,
		e.Outcome, e.Error, string(e.Before), string(e.After)).Scan(&seq)
	if err != nil {
		return 0, fmt.Errorf("insert audit entry: %w", err)
	}
	return seq, nil
}

// AppendAudit implements vdibroker.AuditStore.
func (s *DB) AppendAudit(ctx context.Context, e *vdibroker.AuditEntry) error {
	if e.Time.IsZero() {
		e.Time = s.now()
	}
	var seq int64
	err := s.write(context.WithoutCancel(ctx), func(t *tx) (err error) {
		t.audit = nil // this entry is the write, not a change it records
		seq, err = insertAuditRow(ctx, t, e)
		return err
	})
	if err != nil {
		return wrap(err, "append audit entry")
	}
	e.Seq = seq
	return nil
}

// ListAudit implements vdibroker.AuditStore.
func (s *DB) ListAudit(ctx context.Context, f vdibroker.AuditFilter) ([]*vdibroker.AuditEntry, error) {
	q, args := listAuditQuery(s.d, f)
	var out []*vdibroker.AuditEntry
	err := s.read(ctx, func(t *tx) (err error) {
		out, err = queryAll(ctx, t, scanAudit, q, args...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list audit entries: %w", err)
	}
	return out, nil
}

// listAuditQuery is ListAudit's query of f and its arguments. A request
// id is read in audit_log_by_request (migration 00069): a helpdesk given
// a portal user's reference asks for one entry among a month of them. A
// principal is read in audit_log_by_principal_id (00070) and
// audit_log_by_principal_name (00072 on PostgreSQL), see byPrincipal.
func listAuditQuery(d *dialect, f vdibroker.AuditFilter) (string, []any) {
	var where []string
	var args []any
	add := func(cond string, a ...any) {
		where = append(where, cond)
		args = append(args, a...)
	}
	switch {
	case f.After > 0 && f.Newest:
		add("seq < ?", f.After)
	case f.After > 0:
		add("seq > ?", f.After)
	}
	switch {
	case strings.HasSuffix(f.Target, "/"):
		add("substr(target, 1, ?) = ?", len(f.Target), f.Target)
	case f.Target != "":
		add("target = ?", f.Target)
	}
	if f.Action != "" {
		add("action = ?", f.Action)
	}
	if f.RequestID != "" {
		add("request_id = ?", f.RequestID)
	}
	if !f.Since.IsZero() {
		add("time >= ?", ns(f.Since))
	}
	if !f.Until.IsZero() {
		add("time < ?", ns(f.Until))
	}
	if len(f.HostPools) > 0 {
		ph := strings.TrimSuffix(strings.Repeat("?,", len(f.HostPools)), ",")
		for _, p := range f.HostPools {
			args = append(args, p)
		}
		where = append(where, "host_pool IN ("+ph+")")
	}
	order := " ORDER BY seq"
	if f.Newest {
		order += " DESC"
	}
	if f.Limit > 0 {
		order += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	q := `SELECT seq, time, principal_kind, principal_id, principal_name, principal_role, principal_scope,
		remote_addr, request_id, action, target, host_pool, outcome, error, before, after FROM audit_log`
	if f.Principal != "" {
		sub, subArgs := byPrincipal(d, f.Principal, where, args, order)
		return q + " WHERE seq IN (" + sub + ")" + order, subArgs
	}
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	return q + order, args
}

// byPrincipal is the union of the seqs of principal's entries that match
// where (with its args), each part in order up to the page (order): a
// token id or OIDC subject exactly, in audit_log_by_principal_id; a
// token's subject exactly or in any case of its ASCII letters (R-E5), in
// audit_log_by_principal_name, on d.principalNameLower (folding ASCII
// only on both engines, so a subject equal to principal has principal's
// asciiLower). The entries are those of principal_id = ? OR
// d.principalNameLower = ?, which no index serves as one condition, each
// once.
func byPrincipal(d *dialect, principal string, where []string, args []any, order string) (string, []any) {
	var parts []string
	var out []any
	for _, c := range []struct {
		cond string
		args []any
	}{
		{"principal_id = ?", []any{principal}},
		{d.principalNameLower + " = ?", []any{asciiLower(principal)}},
	} {
		conds := append([]string{c.cond}, where...)
		parts = append(parts, "SELECT seq FROM (SELECT seq FROM audit_log WHERE "+strings.Join(conds, " AND ")+order+") AS by_principal")
		out = append(append(out, c.args...), args...)
	}
	return strings.Join(parts, " UNION "), out
}

func scanAudit(sc scanner) (*vdibroker.AuditEntry, error) {
	var e vdibroker.AuditEntry
	var tm int64
	var scope, before, after string
	if err := sc.Scan(&e.Seq, &tm, &e.Principal.Kind, &e.Principal.ID, &e.Principal.Name, &e.Principal.Role, &scope,
		&e.RemoteAddr, &e.RequestID, &e.Action, &e.Target, &e.HostPool, &e.Outcome, &e.Error, &before, &after); err != nil {
		return nil, err
	}
	e.Time = fromNS(tm)
	e.Principal.HostPools = parseList(scope)
	e.Before, e.After = json.RawMessage(before), json.RawMessage(after)
	return &e, nil
}

// parseList decodes list's JSON; bad or empty text is nil.
func parseList(s string) []string {
	var l []string
	if err := json.Unmarshal([]byte(s), &l); err != nil || len(l) == 0 {
		return nil
	}
	return l
}

// asciiLower is s with its ASCII capitals lowered, as SQLite's lower()
// does; other characters stay.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
