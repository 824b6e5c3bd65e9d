package http

import (
	"net"
	nethttp "net/http"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/vdibroker/vdibroker"
)

// Rate limits (R-SEC). They are aimed at what an attacker does, not at
// what a busy pod does: a logon storm of valid tokens is never limited.
//   - Failed authentication per client address: every 401 spends a token
//     of the address's bucket (AuthFailuresPerSecond, burst
//     AuthFailureBurst); while it is empty the address's failed attempts
//     are answered 429 (and not audited one by one), so tokens and
//     credentials cannot be guessed at speed. A request that authenticates
//     is never refused for its address.
//   - Heartbeats per host credential (HeartbeatsPerSecond, burst
//     HeartbeatBurst): an agent sends one every 10 s; a stolen or broken
//     one cannot flood the shared write batch.
//   - Access log lines of requests whose caller proved no credential
//     (refused ones, health probes, the console's pages before sign-in;
//     RefusedLogLinesPerSecond, burst RefusedLogLineBurst, for the whole
//     server): beyond it they are dropped and counted, and the next line
//     logged says how many (refusedLinesDropped).
const (
	AuthFailuresPerSecond    = 5
	AuthFailureBurst         = 60
	HeartbeatsPerSecond      = 5
	HeartbeatBurst           = 120
	RefusedLogLinesPerSecond = 10
	RefusedLogLineBurst      = 100
)

// lineBudget is a token bucket of log lines that counts what it drops.
type lineBudget struct {
	mu      sync.Mutex
	lim     *rate.Limiter
	dropped int
}

func newLineBudget(perSecond float64, burst int) *lineBudget {
	return &lineBudget{lim: rate.NewLimiter(rate.Limit(perSecond), burst)}
}

// take spends a line at now if one is left, returning how many were
// dropped since the last one taken.
func (b *lineBudget) take(now time.Time) (dropped int, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.lim.AllowN(now, 1) {
		b.dropped++
		return 0, false
	}
	dropped, b.dropped = b.dropped, 0
	return dropped, true
}

// limiters is a bounded map of token buckets by key.
type limiters struct {
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

// maxLimiterKeys bounds a limiters map.
const maxLimiterKeys = 1 << 16

func newLimiters(perSecond float64, burst int) *limiters {
	return &limiters{m: map[string]*rate.Limiter{}, every: rate.Limit(perSecond), burst: burst,
		max: maxLimiterKeys, overflow: rate.NewLimiter(rate.Limit(perSecond), burst)}
}

// get returns key's bucket. A full map first forgets the buckets that
// have filled up again, which are the same as new ones; it never forgets
// a bucket with tokens spent, so flooding it with new addresses does not
// give an address that was being throttled a fresh bucket (R-SEC).
func (l *limiters) get(key string) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim, ok := l.m[key]
	if ok {
		return lim
	}
	if now := time.Now(); len(l.m) >= l.max && now.Sub(l.swept) >= time.Second {
		// At most a sweep a second: a flood must not make every new
		// address walk the whole map.
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

// spend takes one token of key's bucket at now, if any is left.
func (l *limiters) spend(key string, now time.Time) bool { return l.get(key).AllowN(now, 1) }

// spent reports whether key's bucket is empty at now, taking nothing (a
// key without a bucket has a full one).
func (l *limiters) spent(key string, now time.Time) bool {
	l.mu.Lock()
	lim, ok := l.m[key]
	if !ok && len(l.m) >= l.max {
		lim, ok = l.overflow, true
	}
	l.mu.Unlock()
	return ok && lim.TokensAt(now) < 1
}

// Throttled reports whether r's address has used up its failed
// authentications (R-SEC), for other adapters that take credentials from
// anonymous callers: the console refuses its OpenID Connect callback
// from such an address before it asks the provider anything.
func (s *Server) Throttled(r *nethttp.Request) bool {
	return s.authFailures.spent(clientAddr(r), s.now())
}

// FailedAuthentication spends one of r's address's failed
// authentications, and reports false when none was left (the caller then
// answers 429 and records nothing).
func (s *Server) FailedAuthentication(r *nethttp.Request) bool {
	return s.authFailures.spend(clientAddr(r), s.now())
}

// empty reports whether key's bucket has no token left at now.
func (l *limiters) empty(key string, now time.Time) bool { return l.get(key).TokensAt(now) < 1 }

// throttled is the 429 answer, with how long to wait.
func throttled(what string, perSecond float64) error {
	return &vdibroker.Error{Code: vdibroker.ETooManyRequests,
		Message:    what + "; slow down and try again",
		RetryAfter: time.Duration(float64(time.Second) / perSecond)}
}

// clientAddr is the request's remote IP (without the port).
func clientAddr(r *nethttp.Request) string {
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
