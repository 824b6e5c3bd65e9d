package http

import (
	"context"
	"fmt"
	nethttp "net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/internal/ratelimit"
)

// The audit trail (R-SEC). handle starts an entry for every request
// (startAudit); for the routes of auditedActions it rides in the request's
// context, and the store writes it in the transaction of the change
// (vdibroker.WithAudit). A refusal is written alone (refused). Every entry
// written is also one JSON log line, message "audit" (recorded), for a SIEM.

// auditedActions names the action of every route that changes something.
var auditedActions = map[string]string{
	"PUT /api/v1/hostpools/{pool}":                                        "hostpool.put",
	"PATCH /api/v1/hostpools/{pool}":                                      "hostpool.update",
	"DELETE /api/v1/hostpools/{pool}":                                     "hostpool.delete",
	"PUT /api/v1/hostpools/{pool}/sessionhosts/{host}":                    "sessionhost.put",
	"PATCH /api/v1/hostpools/{pool}/sessionhosts/{host}":                  "sessionhost.update",
	"DELETE /api/v1/hostpools/{pool}/sessionhosts/{host}":                 "sessionhost.delete",
	"DELETE /api/v1/hostpools/{pool}/usersessions/{id}":                   "usersession.logoff",
	"POST /api/v1/hostpools/{pool}/usersessions/{id}/disconnect":          "usersession.disconnect",
	"POST /api/v1/hostpools/{pool}/usersessions/{id}/sendmessage":         "usersession.sendmessage",
	"POST /api/v1/hostpools/{pool}/registrationtoken":                     "registrationtoken.create",
	"DELETE /api/v1/hostpools/{pool}/registrationtokens/{id}":             "registrationtoken.revoke",
	"POST /api/v1/hostpools/{pool}/sessionhosts/{host}/resetregistration": "sessionhost.resetregistration",
	"POST /api/v1/hostpools/{pool}/sessionhosts/{host}/start":             "sessionhost.start",
	"POST /api/v1/hostpools/{pool}/sessionhosts/{host}/stop":              "sessionhost.stop",
	"POST /api/v1/hostpools/{pool}/sessionhosts/{host}/sendmessage":       "sessionhost.sendmessage",
	"PUT /api/v1/scalingplans/{name}":                                     "scalingplan.put",
	"DELETE /api/v1/scalingplans/{name}":                                  "scalingplan.delete",
	"POST /api/v1/tokens":                                                 "token.create",
	"DELETE /api/v1/tokens/{id}":                                          "token.revoke",
	"POST /api/v1/agent/register":                                         "sessionhost.register",
	"PUT /api/v1/federation":                                              "federation.put",
	"DELETE /api/v1/users/{user}/globalsessions/{pod}/{id}":               "globalsession.logoff",
	"POST /api/v1/users/{user}/globalsessions/{pod}/{id}/disconnect":      "globalsession.disconnect",
	// A peer's logoff or disconnect: usersession.logoff or
	// usersession.disconnect once its body is read (podSessionCommand).
	"POST /api/v1/pod/sessions/command": "podsession.command",
	// A peer's console's write of the document (podDocument).
	"PUT /api/v1/pod/federation":       "federation.put",
	"POST /api/v1/gateway/keys/rotate": "gatewaykey.rotate", // gatewaykey.revoke with ?revoke
	"POST /api/v1/signin":              "signin",
	"POST /api/v1/signout":             "signout",
}

// auditActionsElsewhere are the audit actions that no route of
// auditedActions names: written by the store, the broker's own power
// actions, the gateway's reports, the portal and the console. With
// auditedActions' they are the actions an audit list may filter by.
var auditActionsElsewhere = []string{
	"sessionhost.rekey",   // a host's own re-registration (store)
	"store.restore",       // vdibroker restore, into the restored store (store.ActionStoreRestore)
	"usersession.adopt",   // sessions a heartbeat reported that the broker did not place
	"scalingplan.update",  // a pool's change of its scaling plan, on the plan
	"gatewaykey.revoke",   // gateway key rotate with ?revoke
	"gateway.tunnel.open", // the gateway's reports (R-GW)
	"gateway.tunnel.channel",
	"gateway.tunnel.reached",
	"gateway.tunnel.close",
	"portal.launch",
	"form", // a portal form refused by its CSRF or same-site check
	vdibroker.RefusalSummaryAction,
}

// AuditActions are the actions of the audit trail, sorted; a refusal of
// any other route is recorded under the route's pattern ("GET
// /api/v1/hostpools").
func AuditActions() []string {
	all := slices.Clone(auditActionsElsewhere)
	for _, a := range auditedActions {
		all = append(all, a)
	}
	slices.Sort(all)
	return slices.Compact(all)
}

