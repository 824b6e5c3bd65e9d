package console

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/vdibroker/vdibroker"
)

// auditPageSize is how many audit entries the audit page shows at a time.
const auditPageSize = 50

// auditPage is GET /audit: the audit trail (issue 15), newest first as the
// API pages it, filtered by target, principal and action like
// GET /api/v1/auditlog. Only roles that may read the trail (the admin and
// Contributors) see entries; the API refuses the others, and the page says
// so.
func (c *Console) auditPage(rq *request) {
	q := rq.r.URL.Query()
	f := url.Values{"limit": {strconv.Itoa(auditPageSize)}}
	for _, k := range []string{"target", "principal", "action", "after"} {
		if v := q.Get(k); v != "" {
			f.Set(k, v)
		}
	}
	entries, next, err := rq.api.auditPage(rq.r.Context(), f)
	if err != nil {
		c.apiError(rq, err)
		return
	}
	nextQuery := ""
	if next != "" {
		nq := url.Values{"after": {next}}
		for _, k := range []string{"target", "principal", "action"} {
			if v := q.Get(k); v != "" {
				nq.Set(k, v)
			}
		}
		nextQuery = nq.Encode()
	}
	c.page(rq, http.StatusOK, "audit", map[string]any{
		"Title": "Audit trail", "Nav": "audit",
		"Entries": entries, "Next": nextQuery,
		"F": map[string]string{"Target": q.Get("target"), "Principal": q.Get("principal"), "Action": q.Get("action")},
	})
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
