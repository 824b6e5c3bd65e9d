package http

import (
	nethttp "net/http"

	"github.com/vdibroker/vdibroker"
)

// listSessions lists a pool's sessions, open ones unless ?state= says
// otherwise, filtered by ?user= (exact) or ?userPrefix= (a search: the
// start of a name, any case, listed by name) and ?sessionHost=, paged by
// id (a search in its own order; nextLink's cursor carries on either).
func (s *Server) listSessions(w nethttp.ResponseWriter, r *nethttp.Request) error {
	limit, after, err := pageParams(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	f := vdibroker.SessionFilter{
		HostPool:    r.PathValue("pool"),
		User:        q.Get("user"),
		UserPrefix:  q.Get("userPrefix"),
		State:       q.Get("state"),
		SessionHost: q.Get("sessionHost"),
		After:       after,
		Limit:       limit + 1, // one more tells whether a next page exists
	}
	list, err := s.svc.Sessions.ListSessions(r.Context(), f)
	if err != nil {
		return err
	}
	out := page[*vdibroker.UserSession]{Value: list}
	if len(list) > limit {
		out.Value = list[:limit]
		out.NextLink = nextLink(r, limit, list[limit-1].ID)
	}
	if out.Value == nil {
		out.Value = []*vdibroker.UserSession{}
	}
	writeJSON(w, nethttp.StatusOK, out)
	return nil
}

func (s *Server) getSession(w nethttp.ResponseWriter, r *nethttp.Request) error {
	us, err := s.svc.Sessions.Session(r.Context(), r.PathValue("pool"), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, nethttp.StatusOK, us)
	return nil
}

func (s *Server) getPlacement(w nethttp.ResponseWriter, r *nethttp.Request) error {
	rec, err := s.svc.Sessions.Placement(r.Context(), r.PathValue("pool"), r.PathValue("id"))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(nethttp.StatusOK)
	w.Write(rec)
	return nil
}

// logoff is DELETE .../usersessions/{id} (R-S4): queued for the host's
// agent (a Pending session the agent has not seen ends at once). 202 with
// the command.
func (s *Server) logoff(w nethttp.ResponseWriter, r *nethttp.Request) error {
	c, err := s.svc.Sessions.Logoff(r.Context(), r.PathValue("pool"), r.PathValue("id"))
	return writeCommand(w, c, err)
}

func (s *Server) disconnect(w nethttp.ResponseWriter, r *nethttp.Request) error {
	c, err := s.svc.Sessions.Disconnect(r.Context(), r.PathValue("pool"), r.PathValue("id"))
	return writeCommand(w, c, err)
}

func (s *Server) sendMessage(w nethttp.ResponseWriter, r *nethttp.Request) error {
	var req SendMessageRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	c, err := s.svc.Sessions.SendMessage(r.Context(), r.PathValue("pool"), r.PathValue("id"), req.Message)
	return writeCommand(w, c, err)
}

// sendHostMessage is POST .../sessionhosts/{host}/sendmessage, body
// {"message"} as a session's: one message queued for each Active and
// Disconnected session of the host. 202 with how many, and warnings.
func (s *Server) sendHostMessage(w nethttp.ResponseWriter, r *nethttp.Request) error {
	var req SendMessageRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	m, err := s.svc.Sessions.SendHostMessage(r.Context(), r.PathValue("pool"), r.PathValue("host"), req.Message)
	if err != nil {
		return err
	}
	warningHeaders(w, m.Warnings)
	writeJSON(w, nethttp.StatusAccepted, m)
	return nil
}

// writeCommand answers a queued command: 202, delivered on the agent's
// next heartbeat; its warnings (a host that cannot carry it out now, R-S4)
// in Warning headers too.
func writeCommand(w nethttp.ResponseWriter, c *vdibroker.Command, err error) error {
	if err != nil {
		return err
	}
	warningHeaders(w, c.Warnings)
	writeJSON(w, nethttp.StatusAccepted, c)
	return nil
}
