package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vdibroker/vdibroker"
)

// Defaults of the xrdp provider.
const (
	DefaultProcDir     = "/proc"
	DefaultXrdpSockDir = "/run/xrdp/sockdir" // Debian's --with-socketdir
	defaultXrdpGrace   = 5 * time.Second
)

// XrdpProvider finds the host's xrdp sessions in /proc. xrdp 0.9 without
// systemd writes its sessions neither to logind nor to utmp, and its own
// listing (xrdp-sesadmin) needs the user's password, so the process tree
// is the source that always answers:
//
//   - a session is an X server whose parent is a per-session xrdp-sesman
//     process (xrdp-sesexec in xrdp 0.10), root's, and whose first
//     argument is its display (":10"); it runs as the session's user,
//     whose name is the USER sesman put in its environment when that
//     names the X server's uid (else the uid's name);
//   - the session is connected while the X server holds a connected socket
//     on its xrdp_display_<N> listening socket in xrdp's socket directory:
//     that is the end xorgxrdp accepted from the xrdp process serving the
//     client, which closes when the client goes. /proc/net/unix does not
//     name a socket's peer, but it lists an accepted socket with its
//     listener's path, and the X server's fd links name its inodes, so the
//     X server's own side answers without netlink (read in the X server's
//     network namespace, /proc/<pid>/net/unix, in case the agent runs in
//     another);
//   - while xrdp is still attaching the client that started the session
//     (an X server younger than LogonGrace that was never seen connected),
//     the session is reported Active: it is being logged on to, not left,
//     and a Pending session must not pass through Disconnected;
//   - the id is "xrdp-<display>-<start>", the display and the X server's
//     start time in clock ticks after boot: stable for the session's life,
//     also across disconnects and reconnects, and never given to a later
//     session on the same display.
//
// Logoff ends the X server (SIGTERM, SIGKILL after Grace), which ends the
// session's window manager and sesman's session process, then the user's
// processes left over from that session (those whose environment has
// XRDP_SESSION and the session's DISPLAY, such as an ssh-agent), the same
// way. Disconnect asks the X server to drop its client through xorgxrdp's
// xrdp_disconnect_display_<N> socket, xrdp's own mechanism: the xrdp
// process serving the client then ends its connection, and the session
// stays for a reconnect. SendMessage is unsupported: an X session has no
// terminal to write to.
//
// Only X servers with the xorgxrdp module (Xorg, Debian's default) are
// reported; Xvnc sessions, which xrdp reaches over TCP, are not.
type XrdpProvider struct {
	// Proc is the proc file system's root (DefaultProcDir); tests point it
	// at a recorded tree.
	Proc string
	// SockDir is xrdp's socket directory when the X server's environment
	// does not name one (XRDP_SOCKET_PATH); DefaultXrdpSockDir when empty.
	SockDir string
	// LookupUser names a uid when the X server's environment has no USER
	// of that uid; LookupUID finds the uid of the USER there (the name the
	// user logged on with, which may differ from the uid's name in case
	// or domain). Without LookupUID, USER is not used.
	LookupUser func(uid int) (string, error)
	LookupUID  func(name string) (int, error)
	// Signal sends sig to the process pid that started at start (clock
	// ticks after boot), and must not signal a later process that reused
	// the pid; os.ErrProcessDone when it has gone.
	Signal func(pid int, start uint64, sig syscall.Signal) error
	// KernelSocket asks the kernel about the socket of inode in pid's
	// network namespace (sock_diag): whether a session is connected is
	// its word, not the table of /proc/<pid>/net/unix, where a user's
	// socket path can add lines (displayConnected); nil, an error but
	// errNoSocket, or errNoSocket for every socket the X server holds (a
	// kernel without unix_diag) reads the table.
	KernelSocket func(pid int, inode uint64) (UnixSocket, error)
	// SendDatagram sends one datagram to the Unix socket at path, which
	// must be a socket of uid owner, not a link: the path comes from the
	// X server's environment, which its user may change.
	SendDatagram func(path string, owner int, msg []byte) error
	// Self is the agent's own pid, never signalled.
	Self int
	// Grace is how long a process has to exit after SIGTERM before SIGKILL
	// (defaultXrdpGrace when 0); Poll how often to look (100ms when 0).
	Grace, Poll time.Duration
	// LogonGrace is how long after its X server started a session that
	// never had a client is still taken as logging on
	// (defaultXrdpLogonGrace when 0).
	LogonGrace time.Duration

	// Logger hears, once, that the kernel could not be asked about a
	// socket and the table is read; nil logs nothing.
	Logger *slog.Logger

	mu        sync.Mutex
	connected map[string]bool // sessions seen with a client
	fellBack  atomic.Bool     // the fallback to the table was logged
}

