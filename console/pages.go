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
	"github.com/vdibroker/vdibroker/placement"
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
	capacityOf(&row, p.MaxSessionLimit)
	return row
}

// summaryRow is a pool's overview row from the API's summary of it.
func summaryRow(p poolAnswer) poolRow {
	row := poolRow{Pool: p, Capacity: -1}
	if s := p.Summary; s != nil {
		row.Total, row.Available, row.Drained, row.Sessions = s.Hosts, s.Available, s.Drained, s.Sessions
	}
	capacityOf(&row, p.MaxSessionLimit)
	return row
}

// capacityOf fills row's used capacity (R-A1) and its meter.
func capacityOf(row *poolRow, limit int) {
	if limit >= vdibroker.NoSessionLimit {
		return
	}
	if capacity := limit * row.Available; capacity > 0 {
		row.Capacity = 100 * float64(row.Sessions) / float64(capacity)
	} else if row.Sessions > 0 {
		row.Capacity = 100
	} else {
		row.Capacity = 0
	}
	row.Meter = meter(row.Capacity)
}

func (c *Console) overview(rq *request) {
	ctx := rq.r.Context()
	pools, err := rq.api.listPoolSummaries(ctx)
	if err != nil {
		c.apiError(rq, err)
		return
	}
	rows := make([]poolRow, 0, len(pools))
	counts := map[string]int{}
	var total poolRow
	for _, p := range pools {
		row := summaryRow(p)
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
		"History": timeChart(onlyPools(c.history.series(), counts), c.now(), time.Hour), // scope.go
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

// settingsField is one input of the pool settings form, made from a
// schema field (vdibroker.PoolFields): the same path, label, range and help
// the API validates against (R-P4).
type settingsField struct {
	vdibroker.Field
	// Input is the form control: "number", "text", "textarea", "select"
	// or "checkbox".
	Input string
	// MinAttr, MaxAttr and Step are the number input's attributes ("" for none).
	MinAttr, MaxAttr, Step string
	// MaxLength bounds a text input (0 for none).
	MaxLength int
	// Options are a select's values for this pool's type.
	Options []string
	// Hint is the help shown under the input: the range and what the
	// setting does.
	Hint string
}

// settingsFields are the form's inputs for a pool of poolType, in schema
// order: every setting that can change after creation (not name, not
// hostPoolType, R-P1) and applies to the pool's type.
func settingsFields(schema []vdibroker.Field, poolType string) []settingsField {
	var out []settingsField
	for _, f := range schema {
		if f.Immutable || !f.AppliesTo(poolType) {
			continue
		}
		sf := settingsField{Field: f}
		switch f.Kind {
		case vdibroker.KindInt, vdibroker.KindNumber:
			sf.Input, sf.MinAttr, sf.Step = "number", vdibroker.FormatValue(f.Min), "any"
			if !math.IsInf(f.Max, 1) {
				sf.MaxAttr = vdibroker.FormatValue(f.Max)
			}
			if f.Kind == vdibroker.KindInt {
				sf.Step = "1"
			}
		case vdibroker.KindBool:
			sf.Input = "checkbox"
		case vdibroker.KindEnum:
			sf.Input, sf.Options = "select", f.Values(poolType)
		default:
			sf.Input, sf.MaxLength = "text", int(f.Max)
			if f.Multiline {
				sf.Input = "textarea"
			}
		}
		sf.Hint = formHint(f)
		out = append(out, sf)
	}
	return out
}

// formHint is a field's help line: range, what 0 means, what it does, and
// which load balancer types read it.
func formHint(f vdibroker.Field) string {
	var parts []string
	if f.Kind != vdibroker.KindBool && f.Kind != vdibroker.KindEnum {
		r := f.Range()
		if f.Zero != "" {
			r += ", 0 = " + f.Zero
		}
		parts = append(parts, r)
	}
	parts = append(parts, f.Help)
	if f.LoadBalancerTypes != nil {
		parts = append(parts, strings.Join(f.LoadBalancerTypes, ", ")+" only")
	}
	return strings.Join(parts, " · ")
}

// formFrom fills the form from a pool.
func formFrom(fields []settingsField, p *vdibroker.HostPool) *settingsForm {
	f := &settingsForm{Values: map[string]string{}, Checks: map[string]bool{}, Errors: map[string]string{}}
	for _, fd := range fields {
		switch v := fd.Value(p).(type) {
		case bool:
			f.Checks[fd.Path] = v
		default:
			f.Values[fd.Path] = vdibroker.FormatValue(v)
		}
	}
	return f
}

// parseSettings reads the posted form into a PATCH body. Values that are
// not numbers are refused here, beside their field, and nothing is sent.
// A number or text the form did not post at all is not sent (PATCH leaves
// it); a checkbox not posted is off, as browsers send none for it.
func parseSettings(r *http.Request, fields []settingsField) (*settingsForm, map[string]any) {
	f := &settingsForm{Values: map[string]string{}, Checks: map[string]bool{}, Errors: map[string]string{}}
	patch := map[string]any{}
	_ = r.ParseForm()
	for _, fd := range fields {
		if fd.Kind == vdibroker.KindBool {
			on := r.PostFormValue(fd.Path) == "on"
			f.Checks[fd.Path] = on
			fd.Put(patch, on)
			continue
		}
		if _, posted := r.PostForm[fd.Path]; !posted {
			continue
		}
		raw := r.PostFormValue(fd.Path)
		switch fd.Kind {
		case vdibroker.KindInt:
			s := strings.TrimSpace(raw)
			f.Values[fd.Path] = s
			n, err := strconv.Atoi(s)
			if err != nil {
				f.Errors[fd.Path] = fd.Path + ": must be a whole number, allowed " + fd.Range()
				continue
			}
			fd.Put(patch, n)
		case vdibroker.KindNumber:
			s := strings.TrimSpace(raw)
			f.Values[fd.Path] = s
			v, err := strconv.ParseFloat(s, 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				f.Errors[fd.Path] = fd.Path + ": must be a number, allowed " + fd.Range()
				continue
			}
			fd.Put(patch, v)
		default:
			f.Values[fd.Path] = raw
			fd.Put(patch, raw)
		}
	}
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
	fields := settingsFields(c.schema, p.HostPoolType)
	if form == nil {
		form = formFrom(fields, &p.HostPool)
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
		"Form":           form, "Fields": fields,
	})
}

// poolSettings saves the settings form with PATCH; the server validates
// (R-P4) and its field errors are shown beside the fields.
func (c *Console) poolSettings(rq *request) {
	pool := rq.r.PathValue("pool")
	p, err := rq.api.getPool(rq.r.Context(), pool)
	if err != nil {
		c.apiError(rq, err)
		return
	}
	form, patch := parseSettings(rq.r, settingsFields(c.schema, p.HostPoolType))
	if len(form.Errors) > 0 {
		c.renderPool(rq, http.StatusBadRequest, "Nothing was saved: correct the fields marked below.", form)
		return
	}
	p, err = rq.api.patchPool(rq.r.Context(), pool, patch)
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
	// The words are placement's, shared with `vdibroker placement show`.
	type exclusionRow struct{ Host, Reason, Text string }
	rows := make([]exclusionRow, len(e.Excluded))
	for i, x := range e.Excluded {
		rows[i] = exclusionRow{Host: x.Host, Reason: x.Reason, Text: placement.ExclusionText(x)}
	}
	total, counts := placement.ExcludedSummary(e)
	c.page(rq, http.StatusOK, "placement", map[string]any{
		"Title": "Placement of " + sess.User, "Nav": "sessions",
		"Session": sess, "Explain": e, "Story": placement.Describe(e),
		"Exclusions": rows, "ExcludedTotal": total, "ExcludedCounts": counts,
	})
}
