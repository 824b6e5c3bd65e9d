package power

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/vdibroker/vdibroker"
)

// Exec runs an argv per action, without a shell: {pool}, {host} and
// {address} in any argument are replaced by the target's values, and
// nothing else is interpreted, so a host name cannot inject a command;
// an argument whose value would begin with "-" where the config's does
// not is refused, so it cannot inject an option either.
// Each run is bounded by Timeout; on timeout the whole process group is
// killed (a script's children too). Output is logged line by line.
//
// Status: exit 0 is Running, exit 3 Stopped (the LSB init-script
// convention), anything else Unknown.
type Exec struct {
	Name                string
	StartArgv, StopArgv []string
	StatusArgv          []string // optional
	Timeout             time.Duration
	Log                 *slog.Logger
}

// DefaultTimeout bounds a driver action when the config names none.
const DefaultTimeout = 60 * time.Second

// Substitute returns argv with {pool}, {host} and {address} replaced.
func Substitute(argv []string, t Target) []string {
	r := strings.NewReplacer("{pool}", t.Pool, "{host}", t.Host, "{address}", t.Address)
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = r.Replace(a)
	}
	return out
}

// Start implements Driver.
func (e *Exec) Start(ctx context.Context, t Target) error {
	_, err := e.run(ctx, "start", e.StartArgv, t)
	return err
}

// Stop implements Driver.
func (e *Exec) Stop(ctx context.Context, t Target) error {
	_, err := e.run(ctx, "stop", e.StopArgv, t)
	return err
}

// Status implements Driver.
func (e *Exec) Status(ctx context.Context, t Target) (string, error) {
	if len(e.StatusArgv) == 0 {
		return vdibroker.PowerUnknown, ErrNoStatus
	}
	code, err := e.run(ctx, "status", e.StatusArgv, t)
	switch {
	case err == nil:
		return vdibroker.PowerRunning, nil
	case code == 3:
		return vdibroker.PowerStopped, nil
	case code > 0:
		return vdibroker.PowerUnknown, nil
	}
	return vdibroker.PowerUnknown, err
}

// run runs one action; code is the exit code when the command ran and
// exited (else -1).
func (e *Exec) run(ctx context.Context, action string, argv []string, t Target) (code int, err error) {
	log := e.Log
	if log == nil {
		log = slog.Default()
	}
	subst := Substitute(argv, t)
	for i, a := range subst {
		// A host registers its own name and address (a registration
		// token is enough): a value beginning with "-" would be read as
		// an option of the admin's program ("vm stop --all"), so an
		// argument may begin with "-" only when the config's does.
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(argv[i], "-") {
			log.Warn("power action refused: an argument would begin with '-'", "arg", a)
			return -1, fmt.Errorf("power driver %q: %s %s/%s: refused: argument %d would be %q, read as an option by %s (a pool, host or address beginning with \"-\")",
				e.Name, action, t.Pool, t.Host, i, a, argv[0])
		}
	}
	argv = subst
	timeout := e.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	log = log.With("driver", e.Name, "action", action, "pool", t.Pool, "host", t.Host)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	// Its own process group, so that a timeout kills what it started.
	cmd.SysProcAttr = procAttr()
	cmd.Cancel = func() error { return killGroup(cmd.Process) }
	// A background child that keeps stdout or stderr open (an agent a
	// start script launched) must not hold the action up: once the command
	// exited, its output is read for at most this long.
	cmd.WaitDelay = time.Second
	outLog, errLog := &lineLog{log: log, stream: "stdout"}, &lineLog{log: log, stream: "stderr"}
	cmd.Stdout, cmd.Stderr = outLog, errLog
	err = cmd.Run()
	outLog.flush()
	errLog.flush()
	if err != nil && ctx.Err() != nil && !errors.Is(err, exec.ErrWaitDelay) {
		log.Warn("power action timed out", "timeout", timeout)
		return -1, fmt.Errorf("power driver %q: %s %s/%s: killed after %s", e.Name, action, t.Pool, t.Host, timeout)
	}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee) && ee.Exited():
		log.Warn("power action failed", "exit", ee.ExitCode())
		return ee.ExitCode(), fmt.Errorf("power driver %q: %s %s/%s: exit status %d", e.Name, action, t.Pool, t.Host, ee.ExitCode())
	case errors.Is(err, exec.ErrWaitDelay):
		// Exited 0; a child still holds the output open.
	case err != nil:
		return -1, fmt.Errorf("power driver %q: %s %s/%s: %w", e.Name, action, t.Pool, t.Host, err)
	}
	log.Info("power action done")
	return 0, nil
}

// lineLog logs what a command writes, a line per record.
type lineLog struct {
	mu     sync.Mutex
	log    *slog.Logger
	stream string
	buf    []byte
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.log.Info("power driver output", "stream", l.stream, "line", string(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) > 64<<10 { // a line without end: log it in pieces
		l.log.Info("power driver output", "stream", l.stream, "line", string(l.buf))
		l.buf = l.buf[:0]
	}
	return len(p), nil
}

func (l *lineLog) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.log.Info("power driver output", "stream", l.stream, "line", string(l.buf))
		l.buf = nil
	}
}