// checkAuditAction refuses a filter by an action the broker does not
// write, which would answer nothing silently: a typo. An API route's
// pattern is an action too (a refused read's), but not that of a route
// that refuses no one (registered refusesNoOne: "GET /healthz"), nor that of a
// route of auditedActions, whose entries are under its action (the 400
// names it); a mounted one
// ("/" of the console, "GET /metrics") is not either: no entry is
// recorded under it (the console's and the portal's are under actions of
// their own). It names the actions of the same noun, or the docs' list.
func (s *Server) checkAuditAction(action string) error {
	known := AuditActions()
	if slices.Contains(known, action) || slices.Contains(s.apiRoutes, action) && auditedActions[action] == "" {
		return nil
	}
	noun, _, _ := strings.Cut(action, ".")
	var near []string
	for _, a := range known {
		if strings.HasPrefix(a, noun+".") || a == noun {
			near = append(near, a)
		}
	}
	// Quoted cut: the caller chose its length (R-SEC).
	quoted := vdibroker.Cut(action, maxQuotedAction)
	if len(near) > 0 {
		return vdibroker.FieldError("action", "no audit entry has action %q: the %s actions are %s (every action: docs/behaviour.md, \"Audit actions\")", quoted, noun, strings.Join(near, ", "))
	}
	served := ""
	switch {
	case auditedActions[action] != "":
		also := map[string]string{"gatewaykey.rotate": " (or gatewaykey.revoke)", "podsession.command": " (or usersession.logoff and usersession.disconnect)"}
		served = fmt.Sprintf(" (a route of the API whose entries, refusals too, are under its action, %s%s, not its pattern)", auditedActions[action], also[auditedActions[action]])
	case s.unaudited[action]:
		served = " (a route of the API whose requests are not audited: it refuses no one, so no entry is recorded under its pattern)"
	case slices.Contains(s.patterns, action):
		served = " (a route this server serves, but not one of the API's: no entry is recorded under its pattern; the console's and the portal's own are under signin, form and portal.launch)"
	}
	return vdibroker.FieldError("action", "no audit entry has action %q%s: it must be an audit action such as sessionhost.update, token.create or signin (every action: docs/behaviour.md, \"Audit actions\"), or a refused API route's pattern such as \"GET /api/v1/hostpools\"", quoted, served)
}

// maxQuotedAction is the most bytes of an unknown action its refusal
// quotes back (vdibroker.Cut): longer than any action or route pattern.
const maxQuotedAction = 128

// startAudit begins the request's entry: time, remote address, request
// id, action and target; the principal is filled in once authenticated.
func (s *Server) startAudit(w nethttp.ResponseWriter, r *nethttp.Request) *vdibroker.AuditEntry {
	action := auditedActions[r.Pattern]
	if action == "" {
		action = r.Pattern
	}
	kind := vdibroker.PrincipalAnonymous
	switch r.Pattern {
	case "POST /api/v1/agent/register":
		kind = vdibroker.PrincipalRegistration
	case "POST /api/v1/agent/heartbeat":
		kind = vdibroker.PrincipalHost
	}
	ev := &vdibroker.AuditEntry{
		Time:       s.now().UTC(),
		Principal:  vdibroker.AuditPrincipal{Kind: kind},
		RemoteAddr: ratelimit.ClientAddr(r),
		RequestID:  w.Header().Get("X-Request-Id"),
		Action:     action,
		Target:     strings.TrimPrefix(r.URL.Path, "/api/v1/"),
		HostPool:   r.PathValue("pool"),
	}
	ev.Bound() // an anonymous caller chooses the path (R-SEC)
	return ev
}

// refused records a refused request: every failed authentication and
// authorization (authz), and any error of a route that changes something.
// Nothing was changed (a store method that fails has changed nothing), so
// the entry is written alone, within the bounds of RecordRefusal (R-SEC):
// per principal for a caller with a valid API credential, per address
// for anyone else, so that no flood of refused requests fills the store.
// Store outages are not recorded (they cannot be), nor are throttled
// requests of API principals; throttled failed authentications are
// counted.
func (s *Server) refused(r *nethttp.Request, ev *vdibroker.AuditEntry, err error, authz bool) {
	code := vdibroker.ErrorCode(err)
	switch {
	case ev.Seq != 0, code == vdibroker.EStoreUnavailable, s.unaudited[r.Pattern]:
		return
	case code == vdibroker.ETooManyRequests && ev.Principal.HoldsAPICredential():
		return
	case authz, code == vdibroker.EUnauthenticated, code == vdibroker.EPermission, code == vdibroker.ETooManyRequests,
		auditedActions[r.Pattern] != "":
	default:
		return
	}
	ev.Outcome = vdibroker.AuditRefused
	ev.Error = vdibroker.Cut(code+": "+vdibroker.ErrorMessage(err), vdibroker.MaxAuditField)
	ev.Before, ev.After = nil, nil
	ctx := context.WithoutCancel(r.Context())
	if _, aerr := s.svc.Audit.RecordRefusal(ctx, ev); aerr != nil {
		s.loggerFrom(r.Context()).Error("audit: cannot record a refusal", "err", aerr, "action", ev.Action, "target", ev.Target)
		return
	}
	s.recorded(r, ev)
}

// recorded logs an entry the store wrote (none: no log).
func (s *Server) recorded(r *nethttp.Request, ev *vdibroker.AuditEntry) {
	if ev.Seq == 0 {
		return
	}
	s.loggerFrom(r.Context()).Info("audit", "audit", ev)
}

