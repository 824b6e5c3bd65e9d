package http

import (
	nethttp "net/http"

	"github.com/vdibroker/vdibroker"
)

// Entitlements (R-E1..R-E10): application groups and their applications,
// an application's connect, and what a user may use. An application
// group names its pool in its body, not its path: the entitlement service
// authorizes a principal scoped to host pools by the group's pool, as the
// scaling plan service does by a plan's pools.

const appGroupsPath = "/api/v1/applicationgroups"

// entitlementRoutes registers the entitlement API (routes.go calls it).
func (s *Server) entitlementRoutes() {
	const g = appGroupsPath + "/{name}"
	s.handle("GET "+appGroupsPath, vdibroker.ActionRead, s.listAppGroups)
	s.handle("GET "+g, vdibroker.ActionRead, s.getAppGroup)
	s.handle("PUT "+g, vdibroker.ActionWrite, s.putAppGroup)
	s.handle("DELETE "+g, vdibroker.ActionWrite, s.deleteAppGroup)
	s.handle("GET "+g+"/applications", vdibroker.ActionRead, s.listApps)
	s.handle("GET "+g+"/applications/{app}", vdibroker.ActionRead, s.getApp)
	s.handle("PUT "+g+"/applications/{app}", vdibroker.ActionWrite, s.putApp)
	s.handle("DELETE "+g+"/applications/{app}", vdibroker.ActionWrite, s.deleteApp)
	s.handle("POST "+g+"/connect", vdibroker.ActionConnect, s.connectApp)
	// Every role: an end user asks about itself (the service checks).
	s.handle("GET /api/v1/users/{user}/entitlements", vdibroker.ActionIdentify, s.userEntitlements)
	s.handle("GET /api/v1/users/{user}/sessions", vdibroker.ActionIdentify, s.userSessions)
	// The caller's own resources (R-U5).
	s.handle("GET /api/v1/feed", vdibroker.ActionIdentify, s.feed)
}

// entitlementUnscoped are the routes above, which a principal scoped to
// host pools may call (unscopedRoutes): the service keeps what it sees.
var entitlementUnscoped = []string{
	"GET " + appGroupsPath,
	"GET " + appGroupsPath + "/{name}",
	"PUT " + appGroupsPath + "/{name}",
	"DELETE " + appGroupsPath + "/{name}",
	"GET " + appGroupsPath + "/{name}/applications",
	"GET " + appGroupsPath + "/{name}/applications/{app}",
	"PUT " + appGroupsPath + "/{name}/applications/{app}",
	"DELETE " + appGroupsPath + "/{name}/applications/{app}",
	"POST " + appGroupsPath + "/{name}/connect",
	"GET /api/v1/users/{user}/entitlements",
	"GET /api/v1/users/{user}/sessions",
	"GET /api/v1/feed",
}

// entitlementAudited are the audited actions of the routes above
// (auditedActions): each write's entry has the group before and after.
var entitlementAudited = map[string]string{
	"PUT " + appGroupsPath + "/{name}":                       "applicationgroup.put",
	"DELETE " + appGroupsPath + "/{name}":                    "applicationgroup.delete",
	"PUT " + appGroupsPath + "/{name}/applications/{app}":    "application.put",
	"DELETE " + appGroupsPath + "/{name}/applications/{app}": "application.delete",
}

func init() {
	for _, r := range entitlementUnscoped {
		unscopedRoutes[r] = true
	}
	for r, a := range entitlementAudited {
		auditedActions[r] = a
	}
}

// listAppGroups is GET /applicationgroups[?hostPool=P].
func (s *Server) listAppGroups(w nethttp.ResponseWriter, r *nethttp.Request) error {
	limit, after, err := pageParams(r)
	if err != nil {
		return err
	}
	pool := r.URL.Query().Get("hostPool")
	if pool != "" {
		if err := vdibroker.ValidateName("hostPool", pool, vdibroker.MinPoolNameLen, vdibroker.MaxPoolNameLen); err != nil {
			return err
		}
	}
	list, err := s.svc.Entitlements.ListApplicationGroups(r.Context(), pool)
	if err != nil {
		return err
	}
	writeJSON(w, nethttp.StatusOK, pageOf(r, list, func(g *vdibroker.ApplicationGroup) string { return g.Name }, limit, after))
	return nil
}

