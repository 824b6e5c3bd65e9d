package http

import (
	nethttp "net/http"
	"strings"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/broker"
)

// connect is POST /hostpools/{pool}/connect (SPEC §4, §9): the broker
// service decides; a User token may connect only its own user.
func (s *Server) connect(w nethttp.ResponseWriter, r *nethttp.Request) error {
	pool := r.PathValue("pool")
	var req ConnectRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if err := vdibroker.ValidateConnect(&req); err != nil {
		return err
	}
	p := vdibroker.PrincipalFrom(r.Context())
	if err := vdibroker.Authorize(p, vdibroker.ActionConnect, vdibroker.Target{HostPool: pool, For: &vdibroker.UserIdentity{User: req.User}}); err != nil {
		return err
	}
	key := r.Header.Get("Idempotency-Key")
	if len(key) > 255 {
		return vdibroker.FieldError("Idempotency-Key", "must be 1..255 characters")
	}
	if key != "" {
		// The key is scoped to the caller, the pool and the user.
		key = strings.Join([]string{p.Role, p.TokenID, pool, req.User, key}, "\x00")
	}
	a, err := s.svc.ConnectOnce(r.Context(), key, pool, req)
	return writeConnect(w, a, err)
}

// writeConnect answers a connect: 201 for a new session, 200 for an
// existing one or a dry run.
func writeConnect(w nethttp.ResponseWriter, a *broker.Answer, err error) error {
	if err != nil {
		return err
	}
	status := nethttp.StatusOK
	if a.Created {
		status = nethttp.StatusCreated
	}
	writeJSON(w, status, a.ConnectResponse)
	return nil
}
