package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vdibroker/vdibroker"
)

// auditPageSize is how many audit entries the audit page shows at a time.
const auditPageSize = 50

// auditFilters are the audit page's filters, each a query parameter the
// API takes as it is (GET /api/v1/auditlog); from and to are the time
// range, read as UTC. requestId is the reference the user portal shows a
// user beside a refusal, which she reads out to her helpdesk.
var auditFilters = []string{"principal", "action", "target", "requestId"}

// auditTimeLayouts are what the time range accepts: a datetime-local
// input's value (read as UTC) and RFC 3339.
var auditTimeLayouts = []string{"2006-01-02T15:04", "2006-01-02T15:04:05", time.RFC3339Nano, "2006-01-02"}

// auditPage is GET /audit: the audit trail, newest first (the
// API's ?order=desc, so page 1 is today however long the trail is kept),
// filtered by principal, action, target, request id and time range like
// GET /api/v1/auditlog, each entry's change as the fields it changed.
// Only roles that may read the trail (the admin, Contributors and
// Helpdesk) see entries; the others are told what they may not see, and why.
func (c *Console) auditPage(rq *request) {
	q := rq.r.URL.Query()
	f := url.Values{"limit": {strconv.Itoa(auditPageSize)}, "order": {"desc"}}
	form := map[string]string{}
	for _, k := range auditFilters {
		if v := strings.TrimSpace(q.Get(k)); v != "" {
			f.Set(k, v)
			form[k] = v
		}
	}
	var banner string
	for k, api := range map[string]string{"from": "since", "to": "until"} {
		v := strings.TrimSpace(q.Get(k))
		if v == "" {
			continue
		}
		form[k] = v
		t, ok := parseAuditTime(v)
		if !ok {
			banner = fmt.Sprintf("%s: %q is not a time; use the picker or 2026-12-01T09:30 (UTC)", k, v)
			continue
		}
		f.Set(api, t.Format(time.RFC3339Nano))
	}
	if v := q.Get("after"); v != "" {
		f.Set("after", v)
	}
	var entries []auditRow
	next := ""
	if banner == "" {
		list, cursor, err := rq.api.auditPage(rq.r.Context(), f)
		switch {
		case vdibroker.ErrorCode(err) == vdibroker.EPermission:
			c.auditDenied(rq, err)
			return
		case vdibroker.ErrorCode(err) == vdibroker.EInvalid:
			banner = rq.describe(err)
		case err != nil:
			c.apiError(rq, err)
			return
		}
		for i := range list {
			entries = append(entries, auditRowOf(&list[i]))
		}
		if cursor != "" {
			nq := url.Values{"after": {cursor}}
			for k, v := range form {
				nq.Set(k, v)
			}
			next = "/audit?" + nq.Encode()
		}
	}
	first := url.Values{}
	for k, v := range form {
		first.Set(k, v)
	}
	status := http.StatusOK
	if banner != "" {
		status = http.StatusBadRequest
	}
	c.page(rq, status, "audit", map[string]any{
		"Title": "Audit trail", "Nav": "audit", "Error": banner,
		"Entries": entries, "Next": next, "Paged": q.Get("after") != "", "First": strings.TrimSuffix("/audit?"+first.Encode(), "?"),
		"F": form,
	})
}

// auditDenied tells a principal whose role may not read the trail what it
// may not do, and who may: the API refuses the read (R-SEC), and "may not
// make this change" was false of a page that changes nothing.
func (c *Console) auditDenied(rq *request, err error) {
	role := rq.sess.Role
	if role == "" {
		role = "your token's"
	}
	c.page(rq, http.StatusForbidden, "audit", map[string]any{
		"Title": "Audit trail", "Nav": "audit", "Denied": true,
		"Error": fmt.Sprintf("The role %s may not read the audit trail: it records who changed what, from where, with the fields before and after, and is for Contributors, Helpdesk and the admin token (R-SEC). %s may look at host pools, hosts, sessions and scaling plans. The broker said: %s.",
			role, role, vdibroker.ErrorMessage(err)),
	})
}

// parseAuditTime reads a time range bound, as UTC when it names no zone.
func parseAuditTime(v string) (time.Time, bool) {
	for _, l := range auditTimeLayouts {
		if t, err := time.ParseInLocation(l, v, time.UTC); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// auditPage is one page of GET /api/v1/auditlog with query q, and the seq
// to ask the next page after ("" on the last).
func (a *api) auditPage(ctx context.Context, q url.Values) ([]vdibroker.AuditEntry, string, error) {
	var page listAnswer[vdibroker.AuditEntry]
	if err := a.do(ctx, http.MethodGet, apiPrefix+"/auditlog?"+q.Encode(), nil, &page); err != nil {
		return nil, "", err
	}
	next := ""
	if page.NextLink != "" && len(page.Value) > 0 {
		next = strconv.FormatInt(page.Value[len(page.Value)-1].Seq, 10)
	}
	return page.Value, next, nil
}

// auditRow is an entry as the page shows it: its change as fields.
type auditRow struct {
	vdibroker.AuditEntry
	// Change is "created", "deleted", "changed" or "" (no before or
	// after: a sign-in, a refusal).
	Change string
	// Fields are the fields that changed (created and deleted: every
	// field, shown folded).
	Fields []fieldChange
}

// fieldChange is one field of an entry's change: its path (dotted, as the
// API's field names: loadBalancing.cpuThreshold) and its values before and
// after, compact; Had and Has say whether it was there before and after.
type fieldChange struct {
	Path, Before, After string
	Had, Has            bool
}

// auditRowOf diffs an entry's before and after field by field.
func auditRowOf(e *vdibroker.AuditEntry) auditRow {
	r := auditRow{AuditEntry: *e}
	before, after := flatten(e.Before), flatten(e.After)
	switch {
	case before == nil && after == nil:
		return r
	case before == nil:
		r.Change = "created"
	case after == nil:
		r.Change = "deleted"
	default:
		r.Change = "changed"
	}
	paths := make([]string, 0, len(before)+len(after))
	for p := range before {
		paths = append(paths, p)
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	for _, p := range paths {
		b, had := before[p]
		a, has := after[p]
		if had == has && b == a {
			continue
		}
		r.Fields = append(r.Fields, fieldChange{Path: p, Before: b, After: a, Had: had, Has: has})
	}
	return r
}

// maxFieldText bounds a value as the audit page shows it; the API has it
// whole.
const maxFieldText = 160

// flatten turns a JSON document into its leaves by dotted path, each value
// compact JSON (strings unquoted); arrays are leaves. null or not an object
// is nil: nothing to diff.
func flatten(raw json.RawMessage) map[string]string {
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return nil
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	out := map[string]string{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			p := prefix + k
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
				walk(p+".", sub)
				continue
			}
			out[p] = leafText(v)
		}
	}
	walk("", obj)
	return out
}

// leafText is a leaf's value as text: a string as it is, anything else as
// compact JSON, cut at maxFieldText runes.
func leafText(v any) string {
	s, ok := v.(string)
	if !ok {
		b, _ := json.Marshal(v)
		s = string(b)
	}
	if r := []rune(s); len(r) > maxFieldText {
		s = string(r[:maxFieldText-1]) + "…"
	}
	return s
}