const defaultXrdpLogonGrace = 30 * time.Second

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's start time: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

var _ SessionProvider = (*XrdpProvider)(nil)

// xrdpProc is what the provider knows of one process.
type xrdpProc struct {
	PIDStat
	UID  int
	Args []string
	Env  []string // read only where needed (environ); nil when not read or unreadable
}

// xrdpSession is one xrdp session: its X server and what was read of it.
type xrdpSession struct {
	vdibroker.AgentSession
	Display int
	Server  xrdpProc
	SockDir string
	// Attached: a client is attached now (State may also be Active for
	// a session being logged on to).
	Attached bool
}

func (p *XrdpProvider) proc() string {
	if p.Proc == "" {
		return DefaultProcDir
	}
	return p.Proc
}

func (p *XrdpProvider) grace() time.Duration {
	if p.Grace <= 0 {
		return defaultXrdpGrace
	}
	return p.Grace
}

func (p *XrdpProvider) poll() time.Duration {
	if p.Poll <= 0 {
		return 100 * time.Millisecond
	}
	return p.Poll
}

// readProc reads one process; an error means it is gone or unreadable.
func (p *XrdpProvider) readProc(pid int) (xrdpProc, error) {
	dir := filepath.Join(p.proc(), strconv.Itoa(pid))
	data, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return xrdpProc{}, err
	}
	st, err := ParsePIDStat(data)
	if err != nil {
		return xrdpProc{}, err
	}
	data, err = os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return xrdpProc{}, err
	}
	uid, err := ParseProcStatusUID(data)
	if err != nil {
		return xrdpProc{}, err
	}
	pr := xrdpProc{PIDStat: st, UID: uid}
	if data, err := readAtMost(filepath.Join(dir, "cmdline"), maxCmdline); err == nil {
		pr.Args = ParseNulList(data)
	}
	return pr, nil
}

// Bounds of what is read of a process's command line and environment:
// each is as large as its user makes it (megabytes), and she may run
// thousands. The provider needs an X server's first two arguments and a
// few variables sesman sets.
const (
	maxCmdline = 64 << 10
	maxEnviron = 256 << 10
)

// environ reads pid's environment, at most maxEnviron bytes of it; nil
// when unreadable (another user's is readable only by root or that user).
// It is read only for the processes that need it (sessions, members), not
// for every process of the tree.
func (p *XrdpProvider) environ(pid int) []string {
	data, err := readAtMost(filepath.Join(p.proc(), strconv.Itoa(pid), "environ"), maxEnviron)
	if err != nil {
		return nil
	}
	if env := ParseNulList(data); env != nil {
		return env
	}
	return []string{}
}

// readAtMost reads the first max bytes of a file.
func readAtMost(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, max))
}

// procs reads every process of the tree, by pid; processes that end while
// it reads are left out.
func (p *XrdpProvider) procs() (map[int]xrdpProc, error) {
	ents, err := os.ReadDir(p.proc())
	if err != nil {
		return nil, fmt.Errorf("xrdp sessions: %w", err)
	}
	all := make(map[int]xrdpProc, len(ents))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		if pr, err := p.readProc(pid); err == nil {
			all[pid] = pr
		}
	}
	return all, nil
}

