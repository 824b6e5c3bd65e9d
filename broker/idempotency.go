package broker

import (
	"github.com/vdibroker/vdibroker"

	"sync"
	"time"
)

// Idempotency keys for connect (R-C6): the first connect with a key runs;
// later and concurrent ones with the same key get its answer. Only
// successful answers are kept (an error may be retried), for idemTTL, at
// most idemMax keys (oldest dropped first).
const (
	idemTTL = 24 * time.Hour
	idemMax = 100000
)

type idemEntry struct {
	done    chan struct{}
	answer  *vdibroker.ConnectAnswer // nil when the first request failed
	created time.Time
}

type idempotency struct {
	now   func() time.Time
	mu    sync.Mutex
	m     map[string]*idemEntry
	order []string // insertion order, for expiry
}

func newIdempotency(now func() time.Time) *idempotency {
	return &idempotency{now: now, m: make(map[string]*idemEntry)}
}

// do returns the kept answer for key, or runs fn and keeps its answer when
// fn reports it as keepable.
func (c *idempotency) do(key string, fn func() (ans *vdibroker.ConnectAnswer, keep bool)) *vdibroker.ConnectAnswer {
	for {
		c.mu.Lock()
		c.expireLocked()
		e, ok := c.m[key]
		if !ok {
			e = &idemEntry{done: make(chan struct{}), created: c.now()}
			c.m[key] = e
			c.order = append(c.order, key)
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
					delete(c.m, key)
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

func (c *idempotency) expireLocked() {
	now := c.now()
	for len(c.order) > 0 {
		k := c.order[0]
		e, ok := c.m[k]
		if ok && len(c.order) <= idemMax && now.Sub(e.created) < idemTTL {
			break
		}
		if ok {
			select {
			case <-e.done:
				delete(c.m, k)
			default:
				// Still running: keep it (and what follows) for later,
				// even over idemMax, so it cannot stay in the map with no
				// place in the expiry order.
				return
			}
		}
		c.order = c.order[1:]
	}
}
