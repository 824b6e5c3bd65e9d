package http

import (
	"net"
	nethttp "net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/vdibroker/vdibroker"
)

// Rate limits (issue 14). They are aimed at what an attacker does, not at
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
const (
	AuthFailuresPerSecond = 5
	AuthFailureBurst      = 60
	HeartbeatsPerSecond   = 5
	HeartbeatBurst        = 120
)

// limiters is a bounded map of token buckets by key.
type limiters struct {
	mu    sync.Mutex
	m     map[string]*rate.Limiter
	every rate.Limit
	burst int
}

// maxLimiterKeys bounds a limiters map; past it the map starts over (a
// flood of new addresses costs buckets, never memory without bound).
const maxLimiterKeys = 1 << 16

func newLimiters(perSecond float64, burst int) *limiters {
	return &limiters{m: map[string]*rate.Limiter{}, every: rate.Limit(perSecond), burst: burst}
}

func (l *limiters) get(key string) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim, ok := l.m[key]
	if !ok {
		if len(l.m) >= maxLimiterKeys {
			l.m = map[string]*rate.Limiter{}
		}
		lim = rate.NewLimiter(l.every, l.burst)
		l.m[key] = lim
	}
	return lim
}

// spend takes one token of key's bucket, if any is left.
func (l *limiters) spend(key string) bool { return l.get(key).Allow() }

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
	return host
}
