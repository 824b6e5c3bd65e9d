package http

import (
	nethttp "net/http"

	"github.com/vdibroker/vdibroker"
)

// Scaling plans (SPEC §8): PUT, GET and DELETE
// /api/v1/scalingplans/{name} and GET /api/v1/scalingplans. A plan is
// global (no {pool} in its path): the scaling plan service authorizes a
// principal scoped to host pools by the plan's pools (R-SP5).

func (s *Server) listScalingPlans(w nethttp.ResponseWriter, r *nethttp.Request) error {
	limit, after, err := pageParams(r)
	if err != nil {
		return err
	}
	plans, err := s.svc.ScalingPlans.ListScalingPlans(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, nethttp.StatusOK, pageOf(r, plans, func(p *vdibroker.ScalingPlan) string { return p.Name }, limit, after))
	return nil
}

func (s *Server) getScalingPlan(w nethttp.ResponseWriter, r *nethttp.Request) error {
	p, err := s.svc.ScalingPlans.ScalingPlan(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	w.Header().Set("ETag", vdibroker.ETag(p.UpdateTime)) // R-E13
	writeJSON(w, nethttp.StatusOK, p)
	return nil
}

// putScalingPlan creates (201) or replaces (200) a plan: the body decoded
// strictly (unknown fields refused), then validated and stored by the
// service. A refused plan changes nothing. If-Match and If-None-Match
// as an application group's (R-E13).
func (s *Server) putScalingPlan(w nethttp.ResponseWriter, r *nethttp.Request) error {
	pre, err := vdibroker.ParsePrecondition(r.Header)
	if err != nil {
		return err
	}
	p := &vdibroker.ScalingPlan{}
	if err := decodeJSON(w, r, p); err != nil {
		return err
	}
	stored, created, err := s.svc.ScalingPlans.PutScalingPlan(r.Context(), r.PathValue("name"), p, pre)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", vdibroker.ETag(stored.UpdateTime))
	writeJSON(w, createdStatus(created), stored)
	return nil
}

// deleteScalingPlan deletes a plan; If-Match as an application group's
// (R-E13).
func (s *Server) deleteScalingPlan(w nethttp.ResponseWriter, r *nethttp.Request) error {
	pre, err := vdibroker.ParseDeletePrecondition(r.Header)
	if err != nil {
		return err
	}
	if err := s.svc.ScalingPlans.DeleteScalingPlan(r.Context(), r.PathValue("name"), pre); err != nil {
		return err
	}
	w.WriteHeader(nethttp.StatusNoContent)
	return nil
}
