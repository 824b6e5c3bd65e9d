package vdibroker

import (
	"context"
	"strconv"
	"strings"
	"time"
)

// Waiting for a starting host (R-U4). A connect that finds no capacity
// while start VM on connect starts a host is answered 503 HostStarting
// (R-A4); a client that asks to wait (POST .../connect?wait=90s) is held
// instead until the host takes the session, and answered with it, or with
// the 503 when the wait is over. The broker waits on events (a host of
// the pool turning placeable: its agent's heartbeat, a power state
// change, a refresh of the pool's view that finds one), never by
// connecting again on a timer.

// HostStartTimeout is how long a started host may take to heartbeat
// (power.StartTimeout, R-A4): after it, start VM on connect no longer
// counts on it. No connect waits longer.
const HostStartTimeout = 10 * time.Minute

// MaxConnectWait is the longest ?wait= a connect may ask: the start
// timeout. A server bounds it further (serve --max-connect-wait).
const MaxConnectWait = HostStartTimeout

// ParseConnectWait reads a connect's ?wait=: a Go duration ("90s",
// "2m") or whole seconds ("90"), from 0 (do not wait) to MaxConnectWait.
// Anything else is InvalidArgument on field wait, naming the range. It is
// a pure function of its input (fuzzed).
func ParseConnectWait(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	bad := func() error {
		return FieldError("wait", "must be a duration from 0s to %s, such as 90s or 2m (or whole seconds: 90), got %q", MaxConnectWait, Cut(s, 64))
	}
	if len(s) > 32 {
		return 0, bad()
	}
	var d time.Duration
	if n, err := strconv.Atoi(s); err == nil {
		if n < 0 || n > int(MaxConnectWait/time.Second) {
			return 0, bad()
		}
		d = time.Duration(n) * time.Second
	} else {
		if strings.HasPrefix(s, "+") || strings.HasPrefix(s, "-") {
			return 0, bad()
		}
		if d, err = time.ParseDuration(s); err != nil {
			return 0, bad()
		}
	}
	if d < 0 || d > MaxConnectWait {
		return 0, bad()
	}
	return d, nil
}

// WaitEvent is what a held connect tells its observer (WithWaitObserver):
// it began to wait for a starting host (Host, when the broker started one
// for this user or it is the user's own), or a host of the pool turned
// placeable and the connect is decided again.
type WaitEvent struct {
	// Waiting: the connect is held for a starting host; false: it is
	// decided again.
	Waiting  bool
	HostPool string
	Host     string
	// Until is when the wait ends at the latest.
	Until time.Time
}

type waitObserverKey struct{}

// WithWaitObserver returns ctx carrying f, told of a held connect's
// progress (the user portal shows it while its launch waits). f must be
// quick and must not block.
func WithWaitObserver(ctx context.Context, f func(WaitEvent)) context.Context {
	return context.WithValue(ctx, waitObserverKey{}, f)
}

// ObserveWait tells ctx's observer of e, if there is one.
func ObserveWait(ctx context.Context, e WaitEvent) {
	if f, ok := ctx.Value(waitObserverKey{}).(func(WaitEvent)); ok && f != nil {
		f(e)
	}
}
