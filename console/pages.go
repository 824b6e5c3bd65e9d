package console

import (
	"cmp"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/loadindex"
)

// parsePages parses each page together with the layout.
func parsePages() map[string]*template.Template {
	funcs := template.FuncMap{
		"limit":    limitText,
		"pref":     loadindex.Preference,
		"lower":    strings.ToLower,
		"pathesc":  url.PathEscape,
		"duration": durationText,
		"percent":  func(f float64) string { return fmt.Sprintf("%.0f%%", f) },
		"add1":     func(i int) int { return i + 1 },
		"dict":     func(root, f any) map[string]any { return map[string]any{"Root": root, "F": f} },
		"metric": func(m *vdibroker.Metrics, which string) string {
			if m == nil {
				return "–"
			}
			v := m.CPUPercent
			if which == "memory" {
				v = m.MemoryPercent
			}
			return fmt.Sprintf("%.0f%%", v)
		},
	}
	pages := map[string]*template.Template{}
	for _, name := range []string{"signin", "error", "overview", "pool", "sessions", "placement"} {
		pages[name] = template.Must(template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html"))
	}
	return pages
}

// limitText shows maxSessionLimit, with 999999 as "no limit".
func limitText(n int) string {
	if n >= vdibroker.NoSessionLimit {
		return "no limit"
	}
	return strconv.Itoa(n)
}

// durationText is a short age: 4s, 3m 10s, 2h 5m, 3d 4h.
func durationText(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm %ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
	}
}

// poolRow is one line of the overview.
type poolRow struct {
	Pool                       poolAnswer
	Available, Total, Sessions int
	Drained                    int
	Capacity                   float64 // used capacity in percent (R-A1); -1 with no limit
	Meter                      template.HTML
}

// hostStatus is the host's status as the API answered it, or evaluated
// here (R-H1) when the answer left it empty.
func (c *Console) hostStatus(h *vdibroker.SessionHost, p *vdibroker.HostPool) string {
	if h.Status != "" {
		return h.Status
	}
	return vdibroker.HostStatus(h, p.HeartbeatTimeout(), c.now())
}

// summarize computes the overview line of a pool. Used capacity follows
// R-A1: open sessions / (maxSessionLimit × placeable hosts).
func (c *Console) summarize(p poolAnswer, hosts []vdibroker.SessionHost) poolRow {
	row := poolRow{Pool: p, Total: len(hosts), Capacity: -1}
	for i := range hosts {
		h := &hosts[i]
		if vdibroker.Placeable(c.hostStatus(h, &p.HostPool)) {
			row.Available++
		}
		if !h.AllowNewSession {
			row.Drained++
		}
		row.Sessions += h.Sessions
	}
	if p.MaxSessionLimit < vdibroker.NoSessionLimit {
		if capacity := p.MaxSessionLimit * row.Available; capacity > 0 {
			row.Capacity = 100 * float64(row.Sessions) / float64(capacity)
		} else if row.Sessions > 0 {
			row.Capacity = 100
		} else {
			row.Capacity = 0
		}
		row.Meter = meter(row.Capacity)
	}
	return row
}

func (c *Console) overview(rq *request) {
	ctx := rq.r.Context()
	pools, err := rq.api.listPools(ctx)
	if err != nil {
		c.apiError(rq, err)
		return
	}
	rows := make([]poolRow, 0, len(pools))
	counts := map[string]int{}
	var total poolRow
	for _, p := range pools {
		hosts, err := rq.api.listHosts(ctx, p.Name)
		if err != nil {
			c.apiError(rq, err)
			return
		}
		row := c.summarize(p, hosts)
		rows = append(rows, row)
		counts[p.Name] = row.Sessions
		total.Available += row.Available
		total.Total += row.Total
		total.Sessions += row.Sessions
	}
	c.history.record(c.now(), counts)
	c.page(rq, http.StatusOK, "overview", map[string]any{
		"Title": "Overview", "Nav": "overview",
		"Pools": rows, "Total": total,
		"History": timeChart(c.history.series(), c.now(), time.Hour),
	})
}

// settingsForm is the pool settings form: the values as typed and the error
// beside each field (keyed by the API's field path, e.g.
// "loadBalancing.cpuThreshold").
type settingsForm struct {
	Values map[string]string
	Checks map[string]bool
	Errors map[string]string
}

