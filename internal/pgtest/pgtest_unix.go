//go:build unix

// Package pgtest runs a PostgreSQL server of a test's own, which the test
// may stop, start again and pause (SIGSTOP) to play a database outage
// (R-OUT) without disturbing the shared test server other tests use.
// It needs Debian's PostgreSQL server binaries and root (the server runs
// as the postgres user); Start skips the test otherwise.
package pgtest

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
)

// Server is a running (or stopped, or paused) PostgreSQL server.
type Server struct {
	t    testing.TB
	bin  string // the directory of initdb and postgres
	dir  string // the data directory, owned by postgres
	port int
	cmd  *exec.Cmd
	cred *syscall.Credential // the postgres user's
	// DSN connects to the server's postgres database over 127.0.0.1.
	DSN string
}

// Start initialises a data directory and starts a server on a free
// loopback port; the test's cleanup stops it and removes the directory.
// It skips unless VDIBROKER_TEST_POSTGRES_DSN is set (the PostgreSQL tests
// are on), the server binaries exist and the test runs as root.
func Start(t testing.TB) *Server {
	t.Helper()
	if os.Getenv("VDIBROKER_TEST_POSTGRES_DSN") == "" {
		t.Skip("PostgreSQL outage test: set VDIBROKER_TEST_POSTGRES_DSN (and run as root with the PostgreSQL server installed) to run it")
	}
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		t.Skip("PostgreSQL outage test: no /usr/lib/postgresql/*/bin/initdb (apt-get install postgresql)")
	}
	if os.Geteuid() != 0 {
		t.Skip("PostgreSQL outage test: needs root to run a server of its own as the postgres user")
	}
	pg, err := user.Lookup("postgres")
	if err != nil {
		t.Skipf("PostgreSQL outage test: no postgres user: %v", err)
	}
	sort.Strings(bins)
	s := &Server{t: t, bin: filepath.Dir(bins[len(bins)-1])}
	s.dir, err = os.MkdirTemp("", "vdibroker-pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(pg.Uid)
	gid, _ := strconv.Atoi(pg.Gid)
	s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	if err := os.Chown(s.dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.kill()
		os.RemoveAll(s.dir)
	})
	initdb := s.command(filepath.Join(s.bin, "initdb"), "-D", filepath.Join(s.dir, "data"), "-A", "trust", "-U", "postgres", "--no-sync")
	out, err := initdb.CombinedOutput()
	if err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	s.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
	s.Restart()
	return s
}

// Restart starts the server (again) and waits until it accepts connections.
func (s *Server) Restart() {
	s.t.Helper()
	s.cmd = s.command(filepath.Join(s.bin, "postgres"),
		"-D", filepath.Join(s.dir, "data"), "-p", strconv.Itoa(s.port), "-k", s.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=100")
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start postgres: %v", err)
	}
	db, err := sql.Open("pgx", s.DSN)
	if err != nil {
		s.t.Fatal(err)
	}
	defer db.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := db.PingContext(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("postgres did not start: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// command runs name as the postgres user (not through runuser, which
// would stop itself along with a paused server).
func (s *Server) command(name string, args ...string) *exec.Cmd {
	c := exec.Command(name, args...)
	c.Dir = s.dir
	c.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	return c
}

// Stop shuts the server down (fast: open transactions are rolled back).
func (s *Server) Stop() {
	s.t.Helper()
	s.resume()
	if pid := s.postmaster(); pid > 0 {
		syscall.Kill(pid, syscall.SIGINT)
	}
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		s.t.Fatal("postgres did not stop within 30 s")
	}
	s.cmd = nil
}

// Pause stops every process of the server with SIGSTOP: connections stay
// open and nothing answers, as with a hung machine.
//
// A test that ends while the server is paused, failed or not, lets it go
// on first: the cleanups registered before (a schema's DROP) would wait
// on it for ever.
func (s *Server) Pause() {
	s.signalAll(syscall.SIGSTOP)
	s.t.Cleanup(s.resume)
}

// Resume lets a paused server go on.
func (s *Server) Resume() { s.resume() }

func (s *Server) resume() { s.signalAll(syscall.SIGCONT) }

// postmaster returns the server's main process.
func (s *Server) postmaster() int {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// signalAll sends sig to the postmaster and all its children. A SIGSTOP
// stops the postmaster first and waits until it has stopped: one that
// was forking a backend for a new connection finishes the fork before it
// stops, and a child listed before that missed its SIGSTOP and served
// that connection through the whole pause (a health check that pinged on
// it saw the store up). The children are listed again until a listing
// finds none not yet signalled.
func (s *Server) signalAll(sig syscall.Signal) {
	pm := s.postmaster()
	if pm == 0 {
		return
	}
	syscall.Kill(pm, sig)
	if sig == syscall.SIGSTOP {
		waitStopped(s.t, pm)
	}
	signalled := map[int]bool{}
	for {
		more := false
		for _, pid := range children(pm) {
			if !signalled[pid] {
				syscall.Kill(pid, sig)
				signalled[pid], more = true, true
			}
		}
		if !more {
			break
		}
	}
	if sig == syscall.SIGSTOP {
		// A signal is taken when its process next runs: Pause returns
		// when nothing of the server runs.
		for pid := range signalled {
			waitStopped(s.t, pid)
		}
	}
}

// waitStopped waits (up to 5 s) until process pid is stopped, or gone.
func waitStopped(t testing.TB, pid int) {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if st, ok := procState(pid); !ok || st == 'T' || st == 'Z' {
			return
		}
	}
	t.Errorf("PostgreSQL's process %d did not stop within 5 s of SIGSTOP", pid)
}

// procState returns the state letter of /proc/pid/stat (R running, S
// sleeping, T stopped...); ok is false when the process is gone.
func procState(pid int) (state byte, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) == 0 || len(f[0]) != 1 {
		return 0, false
	}
	return f[0][0], true
}

// kill ends the server at once: it is the test's own, and its data
// directory goes with it.
func (s *Server) kill() {
	if s.cmd == nil {
		return
	}
	s.resume()
	s.signalAll(syscall.SIGKILL)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
	}
}

// children returns the pids whose parent is pid, read from /proc.
func children(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, n)
		}
	}
	sort.Ints(out)
	return out
}