// listAudit is GET /api/v1/auditlog: entries by seq, oldest first or,
// with ?order=desc, newest first, paged (?limit=, ?after=<seq>: the
// entries after that one in the listing's order), filtered by ?target=
// (exact, or a prefix ending in /), ?principal= (token id, OIDC subject or
// token subject), ?action=, ?requestId= (the reference the user portal
// shows beside a refusal), ?since= and ?until= (RFC 3339; since <= time <
// until). A principal scoped to host pools sees their entries (the audit
// service keeps them).
func (s *Server) listAudit(w nethttp.ResponseWriter, r *nethttp.Request) error {
	limit, after, err := pageParams(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	f := vdibroker.AuditFilter{Target: q.Get("target"), Principal: q.Get("principal"), Action: q.Get("action"),
		RequestID: q.Get("requestId"), Limit: limit + 1}
	switch o := q.Get("order"); o {
	case "", "asc":
	case "desc":
		f.Newest = true
	default:
		return vdibroker.FieldError("order", "must be asc (oldest first, the default) or desc (newest first), got %q", o)
	}
	if after != "" {
		if f.After, err = strconv.ParseInt(after, 10, 64); err != nil || f.After < 0 {
			return vdibroker.FieldError("after", "must be an entry's seq, got %q", after)
		}
	}
	for name, t := range map[string]*time.Time{"since": &f.Since, "until": &f.Until} {
		if v := q.Get(name); v != "" {
			if *t, err = time.Parse(time.RFC3339Nano, v); err != nil {
				return vdibroker.FieldError(name, "must be an RFC 3339 time such as 2026-01-02T03:04:05Z, got %q", v)
			}
		}
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return vdibroker.FieldError("until", "must be after since (%s), got %s", f.Since.Format(time.RFC3339), f.Until.Format(time.RFC3339))
	}
	list, err := s.svc.Audit.ListAudit(r.Context(), f)
	if err != nil {
		return err
	}
	// Checked on an empty answer only, so that an action an earlier
	// release wrote, no longer in the list, is still found; and, when
	// the other filters (a time, a target, a page) may have left out
	// such an entry, only once none has the action at all: the 400 says
	// no entry has it.
	if len(list) == 0 && f.Action != "" {
		if err := s.checkAuditAction(f.Action); err != nil {
			narrowed := f.Target != "" || f.Principal != "" || f.RequestID != "" || !f.Since.IsZero() || !f.Until.IsZero() || f.After != 0
			if !narrowed {
				return err
			}
			any, lerr := s.svc.Audit.ListAudit(r.Context(), vdibroker.AuditFilter{Action: f.Action, Limit: 1})
			if lerr != nil {
				return lerr
			}
			if len(any) == 0 {
				return err
			}
		}
	}
	out := page[*vdibroker.AuditEntry]{Value: list}
	if len(list) > limit {
		out.Value = list[:limit]
		out.NextLink = nextLink(r, limit, strconv.FormatInt(list[limit-1].Seq, 10))
	}
	if out.Value == nil {
		out.Value = []*vdibroker.AuditEntry{}
	}
	writeJSON(w, nethttp.StatusOK, out)
	return nil
}

// signin is POST /api/v1/signin: whoami that is recorded in the audit
// trail as a sign-in (the console signs in with it). A failed sign-in is
// recorded as a refusal by handle. A principal signs in at most
// SigninsPerPrincipal times a minute (R-SEC): any principal may call it,
// and each is an audit entry.
func (s *Server) signin(w nethttp.ResponseWriter, r *nethttp.Request) error {
	if p := vdibroker.PrincipalFrom(r.Context()); p != nil {
		a := p.Audit()
		if !s.signins.Spend(a.Kind+":"+a.ID, s.now()) {
			return throttled("this principal signs in faster than the web sessions take (16 a minute)", SigninsPerPrincipal/60.0)
		}
	}
	if ev := vdibroker.AuditFrom(r.Context()); ev != nil {
		if err := s.svc.Audit.AppendAudit(r.Context(), ev); err != nil {
			return err
		}
	}
	return s.whoami(w, r)
}

// signout is POST /api/v1/signout: a sign-in's end recorded in the audit
// trail (the console and the portal call it as they sign a browser out),
// so a helpdesk asked "I was signed out" can tell a sign-out from an
// expiry. A principal's are bounded as its sign-ins are, in a bucket of
// their own: no loop writes an entry a request.
func (s *Server) signout(w nethttp.ResponseWriter, r *nethttp.Request) error {
	if p := vdibroker.PrincipalFrom(r.Context()); p != nil {
		a := p.Audit()
		if !s.signins.Spend("signout "+a.Kind+":"+a.ID, s.now()) {
			return throttled("this principal signs out faster than it can sign in (16 a minute)", SigninsPerPrincipal/60.0)
		}
	}
	if ev := vdibroker.AuditFrom(r.Context()); ev != nil {
		if err := s.svc.Audit.AppendAudit(r.Context(), ev); err != nil {
			return err
		}
	}
	w.WriteHeader(nethttp.StatusNoContent)
	return nil
}