// Form fields of the pool settings (SPEC §2, §6), in display order.
var (
	intFields = []settingsField{
		{"maxSessionLimit", "Max session limit", "1..999999 (999999 = no limit)"},
		{"loadBalancing.loadIndexThreshold", "Load index threshold", "0..100, bucket 1 below it (R-LI3)"},
		{"loadBalancing.connectingSessionThreshold", "Connecting session threshold", "0..150"},
		{"loadBalancing.minServersInQueue", "Min servers in queue", "1..1000"},
		{"loadBalancing.hostLoadIndexThreshold", "Host load index threshold", "0..100, 0 = off (R-LI2)"},
		{"loadBalancing.hostConnectingSessionThreshold", "Host connecting session threshold", "0..150, 0 = off"},
		{"loadBalancing.sampleIntervalSeconds", "Sample interval (s)", "5..3600"},
	}
	floatFields = []settingsField{
		{"loadBalancing.cpuThreshold", "CPU threshold (%)", "0..100, 0 = not used"},
		{"loadBalancing.memoryThreshold", "Memory threshold (%)", "0..100, 0 = not used"},
		{"loadBalancing.diskQueueLengthThreshold", "Disk queue length threshold", "≥ 0, 0 = not used"},
		{"loadBalancing.diskReadLatencyThreshold", "Disk read latency threshold (ms)", "≥ 0, 0 = not used"},
		{"loadBalancing.diskWriteLatencyThreshold", "Disk write latency threshold (ms)", "≥ 0, 0 = not used"},
	}
	boolFields = []settingsField{
		{"loadBalancing.includeSessionCount", "Include session count", ""},
		{"loadBalancing.useCustomScript", "Use custom script (R-IDX3)", ""},
	}
)

type settingsField struct{ Name, Label, Help string }

// formFrom fills the form from a pool.
func formFrom(p *vdibroker.HostPool) *settingsForm {
	lb := p.LoadBalancing
	f := &settingsForm{Values: map[string]string{}, Checks: map[string]bool{}, Errors: map[string]string{}}
	f.Values["loadBalancerType"] = p.LoadBalancerType
	for name, v := range map[string]int{
		"maxSessionLimit":                              p.MaxSessionLimit,
		"loadBalancing.loadIndexThreshold":             lb.LoadIndexThreshold,
		"loadBalancing.connectingSessionThreshold":     lb.ConnectingSessionThreshold,
		"loadBalancing.minServersInQueue":              lb.MinServersInQueue,
		"loadBalancing.hostLoadIndexThreshold":         lb.HostLoadIndexThreshold,
		"loadBalancing.hostConnectingSessionThreshold": lb.HostConnectingSessionThreshold,
		"loadBalancing.sampleIntervalSeconds":          lb.SampleIntervalSeconds,
	} {
		f.Values[name] = strconv.Itoa(v)
	}
	for name, v := range map[string]float64{
		"loadBalancing.cpuThreshold":              lb.CPUThreshold,
		"loadBalancing.memoryThreshold":           lb.MemoryThreshold,
		"loadBalancing.diskQueueLengthThreshold":  lb.DiskQueueLengthThreshold,
		"loadBalancing.diskReadLatencyThreshold":  lb.DiskReadLatencyThreshold,
		"loadBalancing.diskWriteLatencyThreshold": lb.DiskWriteLatencyThreshold,
	} {
		f.Values[name] = strconv.FormatFloat(v, 'f', -1, 64)
	}
	f.Checks["loadBalancing.includeSessionCount"] = lb.IncludeSessionCount
	f.Checks["loadBalancing.useCustomScript"] = lb.UseCustomScript
	return f
}

// parseSettings reads the posted form into a PATCH body. Values that are
// not numbers are refused here, beside their field, and nothing is sent.
func parseSettings(r *http.Request) (*settingsForm, map[string]any) {
	f := &settingsForm{Values: map[string]string{}, Checks: map[string]bool{}, Errors: map[string]string{}}
	patch := map[string]any{}
	lb := map[string]any{}
	put := func(name string, v any) {
		if k, ok := strings.CutPrefix(name, "loadBalancing."); ok {
			lb[k] = v
		} else {
			patch[name] = v
		}
	}
	f.Values["loadBalancerType"] = r.PostFormValue("loadBalancerType")
	patch["loadBalancerType"] = f.Values["loadBalancerType"]
	for _, fd := range intFields {
		s := strings.TrimSpace(r.PostFormValue(fd.Name))
		f.Values[fd.Name] = s
		n, err := strconv.Atoi(s)
		if err != nil {
			f.Errors[fd.Name] = fd.Name + ": must be a whole number, allowed " + fd.Help
			continue
		}
		put(fd.Name, n)
	}
	for _, fd := range floatFields {
		s := strings.TrimSpace(r.PostFormValue(fd.Name))
		f.Values[fd.Name] = s
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			f.Errors[fd.Name] = fd.Name + ": must be a number, allowed " + fd.Help
			continue
		}
		put(fd.Name, v)
	}
	for _, fd := range boolFields {
		on := r.PostFormValue(fd.Name) == "on"
		f.Checks[fd.Name] = on
		put(fd.Name, on)
	}
	patch["loadBalancing"] = lb
	return f, patch
}

