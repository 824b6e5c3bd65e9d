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
// most idemMax keys and idemMaxBytes of them (the oldest answered dropped
// first), and at most idemPerUser of one end user's (R-SEC): a User
// token's keys, one connect every 2 s under its write budget (43,200 a
// day), would otherwise let three such tokens fill the whole cache within
// its day and push every other caller's keys out. Administrators' and
// service tokens have no bound of their own: a front end connecting a
// logon storm of distinct users through one token needs the whole cache.
//
// A key dropped (expired, or pushed out by a bound) is no longer known
// here: its connect run again is answered by R-C1's reconnect (the user's
// session in the pool, recorded in the database), and the store's unique
// index refuses a second open session of the user in a pooled pool
// (R-C6), so the cache is not what keeps a retried connect from placing a
// second session. A connect still running is never dropped: a concurrent
// one with its key waits for its answer rather than running beside it.
const (
	idemTTL     = 24 * time.Hour
	idemMax     = 100000
	idemPerUser = 100
	// idemMaxBytes bounds the bytes the kept answers hold (idemEntrySize,
	// R-SEC): the largest answer a connect returns (a RemoteApp with the
	// longest names and command line, a pool's longest customRdpProperty,
	// a gateway token; TestIdempotencyLargestAnswer measures it) holds
	// about 33 KB, so idemMax of them would be 3.3 GB; 128 MiB holds 4,000
	// of those, or 70,000 answers of a desktop through the gateway (under
	// 2 KB each).
	idemMaxBytes = 128 << 20
	// idemOrderSlack is how many dropped entries the expiry order may
	// hold beyond one a kept key before it is compacted.
	idemOrderSlack = 1024
)

// IdempotencyMaxKeys and IdempotencyMaxBytes are the cache's bounds as
// the documentation states them (docs/limits_test.go).
const (
	IdempotencyMaxKeys  = idemMax
	IdempotencyMaxBytes = idemMaxBytes
)

// idemOverhead is what an entry holds beside its strings' bytes: the
// entry (96 bytes), its done channel (96), the answer's fields (eight
// string headers and the rest: 160), its slots in the map, the expiry
// order and its user's list, and the allocator's rounding, rounded up.
const idemOverhead = 512

// idemEntrySize is the bytes an entry for key and caller keeping a holds
// in memory.
func idemEntrySize(key, caller string, a *vdibroker.ConnectAnswer) int64 {
	n := idemOverhead + len(key) + len(caller)
	if a != nil {
		r := &a.ConnectResponse
		n += len(r.SessionID) + len(r.User) + len(r.HostPool) + len(r.SessionHost) + len(r.Address) +
			len(r.State) + len(r.RDPFile) + len(r.Gateway)
	}
	return int64(n)
}

type idemEntry struct {
	key    string
	caller string // the end user whose key it is; empty for others
	done   chan struct{}
	answer *vdibroker.ConnectAnswer // nil when the first request failed
	// kept is when the answer was kept, size the bytes it holds (counted
	// in idempotency.bytes while it is in the map).
	kept time.Time
	size int64
	gone bool // no longer in the map
}

type idempotency struct {
	now func() time.Time
	// maxBytes bounds bytes (idemMaxBytes; smaller in tests).
	maxBytes int64
	mu       sync.Mutex
	m        map[string]*idemEntry
	// bytes is the sum of the sizes of the answers kept in m.
	bytes int64
	// order is the kept entries in the order they were answered, for
	// expiry and the bounds (a connect still running is not in it, so it
	// neither holds back the dropping of those answered before it nor is
	// dropped itself): those gone from the map (dropped by their user's
	// bound) are passed over, and compacted away when they outnumber the
	// kept ones by idemOrderSlack, so that neither they count toward
	// idemMax (an end user's dropped keys pushed every other caller's
	// out) nor a key run again is expired at its first place (holding
	// back the expiry of what followed it).
	order []*idemEntry
	// byUser holds each end user's entries, oldest first (some gone):
	// at most idemPerUser, and only while one of them is kept.
	byUser map[string][]*idemEntry
}

func newIdempotency(now func() time.Time) *idempotency {
	return &idempotency{now: now, maxBytes: idemMaxBytes, m: make(map[string]*idemEntry), byUser: make(map[string][]*idemEntry)}
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
			e = &idemEntry{key: key, caller: user, done: make(chan struct{})}
			c.m[key] = e
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
				if keep && ans != nil {
					// Set even when too large to keep: those waiting for
					// it take it.
					e.answer = ans
					c.keepLocked(e)
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

// keepLocked keeps e's answer within the bounds: it takes its place at
// the end of the expiry order, and the oldest answered go while the
// cache holds more than idemMax keys or maxBytes. An answer larger than
// maxBytes alone is not kept, and no other goes for it.
func (c *idempotency) keepLocked(e *idemEntry) {
	if e.gone {
		return // never while it ran; kept out of the count if ever
	}
	size := idemEntrySize(e.key, e.caller, e.answer)
	if size > c.maxBytes {
		c.removeLocked(e)
		return
	}
	e.kept, e.size = c.now(), size
	c.bytes += size
	c.order = append(c.order, e)
	if len(c.order) > 2*len(c.m)+idemOrderSlack {
		c.order = slices.DeleteFunc(c.order, func(e *idemEntry) bool { return e.gone })
	}
	c.expireLocked()
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

// unmapLocked takes e out of the map, and its answer's bytes out of the
// count.
func (c *idempotency) unmapLocked(e *idemEntry) {
	if e.gone {
		return
	}
	if c.m[e.key] == e {
		delete(c.m, e.key)
	}
	e.gone = true
	c.bytes -= e.size
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

// expireLocked drops the answers kept idemTTL, then the oldest answered
// while the cache holds more than idemMax keys or maxBytes. Connects
// still running are not in the order: never dropped, they count toward
// idemMax (not toward maxBytes, having no answer yet) until answered.
func (c *idempotency) expireLocked() {
	now := c.now()
	for len(c.order) > 0 {
		e := c.order[0]
		if !e.gone && len(c.m) <= idemMax && c.bytes <= c.maxBytes && now.Sub(e.kept) < idemTTL {
			break
		}
		if !e.gone {
			c.removeLocked(e)
		}
		c.order[0] = nil
		c.order = c.order[1:]
	}
}
