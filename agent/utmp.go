package agent

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/vdibroker/vdibroker"
)

// DefaultUtmpPath is where glibc keeps the logged-on users.
const DefaultUtmpPath = "/var/run/utmp"

// utmpRecordSize is sizeof(struct utmp) in glibc on 64-bit Linux (x86_64,
// arm64): 32-bit times for compatibility with 32-bit programs.
const utmpRecordSize = 384

// utmp record types (utmp.h) the agent cares about.
const (
	utmpBootTime    = 2
	utmpUserProcess = 7
	utmpDeadProcess = 8
)

// UtmpEntry is one utmp record.
type UtmpEntry struct {
	Type int16
	PID  int32
	// Line is the terminal ("pts/0", "tty1") or display (":10" for xrdp).
	Line, ID, User, Host string
	Session              int32
	Time                 time.Time
}

// ParseUtmp decodes utmp records (glibc layout):
//
//	0 ut_type int16 (+2 pad)  4 ut_pid int32   8 ut_line [32]
//	40 ut_id [4]  44 ut_user [32]  76 ut_host [256]  332 ut_exit 2×int16
//	336 ut_session int32  340 ut_tv 2×int32  348 ut_addr_v6 [16]  364 unused [20]
func ParseUtmp(data []byte, order binary.ByteOrder) ([]UtmpEntry, error) {
	if len(data)%utmpRecordSize != 0 {
		return nil, fmt.Errorf("utmp: %d bytes is not a whole number of %d-byte records (unsupported layout)", len(data), utmpRecordSize)
	}
	str := func(b []byte) string {
		if i := bytes.IndexByte(b, 0); i >= 0 {
			b = b[:i]
		}
		return string(b)
	}
	var out []UtmpEntry
	for off := 0; off < len(data); off += utmpRecordSize {
		r := data[off : off+utmpRecordSize]
		out = append(out, UtmpEntry{
			Type:    int16(order.Uint16(r[0:])),
			PID:     int32(order.Uint32(r[4:])),
			Line:    str(r[8:40]),
			ID:      str(r[40:44]),
			User:    str(r[44:76]),
			Host:    str(r[76:332]),
			Session: int32(order.Uint32(r[336:])),
			Time:    time.Unix(int64(int32(order.Uint32(r[340:]))), int64(int32(order.Uint32(r[344:])))*1000).UTC(),
		})
	}
	return out, nil
}

// UtmpSessions keeps the logged-on users: USER_PROCESS records whose process
// is alive (a crashed login leaves a stale record behind), as live says
// (UtmpProvider.live). The session id is the terminal line, unique among
// live records.
func UtmpSessions(entries []UtmpEntry, live func(UtmpEntry) bool) []vdibroker.AgentSession {
	var list []vdibroker.AgentSession
	for _, e := range entries {
		if e.Type != utmpUserProcess || e.User == "" || (live != nil && !live(e)) {
			continue
		}
		s := vdibroker.AgentSession{ID: utmpID(e), User: e.User, State: vdibroker.StateActive}
		if !e.Time.IsZero() && e.Time.Unix() > 0 {
			t := e.Time
			s.LogonTime = &t
		}
		list = append(list, s)
	}
	return list
}

func utmpID(e UtmpEntry) string {
	if e.Line != "" {
		return e.Line
	}
	return "pid-" + strconv.Itoa(int(e.PID))
}

// UtmpProvider reads sessions from utmp, which console, ssh and xrdp logons
// write. Logoff hangs up the session's leader process (SIGHUP, what a
// terminal going away sends); Disconnect is unsupported; SendMessage writes to
// the session's terminal.
type UtmpProvider struct {
	Path  string
	Order binary.ByteOrder
	// Alive reports whether a process exists; Started, when not nil, when
	// it started; WriteTTY writes to a terminal such as "pts/3".
	Alive    func(pid int) bool
	Started  func(pid int) (time.Time, error)
	WriteTTY func(tty, message string) error
	// Hangup sends pid SIGHUP if same, asked once pid is held so that it
	// cannot go to another process, still says it is the session's
	// process (pidSignaller); os.ErrProcessDone when not.
	Hangup func(pid int, same func() bool) error
	// Booted, when not nil, hears the time of the file's boot record
	// before Started is asked (bootClock.booted).
	Booted func(time.Time)
	// Logger hears, once, that processes cannot be held (no pidfd).
	Logger *slog.Logger
}

var _ SessionProvider = (*UtmpProvider)(nil)

func (p *UtmpProvider) entries() ([]UtmpEntry, error) {
	data, err := os.ReadFile(p.Path)
	if err != nil {
		return nil, fmt.Errorf("utmp sessions: %w", err)
	}
	list, err := ParseUtmp(data, p.Order)
	for _, e := range list {
		if e.Type == utmpBootTime && p.Booted != nil && e.Time.Unix() > 0 {
			p.Booted(e.Time)
		}
	}
	return list, err
}

// utmpStartSlack covers the rounding of the boot time a process's start is
// counted from (whole seconds) and a record written a little before the
// clock was set back; a pid taken over later than that still shows. A
// clock set forward is bootClock's.
const utmpStartSlack = time.Minute

