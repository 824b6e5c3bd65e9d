package broker

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"
	"unicode"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/placement"
)

// The session service (vdibroker.SessionService): reads of user sessions
// and the commands an admin queues for their hosts' agents (R-S4),
// delivered on each agent's next heartbeat.

var _ vdibroker.SessionService = (*Service)(nil)

var sessionStates = []string{vdibroker.StatePending, vdibroker.StateActive, vdibroker.StateDisconnected, vdibroker.StateLoggedOff}

// ListSessions lists the sessions f selects in f.HostPool, which must exist.
func (s *Service) ListSessions(ctx context.Context, f vdibroker.SessionFilter) ([]*vdibroker.UserSession, error) {
	if f.State != "" && !slices.Contains(sessionStates, f.State) {
		return nil, vdibroker.FieldError("state", "must be one of Pending, Active, Disconnected, LoggedOff, got %q", f.State)
	}
	if f.UserPrefix != "" {
		if f.User != "" {
			return nil, vdibroker.FieldError("userPrefix", "searches by the start of a name; it cannot be combined with user, which is one exact name")
		}
		if err := vdibroker.ValidateText("userPrefix", f.UserPrefix, vdibroker.MaxUserLen); err != nil {
			return nil, err
		}
	}
	if _, err := s.store.GetHostPool(ctx, f.HostPool); err != nil {
		return nil, err
	}
	return s.store.ListUserSessions(ctx, f)
}

// Session reads one session.
func (s *Service) Session(ctx context.Context, pool, id string) (*vdibroker.UserSession, error) {
	return s.store.GetUserSession(ctx, pool, id)
}

// Placement returns a session's decision record (R-C7).
//
// A session a gateway reached has it in the record: "reached the host
// through gateway G at T" (R-GW2).
func (s *Service) Placement(ctx context.Context, pool, id string) ([]byte, error) {
	rec, err := s.store.GetPlacement(ctx, pool, id)
	if err != nil {
		return nil, err
	}
	us, err := s.store.GetUserSession(ctx, pool, id)
	if err != nil {
		return nil, err
	}
	var gw *placement.GatewayReach
	if us.GatewayTime != nil {
		gw = &placement.GatewayReach{Name: us.Gateway, Time: *us.GatewayTime}
	}
	// Stored in the compact form (placement.AppendRecord), answered as JSON.
	out, err := placement.RecordJSON(rec, gw)
	if err != nil {
		return nil, fmt.Errorf("decision record of %s: %w", id, err)
	}
	return out, nil
}

// Logoff queues a Logoff (R-S4). A Pending session the agent has not seen
// yet has no logon to end, so it ends at once (and the Logoff is still
// queued, in case the logon is under way); its answer's SessionEnded
// says so.
func (s *Service) Logoff(ctx context.Context, pool, id string) (*vdibroker.Command, error) {
	us, err := s.ownSession(ctx, pool, id)
	if err != nil {
		return nil, err
	}
	ended := us.State == vdibroker.StatePending && us.AgentSessionID == ""
	if ended {
		if err := s.EndSession(ctx, us, vdibroker.EndLoggedOffByAdmin); err != nil {
			return nil, err
		}
	}
	c, err := s.queue(ctx, us, vdibroker.CommandLogoff, "")
	if err != nil {
		return nil, err
	}
	// The answer says so: the session is over now, not when its agent
	// next reports (the CLI's line, R-S4).
	c.SessionEnded = ended
	return c, nil
}

// Disconnect queues a Disconnect of an Active session.
func (s *Service) Disconnect(ctx context.Context, pool, id string) (*vdibroker.Command, error) {
	us, err := s.ownSession(ctx, pool, id)
	if err != nil {
		return nil, err
	}
	if us.State != vdibroker.StateActive {
		return nil, vdibroker.Errorf(vdibroker.EConflict, "session %s is %s; only Active sessions can be disconnected", us.ID, us.State)
	}
	return s.queue(ctx, us, vdibroker.CommandDisconnect, "")
}

// SendMessage queues a message for the session's user.
func (s *Service) SendMessage(ctx context.Context, pool, id, message string) (*vdibroker.Command, error) {
	if err := validateMessage(message); err != nil {
		return nil, err
	}
	us, err := s.openSession(ctx, pool, id)
	if err != nil {
		return nil, err
	}
	return s.queue(ctx, us, vdibroker.CommandSendMessage, message)
}

// SendHostMessage queues message for each Active and Disconnected session
// of a host (a notice before maintenance), validated as SendMessage's.
// The answer warns when the host cannot show them now (R-S4) or had no
// such session, so that nobody believes a message went out.
func (s *Service) SendHostMessage(ctx context.Context, pool, host, message string) (*vdibroker.HostMessage, error) {
	if err := validateMessage(message); err != nil {
		return nil, err
	}
	h, timeout, err := s.commandHost(ctx, pool, host)
	if err != nil {
		return nil, err
	}
	n, already, err := s.store.QueueHostMessage(ctx, pool, host, message, s.now().UTC())
	if err != nil {
		return nil, err
	}
	out := &vdibroker.HostMessage{HostPool: pool, SessionHost: host, Queued: n, AlreadyQueued: already}
	what := fmt.Sprintf("the %d messages", n)
	switch n {
	case 0:
		out.Warnings = append(out.Warnings, fmt.Sprintf("session host %s has no Active or Disconnected session: no message was queued", host))
		return out, nil
	case 1:
		what = "the message"
	}
	if w := vdibroker.CommandWarning(h, what, timeout, s.now()); w != "" {
		out.Warnings = append(out.Warnings, w)
	}
	return out, nil
}

