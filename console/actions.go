package console

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/internal/webguard"
)

// The console's actions beyond drain and settings: create a pool, delete
// one, issue a registration key, remove a host, drain or resume several
// hosts at once, send a session's user a message. Each is a form post
// (signedIn checks its CSRF token) that calls the API in-process with the
// signed-in user's token, so the API's access checker decides whether the
// user may (role and host-pool scope, R-SEC) and its audit trail records
// what was done, as for the same call from the CLI.

// createForm is the overview's "new host pool" form as typed, with the
// API's error beside its field.
type createForm struct {
	Values map[string]string
	Errors map[string]string
	Open   bool // show the form unfolded (it was posted and refused)
}

// createFields are the form's inputs, in order: the settings a pool is
// made with; the others keep their defaults and the pool page changes them.
var createFields = []string{"name", "hostPoolType", "loadBalancerType", "maxSessionLimit", "friendlyName"}

// createPool is POST /pools: PUT /api/v1/hostpools/{name} with
// If-None-Match: *, so an existing pool of that name is never replaced.
func (c *Console) createPool(rq *request) {
	form := &createForm{Values: map[string]string{}, Errors: map[string]string{}, Open: true}
	body := map[string]any{}
	for _, k := range createFields {
		v := strings.TrimSpace(rq.r.PostFormValue(k))
		form.Values[k] = v
		if v == "" || k == "name" {
			continue
		}
		if k == "maxSessionLimit" {
			n, err := strconv.Atoi(v)
			if err != nil {
				f, _ := vdibroker.PoolField(k)
				form.Errors[k] = "maxSessionLimit: must be a whole number, allowed " + f.Range()
				continue
			}
			body[k] = n
			continue
		}
		body[k] = v
	}
	name := form.Values["name"]
	if name == "" {
		form.Errors["name"] = "name: is required"
	}
	if len(form.Errors) > 0 {
		c.renderOverview(rq, http.StatusBadRequest, "Nothing was created: correct the fields marked below.", form)
		return
	}
	if _, err := rq.api.createPool(rq.r.Context(), name, body); err != nil {
		code := vdibroker.ErrorCode(err)
		switch field := vdibroker.ErrorField(err); {
		case code == vdibroker.EUnauthenticated:
			c.apiError(rq, err)
		case code == vdibroker.EInvalid && field != "":
			form.Errors[field] = vdibroker.ErrorMessage(err)
			if _, shown := form.Values[field]; !shown {
				form.Errors["name"] = vdibroker.ErrorMessage(err)
			}
			c.renderOverview(rq, http.StatusBadRequest, "Nothing was created: the broker refused a value (see the field below).", form)
		default:
			c.renderOverview(rq, vdibroker.HTTPStatus(code), rq.describe(err), form)
		}
		return
	}
	publish := "an application group publishes it to them (R-E4)"
	if c.pod {
		// The federation document may name the pool before it exists.
		publish = "an application group, or a global entitlement naming it (R-E9), publishes it to them (R-E4)"
	}
	c.redirect(rq, "/pools/"+url.PathEscape(name), "Host pool "+name+" created. Issue a registration key below and register its session hosts with it. End users cannot open it until "+publish+": see Published to users below.")
}

// deletePool is POST /pools/{pool}/delete: the API refuses while the pool
// has hosts or open sessions, saying what would go, unless force; done, the
// overview says what went.
func (c *Console) deletePool(rq *request) {
	pool := rq.r.PathValue("pool")
	force := rq.r.PostFormValue("force") == "true"
	del, err := rq.api.deletePool(rq.r.Context(), pool, force)
	if err != nil {
		c.refusedOnPool(rq, err)
		return
	}
	c.redirect(rq, "/", fmt.Sprintf("Host pool %s deleted: %s.", pool, del.Text()))
}

// keyExpiries are the registration key form's choices of lifetime, in
// hours, within the API's 1 hour..27 days.
var keyExpiries = []int{1, 8, 24, 7 * 24, 27 * 24}

