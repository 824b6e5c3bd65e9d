package console

import (
	"context"
	"net/http"
	"strconv"

	"github.com/vdibroker/vdibroker"
)

// The autoscale page of a pool: the autoscaler's last
// evaluations, each with its figures (R-A1) and what it did and why
// (R-A2, R-A3), read through the API like every page.

// autoscaleShown is how many evaluations the page shows.
const autoscaleShown = 60

func (a *api) autoscaleEvaluations(ctx context.Context, pool string, limit int) ([]vdibroker.AutoscaleEvaluation, error) {
	var pg struct {
		Value []vdibroker.AutoscaleEvaluation `json:"value"`
	}
	path := poolPath(pool) + "/autoscale/evaluations?limit=" + strconv.Itoa(limit)
	return pg.Value, a.do(ctx, http.MethodGet, path, nil, &pg)
}

// autoscalePage is GET /pools/{pool}/autoscale.
func (c *Console) autoscalePage(rq *request) {
	ctx := rq.r.Context()
	name := rq.r.PathValue("pool")
	p, err := rq.api.getPool(ctx, name)
	if err != nil {
		c.apiError(rq, err)
		return
	}
	evals, err := rq.api.autoscaleEvaluations(ctx, name, autoscaleShown)
	if err != nil {
		c.apiError(rq, err)
		return
	}
	c.page(rq, http.StatusOK, "autoscale", map[string]any{
		"Title": "Autoscale of " + p.Name, "Nav": "overview",
		"Pool": p, "Evaluations": evals,
	})
}
