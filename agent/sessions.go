package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/vdibroker/vdibroker"
)

// SessionProvider knows the host's real user sessions (R-S2) and carries out
// the broker's commands on them (R-S4). Session ids are the provider's own.
// A command it cannot carry out returns an error saying why; the agent
// reports it as Failed.
type SessionProvider interface {
	Sessions(ctx context.Context) ([]vdibroker.AgentSession, error)
	Logoff(ctx context.Context, id string) error
	Disconnect(ctx context.Context, id string) error
	SendMessage(ctx context.Context, id, message string) error
}

// RemoteAppsReporter is a SessionProvider that knows whether its host can
// run RemoteApps (R-E12): the agent tells the broker at registration and
// in every heartbeat, unless Config.RemoteApps overrides it. A provider
// that is not one says nothing (the broker's Unknown).
type RemoteAppsReporter interface {
	RemoteApps() bool
}

// ErrUnsupported is returned for a provider or a command that this system or
// session type cannot do.
var ErrUnsupported = errors.New("unsupported")

// ErrNoSession is returned for a command on a session the host does not have.
var ErrNoSession = errors.New("no such session on this host")

// NewSessionProvider builds the provider a --sessions-provider value names
// (CheckSessionsProvider): auto (on Linux xrdp when xrdp-sesman runs, else
// logind, else utmp; on Windows wts), logind, utmp, xrdp, wts[:FORMAT],
// file:PATH or none.
func NewSessionProvider(spec string) (SessionProvider, error) {
	kind, arg, err := parseSessionsProvider(spec)
	if err != nil {
		return nil, err
	}
	switch kind {
	case "logind":
		return newLogind()
	case "utmp":
		return newUtmp(DefaultUtmpPath)
	case "xrdp":
		return newXrdp()
	case "wts":
		return newWTS(WindowsUserFormat(arg))
	case "file":
		return &FileProvider{Path: arg}, nil
	case "none":
		return NoSessions{}, nil
	}
	return autoProvider()
}

// CheckSessionsProvider reports whether spec is a --sessions-provider value,
// without looking at the system: auto (or empty), logind, utmp, xrdp, wts,
// wts:FORMAT (upn, domain or user; wts is wts:upn), file:PATH or none.
func CheckSessionsProvider(spec string) error {
	_, _, err := parseSessionsProvider(spec)
	return err
}

func parseSessionsProvider(spec string) (kind, arg string, err error) {
	name, arg, hasArg := strings.Cut(spec, ":")
	switch {
	case spec == "" || spec == "auto":
		return "auto", "", nil
	case !hasArg && (name == "logind" || name == "utmp" || name == "xrdp" || name == "none"):
		return name, "", nil
	case name == "wts":
		f, err := ParseWindowsUserFormat(arg)
		if err != nil || (hasArg && arg == "") {
			return "", "", fmt.Errorf("sessions provider %q: want wts or wts:FORMAT with FORMAT upn, domain or user", spec)
		}
		return name, string(f), nil
	case name == "file":
		if arg == "" {
			return "", "", fmt.Errorf("sessions provider file: needs a path (file:PATH)")
		}
		return name, arg, nil
	}
	return "", "", fmt.Errorf("sessions provider %q: want auto, logind, utmp, xrdp, wts[:upn|domain|user], file:PATH or none", spec)
}

// NoSessions is the "none" provider: the host reports no session and runs no
// command (each is reported Failed).
type NoSessions struct{}

// Sessions implements SessionProvider.
func (NoSessions) Sessions(context.Context) ([]vdibroker.AgentSession, error) { return nil, nil }

// Logoff implements SessionProvider.
func (NoSessions) Logoff(context.Context, string) error {
	return fmt.Errorf("sessions provider none cannot log off: %w", ErrUnsupported)
}

// Disconnect implements SessionProvider.
func (NoSessions) Disconnect(context.Context, string) error {
	return fmt.Errorf("sessions provider none cannot disconnect: %w", ErrUnsupported)
}

// SendMessage implements SessionProvider.
func (NoSessions) SendMessage(context.Context, string, string) error {
	return fmt.Errorf("sessions provider none cannot send messages: %w", ErrUnsupported)
}

