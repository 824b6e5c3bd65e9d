package agent

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf16"

	"github.com/vdibroker/vdibroker"
)

// The Windows session provider ("wts"): the sessions of a Remote Desktop
// Session Host or a multi-session Windows from the Remote Desktop Services
// (WTS) API. Everything but the API calls themselves is here, without a
// build tag, so that it is tested on every system: the calls are behind
// wtsAPI (wts_windows.go has the real one; the tests feed recorded answers).

// WTSConnectState is WTS_CONNECTSTATE_CLASS (wtsapi32.h): the state of a
// Remote Desktop Services session (a WinStation).
type WTSConnectState uint32

// The values of WTS_CONNECTSTATE_CLASS, in the header's order.
const (
	WTSActive       WTSConnectState = iota // a user is logged on and a client is connected
	WTSConnected                           // a client is connected, no user is logged on yet
	WTSConnectQuery                        // the client is connecting
	WTSShadow                              // the session is shadowing (remote-controlling) another session
	WTSDisconnected                        // a user is logged on, no client is connected
	WTSIdle                                // waiting for a client to connect
	WTSListen                              // a listener (RDP-Tcp), no session
	WTSReset                               // being reset
	WTSDown                                // down because of an error
	WTSInit                                // being initialized
)

var wtsStateNames = [...]string{"WTSActive", "WTSConnected", "WTSConnectQuery", "WTSShadow",
	"WTSDisconnected", "WTSIdle", "WTSListen", "WTSReset", "WTSDown", "WTSInit"}

// String is the constant's name in wtsapi32.h.
func (s WTSConnectState) String() string {
	if int(s) < len(wtsStateNames) {
		return wtsStateNames[s]
	}
	return "WTSConnectState(" + strconv.FormatUint(uint64(s), 10) + ")"
}

// MarshalText writes the state by name, so recorded answers read like the
// header.
func (s WTSConnectState) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a state by name or number.
func (s *WTSConnectState) UnmarshalText(b []byte) error {
	for i, n := range wtsStateNames {
		if string(b) == n {
			*s = WTSConnectState(i)
			return nil
		}
	}
	n, err := strconv.ParseUint(string(b), 10, 32)
	if err != nil {
		return fmt.Errorf("WTS connect state %q: want a WTS_CONNECTSTATE_CLASS name or number", b)
	}
	*s = WTSConnectState(n)
	return nil
}

// wtsBrokerState maps a connect state to the broker's session state (R-S2);
// ok is false for the states of no user session. Every value is listed:
//
//   - WTSActive: Active. WTSShadow: Active too, a user's session that is
//     remote-controlling another one; it has its user and its client.
//   - WTSDisconnected: Disconnected, the user's logon lives on without a
//     client (what disconnectedSessionTimeoutMinutes counts, R-S5).
//   - WTSConnected, WTSConnectQuery: a client that has not logged on yet
//     (the logon screen of an RDP connection or of the console): the
//     broker's Pending session turns Active only once the logon is done.
//   - WTSIdle, WTSListen: a spare WinStation or the RDP-Tcp listener.
//   - WTSReset, WTSDown, WTSInit: a WinStation going away or not up yet; a
//     session that ends this way is no longer reported and ends (R-S2).
//
// A value a later Windows adds is no user session until it is mapped here.
func wtsBrokerState(s WTSConnectState) (state string, ok bool) {
	switch s {
	case WTSActive, WTSShadow:
		return vdibroker.StateActive, true
	case WTSDisconnected:
		return vdibroker.StateDisconnected, true
	case WTSConnected, WTSConnectQuery, WTSIdle, WTSListen, WTSReset, WTSDown, WTSInit:
		return "", false
	}
	return "", false
}

// WTSSession is what the WTS API answers for one session: the id, state,
// WinStation name and account from WTSEnumerateSessionsEx (level 1), the
// logon time from WTSQuerySessionInformation(WTSSessionInfo), and the
// account's user principal name from its logon session
// (LsaGetLogonSessionData) or the directory (TranslateName). The JSON
// names are those of the recorded answers in testdata/windows. The logon
// time goes into the session id and the heartbeat (logonTime). ClientName
// (WTSQuerySessionInformation(WTSClientName)) is recorded but not
// reported: the broker keeps no client name.
type WTSSession struct {
	ID         uint32          `json:"sessionId"`
	State      WTSConnectState `json:"state"`
	Station    string          `json:"sessionName"` // "Services", "Console", "RDP-Tcp#3", "RDP-Tcp"
	User       string          `json:"userName"`
	Domain     string          `json:"domainName"`
	UPN        string          `json:"upn,omitempty"`
	ClientName string          `json:"clientName,omitempty"`
	// LogonTime is a FILETIME (100 ns since 1601-01-01 UTC), 0 before a
	// logon. With the id it names one logon: Windows reuses session ids.
	LogonTime int64 `json:"logonTime"`
}

