package broker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/power"
)

// Held connects (R-U4). A connect with a wait that start VM on connect
// answered HostStarting (R-A4) is held until a host of its pool turns
// placeable, then decided again, until it is answered otherwise or its
// wait is over (the 503 then). The events are the views' (Config.Turned
// of package poolview: a host's first heartbeat after its start, seen on
// this replica, or in the maintenance tick's reading of the pool, which
// goes on for a pool with held connects, so a host heartbeating to
// another replica is seen within a tick) and the power service's changes
// of a host's power state. Nothing connects again on a timer. The held
// connects are bounded: DefaultMaxWaiters at once, one per user.

// Defaults of Config.MaxConnectWait and Config.MaxConnectWaiters.
const (
	DefaultMaxConnectWait = 5 * time.Minute
	DefaultMaxWaiters     = 1000
)

// waits are the connects held for a starting host: how many, which users
// (one each, by folded name, R-E5) and, per pool, the event they wait for.
type waits struct {
	mu    sync.Mutex
	max   int
	n     int
	users map[string]bool
	pools map[string]*poolWaits
}

// poolWaits is one pool's event: ch is closed when a host of the pool
// turns placeable, and replaced; n counts the connects watching it.
type poolWaits struct {
	ch chan struct{}
	n  int
}

func newWaits(max int) *waits {
	if max <= 0 {
		max = DefaultMaxWaiters
	}
	return &waits{max: max, users: map[string]bool{}, pools: map[string]*poolWaits{}}
}

// watch registers interest in pool's next event and returns its channel;
// unwatch ends the interest.
func (w *waits) watch(pool string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	pw := w.pools[pool]
	if pw == nil {
		pw = &poolWaits{ch: make(chan struct{})}
		w.pools[pool] = pw
	}
	pw.n++
	return pw.ch
}

func (w *waits) unwatch(pool string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if pw := w.pools[pool]; pw != nil {
		if pw.n--; pw.n <= 0 {
			delete(w.pools, pool)
		}
	}
}

// next returns pool's current channel (after an event woke a watcher).
func (w *waits) next(pool string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if pw := w.pools[pool]; pw != nil {
		return pw.ch
	}
	return nil // never: the caller watches the pool
}

// signal wakes pool's watchers, if any (a host turned placeable).
func (w *waits) signal(pool string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if pw := w.pools[pool]; pw != nil {
		close(pw.ch)
		pw.ch = make(chan struct{})
	}
}

// watching reports whether a connect waits in pool: its view is read
// again by every maintenance tick.
func (w *waits) watching(pool string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pools[pool] != nil
}

// admit takes a held connect's place for user: "" and a release, or why
// it may not be held (the user has one held already, or the broker holds
// as many as it may).
func (w *waits) admit(user string) (release func(), why string) {
	key := vdibroker.FoldUser(user)
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.users[key]:
		return nil, fmt.Sprintf("a connect of user %q is held already (one per user)", user)
	case w.n >= w.max:
		return nil, fmt.Sprintf("the broker holds %d connects already", w.max)
	}
	w.users[key] = true
	w.n++
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.users, key)
		w.n--
	}, ""
}

