package http

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	nethttp "net/http"
	"strings"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/identity"
)

// public marks a route that takes no credential (healthz, the agent's
// register and heartbeat, the signed pod-to-pod calls): handle neither
// authenticates nor authorizes it.
const public vdibroker.Action = 0

// refusesNoOne marks a public route that refuses no one, so that no
// entry is ever recorded under its pattern: the health probe
// (orchestrators probe it without a token; a bad one is answered all the
// same) and the gateways' public signing keys (R-GW6). Its handler fails
// only as the store does, which is not recorded; refused passes it over
// all the same, and its pattern is no action an audit list filters by
// (checkAuditAction), nor in AuditedRoutes. A public route that may
// refuse (the agent's register and heartbeat) is registered public.
const refusesNoOne vdibroker.Action = -1

// bearer returns the token of an "Authorization: Bearer <token>" header.
func bearer(r *nethttp.Request) (string, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", vdibroker.Errorf(vdibroker.EUnauthenticated, "missing Authorization: Bearer <token> header")
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return "", vdibroker.Errorf(vdibroker.EUnauthenticated, "Authorization header must be \"Bearer <token>\"")
	}
	return strings.TrimSpace(tok), nil
}

// authenticate finds the principal of a request's bearer token: the admin
// token (compared by hash in constant time), an OpenID Connect identity,
// or an API token (the token service); or the principal an in-process
// caller put in the request's context (vdibroker.WithVerified). The address's failed-
// authentication bucket is looked at first: from an address that has
// used it up, an OpenID Connect token is checked against the provider's
// keys held, never making the broker fetch them (a valid token still
// passes; one of an unknown key is refused without a request to the
// provider).
func (s *Server) authenticate(r *nethttp.Request) (*vdibroker.Principal, error) {
	if p := vdibroker.VerifiedFrom(r.Context()); p != nil {
		// An in-process caller that authenticated the user (the portal's
		// single sign-on, R-U2).
		return p, nil
	}
	tok, err := bearer(r)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(tok))
	if s.hasAdmin && subtle.ConstantTimeCompare(sum[:], s.adminHash[:]) == 1 {
		return &vdibroker.Principal{Role: vdibroker.RoleAdmin, Subject: "admin", Kind: vdibroker.PrincipalAdmin}, nil
	}
	if s.oidc != nil && identity.LooksLikeJWT(tok) {
		ctx := r.Context()
		if s.Throttled(r) {
			ctx = identity.CachedKeysOnly(ctx)
		}
		id, err := s.oidc.Verify(ctx, tok)
		if err != nil {
			return nil, err
		}
		return &vdibroker.Principal{Role: id.Role, Subject: id.Subject, Kind: vdibroker.PrincipalOIDC, HostPools: id.HostPools,
			Groups: identityGroups(id.Groups)}, nil
	}
	return s.svc.Tokens.Authenticate(r.Context(), hex.EncodeToString(sum[:]))
}

// identityGroups are the groups of an OpenID Connect identity as its
// principal's (R-E6): the first vdibroker.MaxGroups of the claim.
func identityGroups(groups []string) []string {
	if len(groups) > vdibroker.MaxGroups {
		groups = groups[:vdibroker.MaxGroups]
	}
	return groups
}

// unscopedRoutes are the routes without a {pool} that a principal scoped
// to host pools may call: their handlers keep what the principal sees
// (Principal.Sees), and scaling plans are authorized by their pools. Every other route without a pool is global, refused to
// a scoped principal.
var unscopedRoutes = map[string]bool{
	"GET /api/v1/hostpools": true,
	"GET /api/v1/whoami":    true,
	"POST /api/v1/signin":   true,
	"POST /api/v1/signout":  true,
	"GET /api/v1/auditlog":  true,
	// Scaling plans name their pools in the body: the scaling plan service
	// authorizes them (R-SP5).
	"GET /api/v1/scalingplans":           true,
	"GET /api/v1/scalingplans/{name}":    true,
	"PUT /api/v1/scalingplans/{name}":    true,
	"DELETE /api/v1/scalingplans/{name}": true,
	// A gateway's reports name their pool in the body: the gateway
	// service authorizes it (R-GW4).
	"POST /api/v1/gateway/tunnels/open":    true,
	"POST /api/v1/gateway/tunnels/channel": true,
	"POST /api/v1/gateway/tunnels/close":   true,
	"POST /api/v1/gateway/tunnels/check":   true,
}

