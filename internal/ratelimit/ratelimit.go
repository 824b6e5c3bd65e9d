// Package ratelimit holds the token buckets the broker's limits per key
// use (R-SEC): failed authentications per client address (the API, the
// console's and the portal's sign-ins), heartbeats per host credential,
// the portal's anonymous requests per address. A bucket per key, at most
// 65,536 keys: a flood of new keys shares one overflow bucket, and never
// pushes out a key whose bucket has tokens spent.
package ratelimit

import (
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Keyed is a bounded map of token buckets by key (a client address, a
// host's credential).
type Keyed struct {
	mu    sync.Mutex
	m     map[string]*rate.Limiter
	every rate.Limit
	burst int
	max   int
	// overflow is the one bucket every new key shares while the map is
	// full of keys with state (a flood of addresses): the flood gets one
	// bucket, not a fresh one per address.
	overflow *rate.Limiter
	swept    time.Time
}

// maxKeys bounds a Keyed map.
const maxKeys = 1 << 16

// New returns buckets of perSecond tokens a second and burst tokens each.
func New(perSecond float64, burst int) *Keyed { return NewBounded(perSecond, burst, maxKeys) }

// NewBounded is New with at most max keys (tests make small maps).
func NewBounded(perSecond float64, burst, max int) *Keyed {
	return &Keyed{m: map[string]*rate.Limiter{}, every: rate.Limit(perSecond), burst: burst,
		max: max, overflow: rate.NewLimiter(rate.Limit(perSecond), burst)}
}

// get returns key's bucket at now. A full map first forgets the buckets
// that have filled up again, which are the same as new ones; it never
// forgets a bucket with tokens spent, so flooding it with new addresses
// does not give an address that was being throttled a fresh bucket
// (R-SEC).
func (l *Keyed) get(key string, now time.Time) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim, ok := l.m[key]
	if ok {
		return lim
	}
	if d := now.Sub(l.swept); len(l.m) >= l.max && (d >= time.Second || d <= -time.Second) {
		// At most a sweep a second: a flood must not make every new
		// address walk the whole map. Its callers read the time before
		// the lock, so a time a little before the last sweep's is
		// common under a flood and no reason to sweep again; a clock
		// set back a second or more (an injected one) sweeps at its
		// time.
		l.swept = now
		for k, b := range l.m {
			if b.TokensAt(now) >= float64(l.burst) {
				delete(l.m, k)
			}
		}
	}
	if len(l.m) >= l.max {
		return l.overflow
	}
	lim = rate.NewLimiter(l.every, l.burst)
	l.m[key] = lim
	return lim
}

// Spend takes one token of key's bucket at now, if any is left.
func (l *Keyed) Spend(key string, now time.Time) bool { return l.get(key, now).AllowN(now, 1) }

// Refund gives back to key's bucket at now the token a Spend took for
// something that then did not happen, so it is not counted against key;
// the bucket holds no more than its burst.
func (l *Keyed) Refund(key string, now time.Time) {
	// A negative take adds a token; the next take caps the bucket at its
	// burst (rate.Limiter.advance).
	l.get(key, now).AllowN(now, -1)
}

// Wait is how long key's bucket needs at now to hold a token (0: it
// holds one), taking nothing.
func (l *Keyed) Wait(key string, now time.Time) time.Duration {
	l.mu.Lock()
	lim, ok := l.m[key]
	if !ok && len(l.m) >= l.max {
		lim, ok = l.overflow, true
	}
	l.mu.Unlock()
	if !ok || l.every <= 0 {
		return 0
	}
	if t := lim.TokensAt(now); t < 1 {
		return time.Duration((1 - t) / float64(l.every) * float64(time.Second))
	}
	return 0
}

// Spent reports whether key's bucket is empty at now, taking nothing (a
// key without a bucket has a full one).
func (l *Keyed) Spent(key string, now time.Time) bool {
	l.mu.Lock()
	lim, ok := l.m[key]
	if !ok && len(l.m) >= l.max {
		lim, ok = l.overflow, true
	}
	l.mu.Unlock()
	return ok && lim.TokensAt(now) < 1
}

// Len is how many keys have a bucket of their own.
func (l *Keyed) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}

// Empty reports whether key's bucket has no token left at now.
func (l *Keyed) Empty(key string, now time.Time) bool { return l.get(key, now).TokensAt(now) < 1 }

// ClientAddr is the request's remote IP (without the port): the key of
// the limits per address.
func ClientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	// An IPv6 client has a /64 to itself (the least a site is given):
	// one bucket per /64, or every address of it would be a new bucket.
	if ip, err := netip.ParseAddr(host); err == nil && ip.Is6() && !ip.Is4In6() {
		if p, err := ip.Prefix(64); err == nil {
			return p.String()
		}
	}
	return host
}