func (s *Server) getAppGroup(w nethttp.ResponseWriter, r *nethttp.Request) error {
	g, err := s.svc.Entitlements.ApplicationGroup(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	w.Header().Set("ETag", vdibroker.ETag(g.UpdateTime)) // R-E13
	writeJSON(w, nethttp.StatusOK, g)
	return nil
}

// putAppGroup creates (201) or replaces (200) a group, its assignments
// included: the body strictly decoded, validated and stored by the
// service; a refused group changes nothing. If-Match (a GET's ETag, or
// *) writes only over the group read, If-None-Match: * only where there
// is none: 412 PreconditionFailed otherwise (R-E13).
func (s *Server) putAppGroup(w nethttp.ResponseWriter, r *nethttp.Request) error {
	pre, err := vdibroker.ParsePrecondition(r.Header)
	if err != nil {
		return err
	}
	var g vdibroker.ApplicationGroup
	if err := decodeJSON(w, r, &g); err != nil {
		return err
	}
	stored, created, err := s.svc.Entitlements.PutApplicationGroup(r.Context(), r.PathValue("name"), &g, pre)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", vdibroker.ETag(stored.UpdateTime))
	warningHeaders(w, stored.Warnings) // R-E12
	writeJSON(w, createdStatus(created), stored)
	return nil
}

// deleteAppGroup deletes a group; with If-Match only the group read
// (R-E13).
func (s *Server) deleteAppGroup(w nethttp.ResponseWriter, r *nethttp.Request) error {
	pre, err := vdibroker.ParseDeletePrecondition(r.Header)
	if err != nil {
		return err
	}
	if err := s.svc.Entitlements.DeleteApplicationGroup(r.Context(), r.PathValue("name"), pre); err != nil {
		return err
	}
	w.WriteHeader(nethttp.StatusNoContent)
	return nil
}

func (s *Server) listApps(w nethttp.ResponseWriter, r *nethttp.Request) error {
	limit, after, err := pageParams(r)
	if err != nil {
		return err
	}
	list, err := s.svc.Entitlements.ListApplications(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, nethttp.StatusOK, pageOf(r, list, func(a *vdibroker.Application) string { return a.Name }, limit, after))
	return nil
}

func (s *Server) getApp(w nethttp.ResponseWriter, r *nethttp.Request) error {
	a, err := s.svc.Entitlements.Application(r.Context(), r.PathValue("name"), r.PathValue("app"))
	if err != nil {
		return err
	}
	w.Header().Set("ETag", vdibroker.ETag(a.UpdateTime)) // R-E13
	writeJSON(w, nethttp.StatusOK, a)
	return nil
}

// putApp creates or replaces an application; If-Match and If-None-Match
// as putAppGroup's (R-E13).
func (s *Server) putApp(w nethttp.ResponseWriter, r *nethttp.Request) error {
	pre, err := vdibroker.ParsePrecondition(r.Header)
	if err != nil {
		return err
	}
	var a vdibroker.Application
	if err := decodeJSON(w, r, &a); err != nil {
		return err
	}
	stored, created, err := s.svc.Entitlements.PutApplication(r.Context(), r.PathValue("name"), r.PathValue("app"), &a, pre)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", vdibroker.ETag(stored.UpdateTime))
	warningHeaders(w, stored.Warnings) // R-E12
	writeJSON(w, createdStatus(created), stored)
	return nil
}

// deleteApp deletes an application; If-Match as deleteAppGroup's.
func (s *Server) deleteApp(w nethttp.ResponseWriter, r *nethttp.Request) error {
	pre, err := vdibroker.ParseDeletePrecondition(r.Header)
	if err != nil {
		return err
	}
	if err := s.svc.Entitlements.DeleteApplication(r.Context(), r.PathValue("name"), r.PathValue("app"), pre); err != nil {
		return err
	}
	w.WriteHeader(nethttp.StatusNoContent)
	return nil
}

// connectApp is POST /applicationgroups/{name}/connect: a connect whose
// .rdp file opens the application (R-E7); 201 for a new session, 200 for
// the user's existing one in the pool or a dry run.
func (s *Server) connectApp(w nethttp.ResponseWriter, r *nethttp.Request) error {
	var req vdibroker.AppConnectRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	var err error
	if req.Wait, err = connectWait(w, r); err != nil {
		return err
	}
	a, err := s.svc.Entitlements.ConnectApplication(r.Context(), r.PathValue("name"), req, r.Header.Get("Idempotency-Key"))
	return writeConnect(w, a, err)
}

// userEntitlements is GET /users/{user}/entitlements[?group=G...] (R-E10).
func (s *Server) userEntitlements(w nethttp.ResponseWriter, r *nethttp.Request) error {
	who := vdibroker.UserIdentity{User: r.PathValue("user"), Groups: r.URL.Query()["group"]}
	out, err := s.svc.Entitlements.UserEntitlements(r.Context(), who)
	if err != nil {
		return err
	}
	writeJSON(w, nethttp.StatusOK, out)
	return nil
}

// userSessions is GET /users/{user}/sessions (R-U3): the user's open
// sessions in every pool the caller sees, paged as every list.
func (s *Server) userSessions(w nethttp.ResponseWriter, r *nethttp.Request) error {
	limit, after, err := pageParams(r)
	if err != nil {
		return err
	}
	list, err := s.svc.Sessions.UserSessions(r.Context(), r.PathValue("user"))
	if err != nil {
		return err
	}
	writeJSON(w, nethttp.StatusOK, pageOf(r, list, func(us *vdibroker.UserSession) string { return us.ID }, limit, after))
	return nil
}

// feed is GET /feed (R-U5): what the caller may open.
func (s *Server) feed(w nethttp.ResponseWriter, r *nethttp.Request) error {
	f, err := s.svc.Entitlements.Feed(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, nethttp.StatusOK, f)
	return nil
}