// poolView gathers what the pool page shows.
func (c *Console) poolPage(rq *request) {
	c.renderPool(rq, http.StatusOK, "", nil)
}

// renderPool shows the pool page with an optional error banner (an API
// refusal, with its status) and an optional settings form as posted.
func (c *Console) renderPool(rq *request, status int, banner string, form *settingsForm) {
	ctx := rq.r.Context()
	name := rq.r.PathValue("pool")
	p, err := rq.api.getPool(ctx, name)
	if err != nil {
		c.apiError(rq, err)
		return
	}
	hosts, err := rq.api.listHosts(ctx, name)
	if err != nil {
		c.apiError(rq, err)
		return
	}
	now := c.now()
	type hostRow struct {
		vdibroker.SessionHost
		Status       string
		Preference   string
		HeartbeatAge string
	}
	rows := make([]hostRow, len(hosts))
	bars := make([]hostBar, len(hosts))
	for i := range hosts {
		h := &hosts[i]
		st := c.hostStatus(h, &p.HostPool)
		age := "never"
		if h.LastHeartBeat != nil {
			age = durationText(now.Sub(*h.LastHeartBeat)) + " ago"
		}
		rows[i] = hostRow{SessionHost: *h, Status: st, Preference: loadindex.Preference(h.LoadIndex), HeartbeatAge: age}
		bars[i] = hostBar{Name: h.Name, Sessions: h.Sessions, Connecting: h.ConnectingSessions, LoadIndex: h.LoadIndex, Drained: !h.AllowNewSession, Status: st}
	}
	row := c.summarize(*p, hosts)
	c.history.record(now, map[string]int{p.Name: row.Sessions})
	if form == nil {
		form = formFrom(&p.HostPool)
	}
	lbTypes := []string{vdibroker.BreadthFirst, vdibroker.DepthFirst, vdibroker.LoadIndex}
	if p.HostPoolType == vdibroker.Personal {
		lbTypes = []string{vdibroker.Persistent, vdibroker.MultiplePersistent}
	}
	threshold := 0
	if p.LoadBalancerType == vdibroker.LoadIndex {
		threshold = p.LoadBalancing.LoadIndexThreshold
	}
	c.page(rq, status, "pool", map[string]any{
		"Title": p.Name, "Nav": "overview",
		"Pool": p, "Summary": row, "Hosts": rows, "Error": banner,
		"SessionsChart":  sessionsChart(bars, p.MaxSessionLimit),
		"LoadIndexChart": loadIndexChart(bars, threshold),
		"Form":           form, "LBTypes": lbTypes,
		"IntFields": intFields, "FloatFields": floatFields, "BoolFields": boolFields,
	})
}

// poolSettings saves the settings form with PATCH; the server validates
// (R-P4) and its field errors are shown beside the fields.
func (c *Console) poolSettings(rq *request) {
	pool := rq.r.PathValue("pool")
	form, patch := parseSettings(rq.r)
	if len(form.Errors) > 0 {
		c.renderPool(rq, http.StatusBadRequest, "Nothing was saved: correct the fields marked below.", form)
		return
	}
	p, err := rq.api.patchPool(rq.r.Context(), pool, patch)
	if err != nil {
		code := vdibroker.ErrorCode(err)
		if field := vdibroker.ErrorField(err); code == vdibroker.EInvalid && field != "" {
			form.Errors[field] = vdibroker.ErrorMessage(err)
			c.renderPool(rq, http.StatusBadRequest, "Nothing was saved: the broker refused a value (see the field below).", form)
			return
		}
		if code == vdibroker.ENotFound || code == vdibroker.EUnauthenticated {
			c.apiError(rq, err)
			return
		}
		c.renderPool(rq, vdibroker.HTTPStatus(code), describe(err), form)
		return
	}
	msg := "Settings saved. The next placement uses them (R-P1)."
	if len(p.Warnings) > 0 {
		msg += " Warning: " + strings.Join(p.Warnings, "; ")
	}
	c.redirect(rq, "/pools/"+url.PathEscape(pool), msg)
}

