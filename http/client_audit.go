package http

import (
	"context"
	"net/url"
	"strconv"
	"time"

	"github.com/vdibroker/vdibroker"
)

// AuditQuery filters GET /api/v1/auditlog; empty fields match all.
type AuditQuery struct {
	Target    string // exact, or a prefix ending in "/"
	Principal string // token id, OIDC subject or token subject
	Action    string
	// RequestID is a request's X-Request-Id: the reference the user
	// portal shows beside a refusal.
	RequestID string
	// Since and Until bound the entries' time (Since <= time < Until).
	Since, Until time.Time
	// Newest lists newest first.
	Newest bool
	// After lists only the entries after the one of this seq (the API's
	// after): a reader that follows the trail asks for what was written
	// since the last entry it read. Not by time: an entry's time is taken
	// before it is written, so a slow request's entry may be written
	// after a quicker one's of a later time.
	After int64
}

// ListAudit lists audit entries, oldest first (newest first with
// q.Newest), following nextLink to the end (R-SEC; admin and
// Contributors).
func (c *Client) ListAudit(ctx context.Context, q AuditQuery) ([]*vdibroker.AuditEntry, error) {
	v := url.Values{}
	for k, s := range map[string]string{"target": q.Target, "principal": q.Principal, "action": q.Action, "requestId": q.RequestID} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339Nano))
	}
	if !q.Until.IsZero() {
		v.Set("until", q.Until.UTC().Format(time.RFC3339Nano))
	}
	if q.Newest {
		v.Set("order", "desc")
	}
	if q.After > 0 {
		v.Set("after", strconv.FormatInt(q.After, 10))
	}
	return listAll[*vdibroker.AuditEntry](ctx, c, "/api/v1/auditlog", v)
}
