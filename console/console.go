package console

import (
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/internal/ratelimit"
	"github.com/vdibroker/vdibroker/internal/webguard"
	"github.com/vdibroker/vdibroker/websession"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Cookie names. The session cookie holds only a random id; the API token
// stays on the server (package websession). Over HTTPS each has the
// __Host- prefix and Path=/ (webguard.CookieScope).
const (
	sessionCookie = "vdibroker_session"
	signinCookie  = "vdibroker_signin"
)

// Area is the console's name for its web sessions (websession.Config).
const Area = "console"

// PortalPath is where users (role User) connect to their desktops: the
// console sends a User who signs in there.
const PortalPath = "/portal/"

// Config configures a Console.
type Config struct {
	// API serves the broker's HTTP API (/api/v1/...). The console calls it
	// in-process with the signed-in user's token for every read and change.
	// Required.
	API http.Handler
	// Store, when set, is sampled every SampleInterval for the "sessions
	// over the last hour" chart, so the history fills while nobody looks.
	// Without it, only page views record samples.
	Store StoreReader
	// SampleInterval is the spacing of history samples; 0 is 30s.
	SampleInterval time.Duration
	// SecureCookies marks the sign-in cookie Secure even on a request that
	// arrived over plain HTTP: the broker is reached over HTTPS through a
	// TLS-terminating proxy (serve --external-url https://...).
	SecureCookies bool
	// Sessions keeps the sign-ins (the database: every replica serves
	// every sign-in, and a restart keeps them). Required.
	Sessions vdibroker.WebSessionStore
	// SessionTTL is how long a sign-in lasts; 0 is 12h.
	SessionTTL time.Duration
	// SessionLimits bound the sign-ins (zero: websession.DefaultLimits).
	SessionLimits vdibroker.WebSessionLimits
	// Clock drives the sweep of expired sign-ins (nil: the real clock).
	Clock clock.WithTicker
	// RefreshSeconds is how often pages refresh their live parts; 0 is 5.
	RefreshSeconds int
	Logger         *slog.Logger
	// Now returns the current time (nil = time.Now).
	Now func() time.Time
	// Rand supplies session ids and CSRF tokens (nil = crypto/rand).
	Rand io.Reader
	// Outage, when set, says whether the broker's store is down (nil
	// while it is up): every page's header then says so (R-OUT1).
	Outage func() *Outage
	// ClockOff, when set, says whether this replica's clock is off the
	// database server's (nil while within vdibroker.ClockTolerance):
	// every page's header then tells admins and Contributors.
	ClockOff func() *ClockOff
	// Refusals records a signed-in form refused by its CSRF or same-site
	// check (nil: not recorded); single sign-on's refusals have their own
	// (OIDCConfig.Refusals).
	Refusals Refusals
}

// Outage is a store outage as the console's header shows it. Reason is
// shown to signed-in admins and Contributors only (as /healthz tells it
// to them only): it may name the database's address, user and name.
type Outage struct {
	Since  time.Time
	Reason string
	// Placement: new users are placed within this replica's escrow
	// (serve --outage-placement) rather than refused.
	Placement bool
}

// ClockOff is this replica's clock off the database server's, as the
// console's header shows it.
type ClockOff struct {
	Offset time.Duration // this replica's clock minus the database's
}

// Text says how far and which way, to a tenth of a second: "2.3s ahead
// of", "0.7s behind".
func (c ClockOff) Text() string {
	way := "ahead of"
	if c.Offset < 0 {
		way = "behind"
	}
	return c.Offset.Abs().Round(100*time.Millisecond).String() + " " + way
}

// Console is the web console; it is an http.Handler meant to be mounted at
// "/" next to the API. Close stops its history sampler.
type Console struct {
	api   http.Handler
	store StoreReader
	// outage is Config.Outage.
	outage func() *Outage
	// clockOff is Config.ClockOff.
	clockOff func() *ClockOff
	// secureCookies: see Config.SecureCookies.
	secureCookies bool
	// refusals is Config.Refusals.
	refusals Refusals
	log      *slog.Logger
	now      func() time.Time
	rand     io.Reader
	ttl      time.Duration
	refresh  int
	pages    map[string]*template.Template
	mux      *routeMux
	history  *history
	hostHist *hostHistory
	interval time.Duration
	// schema is the host pool settings table the settings form is made
	// of (vdibroker.PoolFields).
	schema []vdibroker.Field

	web  *websession.Manager
	oidc *oidcLogin // oidc.go; nil unless EnableOIDC
	// pod: EnableFederation was called; a user's sessions page also
	// lists those in the other pods.
	pod bool
	// fed is EnableFederation's: how the federation page's changes reach
	// the other pods.
	fed FederationConfig
	// notGlobal: the web sessions whose principal the API refused a
	// listing of a user's sessions in other pods (one scoped to host
	// pools, R-U3): their pages ask no more (otherPodsSessions).
	notGlobal notGlobal

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// webSession is one signed-in browser: its Token is the API token the
// console calls the API with, its Role the token's as the API said at
// sign-in (pages offer changes only to roles that may make them).
type webSession = websession.Session

// seesStoreReason reports whether the clock header shows this user how
// far this replica's clock is off: admins and Contributors, by the role
// of its sign-in.
func seesStoreReason(s *webSession) bool {
	return s.Role == vdibroker.RoleAdmin || s.Role == vdibroker.RoleContributor
}

// seesOutageReason reports whether the outage header shows session s the
// store's error, which may name the database's address, user and name: to
// whom GET /healthz tells it (R-SEC), the admin token and unscoped
// Contributors, decided by vdibroker.Authorize on who the API says the
// session's token is now (whoami), not on the role of its sign-in: a
// Contributor scoped to host pools is not told, nor a token revoked since
// (nor, during the outage, an API token, which the API cannot check
// then). Asked only while the header is shown.
func (c *Console) seesOutageReason(w http.ResponseWriter, r *http.Request, s *webSession) bool {
	if !seesStoreReason(s) || c.outage == nil || c.outage() == nil {
		return false
	}
	me, err := c.apiFor(w, r, s.Token).whoami(r.Context())
	if err != nil {
		return false
	}
	p := &vdibroker.Principal{Role: me.Role, HostPools: me.HostPools}
	return vdibroker.Authorize(p, vdibroker.ActionInspect, vdibroker.Target{Global: "GET /healthz"}) == nil
}

// StoreReader is what the console reads of the store for its history
// charts: the pools and their hosts (vdibroker.Store has both).
type StoreReader interface {
	ListHostPools(ctx context.Context) ([]*vdibroker.HostPool, error)
	ListSessionHosts(ctx context.Context, pool string) ([]*vdibroker.SessionHost, error)
}

// New returns a Console. It panics if cfg.API is nil or a template does not
// parse (both programming errors).
func New(cfg Config) *Console {
	if cfg.API == nil || cfg.Sessions == nil {
		panic("console: Config.API and Config.Sessions are required")
	}
	c := &Console{
		api:           cfg.API,
		store:         cfg.Store,
		outage:        cfg.Outage,
		clockOff:      cfg.ClockOff,
		secureCookies: cfg.SecureCookies,
		refusals:      cfg.Refusals,
		log:           cfg.Logger,
		now:           cfg.Now,
		rand:          cfg.Rand,
		ttl:           cfg.SessionTTL,
		refresh:       cfg.RefreshSeconds,
		interval:      cfg.SampleInterval,
		schema:        vdibroker.PoolFields(),
		stop:          make(chan struct{}),
		done:          make(chan struct{}),
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.rand == nil {
		c.rand = rand.Reader
	}
	if c.ttl <= 0 {
		c.ttl = 12 * time.Hour
	}
	if c.refresh <= 0 {
		c.refresh = 5
	}
	if c.interval <= 0 {
		c.interval = 30 * time.Second
	}
	c.web = websession.New(websession.Config{Store: cfg.Sessions, Area: Area, Cookie: sessionCookie, Path: "/",
		TTL: c.ttl, Limits: cfg.SessionLimits, Secure: c.secure, Clock: cfg.Clock, Now: cfg.Now, Rand: cfg.Rand, Logger: c.log})
	c.history = newHistory(c.interval, time.Hour)
	c.hostHist = newHostHistory(c.interval, time.Hour)
	c.pages = parsePages()
	c.pages["foruser"] = template.Must(template.New("foruser").Funcs(pageFuncs()).ParseFS(templateFS, "templates/layout.html", "templates/foruser.html"))
	c.pages["signout"] = template.Must(template.New("signout").ParseFS(templateFS, "templates/signout.html"))
	c.routes()
	if c.store != nil {
		go c.sample()
	} else {
		close(c.done)
	}
	return c
}

// Close stops the history sampler and the sweep of expired sign-ins.
func (c *Console) Close() error {
	c.closeOnce.Do(func() {
		close(c.stop)
		<-c.done
		c.web.Close()
	})
	return nil
}

func (c *Console) routes() {
	c.mux = newRouteMux()
	static, _ := fs.Sub(staticFS, "static")
	c.mux.Handle("GET /static/", http.StripPrefix("/static/", webguard.Files(static, http.NotFoundHandler())))
	c.mux.HandleFunc("GET /signin", c.signinPage)
	c.mux.HandleFunc("POST /signin", c.signin)
	c.mux.HandleFunc("POST /signout", c.signedIn(c.signout))

	c.mux.HandleFunc("GET /{$}", c.signedIn(c.overview))
	c.mux.HandleFunc("GET /pools/{pool}", c.signedIn(c.poolPage))
	c.mux.HandleFunc("POST /pools/{pool}/settings", c.signedIn(c.poolSettings))
	c.mux.HandleFunc("POST /pools/{pool}/hosts/{host}/drain", c.signedIn(c.drain))
	c.mux.HandleFunc("POST /pools/{pool}/hosts/{host}/power", c.signedIn(c.power))
	c.mux.HandleFunc("POST /pools", c.signedIn(c.createPool))                                  // actions.go
	c.mux.HandleFunc("POST /pools/{pool}/delete", c.signedIn(c.deletePool))                    // actions.go
	c.mux.HandleFunc("POST /pools/{pool}/registrationtoken", c.signedIn(c.registrationKey))    // actions.go
	c.mux.HandleFunc("POST /pools/{pool}/hosts/drain", c.signedIn(c.bulkDrain))                // actions.go
	c.mux.HandleFunc("POST /pools/{pool}/hosts/{host}/delete", c.signedIn(c.removeHost))       // actions.go
	c.mux.HandleFunc("GET /pools/{pool}/sessions/{id}/message", c.signedIn(c.messagePage))     // actions.go
	c.mux.HandleFunc("POST /pools/{pool}/sessions/{id}/message", c.signedIn(c.sendMessage))    // actions.go
	c.mux.HandleFunc("GET /pools/{pool}/hosts/{host}/message", c.signedIn(c.hostMessagePage))  // actions.go
	c.mux.HandleFunc("POST /pools/{pool}/hosts/{host}/message", c.signedIn(c.sendHostMessage)) // actions.go
	c.mux.HandleFunc("GET /pools/{pool}/hosts/{host}", c.signedIn(c.hostPage))
	c.mux.HandleFunc("GET /pools/{pool}/autoscale", c.signedIn(c.autoscalePage)) // autoscale.go
	c.mux.HandleFunc("GET /sessions", c.signedIn(c.sessionsPage))
	c.mux.HandleFunc("GET /audit", c.signedIn(c.auditPage))
	c.mux.HandleFunc("GET /scalingplans", c.signedIn(c.scalingPlansPage))       // scalingplans.go
	c.mux.HandleFunc("GET /scalingplans/{name}", c.signedIn(c.scalingPlanPage)) // scalingplans.go
	c.mux.HandleFunc("GET "+rulesPath, c.rulesPage)
	c.addEntitlementsPage() // entitlements.go
	c.addPublishRoutes()    // publish.go
	c.mux.HandleFunc("POST /pools/{pool}/sessions/{id}/logoff", c.signedIn(c.logoff))
	c.mux.HandleFunc("POST /pools/{pool}/sessions/{id}/disconnect", c.signedIn(c.disconnect))
	c.mux.HandleFunc("GET /pools/{pool}/sessions/{id}/placement", c.signedIn(c.placementPage))
	c.mux.HandleFunc("/", c.notFound)
}

// ServeHTTP implements http.Handler, adding the security headers every
// console answer carries.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	webguard.Headers(w)
	c.mux.ServeHTTP(w, r)
}

// request is what a signed-in page handler gets.
type request struct {
	w    http.ResponseWriter
	r    *http.Request
	sess *webSession
	sid  string
	api  *api
}

// signedIn wraps a handler: without a valid session a GET is sent to the
// sign-in page and anything else is refused; every non-GET must carry the
// session's CSRF token.
func (c *Console) signedIn(h func(*request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sid, sess := c.session(r)
		if sess == nil {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, "/signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			c.errorPage(w, r, http.StatusUnauthorized, "Your sign-in has expired. Sign in again.")
			return
		}
		if r.Method != http.MethodGet {
			if !webguard.SameOrigin(r) || !webguard.Equal(r.PostFormValue("csrf"), sess.CSRF) {
				// Recorded as the portal's are (bounded): a forged form is
				// what it catches.
				if c.refusals != nil {
					c.refusals.Refused(r.Context(), "console/csrf", ratelimit.ClientAddr(r),
						vdibroker.Cut(r.Method+" "+r.URL.Path+": the form lacks this sign-in's CSRF token or comes from another site", vdibroker.MaxAuditField))
				}
				c.errorPage(w, r, http.StatusForbidden, "The form was stale or came from another site (CSRF check failed). Reload the page and try again.")
				return
			}
		}
		w.Header().Set("Cache-Control", "no-store")
		h(&request{w: w, r: r, sess: sess, sid: sid, api: c.apiFor(w, r, sess.Token)})
	}
}

// session returns the request's valid session, and its cookie's value, or
// nil.
func (c *Console) session(r *http.Request) (string, *webSession) {
	s := c.web.Get(r)
	if s == nil {
		return "", nil
	}
	return s.ID(), s
}

// redirect answers a successful change with 303 to path and a message shown
// once on the next page (post/redirect/get), which another replica may
// serve.
func (c *Console) redirect(rq *request, path, flash string) {
	c.web.SetFlash(rq.r.Context(), rq.sess, flash)
	http.Redirect(rq.w, rq.r, path, http.StatusSeeOther)
}

// signinPage shows the token form. A sign-in CSRF token is set in its own
// short-lived cookie and echoed in the form (double submit), so another site
// cannot sign a browser in with the attacker's token.
func (c *Console) signinPage(w http.ResponseWriter, r *http.Request) {
	c.renderSignin(w, r, http.StatusOK, "")
}

func (c *Console) renderSignin(w http.ResponseWriter, r *http.Request, status int, msg string) {
	csrf := webguard.Secret(c.rand)
	c.setSigninCookie(w, r, csrf, 3600)
	w.Header().Set("Cache-Control", "no-store")
	c.render(w, status, "signin", map[string]any{
		"Title": "Sign in", "CSRF": csrf, "Error": msg, "Next": webguard.SafeNext(r.FormValue("next")), "OIDC": c.oidc != nil,
	})
}

// setSigninCookie sets (maxAge -1: clears) the sign-in form's CSRF
// cookie: SameSite=Strict, as the form posts to this site; over HTTPS
// named with the __Host- prefix (webguard.CookieScope), so a sibling
// subdomain cannot plant a token of its choosing for its own form.
func (c *Console) setSigninCookie(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	secure := c.secure(r)
	name, path := webguard.CookieScope(signinCookie, "/signin", secure)
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: path, MaxAge: maxAge,
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode})
}

