package console

import (
	"context"
	"net"
	"net/http"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/identity"
	"github.com/vdibroker/vdibroker/internal/webguard"
)

// OpenID Connect sign-in (R-SEC). GET /signin/oidc starts the
// authorization code flow with PKCE through identity.Flow, whose state
// cookie (vdibroker_oidc, sealed, SameSite=Lax) carries the sign-in under
// way, so nothing is stored before the provider sends the browser back.
// GET /signin/oidc/callback finishes it: from an address that has used up
// its failed authentications (the API's limit) it is refused before the
// provider is asked anything; a refusal spends one, is answered with the
// provider's text cut, and recorded through Refusals, which bounds what a
// flood of refusals writes. A verified identity signs in as a token does
// (openSession): the API checks the ID token again on every call, and the
// session ends when the token expires. Signing out also ends the
// provider's session when it offers an end_session_endpoint.

// Paths and cookie of the console's single sign-on.
const (
	oidcStartPath    = "/signin/oidc"
	oidcCallbackPath = "/signin/oidc/callback"
	oidcStateCookie  = "vdibroker_oidc"
)

// OIDCCallbackPath is the console's callback below the broker's external
// URL: the redirect URI to register at the provider.
const OIDCCallbackPath = oidcCallbackPath

// OIDCConfig configures the console's single sign-on.
type OIDCConfig struct {
	Provider *identity.Provider
	// CallbackURL is <external URL>/signin/oidc/callback, registered at
	// the provider (never derived from a request's Host).
	CallbackURL string
	// PostLogoutURL is where the provider sends the browser after signing
	// it out (<external URL>/signin), registered at the provider.
	PostLogoutURL string
	// Key seals the sign-in state cookie: 32 bytes, the same on every
	// replica.
	Key []byte
	// Limit is the API's per-address limit of failed authentications;
	// nil: none.
	Limit AddressLimit
	// Refusals records refused sign-ins; nil: not recorded.
	Refusals Refusals
}

// AddressLimit is the API's limit on failed authentications per client
// address (http.Server's Throttled and FailedAuthentication, R-SEC).
type AddressLimit interface {
	// Throttled reports whether r's address has none left.
	Throttled(r *http.Request) bool
	// FailedAuthentication spends one, false when none was left.
	FailedAuthentication(r *http.Request) bool
}

// Refusals records refused anonymous attempts in the audit trail,
// aggregated per address and time window under a global budget, so that
// a flood of them writes a bounded number of rows (R-SEC). kind is what
// was attempted ("signin/oidc"), addr the client's address, detail why it
// was refused (already cut to a few hundred bytes).
type Refusals interface {
	Refused(ctx context.Context, kind, addr, detail string)
}

type oidcLogin struct {
	flow       *identity.Flow
	postLogout string
	limit      AddressLimit
	refusals   Refusals
}

// EnableOIDC adds "Sign in with single sign-on". Call it before serving.
func (c *Console) EnableOIDC(cfg OIDCConfig) error {
	flow, err := identity.NewFlow(identity.FlowConfig{Provider: cfg.Provider, CallbackURL: cfg.CallbackURL,
		StateCookie: oidcStateCookie, StatePath: oidcStartPath, Key: cfg.Key, Secure: c.secure, Now: c.now})
	if err != nil {
		return err
	}
	c.oidc = &oidcLogin{flow: flow, postLogout: cfg.PostLogoutURL, limit: cfg.Limit, refusals: cfg.Refusals}
	c.mux.HandleFunc("GET "+oidcStartPath, c.oidcStart)
	c.mux.HandleFunc("GET "+oidcCallbackPath, c.oidcCallback)
	return nil
}

func (c *Console) oidcStart(w http.ResponseWriter, r *http.Request) {
	c.oidc.flow.Start(w, r, webguard.SafeNext(r.FormValue("next")))
}

func (c *Console) oidcCallback(w http.ResponseWriter, r *http.Request) {
	if c.oidc.limit != nil && c.oidc.limit.Throttled(r) {
		c.tooManyFailures(w, r)
		return
	}
	id, raw, next, err := c.oidc.flow.Finish(w, r)
	if err != nil {
		c.oidcRefused(w, r, vdibroker.HTTPStatus(vdibroker.ErrorCode(err)), vdibroker.ErrorMessage(err))
		return
	}
	c.openSession(w, r, raw, id.Expiry, next, func(status int, msg string) { c.oidcRefused(w, r, status, msg) })
}

// oidcRefused answers a refused sign-in: it spends one of the address's
// failed authentications (none left: 429, nothing recorded) and records
// the refusal through Refusals.
func (c *Console) oidcRefused(w http.ResponseWriter, r *http.Request, status int, msg string) {
	if c.oidc.limit != nil && !c.oidc.limit.FailedAuthentication(r) {
		c.tooManyFailures(w, r)
		return
	}
	if c.oidc.refusals != nil {
		addr, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			addr = r.RemoteAddr
		}
		c.oidc.refusals.Refused(context.WithoutCancel(r.Context()), "signin/oidc", identity.Printable(addr, 64), msg)
	}
	c.errorPage(w, r, status, msg)
}

func (c *Console) tooManyFailures(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Retry-After", "60")
	c.errorPage(w, r, http.StatusTooManyRequests, "Too many failed sign-ins from your address. Wait a minute, then sign in again.")
}

// endSessionURL is where to send a browser whose single sign-on session
// ended here ("" when the provider ends none).
func (o *oidcLogin) endSessionURL(idToken string) string {
	return o.flow.Provider().EndSessionURL(idToken, o.postLogout)
}

// signinWhoami is POST /api/v1/signin: the caller's role, recorded in the
// audit trail as a sign-in.
func (a *api) signinWhoami(ctx context.Context) (string, error) {
	var me struct {
		Role string `json:"role"`
	}
	err := a.do(ctx, http.MethodPost, apiPrefix+"/signin", nil, &me)
	return me.Role, err
}
