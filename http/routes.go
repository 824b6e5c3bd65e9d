package http

import (
	nethttp "net/http"
	"strings"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/internal/ratelimit"
)

// routes registers the API of SPEC §9 with the access each call needs.
func (s *Server) routes() {
	const p = "/api/v1/hostpools/{pool}"
	s.handle("GET /healthz", refusesNoOne, s.healthz)

	s.handle("GET /api/v1/hostpools", vdibroker.ActionRead, s.listPools)
	s.handle("GET "+p, vdibroker.ActionRead, s.getPool)
	s.handle("PUT "+p, vdibroker.ActionWrite, s.putPool)
	s.handle("PATCH "+p, vdibroker.ActionWrite, s.patchPool)
	s.handle("DELETE "+p, vdibroker.ActionWrite, s.deletePool)

	s.handle("GET "+p+"/sessionhosts", vdibroker.ActionRead, s.listHosts)
	s.handle("GET "+p+"/sessionhosts/{host}", vdibroker.ActionRead, s.getHost)
	s.handle("PUT "+p+"/sessionhosts/{host}", vdibroker.ActionWrite, s.putHost)
	s.handle("PATCH "+p+"/sessionhosts/{host}", vdibroker.ActionWrite, s.patchHost)
	s.handle("DELETE "+p+"/sessionhosts/{host}", vdibroker.ActionWrite, s.deleteHost)

	s.handle("GET "+p+"/usersessions", vdibroker.ActionRead, s.listSessions)
	s.handle("GET "+p+"/usersessions/{id}", vdibroker.ActionRead, s.getSession)
	// An end user logs off and disconnects its own sessions (R-U3).
	s.handle("DELETE "+p+"/usersessions/{id}", vdibroker.ActionOwnSession, s.logoff)
	s.handle("POST "+p+"/usersessions/{id}/disconnect", vdibroker.ActionOwnSession, s.disconnect)
	s.handle("POST "+p+"/usersessions/{id}/sendmessage", vdibroker.ActionMessage, s.sendMessage)
	s.handle("GET "+p+"/usersessions/{id}/placement", vdibroker.ActionRead, s.getPlacement)

	s.handle("GET "+p+"/autoscale/evaluations", vdibroker.ActionRead, s.listAutoscaleEvaluations) // autoscale.go

	s.handle("POST "+p+"/connect", vdibroker.ActionConnect, s.connect)
	s.handle("POST "+p+"/registrationtoken", vdibroker.ActionWrite, s.createRegistrationToken)
	s.handle("GET "+p+"/registrationtokens", vdibroker.ActionInspect, s.listRegistrationTokens)
	s.handle("DELETE "+p+"/registrationtokens/{id}", vdibroker.ActionWrite, s.deleteRegistrationToken)
	s.handle("POST "+p+"/sessionhosts/{host}/resetregistration", vdibroker.ActionWrite, s.resetRegistration)
	s.handle("POST "+p+"/sessionhosts/{host}/start", vdibroker.ActionWrite, s.startHost) // power.go
	s.handle("POST "+p+"/sessionhosts/{host}/stop", vdibroker.ActionWrite, s.stopHost)
	// A message to every user session of a host: the access of a message
	// to one (R-S4).
	s.handle("POST "+p+"/sessionhosts/{host}/sendmessage", vdibroker.ActionMessage, s.sendHostMessage)

	// Scaling plans (scalingplans.go): global, scope checked per plan.
	s.handle("GET /api/v1/scalingplans", vdibroker.ActionRead, s.listScalingPlans)
	s.handle("GET /api/v1/scalingplans/{name}", vdibroker.ActionRead, s.getScalingPlan)
	s.handle("PUT /api/v1/scalingplans/{name}", vdibroker.ActionWrite, s.putScalingPlan)
	s.handle("DELETE /api/v1/scalingplans/{name}", vdibroker.ActionWrite, s.deleteScalingPlan)

	s.handle("POST /api/v1/tokens", vdibroker.ActionManageTokens, s.createToken)
	s.handle("GET /api/v1/tokens", vdibroker.ActionManageTokens, s.listTokens)
	s.handle("DELETE /api/v1/tokens/{id}", vdibroker.ActionManageTokens, s.deleteToken)
	s.handle("GET /api/v1/whoami", vdibroker.ActionIdentify, s.whoami)
	s.handle("POST /api/v1/signout", vdibroker.ActionIdentify, s.signout) // audit.go
	s.handle("POST /api/v1/signin", vdibroker.ActionIdentify, s.signin)   // audit.go
	s.handle("GET /api/v1/auditlog", vdibroker.ActionAudit, s.listAudit)  // audit.go: admin, Contributors and Helpdesk

	s.handle("POST /api/v1/agent/register", public, s.register)
	s.handle("POST /api/v1/agent/heartbeat", public, s.heartbeat) // host credential checked inside

	s.federationRoutes() // federation.go
	s.gatewayRoutes()    // gateway.go

	s.entitlementRoutes() // entitlements.go

	// Anything else under /api/v1 is a JSON 404 (or 405 when the path exists
	// with other methods), not the mux's plain text.
	s.Mount("/api/v1/", nethttp.HandlerFunc(s.notFound))
}

