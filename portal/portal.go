package portal

import (
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"k8s.io/utils/clock"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/identity"
	"github.com/vdibroker/vdibroker/internal/ratelimit"
	"github.com/vdibroker/vdibroker/internal/webguard"
	"github.com/vdibroker/vdibroker/websession"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Paths of the portal.
const (
	// Prefix is where the portal is mounted.
	Prefix = "/portal/"
	// OIDCCallbackPath is the single sign-on callback to register at the
	// provider (after the broker's external URL).
	OIDCCallbackPath = "/portal/signin/oidc/callback"
	// OIDCStatePath is the state cookie's path.
	OIDCStatePath = "/portal/signin/oidc"
	// SigninPath is the sign-in page (register the external URL and it as
	// the provider's post-logout redirect).
	SigninPath = "/portal/signin"
)

// Cookie names; over HTTPS each has the __Host- prefix and Path=/
// (webguard.CookieScope).
const (
	sessionCookie = "vdibroker_portal"
	signinCookie  = "vdibroker_portal_signin"
	// OIDCStateCookie carries a single sign-on under way.
	OIDCStateCookie = "vdibroker_portal_oidc"
)

// Area is the portal's name for its web sessions.
const Area = "portal"

// Defaults of Config.
const (
	DefaultMaxWait = 5 * time.Minute
	// DefaultAnonymousPerSecond and DefaultAnonymousBurst bound the
	// requests per client address to the paths that need no sign-in
	// (the sign-in page and form, single sign-on's start and callback).
	DefaultAnonymousPerSecond = 0.5
	DefaultAnonymousBurst     = 20
)

// DefaultSessionLimits bound the portal's sign-ins: as the console's
// (websession.DefaultLimits) for one user, and 250,000 in all, the
// sessions a pod carries: every user of a pod may be signed in at once
// within a sign-in's 12 hours (the console's 10,000 refused the
// 10,001st user of a morning). serve's --portal-max-signins sets PerArea.
var DefaultSessionLimits = vdibroker.WebSessionLimits{PerPrincipal: 16, Window: time.Minute, PerArea: 250_000}

// Auditor writes the portal's own audit entries (a launch, R-U7): a
// launch whole, a refused one within the bound of the broker's refusal
// audit (vdibroker.AuditService.RecordRefusal: per principal and window),
// since a signed-in user can ask for what her feed does not offer as
// often as she likes.
type Auditor interface {
	AppendAudit(ctx context.Context, e *vdibroker.AuditEntry) error
	RecordRefusal(ctx context.Context, e *vdibroker.AuditEntry) (written bool, err error)
}

// Refusals records a refused sign-in (R-U7, as the console's): kind names
// the path ("portal/token", "portal/oidc"), addr the caller, detail why.
// serve gives the broker's bounded refusal audit (console.AuditRefusals),
// which writes the first of an address in a window and counts the rest.
type Refusals interface {
	Refused(ctx context.Context, kind, addr, detail string)
}

// Config configures a Portal.
type Config struct {
	// API serves the broker's HTTP API, called in-process as the
	// signed-in user. Required.
	API http.Handler
	// Sessions keeps the sign-ins (the database). Required.
	Sessions vdibroker.WebSessionStore
	// Launches keeps the launches (the database), so that every replica
	// answers them. Required.
	Launches vdibroker.PortalLaunchStore
	// Audit records launches (nil: not recorded; the API still audits the
	// logoffs and disconnects).
	Audit Auditor
	// Refusals records refused sign-ins (nil: not recorded).
	Refusals Refusals
	// SpendWrite spends one of an end user's write budget (0), or says
	// how long she must wait for one, spending nothing (the API server's
	// UserWriteSpend, R-SEC). A launch spends its one as it is kept, and
	// its connect, marked vdibroker.WithWritePaid, no other: two launches
	// at once cannot both find her last one left (a launch whose connect
	// the budget refused failed, holding none of her launches at once,
	// R-U7). A launch past her budget is refused (429) in her language
	// before it is kept or audited. Nil: not spent here (the launch's
	// connect spends it, and a launch past her budget fails).
	SpendWrite func(*vdibroker.Principal) time.Duration
	// OIDC, when set, offers single sign-on; its FlowConfig must have
	// EndUsers set, its callback at OIDCCallbackPath and its state cookie
	// OIDCStateCookie at OIDCStatePath.
	OIDC *identity.Flow
	// PostLogoutURL is where the provider sends a browser it signed out
	// (the external URL + SigninPath).
	PostLogoutURL string
	// SecureCookies marks cookies Secure over plain HTTP too (behind a
	// TLS-terminating proxy).
	SecureCookies bool
	SessionTTL    time.Duration
	// SessionLimits bound the sign-ins (zero: DefaultSessionLimits).
	SessionLimits vdibroker.WebSessionLimits
	// MaxWait is the longest a launch waits for a starting host (R-U4;
	// 0: DefaultMaxWait); the broker bounds it too.
	MaxWait time.Duration
	// GatewayTokenTTL is how long a connection file's RD gateway access
	// token opens its one tunnel after the connect (serve
	// --gateway-token-ttl; 0: vdibroker.DefaultGatewayTokenTTL, the
	// broker's default too): the launch page of a file that carries one
	// says it connects once, within it (R-U4, R-GW1).
	GatewayTokenTTL time.Duration
	// MaxLaunches bounds the launches the pod keeps, under way or ended
	// and not yet fetched (0: DefaultMaxLaunches), MaxLaunchesPerSession
	// those of one sign-in (0: DefaultMaxLaunchesPerSession).
	MaxLaunches, MaxLaunchesPerSession int
	// AnonymousPerSecond and AnonymousBurst bound the anonymous requests
	// per address (0: the defaults).
	AnonymousPerSecond float64
	AnonymousBurst     int
	Clock              clock.WithTicker
	Logger             *slog.Logger
	Rand               io.Reader
}

// Portal is the user portal, an http.Handler to mount at Prefix. Close
// ends its launches and the sweep of its sign-ins.
type Portal struct {
	cfg      Config
	clock    clock.WithTicker
	log      *slog.Logger
	rand     io.Reader
	web      *websession.Manager
	anon     *ratelimit.Keyed
	pages    map[string]*template.Template
	mux      *http.ServeMux
	patterns []string

	// fullSaid is when the log last said the portal is full (unix
	// nanoseconds): once a minute at most, however many are refused.
	fullSaid atomic.Int64

	// ctx ends the launches' connects on Close.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// New returns a Portal. It panics without Config.API, Config.Sessions or
// Config.Launches (programming errors).
func New(cfg Config) *Portal {
	if cfg.API == nil || cfg.Sessions == nil || cfg.Launches == nil {
		panic("portal: Config.API, Config.Sessions and Config.Launches are required")
	}
	if cfg.SessionLimits == (vdibroker.WebSessionLimits{}) {
		cfg.SessionLimits = DefaultSessionLimits
	}
	if cfg.MaxLaunches <= 0 {
		cfg.MaxLaunches = DefaultMaxLaunches
	}
	if cfg.MaxLaunchesPerSession <= 0 {
		cfg.MaxLaunchesPerSession = DefaultMaxLaunchesPerSession
	}
	if cfg.GatewayTokenTTL <= 0 {
		cfg.GatewayTokenTTL = vdibroker.DefaultGatewayTokenTTL
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = DefaultMaxWait
	}
	if cfg.AnonymousPerSecond <= 0 {
		cfg.AnonymousPerSecond = DefaultAnonymousPerSecond
	}
	if cfg.AnonymousBurst <= 0 {
		cfg.AnonymousBurst = DefaultAnonymousBurst
	}
	p := &Portal{cfg: cfg, clock: cfg.Clock, log: cfg.Logger, rand: cfg.Rand}
	if p.clock == nil {
		p.clock = clock.RealClock{}
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.rand == nil {
		p.rand = rand.Reader
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.web = websession.New(websession.Config{Store: cfg.Sessions, Area: Area, Cookie: sessionCookie, Path: Prefix,
		TTL: cfg.SessionTTL, Limits: cfg.SessionLimits, Secure: p.secure, Clock: p.clock, Rand: cfg.Rand, Logger: p.log})
	p.anon = ratelimit.New(cfg.AnonymousPerSecond, cfg.AnonymousBurst)
	p.pages = map[string]*template.Template{}
	for _, name := range []string{"signin", "home", "launch", "error", "signout", "confirm"} {
		// The sessions list is home's and its refresh's (sessionsList).
		p.pages[name] = template.Must(template.New(name).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html", "templates/sessions.html"))
	}
	p.pages["sessions"] = template.Must(template.New("sessions").ParseFS(templateFS, "templates/fragment.html", "templates/sessions.html"))
	p.routes()
	return p
}

// Close ends the launches under way and the sweep of sign-ins.
func (p *Portal) Close() error {
	p.once.Do(func() {
		p.cancel()
		p.wg.Wait()
		p.web.Close()
	})
	return nil
}

func (p *Portal) handle(pattern string, h http.HandlerFunc) {
	p.patterns = append(p.patterns, pattern)
	p.mux.HandleFunc(pattern, h)
}

// Routes lists the patterns the portal serves, for the route matrix.
func (p *Portal) Routes() []string { return slices.Clone(p.patterns) }

func (p *Portal) routes() {
	p.mux = http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	files := webguard.Files(static, http.HandlerFunc(p.notFound))
	p.handle("GET /portal/static/", http.StripPrefix(Prefix+"static/", files).ServeHTTP)
	p.handle("GET /portal/icons/", http.StripPrefix(Prefix, files).ServeHTTP)
	p.handle("GET /portal/signin", p.anonymous(p.signinPage))
	p.handle("POST /portal/signin", p.anonymous(p.signinToken))
	p.handle("GET /portal/signin/oidc", p.anonymous(p.signinOIDC))
	p.handle("GET /portal/signin/oidc/callback", p.anonymous(p.oidcCallback))
	p.handle("POST /portal/signout", p.signedIn(p.signout))
	p.handle("GET /portal/{$}", p.signedIn(p.home))
	p.handle("GET /portal/sessions", p.signedIn(p.sessionsList))
	p.handle("POST /portal/sessions/{pool}/{id}/logoff", p.signedIn(p.logoff))
	p.handle("POST /portal/sessions/{pool}/{id}/disconnect", p.signedIn(p.disconnect))
	p.handle("POST /portal/globalsessions/{pod}/{id}/logoff", p.signedIn(p.globalLogoff))
	p.handle("POST /portal/globalsessions/{pod}/{id}/disconnect", p.signedIn(p.globalDisconnect))
	p.handle("POST /portal/launch", p.signedIn(p.launch))              // launch.go
	p.handle("GET /portal/launches/{id}", p.signedIn(p.launchPage))    // launch.go
	p.handle("GET /portal/launches/{id}/status", p.signedIn(p.status)) // launch.go
	p.handle("GET /portal/launches/{id}/file", p.signedIn(p.file))     // launch.go
	p.handle("/portal/", p.notFound)
}

// ServeHTTP implements http.Handler with the console's security headers.
func (p *Portal) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	webguard.Headers(w)
	p.mux.ServeHTTP(w, r)
}

func (p *Portal) secure(r *http.Request) bool { return r.TLS != nil || p.cfg.SecureCookies }

// anonymous bounds a path that needs no sign-in: per client address,
// AnonymousPerSecond with a burst of AnonymousBurst (R-U7).
func (p *Portal) anonymous(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !p.anon.Spend(ratelimit.ClientAddr(r), p.clock.Now()) {
			w.Header().Set("Retry-After", "60")
			p.errorPage(w, r, http.StatusTooManyRequests, "error.tooMany")
			return
		}
		h(w, r)
	}
}

// request is what a signed-in handler gets.
type request struct {
	w    http.ResponseWriter
	r    *http.Request
	sess *websession.Session
	lang *lang
	api  *caller
	// name is the user as her provider names her for display
	// (preferred_username, email or name), empty for a token's user.
	name string
}

// signedIn wraps a handler: no valid sign-in sends a GET (or HEAD) to
// the sign-in page and refuses anything else (401); every POST must
// carry the session's CSRF token from this site. A HEAD, which the mux
// sends to a GET's handler, is a GET's answer without its body, no
// form: refused as a forged one, it was recorded for the audit trail
// with its path, a launch's secret id in it (R-U7); a handler that
// changes something on a GET says what a HEAD does (the file is taken
// once, by a GET; the home page's flash is taken by its GET alone).
// A single sign-on session's ID token is verified again on every
// request (it expires with it).
func (p *Portal) signedIn(h func(*request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		safe := r.Method == http.MethodGet || r.Method == http.MethodHead
		sess := p.web.Get(r)
		var who *vdibroker.Principal
		var name string
		if sess != nil && sess.OIDC() {
			who, name = p.verify(r.Context(), sess)
			if who == nil {
				p.web.Forget(r.Context(), sess)
				sess = nil
			}
		}
		if sess == nil {
			if safe {
				http.Redirect(w, r, SigninPath+"?next="+url.QueryEscape(returnTo(r)), http.StatusSeeOther)
				return
			}
			// A browser that never signed in (no session cookie) is asked
			// to sign in; one whose cookie names no live sign-in (it
			// expired, ended elsewhere, or its ID token no longer
			// verifies) is told it expired.
			id := "error.signinNeeded"
			if p.hasSessionCookie(r) {
				id = "error.expired"
			}
			p.errorPage(w, r, http.StatusUnauthorized, id)
			return
		}
		if !safe && (!webguard.SameOrigin(r) || !webguard.Equal(r.PostFormValue("csrf"), sess.CSRF)) {
			// Recorded as the refused sign-ins are (R-U7; counted per
			// address, the audit's bound): a forged form is what it
			// catches.
			p.refused(r, "portal/csrf", vdibroker.Cut(r.Method+" "+r.URL.Path+": the form lacks this sign-in's CSRF token or comes from another site", vdibroker.MaxAuditField))
			// Still signed in: the page keeps her header's Sign out.
			l := pickLang(w, r, p.secure(r))
			p.signedInError(w, r, l, sess, http.StatusForbidden, l.T("error.csrf"))
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		h(&request{w: w, r: r, sess: sess, lang: pickLang(w, r, p.secure(r)), api: p.callerFor(w, r, sess.Token, who), name: name})
	}
}

// hasSessionCookie reports whether r carries a portal session cookie,
// live or not (either name: over HTTPS a replica of an older version may
// have set the one without the __Host- prefix).
func (p *Portal) hasSessionCookie(r *http.Request) bool {
	name, _ := webguard.CookieScope(sessionCookie, Prefix, p.secure(r))
	for _, n := range []string{name, sessionCookie} {
		if _, err := r.Cookie(n); err == nil {
			return true
		}
	}
	return false
}

// verify is a single sign-on session's user (nil: its ID token no longer
// verifies) and her name for display.
func (p *Portal) verify(ctx context.Context, sess *websession.Session) (*vdibroker.Principal, string) {
	if p.cfg.OIDC == nil {
		return nil, ""
	}
	id, err := p.cfg.OIDC.Provider().VerifyUser(ctx, sess.Token)
	if err != nil {
		return nil, ""
	}
	return endUser(id), id.Name
}

// endUser is a verified identity as the principal the portal calls the
// API as: a User, its groups for its entitlements (R-E6).
func endUser(id *identity.Identity) *vdibroker.Principal {
	groups := id.Groups
	if len(groups) > vdibroker.MaxGroups {
		groups = groups[:vdibroker.MaxGroups]
	}
	return &vdibroker.Principal{Kind: vdibroker.PrincipalOIDC, Role: vdibroker.RoleUser, Subject: id.Subject, Groups: groups}
}

// pageTitles are the pages' own titles, which <title> puts before the
// portal's name (data's Title, when set, is the page's): a page says
// what it is first, in the browser's tab and to a screen reader arriving
// on it.
var pageTitles = map[string]string{"signin": "signin.title", "error": "error.title", "signout": "signout", "confirm": "logoff"}

// render writes page name with data, the answer to r; every page gets
// its language as L and the start of its language links as LangHref.
func (p *Portal) render(w http.ResponseWriter, r *http.Request, status int, name string, l *lang, data map[string]any) {
	if data == nil {
		data = map[string]any{}
	}
	data["L"] = l
	data["LangHref"] = langHref(r)
	if id, ok := pageTitles[name]; ok && data["Title"] == nil {
		data["Title"] = l.T(id)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := p.pages[name].ExecuteTemplate(w, "layout", data); err != nil {
		p.log.Error("portal: render", "page", name, "err", err)
	}
}

// langHref is the start of a page's language links, to which the
// language's code is added: the page again (its other parameters kept:
// the sign-in page's next), or, for the answer to a form (a refused
// logoff, launch or sign-in), a page a GET reaches: the sign-in page
// with the form's next, else the portal's home. A link back to the
// form's own path found no page. A single sign-on callback's links go to
// the sign-in page.
func langHref(r *http.Request) string {
	q := url.Values{}
	path := ""
	switch {
	case r.URL.Path == OIDCCallbackPath:
		// Not the provider's code and state again: a used code is refused.
		path = SigninPath
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		q = r.URL.Query()
		q.Del("lang")
	case r.URL.Path == SigninPath:
		path = SigninPath
		if next := portalNext(r.PostFormValue("next")); next != Prefix {
			q.Set("next", next)
		}
	default:
		// Her page, the sessions the form carried as logging off still
		// so (homeWith).
		path = Prefix
		if off := loggingOff(r.PostForm["off"]); len(off) > 0 {
			q["off"] = off
		}
	}
	if len(q) == 0 {
		return path + "?lang="
	}
	return path + "?" + q.Encode() + "&lang="
}

// errorView is what an error page shows besides its message, in the
// language of showError's l.
type errorView struct {
	status int
	msg    string
	// sess is the sign-in of a signed-in user: her page's header has
	// Sign out, as her home page has (R-U1). nil: a browser not signed
	// in, whose page has none.
	sess *websession.Session
	// signin makes the page's one link Sign in (her sign-in is needed,
	// or ended), which brings her back to next once signed in (next
	// passes portalNext; "" or Prefix: her home page); else the link
	// leads back to her home page.
	signin bool
	next   string
}

// showError answers r with the error page of v in l, never cached.
func (p *Portal) showError(w http.ResponseWriter, r *http.Request, l *lang, v errorView) {
	// Back to her page: after a form of hers (a logoff refused), with the
	// sessions it carried as logging off still so (homeWith); after a page
	// that named them (a launch's, gone), those it named.
	off := r.PostForm["off"]
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		off = r.URL.Query()["off"]
	}
	data := map[string]any{"Message": v.msg, "Status": v.status, "LeadsToSignin": v.signin, "Back": homeWith(off)}
	if v.sess != nil {
		data["CSRF"], data["SignedIn"] = v.sess.CSRF, true
	}
	if next := portalNext(v.next); v.signin && next != Prefix {
		data["Next"] = next
	}
	w.Header().Set("Cache-Control", "no-store")
	p.render(w, r, v.status, "error", l, data)
}

// signedInError is the error page of a signed-in user (sess): status
// and msg, with her header's Sign out, for she is still signed in
// (R-U1). Every such page is this one.
func (p *Portal) signedInError(w http.ResponseWriter, r *http.Request, l *lang, sess *websession.Session, status int, msg string) {
	p.showError(w, r, l, errorView{status: status, msg: msg, sess: sess})
}

// errorPage answers a browser not signed in with status and the message
// id (and its arguments); a 401 leads to Sign in, which brings her back
// to the page r asked for (returnTo).
func (p *Portal) errorPage(w http.ResponseWriter, r *http.Request, status int, id string, args ...any) {
	l := pickLang(w, r, p.secure(r))
	v := errorView{status: status, msg: l.T(id, args...)}
	if status == http.StatusUnauthorized {
		v.signin, v.next = true, returnTo(r)
	}
	p.showError(w, r, l, v)
}

// userError answers a signed-in request with the error page of status
// and the message id (signedInError).
func (p *Portal) userError(rq *request, status int, id string, args ...any) {
	p.signedInError(rq.w, rq.r, rq.lang, rq.sess, status, rq.lang.T(id, args...))
}

// returnTo is where a sign-in that r's answer asks for brings her back:
// the page r asked for (a GET's address, kept within the portal by
// portalNext), or, for a form posted, her home page: a form's answer is
// no page a GET reaches again, and every form of hers is on her home
// page (or on the confirmation page, itself a form's answer), naming
// the sessions the form carried as logging off (homeWith, R-U3).
func returnTo(r *http.Request) string {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		_ = r.ParseForm() // bounded: every route's body is
		return homeWith(r.PostForm["off"])
	}
	return portalNext(r.URL.RequestURI())
}

// notFound answers a path the portal has no page at (404): to a
// signed-in browser with Sign out, as every page of hers, to any other
// with no header button and the way to her desktops (which leads to the
// sign-in page).
func (p *Portal) notFound(w http.ResponseWriter, r *http.Request) {
	sess := p.web.Get(r)
	if sess != nil && sess.OIDC() {
		if who, _ := p.verify(r.Context(), sess); who == nil {
			sess = nil
		}
	}
	if sess == nil {
		p.errorPage(w, r, http.StatusNotFound, "error.notFound")
		return
	}
	l := pickLang(w, r, p.secure(r))
	p.signedInError(w, r, l, sess, http.StatusNotFound, l.T("error.notFound"))
}

// apiError answers an API refusal with its status, in the user's words
// (R-U6): the message of its code in keys, else in apiErrorKeys, else
// error.failed, with the request's id as a reference for her helpdesk.
// The API's own message is the administrator's, in English (pools,
// hosts, ids): it is in the log line of that request id, not on her
// page.
func (p *Portal) apiError(rq *request, err error, keys map[string]string) {
	code := vdibroker.ErrorCode(err)
	if code == vdibroker.EInternal {
		p.log.Error("portal: API call failed", "request_id", rq.api.requestID, "path", rq.r.URL.Path, "err", err)
	} else {
		p.log.Info("portal: API call refused", "request_id", rq.api.requestID, "path", rq.r.URL.Path,
			"code", code, "err", vdibroker.ErrorMessage(err))
	}
	if code == vdibroker.EUnauthenticated {
		p.web.Forget(rq.r.Context(), rq.sess)
	}
	if ra := vdibroker.ErrorRetryAfter(err); ra > 0 {
		rq.w.Header().Set("Retry-After", strconv.Itoa(int(ra.Seconds()+0.5)))
	}
	key, ok := keys[code]
	if !ok {
		key = userErrorKey(apiErrorKeys, code)
	}
	msg := rq.lang.T(key)
	if code != vdibroker.EUnauthenticated && rq.api.requestID != "" {
		msg += " " + rq.lang.T("launch.reference", verbatim(rq.api.requestID))
	}
	// Still signed in unless the API refused her credential (then her
	// sign-in was forgotten above): Sign out, or the way to sign in,
	// back to the page she asked for.
	if code == vdibroker.EUnauthenticated {
		p.showError(rq.w, rq.r, rq.lang, errorView{status: vdibroker.HTTPStatus(code), msg: msg, signin: true, next: returnTo(rq.r)})
		return
	}
	p.signedInError(rq.w, rq.r, rq.lang, rq.sess, vdibroker.HTTPStatus(code), msg)
}

// apiErrorKeys are the user's words for an API refusal by its code
// (apiError); signinTokenKeys and signinOIDCKeys those for a refused
// sign-in; sessionErrorKeys those for a refused logoff or disconnect,
// mostly of a session that ended since the page was shown.
var (
	apiErrorKeys = map[string]string{
		vdibroker.EUnauthenticated:  "error.expired",
		vdibroker.EStoreUnavailable: "error.unavailable",
		vdibroker.ETooManyRequests:  "error.unavailable",
	}
	signinTokenKeys = map[string]string{
		vdibroker.EUnauthenticated:  "error.badToken",
		vdibroker.EPermission:       "error.notUser",
		vdibroker.EStoreUnavailable: "error.unavailable",
		vdibroker.ETooManyRequests:  "error.unavailable",
	}
	signinOIDCKeys = map[string]string{
		vdibroker.EUnauthenticated:  "error.ssoFailed",
		vdibroker.EPermission:       "error.ssoFailed",
		vdibroker.EStoreUnavailable: "error.unavailable",
		vdibroker.ETooManyRequests:  "error.unavailable",
	}
	sessionErrorKeys = map[string]string{
		vdibroker.ENotFound:        "error.sessionGone",
		vdibroker.EPermission:      "error.sessionGone",
		vdibroker.ETooManyRequests: "error.tooFast", // her write budget (R-SEC)
	}
)

// userErrorKey is keys' message of code, error.failed when it has none.
func userErrorKey(keys map[string]string, code string) string {
	if k, ok := keys[code]; ok {
		return k
	}
	return "error.failed"
}

// signinRefusal is a refused sign-in's message in the user's words
// (keys by the error's code), with the request id as her helpdesk's
// reference when the words are not hers to act on alone.
func signinRefusal(l *lang, keys map[string]string, err error, requestID string) string {
	key := userErrorKey(keys, vdibroker.ErrorCode(err))
	if errors.As(err, new(*vdibroker.AreaFull)) {
		key = "error.portalFull"
	}
	msg := l.T(key)
	if key == "error.failed" || key == "error.ssoFailed" || key == "error.portalFull" {
		if requestID != "" {
			msg += " " + l.T("launch.reference", verbatim(requestID))
		}
	}
	return msg
}

// signinPage offers single sign-on and the token form; the form's CSRF
// token is a cookie of its own, echoed in the form.
func (p *Portal) signinPage(w http.ResponseWriter, r *http.Request) {
	p.renderSignin(w, r, http.StatusOK, "")
}

func (p *Portal) renderSignin(w http.ResponseWriter, r *http.Request, status int, msg string) {
	csrf := webguard.Secret(p.rand)
	p.setSigninCookie(w, r, csrf, 3600)
	w.Header().Set("Cache-Control", "no-store")
	p.render(w, r, status, "signin", pickLang(w, r, p.secure(r)), map[string]any{
		"CSRF": csrf, "Error": msg, "Next": portalNext(r.FormValue("next")), "OIDC": p.cfg.OIDC != nil})
}

// setSigninCookie sets (maxAge -1: clears) the sign-in form's CSRF
// cookie: SameSite=Strict; over HTTPS named with the __Host- prefix
// (webguard.CookieScope), so a sibling subdomain cannot plant it.
func (p *Portal) setSigninCookie(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	secure := p.secure(r)
	name, path := webguard.CookieScope(signinCookie, SigninPath, secure)
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: path, MaxAge: maxAge,
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode})
}

// maxNext bounds where a sign-in returns to (portalNext), in bytes.
const maxNext = 2048

// portalNext keeps where a sign-in returns to (the sign-in page's and
// form's next, single sign-on's, the address a page asked for) a page of
// the portal on this site, else it is Prefix: a relative path under
// Prefix of at most maxNext bytes, with no scheme or host (webguard.SafeNext:
// no "//host", no backslash, no control character or space), and, once
// percent-decoded, no backslash, no control or format character (a bidi
// override shows the address in another order than it is) and no dot
// segment ("/portal/../console/", or "%2e%2e", which a browser takes as
// "..", or "..;x", which a proxy that strips parameters does), which
// could lead out of the portal.
func portalNext(next string) string {
	if len(next) > maxNext {
		return Prefix
	}
	next = webguard.SafeNext(next)
	if !strings.HasPrefix(next, Prefix) {
		return Prefix
	}
	u, err := url.Parse(next)
	if err != nil || strings.ContainsFunc(u.Path, func(c rune) bool { return c == '\\' || unicode.IsControl(c) || unicode.Is(unicode.Cf, c) }) {
		return Prefix
	}
	for seg := range strings.SplitSeq(u.Path, "/") {
		// A segment's ;parameters are stripped by some proxies and
		// servers before they resolve dot segments: "..;" is "..".
		seg, _, _ = strings.Cut(seg, ";")
		if seg == "." || seg == ".." {
			return Prefix
		}
	}
	return next
}

// signinToken signs in with a User token.
func (p *Portal) signinToken(w http.ResponseWriter, r *http.Request) {
	l := pickLang(w, r, p.secure(r))
	name, _ := webguard.CookieScope(signinCookie, SigninPath, p.secure(r))
	ck, err := r.Cookie(name)
	if err != nil || !webguard.Equal(r.PostFormValue("csrf"), ck.Value) || !webguard.SameOrigin(r) {
		p.refused(r, "portal/token", "the sign-in form's CSRF check failed")
		p.renderSignin(w, r, http.StatusForbidden, l.T("error.csrf"))
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	if token == "" {
		p.renderSignin(w, r, http.StatusBadRequest, l.T("error.noToken"))
		return
	}
	p.setSigninCookie(w, r, "", -1)
	api := p.callerFor(w, r, token, nil)
	p.open(w, r, api, time.Time{}, portalNext(r.PostFormValue("next")), func(err error) {
		p.refused(r, "portal/token", vdibroker.ErrorMessage(err))
		p.renderSignin(w, r, vdibroker.HTTPStatus(vdibroker.ErrorCode(err)), signinRefusal(l, signinTokenKeys, err, api.requestID))
	})
}

func (p *Portal) signinOIDC(w http.ResponseWriter, r *http.Request) {
	if p.cfg.OIDC == nil {
		p.errorPage(w, r, http.StatusNotFound, "error.notFound")
		return
	}
	p.cfg.OIDC.Start(w, r, portalNext(r.FormValue("next")))
}

func (p *Portal) oidcCallback(w http.ResponseWriter, r *http.Request) {
	if p.cfg.OIDC == nil {
		p.errorPage(w, r, http.StatusNotFound, "error.notFound")
		return
	}
	id, raw, next, err := p.cfg.OIDC.Finish(w, r)
	// Whatever its status (403: not this browser's sign-in, or it took
	// too long), the page says to sign in again: its link is Sign in
	// (error.html's LeadsToSignin), back to the page she asked for when
	// this browser's sign-in named it (next), else to her home page (the
	// callback's address is no page to return to).
	next = portalNext(next)
	refuse := func(err error) {
		p.refused(r, "portal/oidc", vdibroker.ErrorMessage(err))
		l := pickLang(w, r, p.secure(r))
		p.showError(w, r, l, errorView{status: vdibroker.HTTPStatus(vdibroker.ErrorCode(err)), signin: true, next: next,
			msg: signinRefusal(l, signinOIDCKeys, err, w.Header().Get("X-Request-Id"))})
	}
	if err != nil {
		refuse(err)
		return
	}
	p.open(w, r, p.callerFor(w, r, raw, endUser(id)), id.Expiry, next, refuse)
}

// refused records a refused sign-in, if the portal records them.
func (p *Portal) refused(r *http.Request, kind, detail string) {
	if p.cfg.Refusals != nil {
		p.cfg.Refusals.Refused(r.Context(), kind, ratelimit.ClientAddr(r), detail)
	}
}

// open signs a browser in as api's user: who it is (a User only: the
// portal is no place for an administrator's token), the session, the
// sign-in recorded (POST /api/v1/signin), then next.
func (p *Portal) open(w http.ResponseWriter, r *http.Request, api *caller, expires time.Time, next string, refuse func(error)) {
	ctx := r.Context()
	var me struct {
		Role    string `json:"role"`
		Subject string `json:"subject"`
		TokenID string `json:"tokenId"`
		Kind    string `json:"kind"`
	}
	if err := api.do(ctx, http.MethodGet, "/api/v1/whoami", nil, &me); err != nil {
		refuse(err)
		return
	}
	if me.Role != vdibroker.RoleUser {
		refuse(vdibroker.Errorf(vdibroker.EPermission, "a %s token is not an end user's", me.Role))
		return
	}
	principal := me.Kind + ":" + me.Subject
	if me.Kind == vdibroker.PrincipalToken {
		principal = me.Kind + ":" + me.TokenID
	}
	s, err := p.web.Open(ctx, w, r, api.token, principal, me.Role, expires)
	if err != nil {
		var full *vdibroker.AreaFull
		if errors.As(err, &full) {
			p.sayFull(full)
		}
		refuse(err)
		return
	}
	if err := api.do(ctx, http.MethodPost, "/api/v1/signin", nil, nil); err != nil {
		p.web.Forget(context.WithoutCancel(ctx), s)
		w.Header().Del("Set-Cookie")
		refuse(err)
		return
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// sayFull logs that the portal refuses sign-ins for holding its most,
// with what raises it: once a minute at most, since every refused user
// would otherwise write a line.
func (p *Portal) sayFull(full *vdibroker.AreaFull) {
	now := p.clock.Now().UnixNano()
	last := p.fullSaid.Load()
	if now-last < int64(time.Minute) || !p.fullSaid.CompareAndSwap(last, now) {
		return
	}
	p.log.Warn("portal: sign-ins refused: the portal holds its most signed-in users, every replica together; "+
		"raise serve's --portal-max-signins, or wait for sign-ins to end (each lasts at most its TTL)", "max", full.Max)
}

// signout ends the sign-in; a single sign-on one at the provider too
// when it offers end_session_endpoint, through a page that moves on at
// once (the CSP's form-action would stop a redirect of the form's
// answer to the provider).
func (p *Portal) signout(rq *request) {
	if err := p.web.End(rq.r.Context(), rq.w, rq.r, rq.sess); err != nil {
		// Still signed in (R-U2): said so, with the sign-out button to
		// try again.
		rq.w.Header().Set("Retry-After", "5")
		p.userError(rq, http.StatusServiceUnavailable, "error.signoutFailed")
		return
	}
	// Recorded (the audit trail's "signout"); the sign-in has ended
	// whether or not the entry is written.
	if err := rq.api.do(rq.r.Context(), http.MethodPost, "/api/v1/signout", nil, nil); err != nil {
		p.log.Warn("portal: record a sign-out", "err", err)
	}
	if p.cfg.OIDC != nil && rq.sess.OIDC() {
		if u := p.cfg.OIDC.Provider().EndSessionURL(rq.sess.Token, p.cfg.PostLogoutURL); u != "" {
			p.render(rq.w, rq.r, http.StatusOK, "signout", rq.lang, map[string]any{"URL": u})
			return
		}
	}
	http.Redirect(rq.w, rq.r, SigninPath, http.StatusSeeOther)
}

// userSession is one of the user's sessions as the page shows it.
type userSession struct {
	vdibroker.UserSession
	// Name is what the user opened, as her feed names it (sessionName).
	Name string
	// Pod is the other pod of the federation the session is in; empty
	// for this pod's. SameSite says that pod is of this pod's site: the
	// row has no "At another site": to her, another pod of her site is
	// here ("pod" is the administrators' word).
	Pod      string
	SameSite bool
	// Desktop is the feed's desktop whose connect reaches the session, if
	// one does: opening it again, naming the session, reconnects to it
	// (R-C1, R-G1), which the page offers for a Disconnected one.
	Desktop string
	// NoReconnect says a desktop of the feed names the session but none
	// reaches it from here (a global one whose scope from this pod leaves
	// the session's pod out, R-G1: opening it makes a new session): the
	// page says so where it would offer Reconnect.
	NoReconnect bool
	// Since is when the session took its state (its logon, its
	// disconnect): the page's "Since" follows "State", and a user who
	// reads "Disconnected since 09:00" takes it so. SinceTime is the
	// same, for the page's machine-readable time.
	Since     string
	SinceTime time.Time
	// LoggingOff marks a session the user logged off, still listed
	// until its host has done it (sessionsData).
	LoggingOff bool
}

// newUserSession is s as the page shows it (Name and Desktop to fill).
func newUserSession(s vdibroker.UserSession) userSession {
	at := s.StateTime
	if at.IsZero() {
		at = s.CreateTime // an answer without it (an older pod's)
	}
	return userSession{UserSession: s, Since: since(at), SinceTime: at.UTC()}
}

// sessionName names a session in pool by what the user's feed offers
// there, the pool's own resources and the global entitlements it is a
// member of alike: the first desktop's friendly name, else those of its
// applications (the first three, and "…" for more), else the pool's
// name. A user knows "Office desktop", not the pool behind it. desktop
// is the id of the desktop that names it, if one does.
func sessionName(resources []vdibroker.FeedResource, pool string) (name, desktop string) {
	var apps []string
	more := false
	for _, r := range resources {
		switch {
		case r.HostPool != pool && !slices.Contains(r.MemberPools, pool):
		case r.Kind == vdibroker.FeedDesktop:
			return r.FriendlyName, r.ID
		case len(apps) < 3:
			apps = append(apps, r.FriendlyName)
		default:
			more = true
		}
	}
	if more {
		apps = append(apps, "…")
	}
	if len(apps) > 0 {
		return strings.Join(apps, ", "), ""
	}
	return pool, ""
}

// reconnectDesktop is the id of the feed's desktop through which
// Reconnect reaches the user's session in pool of this pod, "" when none
// does: pool's own desktop, whose connect naming the session (R-C1's
// sessionId) reaches it wherever it is, else the first global desktop
// the pool is a member of whose scope from this pod takes in this pod
// (FeedResource.ReconnectsHere). Through a global desktop whose scope
// leaves this pod out (R-G1: WithinSite, for a user whose home site is
// another) the connect would pass the session over and make a new one
// in its scope (R-U1, R-U3).
func reconnectDesktop(resources []vdibroker.FeedResource, pool string) string {
	global := ""
	for _, r := range resources {
		switch {
		case r.Kind != vdibroker.FeedDesktop:
		case r.GlobalEntitlement == "" && r.HostPool == pool:
			return r.ID
		case global == "" && r.GlobalEntitlement != "" && r.ReconnectsHere && slices.Contains(r.MemberPools, pool):
			global = r.ID
		}
	}
	return global
}

// home lists the user's resources (the feed, R-U5) and open sessions
// (R-U3). Its GET takes the one-shot message (the flash); a HEAD
// leaves it.
func (p *Portal) home(rq *request) {
	data, ok := p.sessionsData(rq)
	if !ok {
		return
	}
	// A HEAD (signedIn lets it through as a GET without its body: a
	// link checker's, a tab's preload) shows nothing: the one-shot
	// message is left for her GET, which shows it.
	flash := rq.sess.Flash
	if rq.r.Method == http.MethodGet {
		flash = p.web.TakeFlash(rq.r.Context(), rq.sess)
	}
	// The session she just logged off (named last by the logoff's
	// redirect) is no longer listed: it has been logged off, not "is
	// being". A Pending session no agent saw ends at once (R-U3), and a
	// host may report before her browser follows the redirect; "It leaves
	// this list once its host has done so" over a list without it, and no
	// refresh to say more, reads as a logoff that hangs. A session of a
	// pod whose list could not be read may be there still: left as is.
	if off := loggingOff(rq.r.URL.Query()["off"]); flash == rq.lang.T("flash.loggedOff") && len(off) > 0 && !data["Unread"].(bool) &&
		!slices.ContainsFunc(data["Sessions"].([]userSession), func(s userSession) bool { return s.ID == off[len(off)-1] }) {
		flash = rq.lang.T("sessions.loggedOff")
	}
	data["Flash"] = flash
	p.render(rq.w, rq.r, http.StatusOK, "home", rq.lang, data)
}

// fragmentHeader is the request header (value "sessions") by which the
// page's script asks GET /portal/sessions for the sessions list alone.
// No navigation carries a header a page's script set, whatever the
// browser: a bookmark, a typed address or the address a sign-in returns
// to is a navigation (Sec-Fetch-Mode would say so, but only in browsers
// that send it).
const fragmentHeader = "Portal-Fragment"

// sessionsList is GET /portal/sessions: the home page's "My sessions"
// alone, which the page's script fetches (with fragmentHeader) to
// refresh the list while a session it logged off is still listed
// (R-U3): the flash stays, and nothing but the list is read again.
// Opened as a page (without the header) it is her home page: a
// redirect there, the query (?off=) kept.
func (p *Portal) sessionsList(rq *request) {
	rq.w.Header().Add("Vary", fragmentHeader)
	if rq.r.Header.Get(fragmentHeader) != "sessions" || rq.r.Header.Get("Sec-Fetch-Mode") == "navigate" {
		to := Prefix
		if q := rq.r.URL.Query(); len(q) > 0 {
			to += "?" + q.Encode()
		}
		http.Redirect(rq.w, rq.r, to, http.StatusSeeOther)
		return
	}
	data, ok := p.sessionsData(rq)
	if !ok {
		return
	}
	p.render(rq.w, rq.r, http.StatusOK, "sessions", rq.lang, data)
}

// refreshDelays are the seconds the page waits before each refresh of
// its sessions list while a session it logged off is listed (portal.js):
// 9 tries over 2 minutes, sooner first (an agent reports every 10 s by
// default), then the page stops and says the logoff takes longer.
var refreshDelays = []int{1, 2, 3, 5, 8, 13, 21, 30, 37}

// sessionsData is what the home page and its sessions list show: the
// feed, the user's sessions here and in the other pods, those of ?off=
// (the sessions she logged off, as the logoff's redirect names them)
// marked as logging off. false: the page was answered (an error).
func (p *Portal) sessionsData(rq *request) (map[string]any, bool) {
	ctx := rq.r.Context()
	var feed vdibroker.Feed
	if err := rq.api.do(ctx, http.MethodGet, "/api/v1/feed", nil, &feed); err != nil {
		p.apiError(rq, err, nil)
		return nil, false
	}
	var page struct {
		Value []vdibroker.UserSession `json:"value"`
	}
	if err := rq.api.do(ctx, http.MethodGet, "/api/v1/users/"+url.PathEscape(feed.User)+"/sessions?limit="+strconv.Itoa(maxSessionsShown), nil, &page); err != nil {
		p.apiError(rq, err, nil)
		return nil, false
	}
	sessions := make([]userSession, len(page.Value))
	for i, s := range page.Value {
		sessions[i] = newUserSession(s)
		var named string
		sessions[i].Name, named = sessionName(feed.Resources, s.HostPool)
		sessions[i].Desktop = reconnectDesktop(feed.Resources, s.HostPool)
		sessions[i].NoReconnect = named != "" && sessions[i].Desktop == ""
	}
	remote, unread := p.otherPodsSessions(rq, &feed)
	sessions = append(sessions, remote...)
	// The sessions she logged off, while they are listed: "Logging off",
	// no buttons, and the list refreshed by the page's script (bounded).
	// Matched by id alone (a session's id is unique, a ULID), so only ids
	// of hers reach the page's refresh address and its forms (Off),
	// which carry them to the page a form's answer sends her to
	// (afterAction): another logoff, or a disconnect, keeps them marked.
	// While some pod's sessions could not be read, those not found are
	// kept too: they may be that pod's.
	off := loggingOff(rq.r.URL.Query()["off"])
	marked := false
	for i := range sessions {
		if slices.Contains(off, sessions[i].ID) {
			sessions[i].LoggingOff, marked = true, true
		}
	}
	if !unread {
		off = slices.DeleteFunc(off, func(id string) bool {
			return !slices.ContainsFunc(sessions, func(s userSession) bool { return s.ID == id })
		})
	}
	refresh := ""
	if marked {
		refresh = Prefix + "sessions?" + url.Values{"off": off}.Encode()
	}
	delays := make([]string, len(refreshDelays))
	for i, d := range refreshDelays {
		delays[i] = strconv.Itoa(d)
	}
	// Her name as her provider gives it: a provider's subject may be an
	// opaque id (Entra ID's is), which she would not know as hers.
	user := feed.User
	if rq.name != "" {
		user = rq.name
	}
	return map[string]any{
		"User": user, "Resources": feed.Resources, "Sessions": sessions, "Unread": unread,
		"Refresh": refresh, "Delays": strings.Join(delays, ","), "Off": off,
		"CSRF": rq.sess.CSRF, "SignedIn": true,
	}, true
}

// otherPodsSessions are the user's sessions in the other pods of the
// federation, when her feed has a global entitlement (R-U3, R-G1): named
// by the entitlement, with Reconnect through one that reaches it from this
// pod (GlobalSession.Reconnect), and Log off and Disconnect, which this
// pod's API asks their pod for (globalLogoff). unread says some pod did
// not answer (or the call failed: the page is still served).
func (p *Portal) otherPodsSessions(rq *request, feed *vdibroker.Feed) (out []userSession, unread bool) {
	if !slices.ContainsFunc(feed.Resources, func(r vdibroker.FeedResource) bool { return r.GlobalEntitlement != "" }) {
		return nil, false
	}
	var gs vdibroker.GlobalSessions
	if err := rq.api.do(rq.r.Context(), http.MethodGet, "/api/v1/users/"+url.PathEscape(feed.User)+"/globalsessions", nil, &gs); err != nil {
		level := slog.LevelWarn
		if vdibroker.ErrorCode(err) == vdibroker.ETooManyRequests {
			// Her listings' bound (R-SEC): a line for each page she
			// reloads past it would be the log's flood the bound spares.
			level = slog.LevelDebug
		}
		p.log.Log(rq.r.Context(), level, "portal: the user's sessions in other pods", "err", err)
		return nil, true
	}
	for _, s := range gs.Value {
		// Named as one of this pod's is (sessionName), by the global
		// resources of her feed whose entitlement its pool is a member of.
		var named []vdibroker.FeedResource
		for _, r := range feed.Resources {
			if r.GlobalEntitlement != "" && slices.Contains(s.GlobalEntitlements, r.GlobalEntitlement) {
				r.HostPool = s.HostPool
				named = append(named, r)
			}
		}
		us := newUserSession(s.UserSession)
		us.Pod, us.SameSite = s.Pod, gs.Site != "" && s.Site == gs.Site
		var desktop string
		us.Name, desktop = sessionName(named, s.HostPool)
		// Reconnect: a desktop whose global connect here looks in the
		// session's pod (R-G1); through another it would make a new one.
		for _, r := range named {
			if r.Kind == vdibroker.FeedDesktop && slices.Contains(s.Reconnect, r.GlobalEntitlement) {
				us.Desktop = r.ID
				break
			}
		}
		us.NoReconnect = desktop != "" && us.Desktop == ""
		out = append(out, us)
	}
	return out, len(gs.Unanswered) > 0
}

// since is a session's time, as the page shows it.
func since(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }

// maxSessionsShown bounds the sessions the page lists.
const maxSessionsShown = 100

// logoff and disconnect act on one of the user's own sessions through
// the API (ActionOwnSession, R-U3): another user's is refused there, and
// the API's audit entry records it. A logoff ends what she had not saved
// in the session, so it is done only when the form carries her
// confirmation (confirm=yes: the page's dialog, portal.js, or the
// confirmation page); without it the answer is the confirmation page,
// which asks, so that without scripts one click never logs off.
func (p *Portal) logoff(rq *request) {
	if !p.confirmed(rq, Prefix+"sessions/"+url.PathEscape(rq.r.PathValue("pool"))+"/"+url.PathEscape(rq.r.PathValue("id"))+"/logoff") {
		return
	}
	p.sessionAction(rq, http.MethodDelete, "", "flash.loggedOff")
}

// maxConfirmName bounds the session's name the confirmation page shows
// (the form's name: the page's own, as its CSRF token says).
const maxConfirmName = 200

// confirmed reports whether the logoff form rq posted to action carries
// the user's confirmation; when not, it answers with the confirmation
// page, whose form posts to action again with it (and Cancel leads back
// to her page, the sessions logging off still so). Nothing is asked of
// the API until she confirms.
func (p *Portal) confirmed(rq *request, action string) bool {
	if rq.r.PostFormValue("confirm") == "yes" {
		return true
	}
	name := []rune(strings.TrimSpace(rq.r.PostFormValue("name")))
	if len(name) == 0 {
		name = []rune(rq.r.PathValue("id"))
	}
	if len(name) > maxConfirmName {
		name = append(name[:maxConfirmName], '…')
	}
	p.render(rq.w, rq.r, http.StatusOK, "confirm", rq.lang, map[string]any{"Action": action, "Name": string(name),
		"Question": rq.lang.T("logoff.confirm", string(name)), "Off": loggingOff(rq.r.PostForm["off"]), "Cancel": homeWith(rq.r.PostForm["off"]), "CSRF": rq.sess.CSRF, "SignedIn": true})
	return false
}

func (p *Portal) disconnect(rq *request) {
	p.sessionAction(rq, http.MethodPost, "/disconnect", "flash.disconnected")
}

func (p *Portal) sessionAction(rq *request, method, suffix, flash string) {
	path := "/api/v1/hostpools/" + url.PathEscape(rq.r.PathValue("pool")) + "/usersessions/" + url.PathEscape(rq.r.PathValue("id")) + suffix
	var body any
	if method == http.MethodPost {
		body = struct{}{}
	}
	if err := rq.api.do(rq.r.Context(), method, path, body, nil); err != nil {
		p.apiError(rq, err, sessionErrorKeys)
		return
	}
	p.web.SetFlash(rq.r.Context(), rq.sess, rq.lang.T(flash))
	http.Redirect(rq.w, rq.r, afterAction(rq, method == http.MethodDelete), http.StatusSeeOther)
}

// afterAction is where a logoff or disconnect form sends the browser once
// it was asked of the API, or refused by a pod that did not answer: her
// page, naming (?off=) the sessions the form carried as logging off
// (its off fields, sessionsData's Off) and, after a logoff (loggedOff),
// this one last; the page shows each as logging off and refreshes its
// list until they are gone (sessionsData, portal.js).
func afterAction(rq *request, loggedOff bool) string {
	off := rq.r.PostForm["off"]
	if loggedOff {
		off = append(slices.Clip(off), rq.r.PathValue("id"))
	}
	return homeWith(off)
}

// homeWith is her home page naming the sessions of off (a form's off
// fields, as loggingOff keeps them) as logging off: where a form's
// answer sends her, or links back (the confirmation page's Cancel, an
// error page's Back, the language links), so that none gives a session
// logging off its buttons back (R-U3).
func homeWith(off []string) string {
	if off = loggingOff(off); len(off) > 0 {
		return Prefix + "?" + url.Values{"off": off}.Encode()
	}
	return Prefix
}

// maxLoggingOff bounds the sessions a page marks as logging off and its
// forms carry (loggingOff): a user logs off a few at a time, and each
// of her page's forms carries them all.
const maxLoggingOff = 20

// loggingOff is the sessions that ids (?off=, a form's off fields) name
// as logging off: each of 1..vdibroker.MaxSessionIDLen bytes (no
// session's id is longer, federation.ValidateSessionRef) with no
// control character, each once, at most maxLoggingOff, the last ones
// named (the newest logoff is named last).
func loggingOff(ids []string) []string {
	var out []string
	for i := len(ids) - 1; i >= 0 && len(out) < maxLoggingOff; i-- {
		id := ids[i]
		if id == "" || len(id) > vdibroker.MaxSessionIDLen || strings.ContainsFunc(id, unicode.IsControl) || slices.Contains(out, id) {
			continue
		}
		out = append(out, id)
	}
	slices.Reverse(out)
	return out
}

// globalLogoff and globalDisconnect act on one of the user's sessions in
// another pod of the federation through the API (DELETE or POST
// .../disconnect of /users/{user}/globalsessions/{pod}/{id}, R-U3), which
// asks that pod: the user is who the API says she is, a session not hers
// is refused there (and by the pod), and both pods' audit trails record
// it. A pod that does not answer is said on her page, which is still
// served.
func (p *Portal) globalLogoff(rq *request) {
	if !p.confirmed(rq, Prefix+"globalsessions/"+url.PathEscape(rq.r.PathValue("pod"))+"/"+url.PathEscape(rq.r.PathValue("id"))+"/logoff") {
		return
	}
	p.globalSessionAction(rq, http.MethodDelete, "", "flash.loggedOff")
}

func (p *Portal) globalDisconnect(rq *request) {
	p.globalSessionAction(rq, http.MethodPost, "/disconnect", "flash.disconnected")
}

func (p *Portal) globalSessionAction(rq *request, method, suffix, flash string) {
	ctx := rq.r.Context()
	var me struct {
		Subject string `json:"subject"`
	}
	if err := rq.api.do(ctx, http.MethodGet, "/api/v1/whoami", nil, &me); err != nil {
		p.apiError(rq, err, nil)
		return
	}
	path := "/api/v1/users/" + url.PathEscape(me.Subject) + "/globalsessions/" + url.PathEscape(rq.r.PathValue("pod")) + "/" +
		url.PathEscape(rq.r.PathValue("id")) + suffix
	var body any
	if method == http.MethodPost {
		body = struct{}{}
	}
	if err := rq.api.do(ctx, method, path, body, nil); err != nil {
		if vdibroker.ErrorCode(err) != vdibroker.EPodUnavailable {
			p.apiError(rq, err, sessionErrorKeys)
			return
		}
		p.log.Info("portal: a pod did not do a logoff or disconnect", "request_id", rq.api.requestID, "path", rq.r.URL.Path,
			"err", vdibroker.ErrorMessage(err))
		p.web.SetFlash(ctx, rq.sess, rq.lang.T("error.podUnavailable"))
		http.Redirect(rq.w, rq.r, afterAction(rq, false), http.StatusSeeOther)
		return
	}
	p.web.SetFlash(ctx, rq.sess, rq.lang.T(flash))
	http.Redirect(rq.w, rq.r, afterAction(rq, method == http.MethodDelete), http.StatusSeeOther)
}