// registrationKey is POST /pools/{pool}/registrationtoken: a new key for
// agents to register hosts with, shown once on a page of its own (the
// broker keeps only its hash) with a copy button, its expiry and the
// agent's command line.
func (c *Console) registrationKey(rq *request) {
	pool := rq.r.PathValue("pool")
	hours, err := strconv.Atoi(rq.r.PostFormValue("expiresInHours"))
	if err != nil {
		c.renderPool(rq, http.StatusBadRequest, "expiresInHours: must be a whole number of hours, 1 to 648 (27 days)", nil)
		return
	}
	req := vdibroker.RegistrationTokenRequest{ExpiresInSeconds: hours * 3600}
	if v := strings.TrimSpace(rq.r.PostFormValue("maxHosts")); v != "" {
		if req.MaxHosts, err = strconv.Atoi(v); err != nil {
			c.renderPool(rq, http.StatusBadRequest, "maxHosts: must be a whole number (0 or empty: no limit)", nil)
			return
		}
	}
	key, err := rq.api.createRegistrationToken(rq.r.Context(), pool, req)
	if err != nil {
		c.refusedOnPool(rq, err)
		return
	}
	scheme := "http"
	if c.secure(rq.r) {
		scheme = "https"
	}
	c.page(rq, http.StatusCreated, "regkey", map[string]any{
		"Title": "Registration key · " + pool, "Nav": "overview",
		"Pool": pool, "Key": key, "ExpiresIn": durationText(key.ExpirationTime.Sub(c.now())),
		"Server": scheme + "://" + rq.r.Host,
	})
}

// removeHost is POST /pools/{pool}/hosts/{host}/delete: the host goes and
// its agent's credential is revoked; refused while it has sessions unless
// force (they end, HostDeleted).
func (c *Console) removeHost(rq *request) {
	pool, host := rq.r.PathValue("pool"), rq.r.PathValue("host")
	force := rq.r.PostFormValue("force") == "true"
	if err := rq.api.deleteHost(rq.r.Context(), pool, host, force); err != nil {
		if code := vdibroker.ErrorCode(err); code == vdibroker.ENotFound || code == vdibroker.EUnauthenticated {
			c.apiError(rq, err)
			return
		}
		c.renderHost(rq, vdibroker.HTTPStatus(vdibroker.ErrorCode(err)), rq.describe(err))
		return
	}
	c.redirect(rq, "/pools/"+url.PathEscape(pool), host+" removed: its agent's credential is revoked, so it must register again to come back.")
}

// refusedOnPool answers the API's refusal of an action on a pool or its
// host: a pool or host that is not there (or not the user's to see) and a
// token no longer accepted on their own page, any other refusal (a
// Reader's change, a Conflict) on the pool page with its status and why.
func (c *Console) refusedOnPool(rq *request, err error) {
	if code := vdibroker.ErrorCode(err); code == vdibroker.ENotFound || code == vdibroker.EUnauthenticated {
		c.apiError(rq, err)
		return
	}
	c.renderPool(rq, vdibroker.HTTPStatus(vdibroker.ErrorCode(err)), rq.describe(err), nil)
}

// maxBulkHosts bounds one bulk drain: a page of the pool's hosts.
const maxBulkHosts = hostsPerPage

