package http

import (
	nethttp "net/http"

	"github.com/vdibroker/vdibroker"
)

// HostPoolResponse is a host pool as the API answers it: the §2 fields and
// the warnings of R-P3 (absent when none). A body sent back unchanged is a
// valid PUT body (warnings are ignored on input).
type HostPoolResponse struct {
	*vdibroker.HostPool
	Warnings []string `json:"warnings,omitempty"`
}

func poolAnswer(w nethttp.ResponseWriter, status int, p *vdibroker.HostPool) {
	warnings, _ := vdibroker.ValidateHostPool(p)
	for _, wn := range warnings {
		w.Header().Add("Warning", `299 vdibroker "`+wn+`"`)
	}
	writeJSON(w, status, HostPoolResponse{HostPool: p, Warnings: warnings})
}

func (s *Server) listPools(w nethttp.ResponseWriter, r *nethttp.Request) error {
	limit, after, err := pageParams(r)
	if err != nil {
		return err
	}
	pools, err := s.store.ListHostPools(r.Context())
	if err != nil {
		return err
	}
	pg := pageOf(r, pools, func(p *vdibroker.HostPool) string { return p.Name }, limit, after)
	out := page[HostPoolResponse]{Value: make([]HostPoolResponse, len(pg.Value)), NextLink: pg.NextLink}
	for i, p := range pg.Value {
		warnings, _ := vdibroker.ValidateHostPool(p)
		out.Value[i] = HostPoolResponse{HostPool: p, Warnings: warnings}
	}
	writeJSON(w, nethttp.StatusOK, out)
	return nil
}

func (s *Server) getPool(w nethttp.ResponseWriter, r *nethttp.Request) error {
	p, err := s.store.GetHostPool(r.Context(), r.PathValue("pool"))
	if err != nil {
		return err
	}
	poolAnswer(w, nethttp.StatusOK, p)
	return nil
}

// putPool creates or replaces a pool: the §2 defaults under the body
// (R-P4: validated before anything is stored).
func (s *Server) putPool(w nethttp.ResponseWriter, r *nethttp.Request) error {
	name := r.PathValue("pool")
	p := vdibroker.NewHostPool(name)
	p.LoadBalancerType = ""
	if err := decodeJSON(w, r, &HostPoolResponse{HostPool: p}); err != nil {
		return err
	}
	createOnly := false
	switch inm := r.Header.Get("If-None-Match"); inm {
	case "":
	case "*":
		createOnly = true
	default:
		return vdibroker.FieldError("If-None-Match", `only "*" (create, never replace) is supported, got %q`, inm)
	}
	old, err := s.store.GetHostPool(r.Context(), name)
	if err != nil {
		if vdibroker.ErrorCode(err) != vdibroker.ENotFound {
			return err
		}
		old = nil
	}
	if createOnly && old != nil {
		return poolExists(name)
	}
	return s.storePool(w, r, name, old, p, createOnly)
}

func poolExists(name string) error {
	return vdibroker.Errorf(vdibroker.EConflict, "host pool %q already exists; change it with PATCH or PUT without If-None-Match", name)
}

// patchPool changes the fields the body names: the existing pool under the
// body, validated as a whole; refused means nothing changed (R-P4).
func (s *Server) patchPool(w nethttp.ResponseWriter, r *nethttp.Request) error {
	name := r.PathValue("pool")
	old, err := s.store.GetHostPool(r.Context(), name)
	if err != nil {
		return err
	}
	p := *old
	if err := decodeJSON(w, r, &HostPoolResponse{HostPool: &p}); err != nil {
		return err
	}
	return s.storePool(w, r, name, old, &p, false)
}

func hostPoolTypeChange(was string) error {
	return vdibroker.FieldError("hostPoolType", "cannot be changed after creation (R-P1): this pool is %s; create a new host pool instead", was)
}

// storePool validates p and stores it; old is the pool before (nil when
// new). createOnly refuses, in the store's transaction, to replace a pool
// created meanwhile (If-None-Match: *).
func (s *Server) storePool(w nethttp.ResponseWriter, r *nethttp.Request, name string, old, p *vdibroker.HostPool, createOnly bool) error {
	if p.Name != name {
		return vdibroker.FieldError("name", "must match the host pool name in the path (%q), got %q", name, p.Name)
	}
	// R-P1 first: a type change is refused for what it is, not for the
	// load balancer type that no longer fits the new type.
	validType := p.HostPoolType == vdibroker.Pooled || p.HostPoolType == vdibroker.Personal
	if old != nil && validType && p.HostPoolType != old.HostPoolType {
		return hostPoolTypeChange(old.HostPoolType)
	}
	p.FillDefaults()
	if _, err := vdibroker.ValidateHostPool(p); err != nil {
		return err
	}
	if old != nil && p.HostPoolType != old.HostPoolType {
		return hostPoolTypeChange(old.HostPoolType)
	}
	now := s.now().UTC()
	p.CreateTime, p.UpdateTime = now, now
	var created bool
	var err error
	if createOnly {
		created, err = true, s.store.CreateHostPool(r.Context(), p)
		if vdibroker.ErrorCode(err) == vdibroker.EConflict {
			return poolExists(name) // created since our read
		}
	} else {
		created, err = s.store.PutHostPool(r.Context(), p)
	}
	if err != nil {
		return err
	}
	// Read back what the store kept (createTime on replace).
	stored, err := s.store.GetHostPool(r.Context(), name)
	if err != nil {
		return err
	}
	s.views.setPool(stored) // R-P1: the next placement uses the new settings
	status := nethttp.StatusOK
	if created {
		status = nethttp.StatusCreated
	}
	poolAnswer(w, status, stored)
	return nil
}

func (s *Server) deletePool(w nethttp.ResponseWriter, r *nethttp.Request) error {
	force, err := boolParam(r, "force")
	if err != nil {
		return err
	}
	name := r.PathValue("pool")
	if err := s.store.DeleteHostPool(r.Context(), name, force); err != nil {
		return err
	}
	s.views.drop(name)
	w.WriteHeader(nethttp.StatusNoContent)
	return nil
}
