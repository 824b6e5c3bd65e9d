package console

import (
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"time"

	"github.com/vdibroker/vdibroker"
)

// The federation page (SPEC §7): sites, pods with their health
// and generation, and global entitlements with their members' loads, as
// GET /api/v1/federation and GET /api/v1/globalentitlements answer them.
// It is added by EnableFederation, so the console's own page list does not
// change for brokers that are no pod.

// EnableFederation adds the federation page at /federation. Call it before
// serving.
func (c *Console) EnableFederation() {
	funcs := pageFuncs()
	for k, f := range (template.FuncMap{
		"load": func(f *float64) string {
			if f == nil {
				return "–"
			}
			return fmt.Sprintf("%.3g", *f)
		},
		"ago": func(t *time.Time) string {
			if t == nil {
				return "never"
			}
			return durationText(c.now().Sub(*t)) + " ago"
		},
	}) {
		funcs[k] = f
	}
	c.pages["federation"] = template.Must(template.New("federation").Funcs(funcs).
		ParseFS(templateFS, "templates/layout.html", "templates/federation.html"))
	c.mux.HandleFunc("GET /federation", c.signedIn(c.federationPage))
	c.pod = true
}

// otherPodsSessions are user's open sessions in the other pods of the
// federation (GET /users/{user}/globalsessions, R-U3, R-G1), for the
// sessions page of one user; failed says why the pod could not ask.
func (c *Console) otherPodsSessions(rq *request, user string) (gs *vdibroker.GlobalSessions, failed string) {
	gs = &vdibroker.GlobalSessions{}
	err := rq.api.do(rq.r.Context(), http.MethodGet, "/api/v1/users/"+url.PathEscape(user)+"/globalsessions", nil, gs)
	switch vdibroker.ErrorCode(err) {
	case "":
		return gs, ""
	case vdibroker.EPermission:
		return nil, "" // a principal scoped to host pools: global views are not its
	default:
		return nil, describe(err)
	}
}

// fedStatus is GET /api/v1/federation as the page reads it.
type fedStatus struct {
	Pod      string               `json:"pod"`
	Site     string               `json:"site"`
	Document vdibroker.Federation `json:"document"`
	Peers    []struct {
		Pod                string     `json:"pod"`
		Site               string     `json:"site"`
		URL                string     `json:"url"`
		LastContact        *time.Time `json:"lastContact"`
		Health             string     `json:"health"`
		Generation         int64      `json:"generation"`
		GenerationMismatch bool       `json:"generationMismatch"`
		LatencyMs          float64    `json:"latencyMs"`
	} `json:"peers"`
}

// fedEntitlement is one of GET /api/v1/globalentitlements.
type fedEntitlement struct {
	Name                string `json:"name"`
	Scope               string `json:"scope"`
	SessionDistribution string `json:"sessionDistribution"`
	UseHomeSite         bool   `json:"useHomeSite"`
	Members             []struct {
		Pod      string   `json:"pod"`
		Site     string   `json:"site"`
		HostPool string   `json:"hostPool"`
		Load     *float64 `json:"load"`
		Error    string   `json:"error"`
		Facts    *struct {
			Found       bool `json:"found"`
			Hosts       int  `json:"hosts"`
			Sessions    int  `json:"sessions"`
			HasCapacity bool `json:"hasCapacity"`
		} `json:"facts"`
	} `json:"members"`
}

func (c *Console) federationPage(rq *request) {
	ctx := rq.r.Context()
	data := map[string]any{"Title": "Federation", "Nav": "federation"}
	var st fedStatus
	err := rq.api.do(ctx, "GET", apiPrefix+"/federation", nil, &st)
	switch vdibroker.ErrorCode(err) {
	case "":
	case vdibroker.ENotFound:
		// Not a pod, or no document yet: say so on the page.
		data["NotFederated"] = vdibroker.ErrorMessage(err)
		c.page(rq, http.StatusOK, "federation", data)
		return
	default:
		c.apiError(rq, err)
		return
	}
	var ges listAnswer[fedEntitlement]
	if err := rq.api.do(ctx, "GET", apiPrefix+"/globalentitlements", nil, &ges); err != nil {
		c.apiError(rq, err)
		return
	}
	type siteRow struct {
		Name string
		Pods []string
	}
	var sites []siteRow
	for _, s := range st.Document.Sites {
		row := siteRow{Name: s.Name}
		for _, p := range st.Document.Pods {
			if p.Site == s.Name {
				row.Pods = append(row.Pods, p.Name)
			}
		}
		sites = append(sites, row)
	}
	data["Status"] = st
	data["Sites"] = sites
	data["Entitlements"] = ges.Value
	c.page(rq, http.StatusOK, "federation", data)
}