// bootClock turns a process's start, in clock ticks after boot, into a
// wall-clock time from the boot time /proc/stat gives (btime). btime is
// the wall clock less the time since boot, so it moves when the clock is
// set: set forward by a day after a logon (NTP on a host without a
// battery clock, a VM resumed from a snapshot), every process would seem
// to have started a day later, after its utmp record was written, and
// every session would vanish. So a start counts from the earliest btime
// seen since the agent started, or written in utmp's boot record (by the
// clock the host booted with, before NTP set it, as a console login's
// record): a record written before the clock was set forward keeps its
// session; one written after it gives a later process that took its pid
// as much leeway as the clock moved.
type bootClock struct {
	mu       sync.Mutex
	earliest int64
	seen     bool
}

// start is the wall-clock time a process started ticks after boot, where
// /proc/stat gives btime now.
func (c *bootClock) start(btime int64, ticks uint64) time.Time {
	c.booted(btime)
	c.mu.Lock()
	btime = c.earliest
	c.mu.Unlock()
	return time.Unix(btime, 0).Add(time.Duration(ticks) * time.Second / clockTicks)
}

// booted hears a boot time: /proc/stat's btime, or utmp's boot record.
func (c *bootClock) booted(btime int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.seen || btime < c.earliest {
		c.earliest, c.seen = btime, true
	}
}

// live reports whether e's process is its login's: alive, and, when its
// start is known, started no later than the record was written. A crashed
// login leaves its record, and its pid goes to a later process, of any
// user (who may fork until she has it): that is no session (R-S2), and
// no process for a logoff to hang up.
func (p *UtmpProvider) live(e UtmpEntry) bool {
	if p.Alive != nil && !p.Alive(int(e.PID)) {
		return false
	}
	if p.Started == nil || e.Time.Unix() <= 0 {
		return true
	}
	start, err := p.Started(int(e.PID))
	return err == nil && !start.After(e.Time.Add(utmpStartSlack))
}

// Sessions implements SessionProvider.
func (p *UtmpProvider) Sessions(ctx context.Context) ([]vdibroker.AgentSession, error) {
	e, err := p.entries()
	if err != nil {
		return nil, err
	}
	return UtmpSessions(e, p.live), nil
}

func (p *UtmpProvider) find(id string) (UtmpEntry, error) {
	list, err := p.entries()
	if err != nil {
		return UtmpEntry{}, err
	}
	for _, e := range list {
		if e.Type == utmpUserProcess && utmpID(e) == id && p.live(e) {
			return e, nil
		}
	}
	return UtmpEntry{}, fmt.Errorf("session %q: %w", id, ErrNoSession)
}

// Logoff implements SessionProvider.
func (p *UtmpProvider) Logoff(ctx context.Context, id string) error {
	e, err := p.find(id)
	if err != nil {
		return err
	}
	if e.PID <= 1 {
		return fmt.Errorf("log off session %q: utmp names no process to hang up", id)
	}
	// Checked again once the process is held: its pid, free since find,
	// may have gone to another user's process (R-S2).
	err = p.Hangup(int(e.PID), func() bool { return p.live(e) })
	if errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("session %q: its process %d ended: %w", id, e.PID, ErrNoSession)
	}
	if err != nil {
		return fmt.Errorf("log off session %q: hang up process %d: %w", id, e.PID, err)
	}
	return nil
}

// Disconnect implements SessionProvider: utmp sessions cannot be detached.
func (p *UtmpProvider) Disconnect(ctx context.Context, id string) error {
	if _, err := p.find(id); err != nil {
		return err
	}
	return fmt.Errorf("disconnect session %q: utmp sessions cannot be disconnected, only logged off: %w", id, ErrUnsupported)
}

// SendMessage implements SessionProvider.
func (p *UtmpProvider) SendMessage(ctx context.Context, id, message string) error {
	e, err := p.find(id)
	if err != nil {
		return err
	}
	if e.Line == "" || strings.HasPrefix(e.Line, ":") {
		return fmt.Errorf("send message to session %q: display %q has no terminal to write to: %w", id, e.Line, ErrUnsupported)
	}
	return p.WriteTTY(e.Line, message)
}

// ttyMessage is what a user sees in their terminal. The message comes from
// the broker's answer: its control characters other than line breaks and
// tabs are shown as write(1) shows them (^[ for ESC, ? for C1), so that no
// escape sequence reaches the terminal, whatever the broker sent (R-S4).
func ttyMessage(message string, now time.Time) []byte {
	var b strings.Builder
	for _, r := range strings.ReplaceAll(message, "\r\n", "\n") {
		switch {
		case r == '\n':
			b.WriteString("\r\n")
		case r == '\t':
			b.WriteRune(r)
		case r < 0x20:
			b.WriteByte('^')
			b.WriteRune(r + 0x40)
		case r == 0x7f:
			b.WriteString("^?")
		case unicode.IsControl(r):
			b.WriteByte('?')
		default:
			b.WriteRune(r)
		}
	}
	return []byte(fmt.Sprintf("\r\n\a*** Message from vdibroker at %s ***\r\n%s\r\n", now.Format("15:04"), b.String()))
}