// drain switches a host's drain mode (allowNewSession).
func (c *Console) drain(rq *request) {
	pool, host := rq.r.PathValue("pool"), rq.r.PathValue("host")
	on, err := strconv.ParseBool(rq.r.PostFormValue("drain"))
	if err != nil {
		c.renderPool(rq, http.StatusBadRequest, "drain: must be true or false", nil)
		return
	}
	if err := rq.api.patchHost(rq.r.Context(), pool, host, map[string]any{"allowNewSession": !on}); err != nil {
		if code := vdibroker.ErrorCode(err); code == vdibroker.ENotFound || code == vdibroker.EUnauthenticated {
			c.apiError(rq, err)
			return
		}
		c.renderPool(rq, vdibroker.HTTPStatus(vdibroker.ErrorCode(err)), describe(err), nil)
		return
	}
	msg := host + " is drained: it takes no new sessions; its sessions stay (R-C2)."
	if !on {
		msg = host + " takes new sessions again."
	}
	c.redirect(rq, "/pools/"+url.PathEscape(pool), msg)
}

// sessionRow is one line of the sessions page.
type sessionRow struct {
	vdibroker.UserSession
	Since string
}

func (c *Console) sessionsPage(rq *request) {
	c.renderSessions(rq, http.StatusOK, "")
}

func (c *Console) renderSessions(rq *request, status int, banner string) {
	ctx := rq.r.Context()
	filter := rq.r.URL.Query().Get("pool")
	pools, err := rq.api.listPools(ctx)
	if err != nil {
		c.apiError(rq, err)
		return
	}
	now := c.now()
	var rows []sessionRow
	names := make([]string, 0, len(pools))
	for _, p := range pools {
		names = append(names, p.Name)
		if filter != "" && p.Name != filter {
			continue
		}
		ss, err := rq.api.listSessions(ctx, p.Name)
		if err != nil {
			c.apiError(rq, err)
			return
		}
		for _, s := range ss {
			rows = append(rows, sessionRow{UserSession: s, Since: durationText(now.Sub(s.StateTime))})
		}
	}
	slices.SortFunc(rows, func(a, b sessionRow) int {
		return cmp.Or(cmp.Compare(a.HostPool, b.HostPool), cmp.Compare(a.User, b.User), cmp.Compare(a.ID, b.ID))
	})
	c.page(rq, status, "sessions", map[string]any{
		"Title": "Sessions", "Nav": "sessions",
		"Sessions": rows, "Pools": names, "Filter": filter, "Error": banner,
		"Back": rq.r.URL.RequestURI(),
	})
}

func (c *Console) logoff(rq *request)     { c.sessionCommand(rq, "log off") }
func (c *Console) disconnect(rq *request) { c.sessionCommand(rq, "disconnect") }

// sessionCommand queues a log off or disconnect for the host's agent (R-S4).
func (c *Console) sessionCommand(rq *request, what string) {
	pool, id := rq.r.PathValue("pool"), rq.r.PathValue("id")
	var err error
	if what == "log off" {
		err = rq.api.logoff(rq.r.Context(), pool, id)
	} else {
		err = rq.api.disconnect(rq.r.Context(), pool, id)
	}
	if err != nil {
		if vdibroker.ErrorCode(err) == vdibroker.EUnauthenticated {
			c.apiError(rq, err)
			return
		}
		c.renderSessions(rq, vdibroker.HTTPStatus(vdibroker.ErrorCode(err)), describe(err))
		return
	}
	user := rq.r.PostFormValue("user")
	c.redirect(rq, safeNext(cmp.Or(rq.r.PostFormValue("back"), "/sessions")),
		fmt.Sprintf("The %s of %s's session is queued: the host's agent runs it on its next heartbeat (R-S4).", what, cmp.Or(user, id)))
}

// placementPage shows a session's decision record (R-C7) in words.
func (c *Console) placementPage(rq *request) {
	ctx := rq.r.Context()
	pool, id := rq.r.PathValue("pool"), rq.r.PathValue("id")
	sess, err := rq.api.getSession(ctx, pool, id)
	if err != nil {
		c.apiError(rq, err)
		return
	}
	e, err := rq.api.placement(ctx, pool, id)
	if err != nil {
		c.apiError(rq, err)
		return
	}
	c.page(rq, http.StatusOK, "placement", map[string]any{
		"Title": "Placement of " + sess.User, "Nav": "sessions",
		"Session": sess, "Explain": e, "Story": explainStory(e),
		"Reasons": reasonText,
	})
}
