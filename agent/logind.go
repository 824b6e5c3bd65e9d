package agent

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/vdibroker/vdibroker"
)

// LogindProvider reads sessions from systemd-logind through loginctl and logs
// them off with `loginctl terminate-session`. logind knows no "disconnected"
// state, so every session it lists is Active, and Disconnect fails: detaching
// a session's display is up to the remote desktop server (xrdp), not logind.
// SendMessage writes to the session's terminal; graphical sessions without
// one fail with the reason.
type LogindProvider struct {
	// Run runs a command and returns its standard output.
	Run func(ctx context.Context, name string, args ...string) ([]byte, error)
	// WriteTTY writes a message to a terminal such as "pts/3".
	WriteTTY func(tty, message string) error
}

var _ SessionProvider = (*LogindProvider)(nil)

// logindSession is the part of `loginctl show-session` the agent uses.
type logindSession struct {
	ID, Name, State, Class, Type, TTY, Remote, Service string
}

// logindProps are the properties asked of show-session.
var logindProps = []string{"Id", "Name", "State", "Class", "Type", "TTY", "Remote", "Service"}

var (
	sessionIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	uidPattern       = regexp.MustCompile(`^[0-9]+$`)
)

// ParseLoginctlList returns the session ids of `loginctl list-sessions
// --no-legend` output: the first column, whatever columns this systemd
// version prints after it.
func ParseLoginctlList(out []byte) []string {
	var ids []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// SESSION UID USER …: a line whose second column is no uid is a
		// message ("No sessions.") or blank.
		if len(f) < 3 || !sessionIDPattern.MatchString(f[0]) || !uidPattern.MatchString(f[1]) {
			continue
		}
		ids = append(ids, f[0])
	}
	return ids
}

// parseLoginctlShow parses `loginctl show-session ID… -p …` output: blocks
// of Key=Value lines, one block per session, separated by blank lines.
func parseLoginctlShow(out []byte) []logindSession {
	var list []logindSession
	var cur logindSession
	seen := false
	flush := func() {
		if seen {
			list = append(list, cur)
		}
		cur, seen = logindSession{}, false
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			flush()
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		seen = true
		switch k {
		case "Id":
			cur.ID = v
		case "Name":
			cur.Name = v
		case "State":
			cur.State = v
		case "Class":
			cur.Class = v
		case "Type":
			cur.Type = v
		case "TTY":
			cur.TTY = v
		case "Remote":
			cur.Remote = v
		case "Service":
			cur.Service = v
		}
	}
	flush()
	return list
}

// ParseLoginctlSessions turns show-session output into the user sessions the
// broker should know: class user (not greeters, lock screens, background or
// manager sessions) and not closing.
func ParseLoginctlSessions(out []byte) []vdibroker.AgentSession {
	var list []vdibroker.AgentSession
	for _, s := range parseLoginctlShow(out) {
		if s.ID == "" || s.Name == "" || !strings.HasPrefix(s.Class, "user") || s.State == "closing" {
			continue
		}
		list = append(list, vdibroker.AgentSession{ID: s.ID, User: s.Name, State: vdibroker.StateActive})
	}
	return list
}

// show runs show-session for ids; "--" ends loginctl's options, so no id
// is taken for one.
func (p *LogindProvider) show(ctx context.Context, ids ...string) ([]byte, error) {
	args := []string{"show-session"}
	for _, prop := range logindProps {
		args = append(args, "-p", prop)
	}
	args = append(append(args, "--"), ids...)
	return p.Run(ctx, "loginctl", args...)
}

// commandIDPattern is a logind session id ("3", "c1") as a command may
// name it: the ids come from the broker, and an id that is an option of
// loginctl (-H HOST runs ssh to HOST, as root) must never reach it.
var commandIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)

// Sessions implements SessionProvider.
func (p *LogindProvider) Sessions(ctx context.Context) ([]vdibroker.AgentSession, error) {
	out, err := p.Run(ctx, "loginctl", "list-sessions", "--no-legend", "--no-pager")
	if err != nil {
		return nil, fmt.Errorf("logind sessions: %w", err)
	}
	ids := ParseLoginctlList(out)
	if len(ids) == 0 {
		return nil, nil
	}
	out, err = p.show(ctx, ids...)
	if err != nil {
		// A session may end between the two calls; then ask one by one.
		var all []byte
		for _, id := range ids {
			if o, err := p.show(ctx, id); err == nil {
				all = append(append(all, o...), '\n')
			}
		}
		out = all
	}
	return ParseLoginctlSessions(out), nil
}

func (p *LogindProvider) session(ctx context.Context, id string) (logindSession, error) {
	if !commandIDPattern.MatchString(id) {
		return logindSession{}, fmt.Errorf("session %q is not a logind session id: %w", id, ErrNoSession)
	}
	out, err := p.show(ctx, id)
	if err != nil {
		return logindSession{}, fmt.Errorf("session %q: %w (%v)", id, ErrNoSession, err)
	}
	list := parseLoginctlShow(out)
	if len(list) == 0 || list[0].ID == "" {
		return logindSession{}, fmt.Errorf("session %q: %w", id, ErrNoSession)
	}
	return list[0], nil
}

// Logoff implements SessionProvider with `loginctl terminate-session`.
func (p *LogindProvider) Logoff(ctx context.Context, id string) error {
	if _, err := p.session(ctx, id); err != nil {
		return err
	}
	if _, err := p.Run(ctx, "loginctl", "terminate-session", "--", id); err != nil {
		return fmt.Errorf("log off session %q: %w", id, err)
	}
	return nil
}

// Disconnect implements SessionProvider: logind cannot, whatever the type.
func (p *LogindProvider) Disconnect(ctx context.Context, id string) error {
	s, err := p.session(ctx, id)
	if err != nil {
		return err
	}
	return fmt.Errorf("disconnect session %q: logind %s session (service %q) cannot be disconnected, only logged off: %w",
		id, s.Type, s.Service, ErrUnsupported)
}

// SendMessage implements SessionProvider: the message goes to the session's
// terminal.
func (p *LogindProvider) SendMessage(ctx context.Context, id, message string) error {
	s, err := p.session(ctx, id)
	if err != nil {
		return err
	}
	if s.TTY == "" {
		return fmt.Errorf("send message to session %q: %s session has no terminal to write to: %w", id, s.Type, ErrUnsupported)
	}
	return p.WriteTTY(s.TTY, message)
}