// WhoAmI is the answer of GET /api/v1/whoami: the calling token's role
// (Admin, Contributor, Helpdesk, Reader or User), so a client such as the web console
// offers only what the role may do. The server checks every call anyway.
type WhoAmI struct {
	Role    string `json:"role"`
	Subject string `json:"subject"`
	TokenID string `json:"tokenId,omitempty"`
	// Kind is admin, token or oidc.
	Kind string `json:"kind,omitempty"`
	// HostPools is the caller's scope; absent is every pool.
	HostPools []string `json:"hostPools,omitempty"`
}

func (s *Server) whoami(w nethttp.ResponseWriter, r *nethttp.Request) error {
	p := vdibroker.PrincipalFrom(r.Context())
	writeJSON(w, nethttp.StatusOK, WhoAmI{Role: p.Role, Subject: p.Subject, TokenID: p.TokenID, Kind: p.Kind, HostPools: p.HostPools})
	return nil
}

// Health is the answer of GET /healthz.
type Health struct {
	Status string `json:"status"` // ok, or store unavailable
	// Store is the store's health: up, or down since when and why.
	Store vdibroker.HealthStatus `json:"store"`
}

// healthz is GET /healthz: 200 while the store answers, 503 during an
// outage (R-OUT1), within the store timeout either way. The outage's
// reason may name the database's address, user and name: anyone is told
// only PublicStoreReason; the admin token and unscoped Contributors
// (Authorization: Bearer) get the reason itself, as the log has it.
// GET /healthz?live answers 200 whenever the process serves, so an
// orchestrator does not restart a healthy broker for its database's sake.
func (s *Server) healthz(w nethttp.ResponseWriter, r *nethttp.Request) error {
	if r.URL.Query().Has("live") {
		writeJSON(w, nethttp.StatusOK, map[string]string{"status": "live"})
		return nil
	}
	st := s.svc.Health.Health(r.Context())
	if !st.Up {
		if !s.seesStoreReason(r) {
			st.Reason = PublicStoreReason
		}
		writeJSON(w, nethttp.StatusServiceUnavailable, Health{Status: "store unavailable", Store: st})
		return nil
	}
	writeJSON(w, nethttp.StatusOK, Health{Status: "ok", Store: st})
	return nil
}

// PublicStoreReason is the reason of an outage as /healthz tells a caller
// who is not an admin (R-SEC).
const PublicStoreReason = "the database does not answer; its error is in the broker's log"

// seesStoreReason reports whether r's bearer token may read an outage's
// reason: the admin token, or a principal that may inspect what belongs
// to no pool (an unscoped Contributor). A probe without a token, or with
// a bad one, is answered all the same (no 401: orchestrators probe
// without one); a bad token spends the address's failed-authentication
// bucket, and none is tried once it is empty.
func (s *Server) seesStoreReason(r *nethttp.Request) bool {
	if r.Header.Get("Authorization") == "" || s.authFailures.Empty(ratelimit.ClientAddr(r), s.now()) {
		return false
	}
	p, err := s.authenticate(r)
	if err != nil {
		s.FailedAuthentication(r)
		return false
	}
	return vdibroker.Authorize(p, vdibroker.ActionInspect, vdibroker.Target{Global: "GET /healthz"}) == nil
}

// noAPIAt begins the message of notFound's 404, which a pod calling an
// older one tells from a route's own 404 (PodClient.SessionCommand).
const noAPIAt = "no API at "

// notFound answers a request no route took: 405 with the Allow header
// (RFC 9110 requires it) and the allowed methods in the message when the
// path is a route's under other methods, else 404.
func (s *Server) notFound(w nethttp.ResponseWriter, r *nethttp.Request) {
	var allowed []string
	for _, m := range []string{"GET", "PUT", "PATCH", "POST", "DELETE"} {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "" && pattern != "/api/v1/" {
			allowed = append(allowed, m)
		}
	}
	if len(allowed) > 0 {
		allow := strings.Join(allowed, ", ")
		w.Header().Set("Allow", allow)
		writeJSON(w, nethttp.StatusMethodNotAllowed, errorBody{Error: &vdibroker.Error{
			Code: "MethodNotAllowed", Message: "method " + r.Method + " is not allowed on " + r.URL.Path + "; allowed: " + allow}})
		return
	}
	writeError(w, r, s, vdibroker.Errorf(vdibroker.ENotFound, noAPIAt+"%s %s", r.Method, r.URL.Path))
}