// isUserSession reports whether s is a user's logon the broker should know:
// a user session state (wtsBrokerState), a user name, and not session 0,
// where services run and no one logs on.
func (s WTSSession) isUserSession() bool {
	_, ok := wtsBrokerState(s.State)
	return ok && s.ID != 0 && s.User != ""
}

// WindowsUserFormat is how a Windows account is named to the broker, which
// compares user names without regard to case.
type WindowsUserFormat string

// The user name formats of the wts provider (--sessions-provider wts:FORMAT).
const (
	// UserFormatUPN names accounts by their user principal name
	// (alice@contoso.com), as Azure Virtual Desktop and Entra ID do;
	// accounts without one (local accounts) by DOMAIN\user.
	UserFormatUPN WindowsUserFormat = "upn"
	// UserFormatDomain names accounts DOMAIN\user (CONTOSO\alice), the
	// pre-Windows 2000 logon name Horizon uses.
	UserFormatDomain WindowsUserFormat = "domain"
	// UserFormatUser names accounts by the bare user name (alice): for
	// one domain, or a workgroup host whose broker names users so.
	UserFormatUser WindowsUserFormat = "user"
)

// ParseWindowsUserFormat checks a format name; empty is upn.
func ParseWindowsUserFormat(s string) (WindowsUserFormat, error) {
	switch f := WindowsUserFormat(s); f {
	case "":
		return UserFormatUPN, nil
	case UserFormatUPN, UserFormatDomain, UserFormatUser:
		return f, nil
	}
	return "", fmt.Errorf("windows user format %q: want upn, domain or user", s)
}

