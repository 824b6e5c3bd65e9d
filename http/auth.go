package http

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	nethttp "net/http"
	"strings"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/identity"
)

// access is what a route requires of the caller's token (R-SEC).
type access int

const (
	// public routes need no token (healthz, agent register).
	public access = iota
	// read routes take Reader, Contributor and the admin token.
	read
	// write routes take Contributor and the admin token.
	write
	// connect takes Contributor, the admin token, and User tokens (the
	// handler checks that a User connects only itself).
	connect
	// admin routes take the admin token only (issuing API tokens).
	admin
	// anyRole routes take every API token (whoami).
	anyRole
)

// principal is who is calling.
type principal struct {
	Role    string // vdibroker.Role*
	Subject string
	TokenID string
	// Kind is vdibroker.PrincipalAdmin, PrincipalToken or PrincipalOIDC.
	Kind string
	// HostPools scopes the principal to these pools (empty: every pool).
	HostPools []string
}

// audit is the principal as an audit entry names it.
func (p *principal) audit() vdibroker.AuditPrincipal {
	id := p.TokenID
	if p.Kind == vdibroker.PrincipalOIDC || p.Kind == vdibroker.PrincipalAdmin {
		id = p.Subject
	}
	return vdibroker.AuditPrincipal{Kind: p.Kind, ID: id, Name: p.Subject, Role: p.Role, HostPools: p.HostPools}
}

// sees reports whether the principal may see (and, with its role, act on)
// pool: the one test of a host-pool scope, used by authorize for a route's
// pool and by list routes to filter.
func (p *principal) sees(pool string) bool {
	return p != nil && vdibroker.InScope(p.HostPools, pool)
}

func principalFrom(ctx context.Context) *principal {
	p, _ := ctx.Value(ctxPrincipal).(*principal)
	return p
}

// hashSecret is how every secret is stored: hex SHA-256. Bearer secrets are
// 256-bit random values, so an unsalted fast hash is enough.
func hashSecret(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

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
// token (compared by hash in constant time) or a stored API token.
func (s *Server) authenticate(r *nethttp.Request) (*principal, error) {
	tok, err := bearer(r)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(tok))
	if s.hasAdmin && subtle.ConstantTimeCompare(sum[:], s.adminHash[:]) == 1 {
		return &principal{Role: vdibroker.RoleAdmin, Subject: "admin", Kind: vdibroker.PrincipalAdmin}, nil
	}
	if s.oidc != nil && identity.LooksLikeJWT(tok) {
		id, err := s.oidc.Verify(r.Context(), tok)
		if err != nil {
			return nil, err
		}
		return &principal{Role: id.Role, Subject: id.Subject, Kind: vdibroker.PrincipalOIDC, HostPools: id.HostPools}, nil
	}
	hash := hex.EncodeToString(sum[:])
	t, err := s.store.TokenByHash(r.Context(), hash)
	switch vdibroker.ErrorCode(err) {
	case "":
	case vdibroker.ENotFound, vdibroker.EUnauthenticated:
		return nil, vdibroker.Errorf(vdibroker.EUnauthenticated, "invalid token")
	default:
		return nil, err
	}
	// The store found the row by hash; compare again in constant time so
	// the answer does not depend on how the lookup compared.
	if subtle.ConstantTimeCompare([]byte(t.Hash), []byte(hash)) != 1 {
		return nil, vdibroker.Errorf(vdibroker.EUnauthenticated, "invalid token")
	}
	if t.ExpireTime != nil && !s.now().Before(*t.ExpireTime) {
		return nil, vdibroker.Errorf(vdibroker.EUnauthenticated, "token expired at %s", t.ExpireTime.UTC().Format("2006-01-02T15:04:05Z"))
	}
	return &principal{Role: t.Role, Subject: t.Subject, TokenID: t.ID, Kind: vdibroker.PrincipalToken, HostPools: t.HostPools}, nil
}

