package outage

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/vdibroker/vdibroker"
)

// Health is what the broker knows of its store: up, or down since when and
// why (R-OUT1). A store call that fails with anything but a domain error,
// or runs past the store timeout, is checked at once with a ping under a
// short deadline; a failed ping starts an outage, and a prober pings until
// the store answers again. Changes are logged once each.
type Health struct {
	log   *slog.Logger
	clock clock.WithTicker
	now   func() time.Time // clock.Now

	mu     sync.Mutex
	down   bool
	since  time.Time
	reason string
	past   time.Duration // total length of the outages that ended
	// lastSince and lastEnd are the last outage that ended (zero: none).
	lastSince, lastEnd time.Time
	// started is when the health was made: the broker's start.
	started  time.Time
	onUp     []func()
	probing  bool
	ping     func(ctx context.Context) error
	interval time.Duration // between pings of the watch and the probe
	timeout  time.Duration // of one ping: the store timeout
	stop     <-chan struct{}
}

// HealthConfig is what a Health needs.
type HealthConfig struct {
	// Ping asks the store whether it answers (the store's own Ping).
	Ping func(ctx context.Context) error
	// Timeout bounds a ping: the store timeout.
	Timeout time.Duration
	// Interval is the wait between the pings of the watch and the probe
	// (0 = the smaller of Timeout and 1s).
	Interval time.Duration
	Logger   *slog.Logger // nil discards logs
	// Clock is the health's time and the tickers of its watch and probe
	// (nil = the real clock).
	Clock clock.WithTicker
	// Stop ends the watch and the probe.
	Stop <-chan struct{}
}

// NewHealth returns the health of a store that is up; Watch starts
// watching it.
func NewHealth(cfg HealthConfig) *Health {
	h := &Health{log: cfg.Logger, clock: cfg.Clock, ping: cfg.Ping, timeout: cfg.Timeout, interval: cfg.Interval, stop: cfg.Stop}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.clock == nil {
		h.clock = clock.RealClock{}
	}
	h.now = h.clock.Now
	h.started = h.now()
	if h.interval <= 0 {
		h.interval = min(h.timeout, time.Second)
	}
	return h
}

// OnUp adds hooks that run, in order, each time an outage ends.
func (h *Health) OnUp(hooks ...func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.onUp = append(h.onUp, hooks...)
}

// Status returns the store's health now.
func (h *Health) Status() vdibroker.HealthStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	total := h.past
	if h.down {
		total += h.now().Sub(h.since)
	}
	return vdibroker.HealthStatus{Up: !h.down, Since: h.since, Reason: h.reason, OutageSeconds: total.Seconds()}
}

// HeardSince is since when the broker has heard its hosts' heartbeats in
// its store: its start, or the end of its last store outage, whichever is
// later (now during an outage: the heartbeats are held in memory, not
// written). A host whose last heartbeat in the store is older than its
// pool's heartbeat timeout has been silent only if this is older too: at
// a broker's start (a restart, an upgrade) or an outage's end every host
// looks silent until its agent's next heartbeat lands (R-A4).
func (h *Health) HeardSince() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.down {
		return h.now()
	}
	if h.lastEnd.After(h.started) {
		return h.lastEnd
	}
	return h.started
}

// Down reports whether an outage is under way.
func (h *Health) Down() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.down
}

// fail records that the store did not answer: reason is the ping's error.
func (h *Health) fail(reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.down {
		return
	}
	h.down, h.since, h.reason = true, h.now(), reason
	h.log.Error("store unavailable: brokering from memory until it is back", "reason", reason)
	if !h.probing {
		h.probing = true
		go h.probe(h.clock.NewTicker(h.interval))
	}
}

// recovered ends an outage and runs the recovery hooks (outside the lock).
// The prober calls it and ends with it: it is no longer probing from the
// moment the outage ends, so an outage that starts again while the hooks
// run (a flapping failover) starts a prober of its own.
func (h *Health) recovered() {
	h.mu.Lock()
	h.probing = false
	if !h.down {
		h.mu.Unlock()
		return
	}
	d := h.now().Sub(h.since)
	h.past += d
	h.lastSince, h.lastEnd = h.since, h.since.Add(d)
	h.down, h.since, h.reason = false, time.Time{}, ""
	hooks := h.onUp
	h.mu.Unlock()
	h.log.Info("store available again", "outage", d.Round(time.Millisecond))
	for _, f := range hooks {
		f()
	}
}

