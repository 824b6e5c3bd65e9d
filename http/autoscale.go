package http

import (
	"context"
	nethttp "net/http"
	"net/url"
	"strconv"

	"github.com/vdibroker/vdibroker"
)

// listAutoscaleEvaluations is GET .../hostpools/{pool}/autoscale/evaluations
// (SPEC §8): the autoscaler's evaluations of the pool, newest first,
// paged with ?limit= and ?after=<seq> (the nextLink: older ones). Readers
// may read it; a token scoped to other pools does not see the pool.
func (s *Server) listAutoscaleEvaluations(w nethttp.ResponseWriter, r *nethttp.Request) error {
	limit, after, err := pageParams(r)
	if err != nil {
		return err
	}
	var before int64
	if after != "" {
		if before, err = strconv.ParseInt(after, 10, 64); err != nil || before < 1 {
			return vdibroker.FieldError("after", "must be an evaluation's seq (1 or more), got %q", after)
		}
	}
	list, err := s.svc.ScalingPlans.AutoscaleEvaluations(r.Context(), r.PathValue("pool"), before, limit+1)
	if err != nil {
		return err
	}
	out := page[*vdibroker.AutoscaleEvaluation]{Value: list}
	if len(list) > limit {
		out.Value = list[:limit]
		out.NextLink = nextLink(r, limit, strconv.FormatInt(list[limit-1].Seq, 10))
	}
	if out.Value == nil {
		out.Value = []*vdibroker.AutoscaleEvaluation{}
	}
	writeJSON(w, nethttp.StatusOK, out)
	return nil
}

// AutoscaleEvaluations lists the autoscaler's last evaluations of a pool,
// newest first, at most limit (0: one page of the server's default).
func (c *Client) AutoscaleEvaluations(ctx context.Context, pool string, limit int) ([]*vdibroker.AutoscaleEvaluation, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var pg page[*vdibroker.AutoscaleEvaluation]
	if _, err := c.do(ctx, "GET", "/api/v1/hostpools/"+url.PathEscape(pool)+"/autoscale/evaluations", q, nil, &pg, nil); err != nil {
		return nil, err
	}
	return pg.Value, nil
}
