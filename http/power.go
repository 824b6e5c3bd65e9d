package http

import (
	nethttp "net/http"

	"github.com/vdibroker/vdibroker"
)

// Power actions (R-A4): POST .../sessionhosts/{host}/start and
// .../stop (?force=true to stop a host with sessions). Contributor and the
// admin token, within the token's pool scope; the driver that runs is the
// pool's powerDriver, one of serve --power-config's, never a request's.
// Both answer 202 with the host as recorded (Starting, Stopping or
// Stopped): the host runs once its agent heartbeats.

func (s *Server) startHost(w nethttp.ResponseWriter, r *nethttp.Request) error {
	pool, name := r.PathValue("pool"), r.PathValue("host")
	if err := s.svc.Power.StartHost(r.Context(), pool, name, actor(r)); err != nil {
		return err
	}
	return s.writeHostAccepted(w, r, pool, name)
}

func (s *Server) stopHost(w nethttp.ResponseWriter, r *nethttp.Request) error {
	force, err := boolParam(r, "force")
	if err != nil {
		return err
	}
	pool, name := r.PathValue("pool"), r.PathValue("host")
	if err := s.svc.Power.StopHost(r.Context(), pool, name, force, actor(r)); err != nil {
		return err
	}
	return s.writeHostAccepted(w, r, pool, name)
}

func (s *Server) writeHostAccepted(w nethttp.ResponseWriter, r *nethttp.Request, pool, name string) error {
	h, err := s.svc.Hosts.SessionHost(r.Context(), pool, name)
	if err != nil {
		return err
	}
	writeJSON(w, nethttp.StatusAccepted, h)
	return nil
}

// actor names the caller for the service's logs of who asked.
func actor(r *nethttp.Request) string {
	return vdibroker.PrincipalFrom(r.Context()).Actor()
}