// sockets returns the inodes of pid's sockets.
func (p *XrdpProvider) sockets(pid int) map[uint64]bool {
	dir := filepath.Join(p.proc(), strconv.Itoa(pid), "fd")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	held := make(map[uint64]bool)
	for _, e := range ents {
		link, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if inode, ok := ParseSocketLink(link); ok {
			held[inode] = true
		}
	}
	return held
}

// uptime returns the time since boot, or false when unknown.
func (p *XrdpProvider) uptime() (time.Duration, bool) {
	data, err := os.ReadFile(filepath.Join(p.proc(), "uptime"))
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 0, false
	}
	sec, err := strconv.ParseFloat(f[0], 64)
	if err != nil || sec < 0 {
		return 0, false
	}
	return time.Duration(sec * float64(time.Second)), true
}

// sessions finds the xrdp sessions among all processes, by display.
func (p *XrdpProvider) sessions(all map[int]xrdpProc) []xrdpSession {
	var list []xrdpSession
	up, upKnown := p.uptime()
	logonGrace := p.LogonGrace
	if logonGrace <= 0 {
		logonGrace = defaultXrdpLogonGrace
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := map[string]bool{}
	for _, pr := range all {
		if pr.State == 'Z' {
			continue
		}
		n, ok := XrdpDisplay(pr.Args)
		if !ok {
			continue
		}
		if parent, ok := all[pr.PPID]; !ok || !startsXrdpSessions(parent.PIDStat, parent.UID) {
			continue // an X server xrdp did not start (a console, Xvfb, a user's)
		}
		pr.Env = p.environ(pr.PID)
		if pr.Env != nil {
			if _, ok := envValue(pr.Env, "XRDP_SESSION"); !ok {
				continue
			}
		}
		s := xrdpSession{Display: n, Server: pr, SockDir: p.SockDir}
		if dir, ok := envValue(pr.Env, "XRDP_SOCKET_PATH"); ok && dir != "" {
			s.SockDir = dir
		}
		if s.SockDir == "" {
			s.SockDir = DefaultXrdpSockDir
		}
		s.ID = "xrdp-" + strconv.Itoa(n) + "-" + strconv.FormatUint(pr.Start, 10)
		s.User = p.userName(pr)
		s.State = vdibroker.StateDisconnected
		if p.attached(pr.PID, displayPath(s.SockDir, n)) {
			s.State, s.Attached = vdibroker.StateActive, true
		}
		if s.Attached {
			seen[s.ID] = true
		} else if p.connected[s.ID] {
			seen[s.ID] = true
		} else if age := up - time.Duration(pr.Start)*time.Second/clockTicks; upKnown && age < logonGrace {
			s.State = vdibroker.StateActive // logging on
		}
		list = append(list, s)
	}
	p.connected = seen
	sort.Slice(list, func(i, j int) bool { return list[i].Display < list[j].Display })
	return list
}

// attached reports whether the X server pid holds the accepted end of a
// client's connection to its display's listening socket at path: by the
// kernel's word when it can be asked (KernelSocket), else by the table of
// /proc/<pid>/net/unix (in the X server's network namespace), which a
// user can add lines to (displayConnected).
func (p *XrdpProvider) attached(pid int, path string) bool {
	held := p.sockets(pid)
	if p.KernelSocket != nil {
		ok, err := kernelConnected(held, path, func(inode uint64) (UnixSocket, error) { return p.KernelSocket(pid, inode) })
		if err == nil {
			return ok
		}
		if p.Logger != nil && !p.fellBack.Swap(true) {
			p.Logger.Warn("xrdp sessions: the kernel cannot be asked whether a client is attached; reading /proc/<pid>/net/unix, where a user's socket path can add lines", "pid", pid, "err", err)
		}
	}
	data, err := os.ReadFile(filepath.Join(p.proc(), strconv.Itoa(pid), "net", "unix"))
	if err != nil {
		return false
	}
	table, err := ParseNetUnix(data)
	return err == nil && displayConnected(table, held, path)
}

// userName names the user of a session's X server: the USER sesman put in
// its environment when that names the X server's uid, else the uid's name,
// else the uid. The X server runs as its user, who may rewrite its
// environment (ptrace, /proc/<pid>/mem): her session must not be reported
// as another user's (R-S2).
func (p *XrdpProvider) userName(pr xrdpProc) string {
	if u, _ := envValue(pr.Env, "USER"); u != "" && p.LookupUID != nil {
		if uid, err := p.LookupUID(u); err == nil && uid == pr.UID {
			return u
		}
	}
	if p.LookupUser != nil {
		if u, err := p.LookupUser(pr.UID); err == nil && u != "" {
			return u
		}
	}
	return strconv.Itoa(pr.UID)
}

func (p *XrdpProvider) find(id string) (xrdpSession, map[int]xrdpProc, error) {
	all, err := p.procs()
	if err != nil {
		return xrdpSession{}, nil, err
	}
	for _, s := range p.sessions(all) {
		if s.ID == id {
			return s, all, nil
		}
	}
	return xrdpSession{}, nil, fmt.Errorf("session %q: %w", id, ErrNoSession)
}

// Sessions implements SessionProvider.
func (p *XrdpProvider) Sessions(ctx context.Context) ([]vdibroker.AgentSession, error) {
	all, err := p.procs()
	if err != nil {
		return nil, err
	}
	var list []vdibroker.AgentSession
	for _, s := range p.sessions(all) {
		list = append(list, s.AgentSession)
	}
	return list, nil
}

// members are the session's user processes other than its X server: the
// user's processes whose environment marks them as started in the session
// (XRDP_SESSION and the session's DISPLAY), wherever they are in the tree
// now (orphans are children of init).
func (p *XrdpProvider) members(s xrdpSession, all map[int]xrdpProc) []xrdpProc {
	var list []xrdpProc
	for _, pr := range all {
		if pr.PID == s.Server.PID || pr.PID <= 1 || pr.PID == p.Self || pr.UID != s.Server.UID || pr.State == 'Z' {
			continue
		}
		pr.Env = p.environ(pr.PID)
		if _, ok := envValue(pr.Env, "XRDP_SESSION"); !ok {
			continue
		}
		if d, ok := envValue(pr.Env, "DISPLAY"); ok && onDisplay(d, s.Display) {
			list = append(list, pr)
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].PID < list[j].PID })
	return list
}

