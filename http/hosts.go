package http

import (
	nethttp "net/http"

	"github.com/vdibroker/vdibroker"
)

func (s *Server) listHosts(w nethttp.ResponseWriter, r *nethttp.Request) error {
	limit, after, err := pageParams(r)
	if err != nil {
		return err
	}
	_, hosts, err := s.svc.HostsPage(r.Context(), r.PathValue("pool"), after, limit)
	if err != nil {
		return err
	}
	pg := page[*vdibroker.SessionHost]{Value: hosts}
	if len(hosts) > limit {
		pg.Value = hosts[:limit]
		pg.NextLink = nextLink(r, limit, hosts[limit-1].Name)
	}
	writeJSON(w, nethttp.StatusOK, pg)
	return nil
}

func (s *Server) getHost(w nethttp.ResponseWriter, r *nethttp.Request) error {
	h, err := s.svc.SessionHost(r.Context(), r.PathValue("pool"), r.PathValue("host"))
	if err != nil {
		return err
	}
	writeJSON(w, nethttp.StatusOK, h)
	return nil
}

// putHost creates or replaces a host's admin fields; runtime fields are the
// agent's. A new host is Unavailable until its agent registers and sends a
// heartbeat (R-H1). An absent address keeps the registered one.
func (s *Server) putHost(w nethttp.ResponseWriter, r *nethttp.Request) error {
	poolName, name := r.PathValue("pool"), r.PathValue("host")
	var req SessionHostRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	pool, err := s.store.GetHostPool(r.Context(), poolName)
	if err != nil {
		return err
	}
	h := &vdibroker.SessionHost{
		HostPool: poolName, Name: name,
		Protocols: []string{"RDP"}, StandardFeatures: true, AllowNewSession: true,
		AssignedUsers: []string{}, CreateTime: s.now().UTC(),
	}
	if req.Address == nil {
		old, err := s.store.GetSessionHost(r.Context(), poolName, name)
		switch vdibroker.ErrorCode(err) {
		case "":
			h.Address = old.Address
		case vdibroker.ENotFound:
		default:
			return err
		}
	}
	if req.Name != nil && *req.Name != name {
		return vdibroker.FieldError("name", "must match the session host name in the path (%q), got %q", name, *req.Name)
	}
	applyHostRequest(h, &req)
	if req.Protocols != nil {
		h.Protocols = *req.Protocols
	}
	if err := validateHost(pool, h); err != nil {
		return err
	}
	got, created, err := s.svc.PutSessionHost(r.Context(), h)
	if err != nil {
		return err
	}
	status := nethttp.StatusOK
	if created {
		status = nethttp.StatusCreated
	}
	writeJSON(w, status, got)
	return nil
}

// patchHost changes allowNewSession (drain), assignedUsers,
// standardFeatures and address; anything else is refused.
func (s *Server) patchHost(w nethttp.ResponseWriter, r *nethttp.Request) error {
	poolName, name := r.PathValue("pool"), r.PathValue("host")
	var req SessionHostRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	const allowed = "PATCH changes only allowNewSession, assignedUsers, standardFeatures and address"
	if req.Name != nil {
		return vdibroker.FieldError("name", "cannot be changed: %s", allowed)
	}
	if req.Protocols != nil {
		return vdibroker.FieldError("protocols", "cannot be changed by PATCH (use PUT or re-register the agent): %s", allowed)
	}
	pool, err := s.store.GetHostPool(r.Context(), poolName)
	if err != nil {
		return err
	}
	got, err := s.svc.UpdateSessionHost(r.Context(), poolName, name, func(h *vdibroker.SessionHost) error {
		wasAllowed := h.AllowNewSession
		applyHostRequest(h, &req)
		if wasAllowed && !h.AllowNewSession {
			s.noteDrain(r, h)
		}
		return validateHost(pool, h)
	})
	if err != nil {
		return err
	}
	writeJSON(w, nethttp.StatusOK, got)
	return nil
}

// noteDrain records on h who drains it and when (the store keeps it with
// the drain; the host page and `sessionhost show` show it).
func (s *Server) noteDrain(r *nethttp.Request, h *vdibroker.SessionHost) {
	now := s.now().UTC()
	h.DrainTime, h.DrainedBy = &now, "unknown"
	if p := vdibroker.PrincipalFrom(r.Context()); p != nil {
		h.DrainedBy = p.Subject
		if p.Subject == "" {
			h.DrainedBy = p.Role
		}
	}
}

func applyHostRequest(h *vdibroker.SessionHost, req *SessionHostRequest) {
	if req.Address != nil {
		h.Address = *req.Address
	}
	if req.StandardFeatures != nil {
		h.StandardFeatures = *req.StandardFeatures
	}
	if req.AllowNewSession != nil {
		h.AllowNewSession = *req.AllowNewSession
	}
	if req.AssignedUsers != nil {
		h.AssignedUsers = *req.AssignedUsers
	}
}

func validateHost(pool *vdibroker.HostPool, h *vdibroker.SessionHost) error {
	if err := vdibroker.ValidateSessionHost(h); err != nil {
		return err
	}
	if pool.HostPoolType == vdibroker.Pooled && len(h.AssignedUsers) > 0 {
		return vdibroker.FieldError("assignedUsers", "only hosts of Personal host pools have assigned users; this pool is Pooled")
	}
	return nil
}

func (s *Server) deleteHost(w nethttp.ResponseWriter, r *nethttp.Request) error {
	force, err := boolParam(r, "force")
	if err != nil {
		return err
	}
	pool, name := r.PathValue("pool"), r.PathValue("host")
	if err := s.svc.DeleteSessionHost(r.Context(), pool, name, force); err != nil {
		return err
	}
	w.WriteHeader(nethttp.StatusNoContent)
	return nil
}
