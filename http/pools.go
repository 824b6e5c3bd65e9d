package http

import (
	"bytes"
	nethttp "net/http"

	"github.com/vdibroker/vdibroker"
)

// HostPoolResponse is a host pool as the API answers it: the §2 fields and
// the warnings of R-P3 (absent when none), and a write's answer those of
// the write (R-P1, HostPool.WriteWarning). A body sent back unchanged is a
// valid PUT body (warnings are ignored on input).
type HostPoolResponse struct {
	*vdibroker.HostPool
	Warnings []string `json:"warnings,omitempty"`
	// Summary is the pool's hosts and sessions at a glance, with
	// ?summary=true (ignored on input).
	Summary *vdibroker.PoolSummary `json:"summary,omitempty"`
}

func poolAnswer(w nethttp.ResponseWriter, status int, p *vdibroker.HostPool, sum ...*vdibroker.PoolSummary) {
	warnings, _ := vdibroker.ValidateHostPool(p)
	if p.WriteWarning != "" {
		warnings = append(warnings, p.WriteWarning) // R-P1: the write's own
	}
	warningHeaders(w, warnings)
	resp := HostPoolResponse{HostPool: p, Warnings: warnings}
	if len(sum) > 0 {
		resp.Summary = sum[0]
	}
	writeJSON(w, status, resp)
}

// warningHeaders sends an answer's warnings (R-P3, R-E12) as Warning
// headers too, beside its body's "warnings".
func warningHeaders(w nethttp.ResponseWriter, warnings []string) {
	for _, wn := range warnings {
		w.Header().Add("Warning", `299 vdibroker "`+wn+`"`)
	}
}

func (s *Server) listPools(w nethttp.ResponseWriter, r *nethttp.Request) error {
	limit, after, err := pageParams(r)
	if err != nil {
		return err
	}
	pools, err := s.svc.Pools.ListPools(r.Context())
	if err != nil {
		return err
	}
	summary, err := boolParam(r, "summary")
	if err != nil {
		return err
	}
	pg := pageOf(r, pools, func(p *vdibroker.HostPool) string { return p.Name }, limit, after)
	out := page[HostPoolResponse]{Value: make([]HostPoolResponse, len(pg.Value)), NextLink: pg.NextLink}
	for i, p := range pg.Value {
		warnings, _ := vdibroker.ValidateHostPool(p)
		out.Value[i] = HostPoolResponse{HostPool: p, Warnings: warnings}
		if summary {
			if out.Value[i].Summary, err = s.svc.Pools.Summary(r.Context(), p); err != nil {
				return err
			}
		}
	}
	writeJSON(w, nethttp.StatusOK, out)
	return nil
}

func (s *Server) getPool(w nethttp.ResponseWriter, r *nethttp.Request) error {
	p, err := s.svc.Pools.Pool(r.Context(), r.PathValue("pool"))
	if err != nil {
		return err
	}
	summary, err := boolParam(r, "summary")
	if err != nil {
		return err
	}
	if !summary {
		w.Header().Set("ETag", vdibroker.ETag(p.UpdateTime)) // R-E13
		poolAnswer(w, nethttp.StatusOK, p)
		return nil
	}
	sum, err := s.svc.Pools.Summary(r.Context(), p)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", vdibroker.ETag(p.UpdateTime))
	poolAnswer(w, nethttp.StatusOK, p, sum)
	return nil
}

// putPool creates or replaces a pool: the §2 defaults under the body
// (R-P4: validated before anything is stored). If-Match (a GET's ETag, or
// *) writes only over the pool read, If-None-Match: * only where there is
// none: 412 PreconditionFailed otherwise (R-E13).
func (s *Server) putPool(w nethttp.ResponseWriter, r *nethttp.Request) error {
	pre, err := vdibroker.ParsePrecondition(r.Header)
	if err != nil {
		return err
	}
	name := r.PathValue("pool")
	p := vdibroker.NewHostPool(name)
	p.LoadBalancerType = ""
	if err := decodeJSON(w, r, &HostPoolResponse{HostPool: p}); err != nil {
		return err
	}
	stored, created, err := s.svc.Pools.PutPool(r.Context(), name, p, pre)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", vdibroker.ETag(stored.UpdateTime))
	poolAnswer(w, createdStatus(created), stored)
	return nil
}

// patchPool changes the fields the body names: the pool as the store's
// write reads it under the body, validated as a whole; refused means
// nothing changed (R-P4). If-Match as putPool's (R-E13). The body is read
// once, before the write: the store may apply it more than once.
func (s *Server) patchPool(w nethttp.ResponseWriter, r *nethttp.Request) error {
	pre, err := vdibroker.ParsePrecondition(r.Header)
	if err != nil {
		return err
	}
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	stored, err := s.svc.Pools.UpdatePool(r.Context(), r.PathValue("pool"), func(p *vdibroker.HostPool) error {
		return decodeStrict(bytes.NewReader(body), &HostPoolResponse{HostPool: p})
	}, pre)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", vdibroker.ETag(stored.UpdateTime))
	poolAnswer(w, nethttp.StatusOK, stored)
	return nil
}

// deletePool deletes a pool; with If-Match only the pool read (R-E13).
func (s *Server) deletePool(w nethttp.ResponseWriter, r *nethttp.Request) error {
	pre, err := vdibroker.ParseDeletePrecondition(r.Header)
	if err != nil {
		return err
	}
	force, err := boolParam(r, "force")
	if err != nil {
		return err
	}
	del, err := s.svc.Pools.DeletePool(r.Context(), r.PathValue("pool"), force, pre)
	if err != nil {
		return err
	}
	writeJSON(w, nethttp.StatusOK, del)
	return nil
}
