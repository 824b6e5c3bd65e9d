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
	"github.com/vdibroker/vdibroker/internal/webguard"
	"github.com/vdibroker/vdibroker/loadindex"
	"github.com/vdibroker/vdibroker/placement"
)

// parsePages parses each page together with the layout.
func parsePages() map[string]*template.Template {
	funcs := pageFuncs()
	pages := map[string]*template.Template{}
	for _, name := range []string{"signin", "error", "overview", "pool", "sessions", "placement", "host", "rules", "audit", "scalingplans", "scalingplan", "autoscale", "regkey", "message"} {
		pages[name] = template.Must(template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html"))
	}
	return pages
}

// pageFuncs are the template functions every page (and the layout) uses.
func pageFuncs() template.FuncMap {
	return template.FuncMap{
		"limit":    limitText,
		"plural":   vdibroker.Plural,
		"pref":     loadindex.Preference,
		"lower":    strings.ToLower,
		"pathesc":  url.PathEscape,
		"duration": durationText,
		"percent":  func(f float64) string { return fmt.Sprintf("%.0f%%", f) },
		"add1":     func(i int) int { return i + 1 },
		"div24":    func(i int) int { return i / 24 },
		"dict":     func(root, f any) map[string]any { return map[string]any{"Root": root, "F": f} },
		"rules":    linkRules,
		"slug":     func(s string) string { return strings.ToLower(strings.ReplaceAll(s, " ", "-")) },
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
	// Taking counts the hosts that take new sessions now: available and
	// not drained (a drained host is available and takes none).
	Taking   int
	Drained  int
	Capacity float64 // used capacity in percent (R-A1); -1 with no limit
	Meter    template.HTML
}

// hostStatus is the host's status as the API answered it, or evaluated
// here (R-H1) when the answer left it empty.
func (c *Console) hostStatus(h *vdibroker.SessionHost, p *vdibroker.HostPool) string {
	if h.Status != "" {
		return h.Status
	}
	return vdibroker.HostStatus(h, p.HeartbeatTimeout(), c.now())
}

// summaryRow is a pool's overview row from the API's summary of it.
func summaryRow(p poolAnswer) poolRow {
	row := poolRow{Pool: p, Capacity: -1}
	if s := p.Summary; s != nil {
		row.Total, row.Available, row.Drained, row.Sessions, row.Taking = s.Hosts, s.Available, s.Drained, s.Sessions, s.TakingSessions
	}
	capacityOf(&row, p.MaxSessionLimit)
	return row
}

// capacityOf fills row's used capacity and its meter. Used capacity
// follows R-A1: open sessions / (maxSessionLimit × placeable hosts not
// drained): a drained host's places are not capacity.
func capacityOf(row *poolRow, limit int) {
	if limit >= vdibroker.NoSessionLimit {
		return
	}
	if capacity := limit * row.Taking; capacity > 0 {
		row.Capacity = 100 * float64(row.Sessions) / float64(capacity)
	} else if row.Sessions > 0 {
		row.Capacity = 100
	} else {
		row.Capacity = 0
	}
	row.Meter = meter(row.Capacity)
}

func (c *Console) overview(rq *request) {
	c.renderOverview(rq, http.StatusOK, "", nil)
}

// renderOverview shows the overview with an optional error banner and the
// new host pool form as posted (nil: empty and folded).
func (c *Console) renderOverview(rq *request, status int, banner string, form *createForm) {
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
		total.Taking += row.Taking
		total.Drained += row.Drained
		total.Total += row.Total
		total.Sessions += row.Sessions
	}
	c.history.record(c.now(), counts)
	if form == nil {
		form = &createForm{Values: map[string]string{}, Errors: map[string]string{}}
	}
	field := func(path string) vdibroker.Field {
		f, _ := vdibroker.PoolField(path)
		return f
	}
	c.page(rq, status, "overview", map[string]any{
		"Title": "Overview", "Nav": "overview", "Error": banner,
		"Pools": rows, "Total": total,
		"History": timeChart(onlyPools(c.history.series(), counts), c.now(), time.Hour), // scope.go
		"Create":  form, "PoolTypes": field("hostPoolType").Values(""), "LBTypes": field("loadBalancerType").Values(""),
		"LimitRange": field("maxSessionLimit").Range(),
		// The text fields' bounds are the API's (§2), as on the
		// pool's settings form: a friendly name the API takes is
		// not cut short at creation.
		"FriendlyNameMax": int(field("friendlyName").Max),
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

// settingsFields are the form's inputs for a pool of poolType whose load
// balancer type is lbType, in schema order: every setting that can change
// after creation (not name, not hostPoolType, R-P1), applies to the pool's
// type and is read by its load balancer type (a DepthFirst pool shows no
// load index setting). lbType "" keeps every load balancer type's settings.
func settingsFields(schema []vdibroker.Field, poolType, lbType string) []settingsField {
	var out []settingsField
	for _, f := range schema {
		if f.Immutable || !f.AppliesTo(poolType) {
			continue
		}
		if lbType != "" && f.LoadBalancerTypes != nil && !slices.Contains(f.LoadBalancerTypes, lbType) {
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

// settingsGroup is one section of the settings form.
type settingsGroup struct {
	Name   string
	Fields []settingsField
}

// groupOrder is the order of the form's sections (vdibroker.Group*).
var groupOrder = []string{vdibroker.GroupCapacity, vdibroker.GroupLoadIndex, vdibroker.GroupTimeouts, vdibroker.GroupPersonal, vdibroker.GroupPower, vdibroker.GroupGateway, vdibroker.GroupGeneral}

// groupFields splits the form's fields into their schema groups, in
// groupOrder, leaving out empty groups; fields of a group the order does
// not know go last, under their own name.
func groupFields(fields []settingsField) []settingsGroup {
	byName := map[string]*settingsGroup{}
	var out []*settingsGroup
	for _, name := range groupOrder {
		g := &settingsGroup{Name: name}
		byName[name] = g
		out = append(out, g)
	}
	for _, f := range fields {
		g := byName[f.Group]
		if g == nil {
			g = &settingsGroup{Name: cmp.Or(f.Group, "Other")}
			byName[f.Group] = g
			out = append(out, g)
		}
		g.Fields = append(g.Fields, f)
	}
	var groups []settingsGroup
	for _, g := range out {
		if len(g.Fields) > 0 {
			groups = append(groups, *g)
		}
	}
	return groups
}

// formHint is a field's help line: range, what 0 means, what it does.
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
	// No "LoadIndex only": the form shows a setting only to the pools
	// whose load balancer type reads it.
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
// hostsPerPage is how many hosts the pool page lists at a time.
const hostsPerPage = 100

func (c *Console) renderPool(rq *request, status int, banner string, form *settingsForm) {
	c.renderPoolWith(rq, status, banner, form, nil)
}

// renderPoolPublish shows the pool page with a banner and one of the
// "Published to users" card's forms as posted and refused (publish.go).
func (c *Console) renderPoolPublish(rq *request, status int, banner string, pub *publishForm) {
	c.renderPoolWith(rq, status, banner, nil, pub)
}

func (c *Console) renderPoolWith(rq *request, status int, banner string, form *settingsForm, pub *publishForm) {
	ctx := rq.r.Context()
	name := rq.r.PathValue("pool")
	p, err := rq.api.getPoolSummary(ctx, name)
	if err != nil {
		c.apiError(rq, err)
		return
	}
	// One page of hosts: a pool of 10,000 is 100 pages, not one page of
	// 15 MB; the summary above the table counts them all.
	after := rq.r.URL.Query().Get("after")
	hosts, next, err := rq.api.hostsPage(ctx, name, after, hostsPerPage)
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
		// StuckStart, for a host whose start timed out
		// (vdibroker.StartTimedOut), says since when: an admin may
		// start it again (R-A4).
		StuckStart string
		CanStart   bool // startOffered
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
		rows[i] = hostRow{SessionHost: *h, Status: st, Preference: loadindex.Preference(h.LoadIndex), HeartbeatAge: age, CanStart: startOffered(h, p.HeartbeatTimeout(), now)}
		if vdibroker.StartTimedOut(h, now) {
			rows[i].StuckStart = stuckStartText(h, p.HeartbeatTimeout(), now)
		}
		bars[i] = hostBar{Name: h.Name, Sessions: h.Sessions, Connecting: h.ConnectingSessions, LoadIndex: h.LoadIndex, Drained: !h.AllowNewSession, Status: st}
	}
	row := summaryRow(*p)
	c.history.record(now, map[string]int{p.Name: row.Sessions})
	fields := settingsFields(c.schema, p.HostPoolType, p.LoadBalancerType)
	if form == nil {
		form = formFrom(fields, &p.HostPool)
	}
	threshold := 0
	if p.LoadBalancerType == vdibroker.LoadIndex {
		threshold = p.LoadBalancing.LoadIndexThreshold
	}
	// The pool's registration keys, for those who may issue them (the API
	// shows them to Contributors and the admin only, ActionInspect).
	var keys []keyRow
	if canWrite(rq.sess) {
		if list, err := rq.api.listRegistrationTokens(ctx, name); err == nil {
			keys = keyRows(list, now)
		}
	}
	// The pool's application groups, read once for the card and the
	// RemoteApps warning; neither is a live part, so a live refresh,
	// which keeps only those (console.js), reads them not.
	var published *publishedCard
	remoteApps := ""
	if rq.r.Header.Get("X-Console-Refresh") == "" {
		if groups, err := rq.api.listAppGroups(ctx, name); err == nil {
			published = publishedOf(p, groups, func() globalReach { return c.globalReach(rq, name) })
			published.readApps(ctx, rq.api)
			remoteApps = remoteAppsWarning(p, groups)
		}
	}
	c.page(rq, status, "pool", map[string]any{
		"RemoteAppsWarning": remoteApps,
		"Published":         published,
		"Keys":              keys, "KeyExpiries": keyExpiries,
		"Title": p.Name, "Nav": "overview",
		"Pool": p, "Summary": row, "Hosts": rows, "Error": banner,
		"After": after, "NextAfter": next, "PageSize": hostsPerPage,
		"SessionsChart": sessionsChart(bars, p.MaxSessionLimit),
		// The load index decides only in LoadIndex pools (R-IDX): a
		// DepthFirst pool's "100 Blocked" said nothing about placement.
		"UsesLoadIndex":  p.LoadBalancerType == vdibroker.LoadIndex,
		"NoLoadIndex":    noLoadIndexText(p.LoadBalancerType),
		"LoadIndexChart": loadIndexChart(bars, threshold),
		"Form":           form, "Groups": groupFields(fields),
		"Publish": pub, "AppGroupTypes": []string{vdibroker.AppGroupDesktop, vdibroker.AppGroupRemoteApp},
		"CommandLineSettings": []string{vdibroker.CommandLineDoNotAllow, vdibroker.CommandLineAllow, vdibroker.CommandLineRequire},
		"AppGroupNameMax":     vdibroker.MaxAppGroupNameLen, "AppNameMax": vdibroker.MaxAppNameLen, "TextMax": vdibroker.MaxTextLen,
		"FilePathMax": vdibroker.MaxFilePathLen, "CommandLineMax": vdibroker.MaxCommandLineLen, "UserMax": vdibroker.MaxUserLen,
	})
}

// remoteAppsWarning warns that pool p publishes applications (a RemoteApp
// group among groups) and none of its hosts can run them: each
// application connect is refused until a host that can is added (R-E12).
// "" otherwise.
func remoteAppsWarning(p *poolAnswer, groups []vdibroker.ApplicationGroup) string {
	if p.Summary == nil || p.Summary.Hosts == 0 || p.Summary.CannotRunRemoteApps < p.Summary.Hosts {
		return ""
	}
	var apps []string
	for _, g := range groups {
		if g.ApplicationGroupType == vdibroker.AppGroupRemoteApp {
			apps = append(apps, g.Name)
		}
	}
	if len(apps) == 0 {
		return ""
	}
	return fmt.Sprintf("RemoteApp groups %s: %s.", strings.Join(apps, ", "), vdibroker.RemoteAppsWarningText(p.Name, p.Summary.Hosts))
}

// noLoadIndexText says why a pool of load balancer type lb shows no load
// index: its hosts are chosen by another rule (the host page says so too).
func noLoadIndexText(lb string) string {
	how := map[string]string{
		vdibroker.DepthFirst:   "which fills the host with the most sessions first (R-DF2)",
		vdibroker.BreadthFirst: "which spreads sessions over the hosts with the fewest (R-BF2)",
	}[lb]
	if how == "" {
		how = "whose hosts are each user's own (R-PE1)"
	}
	return fmt.Sprintf("Not used: this pool is %s, %s. The load index (CPU, memory and disk, R-IDX) decides only in LoadIndex pools, so this page shows none.", lb, how)
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
	form, patch := parseSettings(rq.r, settingsFields(c.schema, p.HostPoolType, p.LoadBalancerType))
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
		c.renderPool(rq, vdibroker.HTTPStatus(code), rq.describe(err), form)
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
		c.refusedOnPool(rq, err) // actions.go
		return
	}
	msg := host + " is drained: it takes no new sessions; its sessions stay (R-C2)."
	if !on {
		msg = host + " takes new sessions again."
	}
	back := "/pools/" + url.PathEscape(pool)
	if rq.r.PostFormValue("back") == "host" {
		back += "/hosts/" + url.PathEscape(host)
	}
	c.redirect(rq, back, msg)
}

// power starts or stops a host through the API (R-A4): form
// action start or stop, force true to stop a host with sessions; back
// "host" returns to the host's page, else to the pool's.
func (c *Console) power(rq *request) {
	pool, host := rq.r.PathValue("pool"), rq.r.PathValue("host")
	action := rq.r.PostFormValue("action")
	if action != "start" && action != "stop" {
		c.renderPool(rq, http.StatusBadRequest, "power: action must be start or stop", nil)
		return
	}
	force := rq.r.PostFormValue("force") == "true"
	back := "/pools/" + url.PathEscape(pool)
	if rq.r.PostFormValue("back") == "host" {
		back += "/hosts/" + url.PathEscape(host)
	}
	if err := rq.api.powerHost(rq.r.Context(), pool, host, action, force); err != nil {
		// A refusal (sessions open, no driver, already starting) is told
		// with its status, as drain's are.
		c.refusedOnPool(rq, err)
		return
	}
	msg := host + " is starting: it takes sessions once its agent heartbeats (R-A4)."
	if action == "stop" {
		msg = host + " is stopping through the pool's power driver."
	}
	c.redirect(rq, back, msg)
}

// sessionRow is one line of the sessions page.
type sessionRow struct {
	vdibroker.UserSession
	Since string
}

func (c *Console) sessionsPage(rq *request) {
	c.renderSessions(rq, http.StatusOK, "")
}

// sessionsFilter is what the sessions page shows: the API's filters
// (SPEC §9: ?user=, ?state=, ?sessionHost=) per pool, a page size, the
// cursor of the page (the pool it starts in and the API's own cursor
// there), and how the page's rows are sorted.
type sessionsFilter struct {
	Pool, User, Host, State string
	// Exact makes User one user's name (a link to their sessions); else
	// User is a search: the start of names, any case (?userPrefix=).
	Exact     bool
	Sort      string // "", user, host, state, since, created; "-" first for descending
	Limit     int
	At, After string
}

// query is the API's filter of f for one page: a user search unless the
// name is exact.
func (f sessionsFilter) query(limit int, after string) sessionQuery {
	q := sessionQuery{State: f.State, SessionHost: f.Host, Limit: limit, After: after}
	if f.Exact {
		q.User = f.User
	} else {
		q.UserPrefix = f.User
	}
	return q
}

// pageSizes are the sessions page's choices of rows per page.
var pageSizes = []int{25, 50, 100, 200, 500}

// sortKeys are the columns the sessions page sorts by.
var sortKeys = []string{"created", "user", "host", "state", "since"}

func sessionsFilterFrom(r *http.Request) sessionsFilter {
	q := r.URL.Query()
	f := sessionsFilter{
		Pool: q.Get("pool"), User: strings.TrimSpace(q.Get("user")), Host: strings.TrimSpace(q.Get("host")),
		State: q.Get("state"), Sort: q.Get("sort"), At: q.Get("at"), After: q.Get("after"), Limit: 50,
		Exact: q.Get("exact") == "1",
	}
	if n, err := strconv.Atoi(q.Get("limit")); err == nil && slices.Contains(pageSizes, n) {
		f.Limit = n
	}
	if !slices.Contains(sortKeys, strings.TrimPrefix(f.Sort, "-")) {
		f.Sort = ""
	}
	return f
}

// link is the sessions page's URL for f.
func (f sessionsFilter) link() string {
	v := url.Values{}
	for k, val := range map[string]string{"pool": f.Pool, "user": f.User, "host": f.Host, "state": f.State, "sort": f.Sort, "at": f.At, "after": f.After} {
		if val != "" {
			v.Set(k, val)
		}
	}
	if f.Limit != 50 {
		v.Set("limit", strconv.Itoa(f.Limit))
	}
	if f.Exact && f.User != "" {
		v.Set("exact", "1")
	}
	if len(v) == 0 {
		return "/sessions"
	}
	return "/sessions?" + v.Encode()
}

// sortLink is the link of a column header: sort by key, ascending, or
// descending when the page is sorted ascending by it already. The cursor
// stays: the sort orders the rows of this page.
func (f sessionsFilter) sortLink(key string) string {
	g := f
	g.Sort = key
	if f.Sort == key {
		g.Sort = "-" + key
	}
	return g.link()
}

// sortRows orders a page's rows by the filter's sort key.
func sortRows(rows []sessionRow, key string) {
	desc := strings.HasPrefix(key, "-")
	key = strings.TrimPrefix(key, "-")
	if key == "" || key == "created" && !desc {
		return // the API's order: by id, which starts with the creation time
	}
	slices.SortStableFunc(rows, func(a, b sessionRow) int {
		var c int
		switch key {
		case "user":
			c = cmp.Compare(a.User, b.User)
		case "host":
			c = cmp.Or(cmp.Compare(a.HostPool, b.HostPool), cmp.Compare(a.SessionHost, b.SessionHost))
		case "state":
			c = cmp.Compare(a.State, b.State)
		case "since":
			c = a.StateTime.Compare(b.StateTime)
		case "created":
			c = cmp.Compare(a.ID, b.ID)
		}
		if desc {
			c = -c
		}
		return c
	})
}

// renderSessions shows one page of sessions. The API pages each pool by
// session id (nextLink); with every pool selected the page goes on into
// the next pool, in name order, so 250,000 sessions are a walk of pages
// each costing one or two indexed reads, never a read of them all. A user
// search is the API's ?userPrefix= in each pool: the names starting with
// what was typed, any case, in name order, one index range per pool and
// page; a link to one user's sessions is the exact ?user=.
func (c *Console) renderSessions(rq *request, status int, banner string) {
	ctx := rq.r.Context()
	f := sessionsFilterFrom(rq.r)
	pools, err := rq.api.listPools(ctx)
	if err != nil {
		c.apiError(rq, err)
		return
	}
	names := make([]string, 0, len(pools))
	for _, p := range pools {
		names = append(names, p.Name)
	}
	targets := names
	if f.Pool != "" {
		targets = []string{f.Pool}
	}
	start := 0
	if f.At != "" {
		if i := slices.Index(targets, f.At); i >= 0 {
			start = i
		}
	}
	now := c.now()
	var rows []sessionRow
	next := f
	next.At, next.After = "", ""
	after := f.After
	for i := start; i < len(targets); i++ {
		ss, cursor, err := rq.api.sessionsPage(ctx, targets[i], f.query(f.Limit-len(rows), after))
		if err != nil {
			if vdibroker.ErrorCode(err) == vdibroker.EInvalid {
				banner = rq.describe(err)
				break
			}
			c.apiError(rq, err)
			return
		}
		after = ""
		for _, s := range ss {
			rows = append(rows, sessionRow{UserSession: s, Since: durationText(now.Sub(s.StateTime))})
		}
		if cursor != "" {
			next.At, next.After = targets[i], cursor
			break
		}
		if len(rows) >= f.Limit {
			if i+1 < len(targets) {
				next.At = targets[i+1]
			}
			break
		}
	}
	sortRows(rows, f.Sort)
	// How many sessions there are in all, when the hosts' counts (R-S1)
	// say it without reading a session: open sessions, no user filter.
	total := -1
	if f.User == "" && f.State == "" {
		total = 0
		for _, pool := range targets {
			hosts, err := rq.api.listHosts(ctx, pool)
			if err != nil {
				total = -1
				break
			}
			for _, h := range hosts {
				if f.Host == "" || h.Name == f.Host {
					total += h.Sessions
				}
			}
		}
	}
	first := f
	first.At, first.After = "", ""
	cols := map[string]string{}
	arrows := map[string]string{}
	for _, k := range sortKeys {
		cols[k] = f.sortLink(k)
		switch f.Sort {
		case k:
			arrows[k] = " ▲"
		case "-" + k:
			arrows[k] = " ▼"
		}
	}
	hasNext := next.At != ""
	// One user's sessions on a pod: those in the other pods too, on the
	// first page, unless the filter names a pool or host of this pod or
	// ended sessions.
	var other *vdibroker.GlobalSessions
	var otherFailed string
	if c.pod && f.Exact && f.User != "" && f.Pool == "" && f.Host == "" && f.State != vdibroker.StateLoggedOff && f.At == "" && f.After == "" {
		other, otherFailed = c.otherPodsSessions(rq, f.User)
		if other != nil && f.State != "" {
			other.Value = slices.DeleteFunc(other.Value, func(s *vdibroker.GlobalSession) bool { return s.State != f.State })
		}
	}
	c.page(rq, status, "sessions", map[string]any{
		"Other": other, "OtherFailed": otherFailed,
		"Title": "Sessions", "Nav": "sessions",
		"Sessions": rows, "Pools": names, "F": f, "Error": banner,
		"States": sessionStatesShown, "PageSizes": pageSizes, "Total": total,
		"Next": next.link(), "HasNext": hasNext, "First": first.link(), "Paged": f.At != "" || f.After != "",
		"SortLinks": cols, "SortArrows": arrows, "Back": rq.r.URL.RequestURI(),
		"Search": f.User != "" && !f.Exact,
	})
}

// sessionStatesShown are the state filter's choices: "" (open: Pending,
// Active and Disconnected, the API's default) or one state.
var sessionStatesShown = []string{vdibroker.StatePending, vdibroker.StateActive, vdibroker.StateDisconnected, vdibroker.StateLoggedOff}

func (c *Console) logoff(rq *request)     { c.sessionCommand(rq, "log off") }
func (c *Console) disconnect(rq *request) { c.sessionCommand(rq, "disconnect") }

// sessionCommand queues a log off or disconnect for the host's agent
// (R-S4). A logoff that ended a Pending session at once (the answer's
// SessionEnded) says so, not that the agent will run it.
func (c *Console) sessionCommand(rq *request, what string) {
	pool, id := rq.r.PathValue("pool"), rq.r.PathValue("id")
	var q *vdibroker.Command
	var err error
	if what == "log off" {
		q, err = rq.api.logoff(rq.r.Context(), pool, id)
	} else {
		q, err = rq.api.disconnect(rq.r.Context(), pool, id)
	}
	if err != nil {
		if vdibroker.ErrorCode(err) == vdibroker.EUnauthenticated {
			c.apiError(rq, err)
			return
		}
		c.renderSessionsAt(rq, webguard.SafeNext(cmp.Or(rq.r.PostFormValue("back"), "/sessions")), err)
		return
	}
	user := rq.r.PostFormValue("user")
	msg := fmt.Sprintf("The %s of %s's session is queued: the host's agent runs it on its next heartbeat (R-S4).", what, cmp.Or(user, id))
	if q.SessionEnded {
		msg = fmt.Sprintf("%s's session is logged off: it ended now, as its host's agent had not reported it yet; a log off stays queued in case its logon is under way (R-S4).", cmp.Or(user, id))
	}
	c.redirect(rq, webguard.SafeNext(cmp.Or(rq.r.PostFormValue("back"), "/sessions")), msg+warned(q.Warnings))
}

// renderSessionsAt answers a refused session action with the sessions
// page the form was on (back, a path of the console's own), its refusal
// as the banner: drawn at the form's address, the page listed every
// session and its forms sent the next action back to the POST's address,
// a page that does not exist.
func (c *Console) renderSessionsAt(rq *request, back string, err error) {
	u, perr := url.Parse(back)
	if perr != nil {
		u = &url.URL{Path: "/sessions"}
	}
	r := *rq.r
	r.URL = u
	shown := *rq
	shown.r = &r
	c.renderSessions(&shown, vdibroker.HTTPStatus(vdibroker.ErrorCode(err)), rq.describe(err))
}

// warned is the API's warnings of a queued command, for its flash: the
// host cannot carry it out now (R-S4), which "queued" alone hides.
func warned(warnings []string) string {
	if len(warnings) == 0 {
		return ""
	}
	return " Warning: " + strings.Join(warnings, " ")
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
