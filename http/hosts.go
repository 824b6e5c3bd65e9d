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
	hosts, err := s.svc.Hosts.HostsPage(r.Context(), r.PathValue("pool"), after, limit)
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
	h, err := s.svc.Hosts.SessionHost(r.Context(), r.PathValue("pool"), r.PathValue("host"))
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
	var req SessionHostRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	got, created, err := s.svc.Hosts.PutSessionHost(r.Context(), r.PathValue("pool"), r.PathValue("host"), &req)
	if err != nil {
		return err
	}
	writeJSON(w, createdStatus(created), got)
	return nil
}

// patchHost changes allowNewSession (drain), assignedUsers,
// standardFeatures and address; anything else is refused.
func (s *Server) patchHost(w nethttp.ResponseWriter, r *nethttp.Request) error {
	var req SessionHostRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	got, err := s.svc.Hosts.UpdateSessionHost(r.Context(), r.PathValue("pool"), r.PathValue("host"), &req)
	if err != nil {
		return err
	}
	writeJSON(w, nethttp.StatusOK, got)
	return nil
}

func (s *Server) deleteHost(w nethttp.ResponseWriter, r *nethttp.Request) error {
	force, err := boolParam(r, "force")
	if err != nil {
		return err
	}
	if err := s.svc.Hosts.DeleteSessionHost(r.Context(), r.PathValue("pool"), r.PathValue("host"), force); err != nil {
		return err
	}
	w.WriteHeader(nethttp.StatusNoContent)
	return nil
}