// Watch starts pinging the store every interval while it is up, so an
// outage is known within about two intervals even when no request comes
// (the probe takes over while it is down), until Stop.
func (h *Health) Watch() {
	t := h.clock.NewTicker(h.interval)
	go h.watch(t)
}

func (h *Health) watch(t clock.Ticker) {
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C():
		}
		if h.Down() {
			continue
		}
		if err := h.confirm(h.timeout); err != nil {
			h.fail(err.Error())
		}
	}
}

// confirm pings the store and, when that fails, once more a moment later:
// an outage is declared on two failures, not on one that a full connection
// pool or a lost packet explains (every request then fails at once until
// the store answers, so a false outage is costly).
func (h *Health) confirm(timeout time.Duration) error {
	var err error
	for attempt := range 2 {
		if attempt > 0 {
			select {
			case <-h.stop:
				return err
			case <-h.clock.After(confirmPause):
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		err = h.ping(ctx)
		cancel()
		if err == nil {
			return nil
		}
	}
	return err
}

// confirmTimeout bounds each ping of confirm: a request that failed has
// waited already, and its answer should not wait two store timeouts more.
func (h *Health) confirmTimeout() time.Duration { return min(h.timeout, time.Second) }

// confirmPause is the wait between the two pings of confirm.
const confirmPause = 200 * time.Millisecond

// probe pings the store every interval until it answers.
func (h *Health) probe(t clock.Ticker) {
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			h.mu.Lock()
			h.probing = false
			h.mu.Unlock()
			return
		case <-t.C():
		}
		ctx, cancel := context.WithTimeout(context.Background(), h.timeout)
		err := h.ping(ctx)
		cancel()
		if err == nil {
			h.recovered() // no longer probing from here on
			return
		}
	}
}

// check runs after a store call that failed with err: a domain error
// (NotFound, Conflict...) says the store answered; anything else is
// checked with a ping. It returns the error to answer: StoreUnavailable
// while the store is down, err otherwise.
func (h *Health) check(err error) error {
	if err == nil || vdibroker.ErrorCode(err) != vdibroker.EInternal {
		return err
	}
	if !h.Down() && errors.Is(err, vdibroker.ErrStoreWrite) {
		// The database said it cannot write (disk full, read-only,
		// failing): no ping needed, and a read-only ping could pass.
		h.fail(err.Error())
	}
	if !h.Down() {
		perr := h.confirm(h.confirmTimeout())
		if perr == nil {
			if errors.Is(err, context.DeadlineExceeded) {
				// The store answers pings but not this call in time
				// (overloaded, a lock held): not an outage, but the
				// caller must not wait longer.
				return unavailable(err)
			}
			return err
		}
		h.fail(perr.Error())
	}
	return unavailable(err)
}

// retryAfter is what a refusal during an outage tells the caller to wait.
const retryAfter = 5 * time.Second

func unavailable(cause error) error {
	return &storeDown{cause: cause}
}

// storeDown is a StoreUnavailable *vdibroker.Error that keeps its cause
// for the log and errors.Is.
type storeDown struct{ cause error }

func (e *storeDown) Error() string { return "store unavailable: " + e.cause.Error() }
func (e *storeDown) Unwrap() []error {
	return []error{e.cause, &vdibroker.Error{Code: vdibroker.EStoreUnavailable,
		Message:    "the broker cannot reach its database right now", // the wait: retryAfter, as the Retry-After
		RetryAfter: retryAfter}}
}

// Credit moves a heartbeat time that fell in the last outage, or shortly
// before it, forward by the outage's length (never past its end): the
// outage does not count against a host's heartbeat age (R-H1, R-OUT5). A host's
// heartbeats during an outage may have gone to another replica, which
// writes them only once it sees the store again, a moment after this one
// does; meanwhile the store's heartbeat time is from before the outage,
// and R-C1 would end every session on the host as if it were Unavailable.
// A host that really went silent turns Unavailable heartbeatTimeout after
// the end of the outage. at nil is returned as is.
func (h *Health) Credit(at *time.Time) *time.Time {
	if at == nil || h == nil {
		return nil
	}
	h.mu.Lock()
	since, end := h.lastSince, h.lastEnd
	h.mu.Unlock()
	if end.IsZero() || !at.Before(end) {
		return at
	}
	moved := at.Add(end.Sub(since))
	if moved.After(end) {
		moved = end
	}
	return &moved
}