// held reports how many connects are held.
func (w *waits) held() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// placeOrWait is place, but a connect with a wait that is answered
// HostStarting is held (R-U4): at most the smallest of its wait, the
// server's maximum and the start timeout (vdibroker.HostStartTimeout),
// decided again whenever a host of the pool turns placeable (and when the
// start of a Personal user's own host it waits for times out, R-A4), and
// answered with the session once a host takes it, or, once the wait is
// over, with what a decision then answers (the 503 with its Retry-After
// as of then, while a host still starts). A connect that may not be held
// (one per user, the cap) gets the 503 at once, saying why.
func (s *Service) placeOrWait(ctx context.Context, pool string, req vdibroker.ConnectRequest) (*vdibroker.ConnectAnswer, error) {
	if req.Wait <= 0 || req.DryRun {
		return s.place(ctx, pool, req)
	}
	// Watching before the first decision: a host that turns placeable
	// while it runs is not missed.
	ch := s.waits.watch(pool)
	defer s.waits.unwatch(pool)
	a, err := s.place(ctx, pool, req)
	if vdibroker.ErrorCode(err) != vdibroker.EHostStarting {
		return a, err
	}
	release, why := s.waits.admit(req.User)
	if release == nil {
		s.log.InfoContext(ctx, "connect not held for a starting host", "pool", pool, "user", req.User, "why", why)
		return nil, notHeld(err, "not held: "+why)
	}
	defer release()
	bound := min(req.Wait, s.maxWait, vdibroker.HostStartTimeout)
	start := s.now()
	timer := s.clock.NewTimer(bound)
	defer timer.Stop()
	// due fires when the start of a Personal user's own host times out
	// within the wait (power.StartTimesOut, R-A4): no event comes then,
	// and from then her connect is answered otherwise (for an
	// administrator), so it is decided again, not held until the wait
	// ends on a start that timed out.
	var due <-chan time.Time
	var dueTimer clock.Timer
	arm := func(err error) {
		if dueTimer != nil {
			dueTimer.Stop()
			dueTimer, due = nil, nil
		}
		if at := power.StartTimesOut(err); !at.IsZero() && at.Before(start.Add(bound)) {
			dueTimer = s.clock.NewTimer(max(at.Sub(s.now()), 0))
			due = dueTimer.C()
		}
	}
	defer func() { arm(nil) }()
	arm(err)
	vdibroker.ObserveWait(ctx, vdibroker.WaitEvent{Waiting: true, HostPool: pool, Host: power.StartingHost(err), Until: start.Add(bound)})
	s.log.InfoContext(ctx, "connect held for a starting host", "pool", pool, "user", req.User, "wait", bound)
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.stop:
			return nil, err
		case <-timer.C():
			// Decided once more: the answer is what holds now, not the
			// first decision's (whose Retry-After may reach past the
			// start's timeout of a Personal user's own host, R-A4, or
			// whose host's start timed out meanwhile).
			waited := s.now().Sub(start).Round(time.Second)
			a, perr := s.place(ctx, pool, req)
			if vdibroker.ErrorCode(perr) != vdibroker.EHostStarting {
				return a, perr
			}
			return nil, notHeld(perr, fmt.Sprintf("waited %s for a starting host", waited))
		case <-due:
		case <-ch:
		}
		ch = s.waits.next(pool)
		host := power.StartingHost(err)
		vdibroker.ObserveWait(ctx, vdibroker.WaitEvent{HostPool: pool, Host: host, Until: start.Add(bound)})
		a, perr := s.place(ctx, pool, req)
		if host != "" && vdibroker.ErrorCode(perr) == vdibroker.ENoCapacity {
			// The host it waits for is no longer starting in the store
			// (the power service reads it there after the view), but the
			// view was read before its first heartbeat landed (taken by
			// another replica): decide once more, rather than answer
			// NoCapacity as it comes up. Reading that host again first
			// lets the decision go without re-reading the whole pool.
			s.views.RefreshHost(ctx, pool, host)
			a, perr = s.place(ctx, pool, req)
		}
		if vdibroker.ErrorCode(perr) != vdibroker.EHostStarting {
			return a, perr
		}
		err = perr
		arm(err)
	}
}

// notHeld is HostStarting err (R-A4, with its Retry-After) saying why it
// was not held, or no longer.
func notHeld(err error, why string) error {
	return &vdibroker.Error{Code: vdibroker.EHostStarting, Message: vdibroker.ErrorMessage(err) + " (" + why + ")",
		RetryAfter: vdibroker.ErrorRetryAfter(err)}
}

// HeldConnects is how many connects wait for a starting host now (R-U4).
func (s *Service) HeldConnects() int { return s.waits.held() }