// alive reports whether the process pr (pid and start time) still runs.
func (p *XrdpProvider) alive(pr xrdpProc) bool {
	now, err := p.readProc(pr.PID)
	return err == nil && now.Start == pr.Start && now.State != 'Z'
}

// end sends SIGTERM to the processes, waits up to Grace for them to exit,
// then sends SIGKILL to the rest and waits once more. It returns the pids
// still running at the end.
func (p *XrdpProvider) end(ctx context.Context, procs []xrdpProc) []int {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		var left []xrdpProc
		for _, pr := range procs {
			if err := p.Signal(pr.PID, pr.Start, sig); err == nil || !errors.Is(err, os.ErrProcessDone) {
				left = append(left, pr)
			}
		}
		deadline := time.Now().Add(p.grace())
		for len(left) > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
			still := left[:0]
			for _, pr := range left {
				if p.alive(pr) {
					still = append(still, pr)
				}
			}
			left = still
			if len(left) > 0 {
				select {
				case <-ctx.Done():
				case <-time.After(p.poll()):
				}
			}
		}
		procs = left
		if len(procs) == 0 {
			return nil
		}
	}
	pids := make([]int, len(procs))
	for i, pr := range procs {
		pids[i] = pr.PID
	}
	return pids
}

// Logoff implements SessionProvider: an attached client is dropped first,
// as Disconnect drops it, then the X server is ended (the session ends
// with it), then whatever of the session's user processes is left.
//
// Dropped as Disconnect drops it, the client is told the session ended
// (ERRINFO_LOGOFF_BY_USER) and exits. Dropped by the X server's end alone
// it sees a network failure and, with automatic reconnection on (as the
// broker's .rdp files have it, R-S4), logs on again straight to the host:
// a new session the broker never placed, after the one it logged off. A
// client that stays attached does not stop the logoff.
func (p *XrdpProvider) Logoff(ctx context.Context, id string) error {
	s, _, err := p.find(id)
	if err != nil {
		return err
	}
	if s.Attached && p.SendDatagram != nil {
		p.Disconnect(ctx, id) // its error (still attached, ended meanwhile) changes nothing below
	}
	if left := p.end(ctx, []xrdpProc{s.Server}); len(left) > 0 {
		return fmt.Errorf("log off session %q: X server (pid %d) still runs after SIGKILL", id, s.Server.PID)
	}
	all, err := p.procs()
	if err != nil {
		return fmt.Errorf("log off session %q: %w", id, err)
	}
	if left := p.end(ctx, p.members(s, all)); len(left) > 0 {
		return fmt.Errorf("log off session %q: processes %v of user %q still run after SIGKILL", id, left, s.User)
	}
	return ctx.Err()
}