// bulkDrain is POST /pools/{pool}/hosts/drain: drain (action drain) or
// resume (action resume) the hosts ticked on the pool page, one PATCH
// each, so each is authorized and audited on its own; the answer names
// those done and those refused.
func (c *Console) bulkDrain(rq *request) {
	pool := rq.r.PathValue("pool")
	_ = rq.r.ParseForm()
	hosts := rq.r.PostForm["host"]
	action := rq.r.PostFormValue("action")
	switch {
	case action != "drain" && action != "resume":
		c.renderPool(rq, http.StatusBadRequest, "action: must be drain or resume", nil)
		return
	case len(hosts) == 0:
		c.renderPool(rq, http.StatusBadRequest, "No host was ticked: tick the hosts to "+action+" in the table, then press the button again.", nil)
		return
	case len(hosts) > maxBulkHosts:
		c.renderPool(rq, http.StatusBadRequest, fmt.Sprintf("host: at most %d hosts at once (a page of the table), got %d", maxBulkHosts, len(hosts)), nil)
		return
	}
	var done, refused []string
	status := http.StatusOK
	for _, h := range hosts {
		err := rq.api.patchHost(rq.r.Context(), pool, h, map[string]any{"allowNewSession": action == "resume"})
		switch code := vdibroker.ErrorCode(err); {
		case err == nil:
			done = append(done, h)
		case code == vdibroker.EUnauthenticated:
			c.apiError(rq, err)
			return
		default:
			refused = append(refused, h+": "+vdibroker.ErrorMessage(err))
			if status == http.StatusOK { // the first refusal's status
				status = vdibroker.HTTPStatus(code)
			}
		}
	}
	verb := map[string]string{"drain": "Drained", "resume": "Resumed"}[action]
	msg := fmt.Sprintf("%s %d host%s: %s.", verb, len(done), plural(len(done)), strings.Join(done, ", "))
	if action == "drain" {
		msg += " They take no new sessions; their sessions stay (R-C2)."
	}
	if len(refused) > 0 {
		banner := "Refused by the broker for " + strings.Join(refused, "; ") + "."
		if len(done) > 0 {
			banner = msg + " " + banner
		}
		c.renderPool(rq, status, banner, nil)
		return
	}
	c.redirect(rq, "/pools/"+url.PathEscape(pool), msg)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// messagePage is GET /pools/{pool}/sessions/{id}/message: the form that
// sends a session's user a message (R-S4).
func (c *Console) messagePage(rq *request) {
	if refuseMessageForm(c, rq) {
		return
	}
	c.renderMessage(rq, http.StatusOK, "", "")
}

// refuseMessageForm answers 403 to a principal that may not send messages
// (a Reader, R-S4) asking for a message form, as the pages offer it no
// link: a form the broker would refuse to send is not shown. The broker
// refuses the post all the same.
func refuseMessageForm(c *Console, rq *request) bool {
	if canOperate(rq.sess) {
		return false
	}
	c.errorPage(rq.w, rq.r, http.StatusForbidden, "Your token may not send messages (R-S4): Contributor and Helpdesk tokens may. Reader tokens can look at everything and change nothing.")
	return true
}

func (c *Console) renderMessage(rq *request, status int, text, fieldErr string) {
	pool, id := rq.r.PathValue("pool"), rq.r.PathValue("id")
	s, err := rq.api.getSession(rq.r.Context(), pool, id)
	if err != nil {
		c.apiError(rq, err)
		return
	}
	c.page(rq, status, "message", map[string]any{
		"Title": "Message to " + s.User, "Nav": "sessions",
		"Action":  "/pools/" + url.PathEscape(pool) + "/sessions/" + url.PathEscape(id) + "/message",
		"Session": s, "Text": text, "FieldError": fieldErr, "Max": vdibroker.MaxMessageLen,
		"Back": webguard.SafeNext(cmp.Or(rq.r.FormValue("back"), "/sessions?pool="+url.QueryEscape(pool))),
	})
}

// sendMessage is POST /pools/{pool}/sessions/{id}/message: the API queues
// the message for the host's agent, which shows it in the session on its
// next heartbeat (R-S4).
func (c *Console) sendMessage(rq *request) {
	pool, id := rq.r.PathValue("pool"), rq.r.PathValue("id")
	// A textarea posts its line breaks as CRLF (HTML): the agent gets
	// them as the user typed them, one LF each.
	text := strings.ReplaceAll(rq.r.PostFormValue("message"), "\r\n", "\n")
	warnings, err := rq.api.sendMessage(rq.r.Context(), pool, id, text)
	if err != nil {
		switch code := vdibroker.ErrorCode(err); code {
		case vdibroker.EInvalid:
			c.renderMessage(rq, http.StatusBadRequest, text, vdibroker.ErrorMessage(err))
		case vdibroker.ENotFound, vdibroker.EUnauthenticated:
			c.apiError(rq, err)
		default:
			c.renderMessage(rq, vdibroker.HTTPStatus(code), text, rq.describe(err))
		}
		return
	}
	user := cmp.Or(rq.r.PostFormValue("user"), id)
	c.redirect(rq, webguard.SafeNext(cmp.Or(rq.r.PostFormValue("back"), "/sessions")),
		fmt.Sprintf("The message to %s is queued: the host's agent shows it in the session on its next heartbeat (R-S4).", user)+warned(warnings))
}

// hostMessagePage is GET /pools/{pool}/hosts/{host}/message: the form
// that sends every user of a host a message (R-S4), as `vdibroker
// sessionhost send-message` does.
func (c *Console) hostMessagePage(rq *request) {
	if refuseMessageForm(c, rq) {
		return
	}
	c.renderHostMessage(rq, http.StatusOK, "", "")
}

func (c *Console) renderHostMessage(rq *request, status int, text, fieldErr string) {
	pool, name := rq.r.PathValue("pool"), rq.r.PathValue("host")
	h, err := rq.api.getHost(rq.r.Context(), pool, name)
	if err != nil {
		c.apiError(rq, err)
		return
	}
	hostURL := "/pools/" + url.PathEscape(pool) + "/hosts/" + url.PathEscape(name)
	c.page(rq, status, "message", map[string]any{
		"Title": "Message to the users of " + name, "Nav": "overview",
		"Action": hostURL + "/message",
		"Host":   h, "Text": text, "FieldError": fieldErr, "Max": vdibroker.MaxMessageLen,
		"Back": webguard.SafeNext(cmp.Or(rq.r.FormValue("back"), hostURL)),
	})
}

// sendHostMessage is POST /pools/{pool}/hosts/{host}/message: the API
// queues one message for each Active and Disconnected session of the host
// (R-S4); the flash says how many, and the API's warning when the host
// cannot show them now.
func (c *Console) sendHostMessage(rq *request) {
	pool, name := rq.r.PathValue("pool"), rq.r.PathValue("host")
	// CRLF from the textarea, LF to the agent, as for one session's.
	text := strings.ReplaceAll(rq.r.PostFormValue("message"), "\r\n", "\n")
	m, err := rq.api.sendHostMessage(rq.r.Context(), pool, name, text)
	if err != nil {
		switch code := vdibroker.ErrorCode(err); code {
		case vdibroker.EInvalid:
			c.renderHostMessage(rq, http.StatusBadRequest, text, vdibroker.ErrorMessage(err))
		case vdibroker.ENotFound, vdibroker.EUnauthenticated:
			c.apiError(rq, err)
		default:
			c.renderHostMessage(rq, vdibroker.HTTPStatus(code), text, rq.describe(err))
		}
		return
	}
	msg := fmt.Sprintf("%s has no Active or Disconnected session: no message was queued (R-S4).", name)
	if m.Queued > 0 {
		msg = fmt.Sprintf("The message is queued for %d session%s on %s: the host's agent shows it in each on its next heartbeat (R-S4).", m.Queued, plural(m.Queued), name)
		if m.AlreadyQueued > 0 {
			msg = strings.TrimSuffix(msg, ".") + fmt.Sprintf("; %d of them had it queued already and get it once.", m.AlreadyQueued)
		}
	}
	back := "/pools/" + url.PathEscape(pool) + "/hosts/" + url.PathEscape(name)
	c.redirect(rq, webguard.SafeNext(cmp.Or(rq.r.PostFormValue("back"), back)), msg+warned(m.Warnings))
}

// keyRow is a registration key as the pool page lists it.
type keyRow struct {
	vdibroker.RegistrationToken
	// State is "valid", "used up" or "expired"; Left the time to expiry.
	State, Left string
}

// keyRows are the pool's registration keys, valid ones first, each with
// what is left of it.
func keyRows(keys []vdibroker.RegistrationToken, now time.Time) []keyRow {
	rows := make([]keyRow, 0, len(keys))
	for _, k := range keys {
		r := keyRow{RegistrationToken: k, State: "valid", Left: durationText(k.ExpireTime.Sub(now))}
		switch {
		case !now.Before(k.ExpireTime):
			r.State, r.Left = "expired", ""
		case k.MaxHosts > 0 && k.Hosts >= k.MaxHosts:
			r.State = "used up"
		}
		rows = append(rows, r)
	}
	spent := func(r keyRow) int {
		if r.State == "valid" {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(rows, func(a, b keyRow) int {
		return cmp.Or(cmp.Compare(spent(a), spent(b)), b.ExpireTime.Compare(a.ExpireTime))
	})
	return rows
}
