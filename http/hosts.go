package http

import (
	nethttp "net/http"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/loadindex"
)

// present fills the read-time fields of hosts: status (R-H1, from the
// heartbeat age now) and loadIndex (R-IDX, -1 when load balancing is off).
// The load index needs pool-wide figures, so hosts should be all the pool's
// hosts when there is more than one.
func (s *Server) present(pool *vdibroker.HostPool, all []*vdibroker.SessionHost, show ...*vdibroker.SessionHost) {
	var lp loadindex.Pool
	var mean loadindex.Mean
	for _, h := range all {
		if loadindex.ValidCustom(h.Metrics) {
			lp.AnyCustom = true
		}
		mean.Add(h.Metrics, h.MetricsSessions)
	}
	lp.PerSession = mean.PerSession()
	timeout := time.Duration(pool.HeartbeatTimeoutSeconds) * time.Second
	now := s.now()
	if len(show) == 0 {
		show = all
	}
	for _, h := range show {
		h.Status = vdibroker.HostStatus(h, timeout, now)
		h.LoadIndex = loadindex.Displayed(pool.LoadBalancing, pool.MaxSessionLimit,
			loadindex.Host{Sessions: h.Sessions, Metrics: h.Metrics, MetricsSessions: h.MetricsSessions}, lp)
		if h.Protocols == nil {
			h.Protocols = []string{}
		}
		if h.AssignedUsers == nil {
			h.AssignedUsers = []string{}
		}
	}
}

func (s *Server) listHosts(w nethttp.ResponseWriter, r *nethttp.Request) error {
	limit, after, err := pageParams(r)
	if err != nil {
		return err
	}
	pool, err := s.store.GetHostPool(r.Context(), r.PathValue("pool"))
	if err != nil {
		return err
	}
	hosts, err := s.store.ListSessionHosts(r.Context(), pool.Name)
	if err != nil {
		return err
	}
	pg := pageOf(r, hosts, func(h *vdibroker.SessionHost) string { return h.Name }, limit, after)
	s.present(pool, hosts, pg.Value...)
	writeJSON(w, nethttp.StatusOK, pg)
	return nil
}

func (s *Server) getHost(w nethttp.ResponseWriter, r *nethttp.Request) error {
	h, err := s.readHost(r, r.PathValue("pool"), r.PathValue("host"))
	if err != nil {
		return err
	}
	writeJSON(w, nethttp.StatusOK, h)
	return nil
}

// readHost reads one host with its read-time fields.
func (s *Server) readHost(r *nethttp.Request, poolName, name string) (*vdibroker.SessionHost, error) {
	pool, err := s.store.GetHostPool(r.Context(), poolName)
	if err != nil {
		return nil, err
	}
	h, err := s.store.GetSessionHost(r.Context(), poolName, name)
	if err != nil {
		return nil, err
	}
	all := []*vdibroker.SessionHost{h}
	if pool.LoadBalancing.UseCustomScript || pool.LoadBalancerType == vdibroker.LoadIndex {
		// Pool-wide figures (R-IDX3, R-LI6) matter only here.
		if all, err = s.store.ListSessionHosts(r.Context(), poolName); err != nil {
			return nil, err
		}
	}
	s.present(pool, all, h)
	return h, nil
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
	created, err := s.store.PutSessionHost(r.Context(), h)
	if err != nil {
		return err
	}
	status := nethttp.StatusOK
	if created {
		status = nethttp.StatusCreated
	}
	return s.answerHost(w, r, status, poolName, name)
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
	_, err = s.store.UpdateSessionHost(r.Context(), poolName, name, func(h *vdibroker.SessionHost) error {
		applyHostRequest(h, &req)
		return validateHost(pool, h)
	})
	if err != nil {
		return err
	}
	return s.answerHost(w, r, nethttp.StatusOK, poolName, name)
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

// answerHost reads the host back, updates the pool's placement view with it
// (drain and assignment apply to the next connect) and answers it.
func (s *Server) answerHost(w nethttp.ResponseWriter, r *nethttp.Request, status int, pool, name string) error {
	mark := s.views.landedMark(pool)
	h, err := s.readHost(r, pool, name)
	if err != nil {
		return err
	}
	s.views.upsertHost(h, mark)
	writeJSON(w, status, h)
	return nil
}

func (s *Server) deleteHost(w nethttp.ResponseWriter, r *nethttp.Request) error {
	force, err := boolParam(r, "force")
	if err != nil {
		return err
	}
	pool, name := r.PathValue("pool"), r.PathValue("host")
	if err := s.store.DeleteSessionHost(r.Context(), pool, name, force); err != nil {
		return err
	}
	s.views.removeHost(pool, name)
	w.WriteHeader(nethttp.StatusNoContent)
	return nil
}
