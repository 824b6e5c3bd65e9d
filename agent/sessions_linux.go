package agent

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func newLogind() (SessionProvider, error) {
	return &LogindProvider{Run: runCommand, WriteTTY: writeTTY}, nil
}

func newUtmp(path string) (SessionProvider, error) {
	clock := &bootClock{}
	started := func(pid int) (time.Time, error) { return processStarted(clock, pid) }
	booted := func(t time.Time) { clock.booted(t.Unix()) }
	p := &UtmpProvider{Path: path, Order: binary.NativeEndian, Alive: processAlive, Started: started, Booted: booted, WriteTTY: writeTTY}
	sig := newPidSignaller()
	p.Hangup = func(pid int, same func() bool) error {
		log := p.Logger
		if log == nil {
			log = slog.Default()
		}
		return sig.signal(log, pid, syscall.SIGHUP, same)
	}
	return p, nil
}

// processStarted is when pid started: the boot time (/proc/stat btime,
// through clock) and the start in clock ticks after boot
// (/proc/<pid>/stat).
func processStarted(clock *bootClock, pid int) (time.Time, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return time.Time{}, err
	}
	st, err := ParsePIDStat(data)
	if err != nil {
		return time.Time{}, err
	}
	data, err = os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			boot, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				break
			}
			return clock.start(boot, st.Start), nil
		}
	}
	return time.Time{}, errors.New("/proc/stat: no btime")
}

// autoProvider picks xrdp when xrdp-sesman runs (its sessions are in
// neither logind nor utmp without systemd), else logind when loginctl
// answers, else utmp when the file exists.
func autoProvider() (SessionProvider, error) {
	if xrdpSesmanRunning(DefaultProcDir) {
		return newXrdp()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, _ := newLogind()
	_, lerr := p.Sessions(ctx)
	if lerr == nil {
		return p, nil
	}
	_, uerr := os.Stat(DefaultUtmpPath)
	if uerr == nil {
		return newUtmp(DefaultUtmpPath)
	}
	return nil, fmt.Errorf("sessions provider auto: no xrdp-sesman runs and neither systemd-logind (%v) nor utmp (%v) is available; use --sessions-provider file:PATH or none", lerr, uerr)
}

// runCommand runs name and returns its stdout; a failure carries stderr.
func runCommand(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, msg)
		}
		return out, fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return out, nil
}

func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

var ttyPattern = regexp.MustCompile(`^(pts/[0-9]+|tty[A-Za-z0-9]+)$`)

// writeTTY writes a message to /dev/<tty>, as write(1) does, without making
// it the agent's controlling terminal.
func writeTTY(tty, message string) error {
	if !ttyPattern.MatchString(tty) {
		return fmt.Errorf("send message: %q is not a terminal name: %w", tty, ErrUnsupported)
	}
	path := "/dev/" + tty
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("send message: %w", err)
	}
	if fi.Mode()&os.ModeCharDevice == 0 {
		return fmt.Errorf("send message: %s is not a terminal", path)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NOCTTY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("send message: %w", err)
	}
	_, err = f.Write(ttyMessage(message, time.Now()))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("send message to %s: %w", path, err)
	}
	return nil
}
