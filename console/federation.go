package console

import (
	"cmp"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation"
	"github.com/vdibroker/vdibroker/internal/webguard"
)

// The federation page (SPEC §7): sites, pods with their health
// and generation, and global entitlements with their members' loads, as
// GET /api/v1/federation and GET /api/v1/globalentitlements answer them.
// It is added by EnableFederation, so the console's own page list does not
// change for brokers that are no pod.

// EnableFederation adds the federation page at /federation, with its
// forms that change the global entitlements (globalent.go), which reach
// the other pods as cfg says. Call it before serving.
func (c *Console) EnableFederation(cfg FederationConfig) {
	funcs := pageFuncs()
	for k, f := range (template.FuncMap{
		"load": func(f *float64) string {
			if f == nil {
				return "–"
			}
			return fmt.Sprintf("%.3g", *f)
		},
		"kv": func(kv ...any) map[string]any {
			m := map[string]any{}
			for i := 0; i+1 < len(kv); i += 2 {
				m[kv[i].(string)] = kv[i+1]
			}
			return m
		},
		"int": func(n int64) int { return int(n) },
		// A peer's last call's time, but only of one it answered (ok,
		// or refused): the time one took to fail says nothing of the
		// peer (R-G5).
		"latency": func(health string, ms float64) string {
			if health != "ok" && !strings.HasPrefix(health, "refused") {
				return "—"
			}
			return fmt.Sprintf("%.1f ms", ms)
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
	c.addGlobalEntitlementRoutes()
	c.fed = cfg
	c.mux.HandleFunc("POST /users/{user}/globalsessions/{pod}/{id}/logoff", c.signedIn(c.globalLogoff))
	c.mux.HandleFunc("POST /users/{user}/globalsessions/{pod}/{id}/disconnect", c.signedIn(c.globalDisconnect))
	c.pod = true
}

func (c *Console) globalLogoff(rq *request)     { c.globalSessionCommand(rq, "log off") }
func (c *Console) globalDisconnect(rq *request) { c.globalSessionCommand(rq, "disconnect") }

// globalSessionCommand logs off or disconnects one of a user's sessions
// in another pod of the federation, as listed on her sessions page
// (DELETE or POST .../disconnect of /users/{user}/globalsessions/{pod}/{id},
// R-U3): this pod's API asks that pod, which queues it for its host's
// agent (R-S4). The API decides who may (Contributors, Helpdesk and the
// admin; not Readers, not a principal scoped to host pools) and audits it
// on both pods. Back on her page, the flash says it is queued, with the
// API's warnings; a pod that did not answer is said there, the page
// still served; any other refusal is her page with its status.
func (c *Console) globalSessionCommand(rq *request, what string) {
	user, pod, id := rq.r.PathValue("user"), rq.r.PathValue("pod"), rq.r.PathValue("id")
	back := webguard.SafeNext(cmp.Or(rq.r.PostFormValue("back"), "/sessions?user="+url.QueryEscape(user)+"&exact=1"))
	path := "/api/v1/users/" + url.PathEscape(user) + "/globalsessions/" + url.PathEscape(pod) + "/" + url.PathEscape(id)
	method, body := http.MethodDelete, any(nil)
	if what == "disconnect" {
		method, body, path = http.MethodPost, struct{}{}, path+"/disconnect"
	}
	var cmd vdibroker.Command
	err := rq.api.do(rq.r.Context(), method, path, body, &cmd)
	switch vdibroker.ErrorCode(err) {
	case "":
		msg := fmt.Sprintf("The %s of %s's session on pod %s is queued there: that pod's host agent runs it on its next heartbeat (R-U3, R-S4).", what, user, pod)
		if cmd.SessionEnded {
			// That pod ended a Pending session its agent never
			// reported at once, as this pod's own log off says.
			msg = fmt.Sprintf("%s's session on pod %s is logged off: it ended now, as that pod's host agent had not reported it yet; a log off stays queued there in case its logon is under way (R-U3, R-S4).", user, pod)
		}
		c.redirect(rq, back, msg+warned(cmd.Warnings))
	case vdibroker.EUnauthenticated:
		c.apiError(rq, err)
	case vdibroker.EPodUnavailable:
		// Its message says which pod and why: it did not answer, or
		// refused this pod's call. One that did not answer says when
		// to try again in its Retry-After (the LoadTTL for which this
		// pod passes it over), said once, here.
		again := "in a moment"
		if ra := vdibroker.ErrorRetryAfter(err); ra > 0 {
			again = fmt.Sprintf("in %d s", int((ra+time.Second-1)/time.Second))
		}
		c.redirect(rq, back, fmt.Sprintf("The %s of %s's session on pod %s was not confirmed: %s. Try again %s, or use pod %s's console.",
			what, user, pod, strings.TrimSuffix(vdibroker.ErrorMessage(err), "."), again, pod))
	default:
		c.renderSessionsAt(rq, back, err)
	}
}

// otherPodsSessions are user's open sessions in the other pods of the
// federation (GET /users/{user}/globalsessions, R-U3, R-G1), for the
// sessions page of one user; failed says why the pod could not ask.
func (c *Console) otherPodsSessions(rq *request, user string) (gs *vdibroker.GlobalSessions, failed string) {
	now := c.now()
	if c.notGlobal.has(rq.sid, now) {
		return nil, ""
	}
	gs = &vdibroker.GlobalSessions{}
	err := rq.api.do(rq.r.Context(), http.MethodGet, "/api/v1/users/"+url.PathEscape(user)+"/globalsessions", nil, gs)
	switch vdibroker.ErrorCode(err) {
	case "":
		return gs, ""
	case vdibroker.EPermission:
		// A principal scoped to host pools: global views are not its.
		// Asked again on each of its pages, the API would audit each
		// refusal and spend its listings (R-SEC): once is enough.
		c.notGlobal.add(rq.sid, rq.sess.Expires, now)
		return nil, ""
	default:
		return nil, rq.describe(err)
	}
}

// notGlobal holds web sessions (by id) that no longer ask for users'
// sessions in other pods, until they expire: at most maxNotGlobal, so
// that sign-ins of scoped principals cost bounded memory (past it the
// page asks, as before).
type notGlobal struct {
	mu sync.Mutex
	m  map[string]time.Time
}

const maxNotGlobal = 10_000

func (n *notGlobal) has(sid string, now time.Time) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	exp, ok := n.m[sid]
	return ok && now.Before(exp)
}

func (n *notGlobal) add(sid string, expires, now time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.m == nil {
		n.m = map[string]time.Time{}
	}
	if len(n.m) >= maxNotGlobal {
		maps.DeleteFunc(n.m, func(_ string, exp time.Time) bool { return !now.Before(exp) })
		if len(n.m) >= maxNotGlobal {
			return
		}
	}
	n.m[sid] = expires
}

// fedStatus is GET /api/v1/federation as the page reads it.
type fedStatus struct {
	Warnings []string             `json:"warnings"`
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
		// AskedAt: a call to the peer under way, unanswered when the
		// page stopped waiting for it (peerWait).
		AskedAt *time.Time `json:"askedAt"`
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
	c.renderFederation(rq, http.StatusOK, map[string]any{}, nil)
}

// renderFederation shows the federation page with data's extras (a
// banner, the pods' answers to a change) and one of its forms as posted
// (nil: every form blank), reading the document as this pod holds it now.
func (c *Console) renderFederation(rq *request, status int, data map[string]any, f *publishForm) {
	c.renderFederationLoaded(rq, status, data, f, nil)
}

// renderFederationLoaded is renderFederation; loaded, when not nil, is
// given the entitlements' member loads the page read, before it is
// shown, to set data's words by them (showApplied: a new member's pool
// not found on its pod) without another call to the pods.
func (c *Console) renderFederationLoaded(rq *request, status int, data map[string]any, f *publishForm, loaded func([]fedEntitlement)) {
	ctx := rq.r.Context()
	data["Title"], data["Nav"] = "Federation", "federation"
	// The peers' health and the members' loads, asked at once, each
	// peer waited for at most the page's wait: a peer that accepts the
	// connection and never answers is shown as not answering instead of
	// holding the page for --pod-timeout (R-G5).
	wait := cmp.Or(c.fed.PeerWait, DefaultPeerWait)
	q := "?peerWait=" + url.QueryEscape(wait.String())
	var (
		st     fedStatus
		ges    listAnswer[fedEntitlement]
		gesErr error
		wg     sync.WaitGroup
	)
	wg.Go(func() {
		gesErr = rq.api.do(ctx, "GET", apiPrefix+"/globalentitlements"+q, nil, &ges)
	})
	err := rq.api.do(ctx, "GET", apiPrefix+"/federation"+q, nil, &st)
	wg.Wait()
	switch vdibroker.ErrorCode(err) {
	case "":
	case vdibroker.ENotFound:
		// Not a pod, or no document yet: say so on the page.
		data["NotFederated"] = vdibroker.ErrorMessage(err)
		c.page(rq, status, "federation", data)
		return
	default:
		c.apiError(rq, err)
		return
	}
	if gesErr != nil {
		c.apiError(rq, gesErr)
		return
	}
	data["PeerWait"] = wait.String()
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
	// The peers known to hold another generation: the page offers to
	// send this pod's document again.
	for _, p := range st.Peers {
		if p.GenerationMismatch {
			data["Differ"] = true
		}
	}
	if data["Differ"] == nil {
		data["Differ"] = false
	}
	if loaded != nil {
		loaded(ges.Value)
	}
	data["Status"] = st
	data["Sites"] = sites
	data["Entitlements"] = ges.Value
	data["Form"] = f
	data["Scopes"], data["Distributions"] = federation.Scopes, federation.Distributions
	data["Kinds"] = []string{vdibroker.KindDesktop, vdibroker.KindApplication}
	data["NameMax"], data["PodNameMax"] = federation.MaxPodNameLen, federation.MaxPodNameLen
	data["PoolNameMax"], data["AppNameMax"], data["UserMax"] = vdibroker.MaxPoolNameLen, vdibroker.MaxAppNameLen, vdibroker.MaxUserLen
	c.page(rq, status, "federation", data)
}