// FileProvider reads the host's sessions from a JSON file, re-read on every
// call, for tests and for integrations that write the file themselves:
//
//	[{"id": "s1", "user": "alice", "state": "Active"}]
//
// A missing file means no session; state defaults to Active. Logoff removes
// the entry, Disconnect sets its state to Disconnected (both rewrite the file
// atomically), and SendMessage appends one JSON line
// {"time","sessionId","user","message"} to PATH.messages.
type FileProvider struct {
	Path string
	// Now stamps messages; time.Now when nil.
	Now func() time.Time

	mu sync.Mutex
}

var _ SessionProvider = (*FileProvider)(nil)

// Sessions implements SessionProvider.
func (f *FileProvider) Sessions(ctx context.Context) ([]vdibroker.AgentSession, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.read()
}

func (f *FileProvider) read() ([]vdibroker.AgentSession, error) {
	data, err := os.ReadFile(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sessions file: %w", err)
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil, nil
	}
	var list []vdibroker.AgentSession
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("sessions file %s: want a JSON list of {\"id\",\"user\",\"state\"}: %w", f.Path, err)
	}
	for i := range list {
		s := &list[i]
		if s.State == "" {
			s.State = vdibroker.StateActive
		}
		if s.ID == "" || s.User == "" {
			return nil, fmt.Errorf("sessions file %s: entry %d: id and user are required", f.Path, i)
		}
		if s.State != vdibroker.StateActive && s.State != vdibroker.StateDisconnected {
			return nil, fmt.Errorf("sessions file %s: entry %d: state %q, want Active or Disconnected", f.Path, i, s.State)
		}
	}
	return list, nil
}

// Logoff implements SessionProvider: the entry leaves the file.
func (f *FileProvider) Logoff(ctx context.Context, id string) error {
	return f.update(id, func(list []vdibroker.AgentSession, i int) []vdibroker.AgentSession {
		return append(list[:i], list[i+1:]...)
	})
}

// Disconnect implements SessionProvider: the entry's state becomes
// Disconnected.
func (f *FileProvider) Disconnect(ctx context.Context, id string) error {
	return f.update(id, func(list []vdibroker.AgentSession, i int) []vdibroker.AgentSession {
		list[i].State = vdibroker.StateDisconnected
		return list
	})
}

func (f *FileProvider) update(id string, change func([]vdibroker.AgentSession, int) []vdibroker.AgentSession) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	list, err := f.read()
	if err != nil {
		return err
	}
	i := indexOf(list, id)
	if i < 0 {
		return fmt.Errorf("session %q: %w", id, ErrNoSession)
	}
	list = change(list, i)
	if list == nil {
		list = []vdibroker.AgentSession{}
	}
	data, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(f.Path, append(data, '\n'))
}

// SendMessage implements SessionProvider: one JSON line in PATH.messages.
func (f *FileProvider) SendMessage(ctx context.Context, id, message string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	list, err := f.read()
	if err != nil {
		return err
	}
	i := indexOf(list, id)
	if i < 0 {
		return fmt.Errorf("session %q: %w", id, ErrNoSession)
	}
	now := time.Now
	if f.Now != nil {
		now = f.Now
	}
	line, err := json.Marshal(struct {
		Time      time.Time `json:"time"`
		SessionID string    `json:"sessionId"`
		User      string    `json:"user"`
		Message   string    `json:"message"`
	}{now().UTC(), id, list[i].User, message})
	if err != nil {
		return err
	}
	// The agent runs as root, and the directory may be the integration's:
	// a link or FIFO put there must not make it append the broker's
	// message to another file, or wait for a reader.
	mf, err := os.OpenFile(f.Path+".messages", os.O_WRONLY|os.O_APPEND|os.O_CREATE|oAppendOnly, 0o644)
	if err != nil {
		return fmt.Errorf("send message: %w", err)
	}
	if fi, err := mf.Stat(); err != nil || !fi.Mode().IsRegular() {
		mf.Close()
		return fmt.Errorf("send message: %s.messages is not a regular file", f.Path)
	}
	if _, err := mf.Write(append(line, '\n')); err != nil {
		mf.Close()
		return fmt.Errorf("send message: %w", err)
	}
	return mf.Close()
}

func indexOf(list []vdibroker.AgentSession, id string) int {
	for i, s := range list {
		if s.ID == id {
			return i
		}
	}
	return -1
}

// writeFileAtomic replaces path with data via a temporary file and a rename,
// so a reader never sees half a file.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