// Disconnect implements SessionProvider: xorgxrdp drops the client when a
// datagram reaches the display's disconnect socket. A session that is not
// connected is left as it is.
func (p *XrdpProvider) Disconnect(ctx context.Context, id string) error {
	s, _, err := p.find(id)
	if err != nil {
		return err
	}
	if !s.Attached {
		return nil
	}
	path := filepath.Join(s.SockDir, "xrdp_disconnect_display_"+strconv.Itoa(s.Display))
	if err := p.SendDatagram(path, s.Server.UID, []byte("sig")); err != nil {
		return fmt.Errorf("disconnect session %q: %w", id, err)
	}
	deadline := time.Now().Add(p.grace())
	for {
		s, _, err := p.find(id)
		if err != nil || !s.Attached {
			return err // ended meanwhile: ErrNoSession
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("disconnect session %q: display :%d still has its client %s after the request to %s", id, s.Display, p.grace(), path)
		}
		select {
		case <-ctx.Done():
		case <-time.After(p.poll()):
		}
	}
}

// SendMessage implements SessionProvider: unsupported.
func (p *XrdpProvider) SendMessage(ctx context.Context, id, message string) error {
	if _, _, err := p.find(id); err != nil {
		return err
	}
	return fmt.Errorf("send message to session %q: an xrdp session has no terminal to write to: %w", id, ErrUnsupported)
}

// RemoteApps is false: xrdp logs the user on to a whole desktop and never
// starts the program a RemoteApp .rdp file names, so a client in
// RemoteApp mode shows no window (R-E12, docs/agent.md).
func (p *XrdpProvider) RemoteApps() bool { return false }

var _ RemoteAppsReporter = (*XrdpProvider)(nil)

// isSesman reports whether a process is xrdp's session manager: named
// xrdp-sesman and running as root. Any user may give a process that name
// (a copy of a program, or prctl(PR_SET_NAME)), and then its child X
// server, with the environment she chose, would be a session of whatever
// user she named (R-S2); a user cannot start a process as root.
func isSesman(st PIDStat, uid int) bool {
	return st.Comm == "xrdp-sesman" && uid == 0 && st.State != 'Z'
}

// startsXrdpSessions reports whether a process is the one xrdp starts a
// session's X server from: a per-session xrdp-sesman (xrdp 0.9) or
// xrdp-sesexec (0.10), running as root for the same reason as isSesman.
func startsXrdpSessions(st PIDStat, uid int) bool {
	return isSesman(st, uid) || (st.Comm == "xrdp-sesexec" && uid == 0 && st.State != 'Z')
}

// xrdpSesmanRunning reports whether an xrdp-sesman process runs in the tree
// under proc: the sign for `auto` that the host serves xrdp sessions.
func xrdpSesmanRunning(proc string) bool {
	ents, err := os.ReadDir(proc)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join(proc, e.Name(), "stat"))
		if err != nil {
			continue
		}
		st, err := ParsePIDStat(data)
		if err != nil || st.Comm != "xrdp-sesman" {
			continue
		}
		data, err = os.ReadFile(filepath.Join(proc, e.Name(), "status"))
		if err != nil {
			continue
		}
		if uid, err := ParseProcStatusUID(data); err == nil && isSesman(st, uid) {
			return true
		}
	}
	return false
}