// WindowsUserName is the name s's user is reported by in format f. Names
// keep the case Windows gives them; the broker compares without regard to
// case (sameUser). A domain Windows leaves empty gives the bare name.
func WindowsUserName(f WindowsUserFormat, s WTSSession) string {
	switch {
	case f == UserFormatUPN && s.UPN != "":
		return s.UPN
	case f == UserFormatUser || s.Domain == "":
		return s.User
	}
	return s.Domain + `\` + s.User
}

// sameUser reports whether two user names name the same user, as the broker
// compares them: without regard to case (Windows account names and UPNs are
// not case-sensitive).
func sameUser(a, b string) bool { return a != "" && strings.EqualFold(a, b) }

// wtsSessionID is the id a logon is reported by: "wts-<session id>-<logon
// time>". Windows gives a freed session id to the next logon, so the logon
// time keeps a command for an ended logon off the next user's.
func wtsSessionID(s WTSSession) string {
	return "wts-" + strconv.FormatUint(uint64(s.ID), 10) + "-" + strconv.FormatInt(s.LogonTime, 10)
}

// parseWTSSessionID reads an id wtsSessionID made. Command ids come from the
// broker; anything else is no session of this host.
func parseWTSSessionID(id string) (session uint32, logon int64, err error) {
	rest, ok := strings.CutPrefix(id, "wts-")
	sid, lt, ok2 := strings.Cut(rest, "-")
	if ok && ok2 {
		s, err1 := strconv.ParseUint(sid, 10, 32)
		l, err2 := strconv.ParseInt(lt, 10, 64)
		if err1 == nil && err2 == nil && l >= 0 && strconv.FormatUint(s, 10) == sid && strconv.FormatInt(l, 10) == lt {
			return uint32(s), l, nil
		}
	}
	return 0, 0, fmt.Errorf("session %q is not a wts session id: %w", id, ErrNoSession)
}

// WTSSessions turns the API's answers into the sessions the broker should
// know (R-S2): user sessions only (isUserSession), each with its state
// (wtsBrokerState), its user in format f (WindowsUserName) and its id
// (wtsSessionID), in the order listed.
func WTSSessions(list []WTSSession, f WindowsUserFormat) []vdibroker.AgentSession {
	var out []vdibroker.AgentSession
	for _, s := range list {
		if !s.isUserSession() {
			continue
		}
		state, _ := wtsBrokerState(s.State)
		out = append(out, vdibroker.AgentSession{ID: wtsSessionID(s), User: WindowsUserName(f, s), State: state, LogonTime: FiletimeTime(s.LogonTime)})
	}
	return out
}

// wtsInfo is the part of WTSINFOW the provider reads.
type wtsInfo struct {
	SessionID uint32
	State     WTSConnectState
	User      string
	Domain    string
	LogonTime int64
}

// The layout of WTSINFOW (wtsapi32.h) on 64-bit Windows: sizes and offsets
// in bytes. TestWindowsLayouts checks them against the Windows SDK headers
// of mingw-w64.
const (
	wtsInfoSize         = 216
	wtsInfoStateOff     = 0   // State, WTS_CONNECTSTATE_CLASS
	wtsInfoSessionIDOff = 4   // SessionId, DWORD; then six DWORD counters
	wtsInfoDomainOff    = 96  // Domain, WCHAR[DOMAIN_LENGTH] (17), after WinStationName WCHAR[32]
	wtsInfoDomainLen    = 34  //
	wtsInfoUserNameOff  = 130 // UserName, WCHAR[USERNAME_LENGTH+1] (21)
	wtsInfoUserNameLen  = 42  //
	wtsInfoLogonTimeOff = 200 // LogonTime, a FILETIME in a LARGE_INTEGER, after ConnectTime, DisconnectTime, LastInputTime; CurrentTime last
)

// decodeWTSInfo decodes the WTSINFOW that
// WTSQuerySessionInformationW(WTSSessionInfo) answers on 64-bit Windows.
// The names are cut at their fields' sizes (20 characters of user name,
// 16 of domain); the provider takes them from the listing, which has them
// whole.
func decodeWTSInfo(b []byte) (wtsInfo, error) {
	if len(b) < wtsInfoSize {
		return wtsInfo{}, fmt.Errorf("WTSINFO: %d bytes, want %d", len(b), wtsInfoSize)
	}
	le := binary.LittleEndian
	return wtsInfo{
		SessionID: le.Uint32(b[wtsInfoSessionIDOff:]),
		State:     WTSConnectState(le.Uint32(b[wtsInfoStateOff:])),
		User:      utf16Field(b[wtsInfoUserNameOff : wtsInfoUserNameOff+wtsInfoUserNameLen]),
		Domain:    utf16Field(b[wtsInfoDomainOff : wtsInfoDomainOff+wtsInfoDomainLen]),
		LogonTime: int64(le.Uint64(b[wtsInfoLogonTimeOff:])),
	}, nil
}

// utf16Field decodes a fixed-size UTF-16LE field up to its first NUL.
func utf16Field(b []byte) string {
	u := make([]uint16, 0, len(b)/2)
	for i := 0; i+1 < len(b); i += 2 {
		c := binary.LittleEndian.Uint16(b[i:])
		if c == 0 {
			break
		}
		u = append(u, c)
	}
	return string(utf16.Decode(u))
}

// wtsAPI is the part of the WTS and LSA APIs the provider calls, for the
// local server (WTS_CURRENT_SERVER_HANDLE). A session that no longer exists
// is an error wrapping ErrNoSession.
type wtsAPI interface {
	// Enumerate is WTSEnumerateSessionsExW, level 1: ID, State, Station,
	// User and Domain of every session, listeners included.
	Enumerate() ([]WTSSession, error)
	// Info is WTSQuerySessionInformationW(WTSSessionInfo).
	Info(id uint32) (wtsInfo, error)
	// UPN is the user principal name of the session's account: "" and no
	// error when it has none (a local account); an error when it could not
	// be found out now (the directory did not answer).
	UPN(id uint32, domain, user string) (string, error)
	// Logoff is WTSLogoffSession, without waiting for the logoff to end.
	Logoff(id uint32) error
	// Disconnect is WTSDisconnectSession, without waiting.
	Disconnect(id uint32) error
	// SendMessage is WTSSendMessageW: a message box in the session, without
	// waiting for the user to close it.
	SendMessage(id uint32, title, message string) error
}

// wtsMessageTitle is the title of the message box SendMessage shows.
const wtsMessageTitle = "Message from your administrator"

// WTSProvider is the "wts" sessions provider (docs/agent.md): the host's
// logons from the WTS API, logged off, disconnected and sent messages
// through it. Safe for concurrent use.
type WTSProvider struct {
	api    wtsAPI
	format WindowsUserFormat

	mu sync.Mutex
	// upns keeps each logon's UPN once found, so a directory that stops
	// answering does not rename a user the broker knows; entries go when
	// their logon does.
	upns map[wtsLogon]string
}

var _ SessionProvider = (*WTSProvider)(nil)

// RemoteApps is true: a Windows session host (RDS) runs the program a
// RemoteApp .rdp file names (R-E12).
func (p *WTSProvider) RemoteApps() bool { return true }

var _ RemoteAppsReporter = (*WTSProvider)(nil)

// wtsLogon names one logon: Windows reuses session ids.
type wtsLogon struct {
	id    uint32
	logon int64
}

func newWTSProvider(api wtsAPI, format WindowsUserFormat) *WTSProvider {
	return &WTSProvider{api: api, format: format, upns: map[wtsLogon]string{}}
}

// PartialListError is returned with the sessions by a provider that left
// some out of its listing; the agent reports the listed sessions and sends
// the reasons as health errors.
type PartialListError struct {
	Reasons []string
}

func (e *PartialListError) Error() string { return strings.Join(e.Reasons, "; ") }

// Sessions implements SessionProvider. A session that ends between the
// listing and its queries is left out; one whose UPN cannot be found out
// now (the directory did not answer) is left out with a PartialListError,
// rather than reported under another name for a while: a renamed user
// looks to the broker like one session ending and another starting.
func (p *WTSProvider) Sessions(ctx context.Context) ([]vdibroker.AgentSession, error) {
	list, err := p.api.Enumerate()
	if err != nil {
		return nil, fmt.Errorf("wts sessions: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var keep []WTSSession
	var left []string
	seen := map[wtsLogon]bool{}
	for _, s := range list {
		if !s.isUserSession() {
			continue
		}
		info, err := p.api.Info(s.ID)
		if errors.Is(err, ErrNoSession) {
			continue // ended since the listing
		}
		if err != nil {
			return nil, fmt.Errorf("wts session %d: %w", s.ID, err)
		}
		// The query is later than the listing: its state wins.
		s.State, s.LogonTime = info.State, info.LogonTime
		if !s.isUserSession() {
			continue
		}
		if p.format == UserFormatUPN {
			key := wtsLogon{s.ID, s.LogonTime}
			seen[key] = true
			upn, ok := p.upns[key]
			if !ok {
				upn, err = p.api.UPN(s.ID, s.Domain, s.User)
				if err != nil {
					left = append(left, fmt.Sprintf("session %d of %s\\%s not reported: its user principal name: %v", s.ID, s.Domain, s.User, err))
					continue
				}
				p.upns[key] = upn
			}
			s.UPN = upn
		}
		keep = append(keep, s)
	}
	for key := range p.upns {
		if !seen[key] {
			delete(p.upns, key)
		}
	}
	out := WTSSessions(keep, p.format)
	if len(left) > 0 {
		return out, &PartialListError{Reasons: left}
	}
	return out, nil
}

// logon finds the logon a command names: the session must still exist,
// hold a user, and be the same logon (the id's logon time), or the command
// is for a session that is gone (ErrNoSession).
func (p *WTSProvider) logon(id string) (uint32, wtsInfo, error) {
	sid, logon, err := parseWTSSessionID(id)
	if err != nil {
		return 0, wtsInfo{}, err
	}
	info, err := p.api.Info(sid)
	if err != nil {
		return 0, wtsInfo{}, fmt.Errorf("session %q: %w", id, err)
	}
	s := WTSSession{ID: sid, State: info.State, User: info.User, LogonTime: info.LogonTime}
	if !s.isUserSession() || info.LogonTime != logon {
		return 0, wtsInfo{}, fmt.Errorf("session %q (now %s, user %q): %w", id, info.State, info.User, ErrNoSession)
	}
	return sid, info, nil
}

// Logoff implements SessionProvider with WTSLogoffSession.
func (p *WTSProvider) Logoff(ctx context.Context, id string) error {
	sid, _, err := p.logon(id)
	if err != nil {
		return err
	}
	if err := p.api.Logoff(sid); err != nil {
		return fmt.Errorf("log off session %q: %w", id, err)
	}
	return nil
}

// Disconnect implements SessionProvider with WTSDisconnectSession; a session
// already disconnected is left as it is.
func (p *WTSProvider) Disconnect(ctx context.Context, id string) error {
	sid, info, err := p.logon(id)
	if err != nil {
		return err
	}
	if info.State == WTSDisconnected {
		return nil
	}
	if err := p.api.Disconnect(sid); err != nil {
		return fmt.Errorf("disconnect session %q: %w", id, err)
	}
	return nil
}

// SendMessage implements SessionProvider with WTSSendMessageW: a message box
// titled wtsMessageTitle in the session.
func (p *WTSProvider) SendMessage(ctx context.Context, id, message string) error {
	sid, _, err := p.logon(id)
	if err != nil {
		return err
	}
	if err := p.api.SendMessage(sid, wtsMessageTitle, message); err != nil {
		return fmt.Errorf("send message to session %q: %w", id, err)
	}
	return nil
}

// filetimeUnixEpoch is 1970-01-01 UTC as a FILETIME: 100 ns intervals
// since 1601-01-01 UTC.
const filetimeUnixEpoch = 116444736000000000

// FiletimeTime is FILETIME ft as a time, nil for 0 (no logon yet) and for
// what lies before 1970, which no logon does.
func FiletimeTime(ft int64) *time.Time {
	if ft <= filetimeUnixEpoch {
		return nil
	}
	d := ft - filetimeUnixEpoch
	t := time.Unix(d/1e7, d%1e7*100).UTC()
	return &t
}