// unscopedRoutes are the routes without a {pool} that a principal scoped
// to host pools may call: their handlers filter what they answer by
// principal.sees. Every other route without a pool is global, refused to
// a scoped principal.
var unscopedRoutes = map[string]bool{
	"GET /api/v1/hostpools": true,
	"GET /api/v1/whoami":    true,
	"POST /api/v1/signin":   true,
	"GET /api/v1/auditlog":  true,
	// Scaling plans name their pools in the body: scalingplans.go checks
	// the scope against them (R-SP5).
	"GET /api/v1/scalingplans":           true,
	"GET /api/v1/scalingplans/{name}":    true,
	"PUT /api/v1/scalingplans/{name}":    true,
	"DELETE /api/v1/scalingplans/{name}": true,
}

// authorize decides whether principal p may make request r to a route
// that needs need: its role first, then its host-pool scope. A pool out
// of scope is not found for a read (a scoped Reader cannot tell it from a
// pool that does not exist) and forbidden for anything else; both answers
// are the same whether the pool exists or not.
func authorize(p *principal, need access, r *nethttp.Request) error {
	if err := authorizeRole(p, need); err != nil || need == public || len(p.HostPools) == 0 {
		return err
	}
	if pool := r.PathValue("pool"); pool != "" {
		if p.sees(pool) {
			return nil
		}
		if r.Method == nethttp.MethodGet {
			return vdibroker.Errorf(vdibroker.ENotFound, "host pool %q not found", pool)
		}
		return vdibroker.Errorf(vdibroker.EPermission, "host pool %q is outside this token's host pools", pool)
	}
	if unscopedRoutes[r.Pattern] {
		return nil
	}
	return vdibroker.Errorf(vdibroker.EPermission, "a token scoped to host pools may not call %s %s", r.Method, r.URL.Path)
}

// authorizeRole checks the principal's role against what the route needs.
func authorizeRole(p *principal, need access) error {
	switch need {
	case public:
		return nil
	case read:
		if p.Role == vdibroker.RoleUser {
			return vdibroker.Errorf(vdibroker.EPermission, "role User may only connect")
		}
		return nil
	case write:
		switch p.Role {
		case vdibroker.RoleAdmin, vdibroker.RoleContributor:
			return nil
		case vdibroker.RoleReader:
			return vdibroker.Errorf(vdibroker.EPermission, "role Reader may only read (GET)")
		default:
			return vdibroker.Errorf(vdibroker.EPermission, "role %s may only connect", p.Role)
		}
	case connect:
		switch p.Role {
		case vdibroker.RoleAdmin, vdibroker.RoleContributor, vdibroker.RoleUser:
			return nil
		default:
			return vdibroker.Errorf(vdibroker.EPermission, "role %s may not connect users", p.Role)
		}
	case anyRole:
		return nil
	case admin:
		if p.Role == vdibroker.RoleAdmin {
			return nil
		}
		return vdibroker.Errorf(vdibroker.EPermission, "only the admin token may manage API tokens")
	}
	return vdibroker.Errorf(vdibroker.EPermission, "permission denied")
}

// handle registers a route: the handler runs after authentication and
// authorization (authorize, the one decision), and an error it returns is
// answered by writeError. Every request's audit entry starts here: for a
// route of auditedActions it rides in the context to the store, which
// writes it with the change; a refusal is recorded by refused (audit.go).
func (s *Server) handle(pattern string, need access, h func(w nethttp.ResponseWriter, r *nethttp.Request) error) {
	s.mux.HandleFunc(pattern, func(w nethttp.ResponseWriter, r *nethttp.Request) {
		ev := s.startAudit(w, r)
		fail := func(err error, refusal bool) {
			// Only failed authentications spend the address's bucket, and
			// only they are answered 429 once it is empty (and no longer
			// audited one by one): a valid token or host credential is
			// never throttled, even from an address (a proxy, a NAT) that
			// others share.
			if vdibroker.ErrorCode(err) == vdibroker.EUnauthenticated && !s.authFailures.spend(clientAddr(r)) {
				writeError(w, r, s, throttled("too many failed authentications from this address", AuthFailuresPerSecond))
				return
			}
			s.refused(r, ev, err, refusal)
			writeError(w, r, s, err)
		}
		if need != public {
			p, err := s.authenticate(r)
			if err == nil {
				ev.Principal = p.audit()
				err = authorize(p, need, r)
			}
			if err != nil {
				fail(err, true)
				return
			}
			r = r.WithContext(context.WithValue(r.Context(), ctxPrincipal, p))
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
