package http

import (
	nethttp "net/http"
	"slices"
	"unicode"

	"github.com/vdibroker/vdibroker"
)

var sessionStates = []string{vdibroker.StatePending, vdibroker.StateActive, vdibroker.StateDisconnected, vdibroker.StateLoggedOff}

// listSessions lists a pool's sessions, open ones unless ?state= says
// otherwise, filtered by ?user= and ?sessionHost=, paged by id.
func (s *Server) listSessions(w nethttp.ResponseWriter, r *nethttp.Request) error {
	limit, after, err := pageParams(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	f := vdibroker.SessionFilter{
		HostPool:    r.PathValue("pool"),
		User:        q.Get("user"),
		State:       q.Get("state"),
		SessionHost: q.Get("sessionHost"),
		After:       after,
		Limit:       limit + 1, // one more tells whether a next page exists
	}
	if f.State != "" && !slices.Contains(sessionStates, f.State) {
		return vdibroker.FieldError("state", "must be one of Pending, Active, Disconnected, LoggedOff, got %q", f.State)
	}
	if _, err := s.store.GetHostPool(r.Context(), f.HostPool); err != nil {
		return err
	}
	list, err := s.store.ListUserSessions(r.Context(), f)
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
	us, err := s.store.GetUserSession(r.Context(), r.PathValue("pool"), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, nethttp.StatusOK, us)
	return nil
}

func (s *Server) getPlacement(w nethttp.ResponseWriter, r *nethttp.Request) error {
	rec, err := s.store.GetPlacement(r.Context(), r.PathValue("pool"), r.PathValue("id"))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(nethttp.StatusOK)
	w.Write(rec)
	return nil
}

// logoff is DELETE .../usersessions/{id} (R-S4): queued for the host's
// agent. A Pending session the agent has not seen yet has no logon to end,
// so it ends at once (and the Logoff is still queued, in case the logon is
// under way).
func (s *Server) logoff(w nethttp.ResponseWriter, r *nethttp.Request) error {
	us, err := s.openSession(r)
	if err != nil {
		return err
	}
	if us.State == vdibroker.StatePending && us.AgentSessionID == "" {
		if err := s.svc.EndSession(r.Context(), us, vdibroker.EndLoggedOffByAdmin); err != nil {
			return err
		}
	}
	return s.queue(w, r, us, vdibroker.CommandLogoff, "")
}

func (s *Server) disconnect(w nethttp.ResponseWriter, r *nethttp.Request) error {
	us, err := s.openSession(r)
	if err != nil {
		return err
	}
	if us.State != vdibroker.StateActive {
		return vdibroker.Errorf(vdibroker.EConflict, "session %s is %s; only Active sessions can be disconnected", us.ID, us.State)
	}
	return s.queue(w, r, us, vdibroker.CommandDisconnect, "")
}

func (s *Server) sendMessage(w nethttp.ResponseWriter, r *nethttp.Request) error {
	var req SendMessageRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.Message == "" {
		return vdibroker.FieldError("message", "is required (1..%d characters)", vdibroker.MaxMessageLen)
	}
	if len([]rune(req.Message)) > vdibroker.MaxMessageLen {
		return vdibroker.FieldError("message", "must be 1..%d characters", vdibroker.MaxMessageLen)
	}
	// The agent shows it in the user's session, terminals included: no
	// escape sequences or other control characters (lines and tabs are
	// fine; issue 14).
	for _, c := range req.Message {
		if unicode.IsControl(c) && c != '\n' && c != '\r' && c != '\t' {
			return vdibroker.FieldError("message", "must not contain control characters (U+%04X); line breaks and tabs are allowed", c)
		}
	}
	us, err := s.openSession(r)
	if err != nil {
		return err
	}
	return s.queue(w, r, us, vdibroker.CommandSendMessage, req.Message)
}

// openSession reads the session of the path; ended sessions are a Conflict.
func (s *Server) openSession(r *nethttp.Request) (*vdibroker.UserSession, error) {
	us, err := s.store.GetUserSession(r.Context(), r.PathValue("pool"), r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	if !us.Open() {
		return nil, vdibroker.Errorf(vdibroker.EConflict, "session %s is already logged off", us.ID)
	}
	return us, nil
}

// queue stores a command for the session's host agent; it is delivered on
// the agent's next heartbeat (R-S4). Answers 202 with the command.
func (s *Server) queue(w nethttp.ResponseWriter, r *nethttp.Request, us *vdibroker.UserSession, typ, msg string) error {
	c := &vdibroker.Command{
		ID:             vdibroker.NewID(),
		HostPool:       us.HostPool,
		SessionHost:    us.SessionHost,
		Type:           typ,
		SessionID:      us.ID,
		AgentSessionID: us.AgentSessionID,
		User:           us.User,
		Message:        msg,
		State:          vdibroker.CommandQueued,
		CreateTime:     s.now().UTC(),
	}
	if err := s.store.QueueCommand(r.Context(), c); err != nil {
		return err
	}
	writeJSON(w, nethttp.StatusAccepted, c)
	return nil
}
