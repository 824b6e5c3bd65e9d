package console

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/identity"
)

// OpenID Connect sign-in (issue 15). GET /signin/oidc starts the
// authorization code flow with PKCE: a fresh state, nonce and code
// verifier are kept here, keyed by the state, and the state is also set in
// a cookie, so the callback must come back to the browser that started it.
// GET /signin/oidc/callback takes the pending sign-in out (a state is used
// once: a replayed callback is refused), exchanges the code with the
// verifier, verifies the ID token (keys, issuer, audience, expiry) and its
// nonce, and opens a console session whose API token is the ID token
// itself: the API verifies it again on every call, as it does for any
// client presenting one, and the session ends when it expires.

// oidcStateCookie carries the pending sign-in's state.
const oidcStateCookie = "vdibroker_oidc"

// loginTTL is how long a started sign-in may take to come back.
const loginTTL = 10 * time.Minute

type oidcLogin struct {
	p       *identity.Provider
	audit   vdibroker.AuditStore // records refused sign-ins; nil: logged only
	mu      sync.Mutex
	pending map[string]*pendingLogin // by state
}

type pendingLogin struct {
	l       *identity.Login
	next    string
	expires time.Time
}

// EnableOIDC adds "Sign in with single sign-on" through p. Refused
// sign-ins are written to audit when set (a successful one is recorded by
// the API's POST /signin). Call it before serving.
func (c *Console) EnableOIDC(p *identity.Provider, audit vdibroker.AuditStore) {
	c.oidc = &oidcLogin{p: p, audit: audit, pending: map[string]*pendingLogin{}}
	c.mux.HandleFunc("GET /signin/oidc", c.oidcStart)
	c.mux.HandleFunc("GET /signin/oidc/callback", c.oidcCallback)
}

func (c *Console) oidcStart(w http.ResponseWriter, r *http.Request) {
	redirect := c.oidc.p.RedirectURL()
	if redirect == "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		redirect = scheme + "://" + r.Host + "/signin/oidc/callback"
	}
	l, authURL := c.oidc.p.NewLogin(redirect)
	now := c.now()
	c.oidc.mu.Lock()
	for s, pl := range c.oidc.pending {
		if !now.Before(pl.expires) {
			delete(c.oidc.pending, s)
		}
	}
	c.oidc.pending[l.State] = &pendingLogin{l: l, next: safeNext(r.FormValue("next")), expires: now.Add(loginTTL)}
	c.oidc.mu.Unlock()
	// Lax, not Strict: the callback is a top-level navigation from the
	// identity provider's site.
	http.SetCookie(w, &http.Cookie{Name: oidcStateCookie, Value: l.State, Path: "/signin/oidc", MaxAge: int(loginTTL.Seconds()),
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, authURL, http.StatusSeeOther)
}

func (c *Console) oidcCallback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	w.Header().Set("Cache-Control", "no-store")
	if e := q.Get("error"); e != "" {
		c.oidcRefused(w, r, http.StatusUnauthorized, "The identity provider did not sign you in: "+e+" "+q.Get("error_description"))
		return
	}
	state := q.Get("state")
	ck, err := r.Cookie(oidcStateCookie)
	if err != nil || !equal(state, ck.Value) {
		c.oidcRefused(w, r, http.StatusForbidden, "This sign-in was not started in this browser (state mismatch). Sign in again.")
		return
	}
	c.oidc.mu.Lock()
	pl := c.oidc.pending[state]
	delete(c.oidc.pending, state)
	c.oidc.mu.Unlock()
	if pl == nil || !c.now().Before(pl.expires) {
		c.oidcRefused(w, r, http.StatusForbidden, "This sign-in was used already or has expired. Sign in again.")
		return
	}
	id, raw, err := c.oidc.p.Finish(r.Context(), pl.l, q.Get("code"))
	if err != nil {
		c.oidcRefused(w, r, vdibroker.HTTPStatus(vdibroker.ErrorCode(err)), "Single sign-on failed: "+vdibroker.ErrorMessage(err))
		return
	}
	// The API records the sign-in (and checks the token once more).
	a := &api{h: c.api, token: raw, remoteAddr: r.RemoteAddr}
	role, err := a.signinWhoami(r.Context())
	if err != nil {
		c.oidcRefused(w, r, vdibroker.HTTPStatus(vdibroker.ErrorCode(err)), "The broker did not accept your sign-in: "+vdibroker.ErrorMessage(err))
		return
	}
	expires := c.now().Add(c.ttl)
	if id.Expiry.Before(expires) {
		expires = id.Expiry
	}
	sid := c.newSecret()
	c.mu.Lock()
	c.sessions[sid] = &webSession{token: raw, role: role, csrf: c.newSecret(), expires: expires}
	c.expireSessions()
	c.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: oidcStateCookie, Value: "", Path: "/signin/oidc", MaxAge: -1})
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: sid, Path: "/", MaxAge: int(time.Until(expires).Seconds()) + 1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	c.log.Info("console: signed in with OIDC", "subject", id.Subject, "name", id.Name, "role", role, "hostPools", id.HostPools)
	http.Redirect(w, r, pl.next, http.StatusSeeOther)
}

// oidcRefused answers a refused sign-in and records it in the audit trail.
func (c *Console) oidcRefused(w http.ResponseWriter, r *http.Request, status int, msg string) {
	c.log.Warn("console: OIDC sign-in refused", "reason", msg, "remote", r.RemoteAddr)
	if c.oidc.audit != nil {
		addr, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			addr = r.RemoteAddr
		}
		ev := &vdibroker.AuditEntry{Time: c.now().UTC(), Principal: vdibroker.AuditPrincipal{Kind: vdibroker.PrincipalAnonymous},
			RemoteAddr: addr, RequestID: w.Header().Get("X-Request-Id"), Action: "signin", Target: "signin/oidc",
			Outcome: vdibroker.AuditRefused, Error: msg}
		if err := c.oidc.audit.AppendAudit(context.WithoutCancel(r.Context()), ev); err != nil {
			c.log.Error("console: cannot record a refused sign-in", "err", err)
		} else {
			c.log.Info("audit", "audit", ev)
		}
	}
	c.errorPage(w, r, status, msg)
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