// signin checks the token against the API and opens a session.
func (c *Console) signin(w http.ResponseWriter, r *http.Request) {
	name, _ := webguard.CookieScope(signinCookie, "/signin", c.secure(r))
	ck, err := r.Cookie(name)
	if err != nil || !webguard.Equal(r.PostFormValue("csrf"), ck.Value) || !webguard.SameOrigin(r) {
		c.renderSignin(w, r, http.StatusForbidden, "The sign-in form was stale (CSRF check failed). Try again.")
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	if token == "" {
		c.renderSignin(w, r, http.StatusBadRequest, "Enter an API token.")
		return
	}
	c.setSigninCookie(w, r, "", -1)
	c.openSession(w, r, token, time.Time{}, webguard.SafeNext(r.PostFormValue("next")), func(status int, msg string) {
		c.renderSignin(w, r, status, msg)
	})
}

// openSession signs a browser in with token (an API token, or an ID
// token from single sign-on) until expires at the latest (zero: the TTL):
// who it is (GET whoami, which the API refuses, and records, for a bad
// token); a User is told this console is for administrators; the session
// is opened within its limits (R-SEC), then the sign-in recorded (POST
// /api/v1/signin, the audit trail's "signin"), then the browser sent to
// next. refuse answers a refusal.
func (c *Console) openSession(w http.ResponseWriter, r *http.Request, token string, expires time.Time, next string, refuse func(status int, msg string)) {
	ctx := r.Context()
	a := c.apiFor(w, r, token)
	me, err := a.whoami(ctx)
	if err != nil {
		// A 429 (too many failed authentications from this address) or
		// a 503 (the database away) says its wait, as the API's pages.
		setRetryAfter(w, err)
		refuse(vdibroker.HTTPStatus(vdibroker.ErrorCode(err)), "That sign-in was not accepted: "+vdibroker.ErrorMessage(err)+retryWords(err))
		return
	}
	if me.Role == vdibroker.RoleUser {
		w.Header().Set("Cache-Control", "no-store")
		c.render(w, http.StatusForbidden, "foruser", map[string]any{"Title": "For administrators", "Name": me.Subject, "Portal": PortalPath})
		return
	}
	principal := me.Kind
	switch me.Kind {
	case vdibroker.PrincipalToken:
		principal += ":" + me.TokenID
	case vdibroker.PrincipalOIDC:
		principal += ":" + me.Subject
	}
	s, err := c.web.Open(ctx, w, r, token, principal, me.Role, expires)
	if err != nil {
		if vdibroker.ErrorCode(err) == vdibroker.EInternal {
			c.log.Error("console: open a session", "err", err)
		}
		setRetryAfter(w, err)
		refuse(vdibroker.HTTPStatus(vdibroker.ErrorCode(err)), "Not signed in: "+vdibroker.ErrorMessage(err)+retryWords(err))
		return
	}
	if _, err := a.signinWhoami(ctx); err != nil {
		// Not recorded, so not signed in.
		c.web.Forget(context.WithoutCancel(ctx), s)
		w.Header().Del("Set-Cookie")
		setRetryAfter(w, err) // the principal's sign-ins a minute (429), the database away (503)
		refuse(vdibroker.HTTPStatus(vdibroker.ErrorCode(err)), "That sign-in was not accepted: "+vdibroker.ErrorMessage(err)+retryWords(err))
		return
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// signout ends the session on every replica; a single sign-on session is
// ended at the provider too when it offers an end_session_endpoint
// (RP-Initiated Logout), which sends the browser back to the sign-in
// page, so that the next sign-in asks again. The way to the provider is a
// page of its own that moves on at once (a meta refresh, and a link):
// browsers apply the Content-Security-Policy's form-action to every
// redirect of a form's answer, and a provider's sign-out may pass through
// several origins of its own.
func (c *Console) signout(rq *request) {
	if err := c.web.End(rq.r.Context(), rq.w, rq.r, rq.sess); err != nil {
		// Still signed in (R-SEC): said so, with the sign-out button of
		// the error page's header to try again.
		rq.w.Header().Set("Retry-After", "5")
		c.errorPage(rq.w, rq.r, http.StatusServiceUnavailable, "You are still signed in: the broker's database did not answer, so your sign-in could not be ended. Sign out again in a moment.")
		return
	}
	// Recorded (the audit trail's "signout"); the sign-in has ended
	// whether or not the entry is written.
	if err := rq.api.do(rq.r.Context(), http.MethodPost, apiPrefix+"/signout", nil, nil); err != nil {
		c.log.Warn("console: record a sign-out", "err", err)
	}
	if c.oidc != nil && rq.sess.OIDC() {
		if u := c.oidc.endSessionURL(rq.sess.Token); u != "" {
			c.render(rq.w, http.StatusOK, "signout", map[string]any{"URL": u})
			return
		}
	}
	http.Redirect(rq.w, rq.r, "/signin", http.StatusSeeOther)
}

// secure reports whether cookies set in answer to r are Secure: always
// over TLS, and behind a TLS-terminating proxy when configured.
func (c *Console) secure(r *http.Request) bool { return r.TLS != nil || c.secureCookies }

func (c *Console) notFound(w http.ResponseWriter, r *http.Request) {
	c.errorPage(w, r, http.StatusNotFound, "There is no console page at "+r.URL.Path+".")
}

func (c *Console) errorPage(w http.ResponseWriter, r *http.Request, status int, msg string) {
	_, sess := c.session(r)
	data := map[string]any{"Title": http.StatusText(status), "Error": msg, "Status": status}
	if sess != nil {
		data["CSRF"] = sess.CSRF
		data["SignedIn"] = true
		data["SeesStoreReason"] = seesStoreReason(sess)
		data["SeesOutageReason"] = c.seesOutageReason(w, r, sess)
	}
	c.render(w, status, "error", data)
}

// apiError shows an API refusal on its own page with the API's status
// (403 for a Reader's change, 404 for a missing pool...); a refused page
// (a GET) says what may not be seen, not that a change was refused.
func (c *Console) apiError(rq *request, err error) {
	code := vdibroker.ErrorCode(err)
	if code == vdibroker.EInternal {
		c.log.Error("console: API call failed", "path", rq.r.URL.Path, "err", err)
	}
	if code == vdibroker.EUnauthenticated {
		// The token was revoked or expired: end the session.
		c.web.Forget(rq.r.Context(), rq.sess)
	}
	msg := rq.describe(err)
	if code == vdibroker.EPermission && rq.r.Method == http.MethodGet {
		msg = "Refused by the broker: your token may not see this page (" + vdibroker.ErrorMessage(err) + ")."
	}
	setRetryAfter(rq.w, err)
	c.errorPage(rq.w, rq.r, vdibroker.HTTPStatus(code), msg)
}

// retrySeconds is err's Retry-After in whole seconds, rounded up so that
// no page tells to come back sooner than the broker said (0.2 s: 1); 0
// when it has none.
func retrySeconds(err error) int {
	ra := vdibroker.ErrorRetryAfter(err)
	if ra <= 0 {
		return 0
	}
	return int((ra + time.Second - 1) / time.Second)
}

// retryWords is " (try again in N s)" for an API refusal with a
// Retry-After (a rate limit, the database away: 429 or 503), as the CLI
// ends its line: the broker's messages say what happens and leave the
// wait to the Retry-After, so the page says it once. "" for any other.
func retryWords(err error) string {
	if s := retrySeconds(err); s > 0 {
		return fmt.Sprintf(" (try again in %d s)", s)
	}
	return ""
}

// setRetryAfter sends err's Retry-After (retrySeconds) on to the
// browser, the number the page's words say; nothing when it has none.
func setRetryAfter(w http.ResponseWriter, err error) {
	if s := retrySeconds(err); s > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(s))
	}
}

// describe turns an API error into a sentence for the signed-in person.
// A refusal fits the role refused: a Reader is told that its role changes
// nothing; anyone else (a Contributor or Helpdesk scoped to other pools,
// Helpdesk asking for more than sessions) has the broker's reason, which
// names a scoped principal's host pools (R-SEC).
func (rq *request) describe(err error) string {
	switch vdibroker.ErrorCode(err) {
	case vdibroker.EPermission:
		msg := "Refused by the broker: your token may not make this change (" + vdibroker.ErrorMessage(err) + ")."
		if rq.sess.Role == vdibroker.RoleReader {
			msg += " Reader tokens can look at everything and change nothing."
		}
		return msg
	case vdibroker.EUnauthenticated:
		return "Your token is no longer accepted (" + vdibroker.ErrorMessage(err) + "). Sign in again."
	default:
		// A rate limit's or the database's refusal says its wait (the
		// Retry-After): its words leave it out.
		return vdibroker.ErrorMessage(err) + retryWords(err)
	}
}

// page renders a signed-in page with the layout's common data.
func (c *Console) page(rq *request, status int, name string, data map[string]any) {
	data["CSRF"] = rq.sess.CSRF
	data["SignedIn"] = true
	data["SeesStoreReason"] = seesStoreReason(rq.sess)
	data["SeesOutageReason"] = c.seesOutageReason(rq.w, rq.r, rq.sess)
	data["Refresh"] = c.refresh
	// A Reader sees no drain, settings or log-off controls: the API would
	// refuse them (R-SEC), and it still checks every change.
	data["CanWrite"] = canWrite(rq.sess)
	data["CanOperate"] = canOperate(rq.sess)
	_, data["Federation"] = c.pages["federation"] // a pod (EnableFederation)
	if _, ok := data["Flash"]; !ok {
		data["Flash"] = c.web.TakeFlash(rq.r.Context(), rq.sess)
	}
	c.render(rq.w, status, name, data)
}

// canWrite reports whether the session's role may change things, so its
// pages offer the controls (the API checks every change anyway).
func canWrite(s *webSession) bool {
	return s.Role == vdibroker.RoleAdmin || s.Role == vdibroker.RoleContributor
}

// canOperate reports whether the session's role may log off, disconnect
// and message users' sessions and read the audit trail: canWrite's, and
// Helpdesk.
func canOperate(s *webSession) bool {
	return canWrite(s) || s.Role == vdibroker.RoleHelpdesk
}

func (c *Console) render(w http.ResponseWriter, status int, name string, data map[string]any) {
	t := c.pages[name]
	if c.outage != nil {
		if o := c.outage(); o != nil {
			data["Outage"] = o
		}
	}
	if c.clockOff != nil {
		if o := c.clockOff(); o != nil {
			data["ClockOff"] = o
		}
	}
	var buf strings.Builder
	if err := t.ExecuteTemplate(&buf, "layout", data); err != nil {
		c.log.Error("console: render", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	io.WriteString(w, showHidden(buf.String()))
}

// sample records every pool's session count each interval (for the
// sessions-over-time chart) until Close.
func (c *Console) sample() {
	defer close(c.done)
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		c.sampleStore()
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
	}
}

func (c *Console) sampleStore() {
	ctx, cancel := context.WithTimeout(context.Background(), c.interval)
	defer cancel()
	pools, err := c.store.ListHostPools(ctx)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			c.log.Warn("console: sample sessions", "err", err)
		}
		return
	}
	counts := map[string]int{}
	for _, p := range pools {
		hosts, err := c.store.ListSessionHosts(ctx, p.Name)
		if err != nil {
			c.log.Warn("console: sample sessions", "pool", p.Name, "err", err)
			return
		}
		for _, h := range hosts {
			counts[p.Name] += h.Sessions
			c.hostHist.record(c.now(), p.Name, h.Name, hostSample(h))
		}
	}
	c.history.record(c.now(), counts)
}
