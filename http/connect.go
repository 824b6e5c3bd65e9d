package http

import (
	nethttp "net/http"
	"time"

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
	var err error
	if req.Wait, err = connectWait(w, r); err != nil {
		return err
	}
	a, err := s.svc.Connect.Connect(r.Context(), pool, req, r.Header.Get("Idempotency-Key"))
	return writeConnect(w, a, err)
}

// connectWait reads a connect's ?wait= (R-U4) and, for a wait, moves the
// answer's write deadline past it: the server's --write-timeout would
// cut a held connect's answer.
func connectWait(w nethttp.ResponseWriter, r *nethttp.Request) (time.Duration, error) {
	d, err := vdibroker.ParseConnectWait(r.URL.Query().Get("wait"))
	if err != nil || d == 0 {
		return 0, err
	}
	// Not every writer can (an in-process caller's); then the wait is
	// bounded by the caller's own deadline.
	_ = nethttp.NewResponseController(w).SetWriteDeadline(time.Now().Add(d + heldConnectSlack))
	return d, nil
}

// heldConnectSlack is the time a held connect's answer has to be written
// after its wait: the connect's last decision and the answer.
const heldConnectSlack = 30 * time.Second

// writeConnect answers a connect: 201 for a new session, 200 for an
// existing one or a dry run.
func writeConnect(w nethttp.ResponseWriter, a *vdibroker.ConnectAnswer, err error) error {
	if err != nil {
		return err
	}
	writeJSON(w, createdStatus(a.Created), a.ConnectResponse)
	return nil
}
