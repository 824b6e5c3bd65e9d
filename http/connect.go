package http

import (
	nethttp "net/http"

	"github.com/vdibroker/vdibroker"
)

// connect is POST /hostpools/{pool}/connect (SPEC §4, §9): the connect
// service decides (and a User token connects only its own user).
func (s *Server) connect(w nethttp.ResponseWriter, r *nethttp.Request) error {
	pool := r.PathValue("pool")
	var req ConnectRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	a, err := s.svc.Connect.Connect(r.Context(), pool, req, r.Header.Get("Idempotency-Key"))
	return writeConnect(w, a, err)
}

// writeConnect answers a connect: 201 for a new session, 200 for an
// existing one or a dry run.
func writeConnect(w nethttp.ResponseWriter, a *vdibroker.ConnectAnswer, err error) error {
	if err != nil {
		return err
	}
	writeJSON(w, createdStatus(a.Created), a.ConnectResponse)
	return nil
}