// routeTarget is what a request to a route acts on, for Authorize: the
// pool of its path; nothing in particular for a route of unscopedRoutes
// (its handler keeps what the principal sees); else something global,
// named by the request's method and path.
func routeTarget(r *nethttp.Request) vdibroker.Target {
	if pool := r.PathValue("pool"); pool != "" {
		return vdibroker.Target{HostPool: pool}
	}
	if unscopedRoutes[r.Pattern] {
		return vdibroker.Target{}
	}
	return vdibroker.Target{Global: r.Method + " " + r.URL.Path}
}

// handle registers a route: the handler runs after authentication and
// authorization (vdibroker.Authorize of the route's action on its target),
// and an error it returns is
// answered by writeError. Every request's audit entry starts here: for a
// route of auditedActions it rides in the context to the store, which
// writes it with the change; a refusal is recorded by refused (audit.go).
// An end user's write spends her write budget once she is authorized,
// before the handler (spendsUserWrite, ratelimit.go).
func (s *Server) handle(pattern string, action vdibroker.Action, h func(w nethttp.ResponseWriter, r *nethttp.Request) error) {
	s.patterns = append(s.patterns, pattern)
	if action == refusesNoOne {
		if s.unaudited == nil {
			s.unaudited = map[string]bool{}
		}
		s.unaudited[pattern] = true
		action = public
	} else {
		s.apiRoutes = append(s.apiRoutes, pattern)
	}
	s.mux.HandleFunc(pattern, func(w nethttp.ResponseWriter, r *nethttp.Request) {
		ev := s.startAudit(w, r)
		fail := func(err error, refusal bool) {
			// Only failed authentications spend the address's bucket, and
			// only they are answered 429 once it is empty (and no longer
			// audited one by one): a valid token or host credential is
			// never throttled, even from an address (a proxy, a NAT) that
			// others share.
			if vdibroker.ErrorCode(err) == vdibroker.EUnauthenticated && !s.FailedAuthentication(r) {
				err = throttled("too many failed authentications from this address", AuthFailuresPerSecond)
				s.refused(r, ev, err, refusal) // counted, not written (RecordRefusal)
				writeError(w, r, s, err)
				return
			}
			s.refused(r, ev, err, refusal)
			writeError(w, r, s, err)
		}
		if action != public {
			p, err := s.authenticate(r)
			if err == nil {
				ev.Principal = p.Audit()
				ev.Bound()
				authenticated(r)
				err = vdibroker.Authorize(p, action, routeTarget(r))
			}
			if err != nil {
				fail(err, true)
				return
			}
			if spendsUserWrite(p, pattern) && !vdibroker.WritePaid(r.Context()) && !s.userWrites.Spend(userWriteKey(p), s.now()) {
				// Before the handler reads or writes anything; not
				// audited (refused: a throttled API credential's 429).
				// A portal launch's connect was paid as it was kept.
				fail(throttled("this end user makes changes faster than a person does (30 at once, then one every 2 s)", UserWritesPerSecond), false)
				return
			}
			r = r.WithContext(vdibroker.WithPrincipal(r.Context(), p))
		}
		if auditedActions[pattern] != "" {
			r = r.WithContext(vdibroker.WithAudit(r.Context(), ev))
		}
		if err := h(w, r); err != nil {
			fail(err, false)
			return
		}
		s.recorded(r, ev)
	})
}
