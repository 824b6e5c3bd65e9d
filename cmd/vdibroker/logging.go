package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/pflag"
	"golang.org/x/time/rate"

	"github.com/vdibroker/vdibroker"
)

// logFlags are the logging flags of serve and agent. The level lives in a
// slog.LevelVar, so it changes while the program runs: on SIGHUP it is
// read again from --log-level-file. A level cannot be read again from the
// command line or from a unit's EnvironmentFile (the process got them
// once, at start), so the file is what an admin edits:
//
//	echo debug > /etc/vdibroker/log-level && systemctl reload vdibroker
//
// and removing the file (then reload) goes back to --log-level.
type logFlags struct {
	format    string
	level     string
	levelFile string
	lv        slog.LevelVar
	// readFile reads levelFile; nil is os.ReadFile. The agent's refuses a
	// file others may change (readAgentLevelFile).
	readFile func(name string) ([]byte, error)
}

func (l *logFlags) addFlags(f *pflag.FlagSet, withFormat bool) {
	if withFormat {
		f.Var(newEnum(&l.format, "text", logFormats...), "log-format", "log format: text or json")
	}
	f.StringVar(&l.level, "log-level", "info", "log level: debug, info, warn or error")
	f.StringVar(&l.levelFile, "log-level-file", "", "file holding the log level (debug, info, warn, error), read at start and again on SIGHUP; overrides --log-level while it exists")
}

// parseLevel reads a level name, as --log-level takes it.
func parseLevel(s string) (slog.Level, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(strings.TrimSpace(s))); err != nil {
		return 0, fmt.Errorf("want debug, info, warn or error, got %q", strings.TrimSpace(s))
	}
	return lv, nil
}

// wanted returns the level the flags ask for now: the file's when it
// exists, else --log-level's; from says which.
func (l *logFlags) wanted() (lv slog.Level, from string, err error) {
	if l.levelFile != "" {
		read := l.readFile
		if read == nil {
			read = os.ReadFile
		}
		b, err := read(l.levelFile)
		switch {
		case err == nil:
			lv, err := parseLevel(string(bytes.TrimSpace(b)))
			if err != nil {
				return 0, "", fmt.Errorf("--log-level-file %s: %w", l.levelFile, err)
			}
			return lv, l.levelFile, nil
		case !errors.Is(err, os.ErrNotExist):
			return 0, "", fmt.Errorf("--log-level-file: %w", err)
		}
	}
	lv, err = parseLevel(l.level)
	if err != nil {
		return 0, "", fmt.Errorf("--log-level: %w", err)
	}
	return lv, "--log-level", nil
}

// logger builds the logger on w: a bad level is a usage error, so a typo
// stops the start instead of logging at a level nobody asked for.
func (l *logFlags) logger(w io.Writer) (*slog.Logger, error) {
	lv, _, err := l.wanted()
	if err != nil {
		return nil, usageError{err}
	}
	l.lv.Set(lv)
	opts := &slog.HandlerOptions{Level: &l.lv}
	if l.format == "json" {
		// Audit entries and access lines quote what anonymous callers
		// chose (a path): escaped as the CLI's json is (R-SEC).
		return slog.New(slog.NewJSONHandler(jsonLogWriter{w}, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}

// jsonLogWriter writes the records of slog's JSON handler, one whole
// record a Write, with the terminal controls it leaves raw escaped
// (escapeJSON).
type jsonLogWriter struct{ w io.Writer }

func (j jsonLogWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(j.w, escapeJSON(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// reload sets the level again from the flags (SIGHUP). A file that does
// not hold a level keeps the level running and says so: a reload must not
// silence a broker.
func (l *logFlags) reload(log *slog.Logger) {
	lv, from, err := l.wanted()
	if err != nil {
		log.Error("SIGHUP: log level kept", "level", l.lv.Level().String(), "err", err)
		return
	}
	old := l.lv.Level()
	l.lv.Set(lv)
	// Logged at warn so that the line shows at every level.
	log.Warn("SIGHUP: log level", "level", lv.String(), "was", old.String(), "from", from)
}

// onHUP calls reload on every SIGHUP until ctx ends, once ready is
// closed (nil: at once). systemctl reload sends SIGHUP; without a handler
// it would end the process (its default action), so it is caught from
// now on, and one that comes before ready is answered when ready closes:
// reload then reads what the start has set (serve's federation secrets
// and OIDC provider, set while it opens), not while it sets it.
func onHUP(ctx context.Context, ready <-chan struct{}, reload func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		if ready != nil {
			select {
			case <-ctx.Done():
				return
			case <-ready:
			}
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				reload()
			}
		}
	}()
}

// serverErrorLog is the ErrorLog of an http.Server: net/http's own lines
// (a TLS handshake that failed, a header too large) at warn, at most
// errorLinesPerSecond a second with a burst of errorLineBurst. Anyone who
// can open a connection causes such a line, so they are bounded (R-SEC);
// the next line logged says how many were dropped.
func serverErrorLog(logger *slog.Logger) *log.Logger {
	w := &boundedLines{log: logger, lim: rate.NewLimiter(errorLinesPerSecond, errorLineBurst)}
	return log.New(w, "", 0)
}

const (
	errorLinesPerSecond = 10
	errorLineBurst      = 100
)

// boundedLines writes each line it gets as one warn log record while its
// token bucket lasts.
type boundedLines struct {
	log     *slog.Logger
	mu      sync.Mutex
	lim     *rate.Limiter
	dropped int
}

func (b *boundedLines) Write(p []byte) (int, error) {
	b.mu.Lock()
	if !b.lim.Allow() {
		b.dropped++
		b.mu.Unlock()
		return len(p), nil
	}
	dropped := b.dropped
	b.dropped = 0
	b.mu.Unlock()
	msg := vdibroker.Cut(strings.TrimRight(string(p), "\n"), vdibroker.MaxAuditField)
	if dropped > 0 {
		b.log.Warn(msg, "linesDropped", dropped)
	} else {
		b.log.Warn(msg)
	}
	return len(p), nil
}
