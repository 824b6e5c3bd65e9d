package broker

import (
	"slices"
	"sync"
	"time"

	"github.com/vdibroker/vdibroker"
)

// Idempotency keys for connect (R-C6): the first connect with a key runs;
// later and concurrent ones with the same key get its answer. Only
// successful answers are kept (an error may be retried), for idemTTL, at
// most idemMax keys (oldest dropped first), and at most idemPerUser of
// one end user's (R-SEC): a User token's keys, one connect every 2 s
// under its write budget (43,200 a day), would otherwise let three such
// tokens fill the whole cache within its day and push every other
// caller's keys out. Administrators' and service
// tokens have no bound of their own: a front end connecting a logon storm
// of distinct users through one token needs the whole cache.
const (
	idemTTL     = 24 * time.Hour
	idemMax     = 100000
	idemPerUser = 100
	// idemOrderSlack is how many dropped entries the expiry order may
	// hold beyond one a kept key before it is compacted.
	idemOrderSlack = 1024
)

type idemEntry struct {
	key     string
	caller  string // the end user whose key it is; empty for others
	done    chan struct{}
	answer  *vdibroker.ConnectAnswer // nil when the first request failed
	created time.Time
	gone    bool // no longer in the map
}

type idempotency struct {
	now func() time.Time
	mu  sync.Mutex
	m   map[string]*idemEntry
	// order is the entries in insertion order, for expiry: those gone
	// from the map (failed, or dropped by their user's bound) are passed
	// over, and compacted away when they outnumber the kept ones by
	// idemOrderSlack, so that neither they count toward idemMax (an end
	// user's dropped keys pushed every other caller's out) nor a key run
	// again is expired at its first place (holding back the expiry of
	// what followed it).
	order []*idemEntry
	// byUser holds each end user's entries, oldest first (some gone):
	// at most idemPerUser, and only while one of them is kept.
	byUser map[string][]*idemEntry
}

func newIdempotency(now func() time.Time) *idempotency {
	return &idempotency{now: now, m: make(map[string]*idemEntry), byUser: make(map[string][]*idemEntry)}
}

// do returns the kept answer for key, or runs fn and keeps its answer when
// fn reports it as keepable. user names the end user (a User principal)
// whose key it is, held to idemPerUser keys; empty for other callers.
func (c *idempotency) do(user, key string, fn func() (ans *vdibroker.ConnectAnswer, keep bool)) *vdibroker.ConnectAnswer {
	for {
		c.mu.Lock()
		c.expireLocked()
		e, ok := c.m[key]
		if !ok {
			e = &idemEntry{key: key, caller: user, done: make(chan struct{}), created: c.now()}
			c.m[key] = e
			c.order = append(c.order, e)
			if len(c.order) > 2*len(c.m)+idemOrderSlack {
				c.order = slices.DeleteFunc(c.order, func(e *idemEntry) bool { return e.gone })
			}
			if user != "" {
				c.keepUserLocked(e)
			}
			c.mu.Unlock()
			var ans *vdibroker.ConnectAnswer
			keep := false
			// Deferred so that a panic in fn (recovered by the middleware)
			// still releases the requests waiting on e.done, which would
			// otherwise wait forever.
			defer func() {
				c.mu.Lock()
				if keep {
					e.answer = ans
				} else {
					c.removeLocked(e)
				}
				close(e.done)
				c.mu.Unlock()
			}()
			ans, keep = fn()
			return ans
		}
		c.mu.Unlock()
		<-e.done
		if e.answer != nil {
			return e.answer
		}
		// The first request failed and its entry is gone: run again.
	}
}

// keepUserLocked adds e to its user's entries, dropping the user's oldest
// answered ones beyond idemPerUser (not one still running: those are
// bounded by the user's write budget).
func (c *idempotency) keepUserLocked(e *idemEntry) {
	list := c.byUser[e.caller]
	for len(list) > 0 && (list[0].gone || len(list) >= idemPerUser && isDone(list[0])) {
		if !list[0].gone {
			c.unmapLocked(list[0])
		}
		list = list[1:]
	}
	c.byUser[e.caller] = append(list, e)
}

// removeLocked takes e out of the map (its place in the expiry order is
// passed over when reached) and its user's entries from the oldest while
// they are gone, so that a user none of whose keys are kept has none.
func (c *idempotency) removeLocked(e *idemEntry) {
	c.unmapLocked(e)
	if e.caller == "" {
		return
	}
	list := c.byUser[e.caller]
	for len(list) > 0 && list[0].gone {
		list = list[1:]
	}
	if len(list) == 0 {
		delete(c.byUser, e.caller)
	} else {
		c.byUser[e.caller] = list
	}
}

// unmapLocked takes e out of the map.
func (c *idempotency) unmapLocked(e *idemEntry) {
	if c.m[e.key] == e {
		delete(c.m, e.key)
	}
	e.gone = true
}

// isDone reports whether e's first request has finished.
func isDone(e *idemEntry) bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

func (c *idempotency) expireLocked() {
	now := c.now()
	for len(c.order) > 0 {
		e := c.order[0]
		if !e.gone && len(c.m) <= idemMax && now.Sub(e.created) < idemTTL {
			break
		}
		if !e.gone {
			select {
			case <-e.done:
				c.removeLocked(e)
			default:
				// Still running: keep it (and what follows) for later,
				// even over idemMax, so it cannot stay in the map with no
				// place in the expiry order.
				return
			}
		}
		c.order[0] = nil
		c.order = c.order[1:]
	}
}
