package http

import (
	"context"
	"net/url"
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
	return listAll[*vdibroker.AuditEntry](ctx, c, "/api/v1/auditlog", v)
}