// validateMessage checks a message to a session's user (R-S4): 1 to
// MaxMessageLen characters. The agent shows it in the user's session,
// terminals included: no escape sequences or other control characters
// (lines and tabs are fine).
func validateMessage(message string) error {
	if message == "" {
		return vdibroker.FieldError("message", "is required (1..%d characters)", vdibroker.MaxMessageLen)
	}
	if len([]rune(message)) > vdibroker.MaxMessageLen {
		return vdibroker.FieldError("message", "must be 1..%d characters", vdibroker.MaxMessageLen)
	}
	for _, c := range message {
		if unicode.IsControl(c) && c != '\n' && c != '\r' && c != '\t' {
			return vdibroker.FieldError("message", "must not contain control characters (U+%04X); line breaks and tabs are allowed", c)
		}
	}
	return nil
}

// ownSession reads an open session the caller may log off or disconnect
// (R-U3): any of its pool for an admin or Contributor, only its own for
// an end user, whose refusal (PermissionDenied) comes before a
// Conflict, so it learns nothing of another user's session but that it
// is not its own.
func (s *Service) ownSession(ctx context.Context, pool, id string) (*vdibroker.UserSession, error) {
	us, err := s.store.GetUserSession(ctx, pool, id)
	if err != nil {
		return nil, err
	}
	if err := vdibroker.Authorize(vdibroker.PrincipalFrom(ctx), vdibroker.ActionOwnSession,
		vdibroker.Target{HostPool: pool, For: &vdibroker.UserIdentity{User: us.User}}); err != nil {
		return nil, err
	}
	if !us.Open() {
		return nil, vdibroker.Errorf(vdibroker.EConflict, "session %s is already logged off", us.ID)
	}
	return us, nil
}

// UserSessions lists user's open sessions in every pool the caller sees
// (R-U3), by id (ids are unique across pools): one range of the store's
// index of open sessions by user. An end user asks about itself only.
func (s *Service) UserSessions(ctx context.Context, user string) ([]*vdibroker.UserSession, error) {
	if err := vdibroker.ValidateUser("user", user); err != nil {
		return nil, err
	}
	me := vdibroker.PrincipalFrom(ctx)
	if me.EndUser() {
		if !vdibroker.SameUser(me.Subject, user) {
			return nil, vdibroker.Errorf(vdibroker.EPermission, "an end user may list only its own sessions (%q)", me.Subject)
		}
	} else if err := vdibroker.Authorize(me, vdibroker.ActionRead, vdibroker.Target{}); err != nil {
		return nil, err
	}
	list, err := s.store.ListUserSessions(ctx, vdibroker.SessionFilter{User: user})
	if err != nil {
		return nil, err
	}
	list = slices.DeleteFunc(list, func(us *vdibroker.UserSession) bool { return !me.Sees(us.HostPool) })
	slices.SortFunc(list, func(a, b *vdibroker.UserSession) int { return cmp.Compare(a.ID, b.ID) })
	if list == nil {
		list = []*vdibroker.UserSession{}
	}
	return list, nil
}

// openSession reads a session; ended sessions are a Conflict.
func (s *Service) openSession(ctx context.Context, pool, id string) (*vdibroker.UserSession, error) {
	us, err := s.store.GetUserSession(ctx, pool, id)
	if err != nil {
		return nil, err
	}
	if !us.Open() {
		return nil, vdibroker.Errorf(vdibroker.EConflict, "session %s is already logged off", us.ID)
	}
	return us, nil
}

// commandNames name the commands in a warning (vdibroker.CommandWarning).
var commandNames = map[string]string{
	vdibroker.CommandLogoff:      "the logoff",
	vdibroker.CommandDisconnect:  "the disconnect",
	vdibroker.CommandSendMessage: "the message",
}

// queue stores a command for the session's host agent, delivered on the
// agent's next heartbeat (R-S4). While the host cannot carry it out
// (Unavailable, Shutdown) it is queued all the same, as the host may
// come back, and the answer warns.
func (s *Service) queue(ctx context.Context, us *vdibroker.UserSession, typ, msg string) (*vdibroker.Command, error) {
	h, timeout, err := s.commandHost(ctx, us.HostPool, us.SessionHost)
	if err != nil {
		return nil, err
	}
	warning := vdibroker.CommandWarning(h, commandNames[typ], timeout, s.now())
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
	var warnings []string
	if warning != "" {
		warnings = []string{warning}
	}
	c.Warnings = warnings // in the audit entry's after
	if err := s.store.QueueCommand(ctx, c); err != nil {
		return nil, err
	}
	// A logoff or disconnect asked again is answered with the one queued,
	// read back from the store, which keeps no warning: the host is no
	// readier for it, so it warns as the first did.
	c.Warnings = warnings
	return c, nil
}

// commandHost reads the host a command is queued for, and its pool's
// heartbeat timeout: what vdibroker.CommandWarning decides from.
func (s *Service) commandHost(ctx context.Context, pool, host string) (*vdibroker.SessionHost, time.Duration, error) {
	p, err := s.store.GetHostPool(ctx, pool)
	if err != nil {
		return nil, 0, err
	}
	h, err := s.store.GetSessionHost(ctx, pool, host)
	if err != nil {
		return nil, 0, err
	}
	return h, p.HeartbeatTimeout(), nil
}

// EndSession ends a session at once with reason (an admin's logoff of a
// Pending session the agent has not seen: there is no logon to end) and
// gives its slot back to the view.
func (s *Service) EndSession(ctx context.Context, us *vdibroker.UserSession, reason string) error {
	if err := s.store.EndSession(ctx, us.HostPool, us.ID, reason, s.now().UTC()); err != nil {
		return err
	}
	s.views.RefreshHost(ctx, us.HostPool, us.SessionHost)
	return nil
}
