package http

import (
	nethttp "net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/internal/ratelimit"
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
//   - Sign-ins (POST /signin) per principal (SigninsPerPrincipal a
//     minute, as many at once): each is an audit entry, and any
//     principal, a User token too, may call it.
//   - Logoffs and disconnects of sessions in other pods (R-U3 across the
//     federation) per principal (GlobalSessionCommandsPerPrincipal a
//     minute, as many at once): each is a pod-to-pod call, spending this
//     pod's budget of calls at the peer (R-G5), and an audit entry on
//     both pods, and an end user may ask for her own.
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
	// SigninsPerPrincipal is how many POST /signin one principal makes
	// at once, and how many a minute: as many as the web sessions take
	// (websession.DefaultLimits), so no sign-in of the console or the
	// portal is refused for it.
	SigninsPerPrincipal = 16
	// GlobalSessionCommandsPerPrincipal is how many logoffs and
	// disconnects of sessions in other pods one principal asks for at
	// once, and how many a minute.
	GlobalSessionCommandsPerPrincipal = 60
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

// Throttled reports whether r's address has used up its failed
// authentications (R-SEC), for other adapters that take credentials from
// anonymous callers: the console refuses its OpenID Connect callback
// from such an address before it asks the provider anything.
func (s *Server) Throttled(r *nethttp.Request) bool {
	return s.authFailures.Spent(ratelimit.ClientAddr(r), s.now())
}

// FailedAuthentication spends one of r's address's failed
// authentications, and reports false when none was left (the caller then
// answers 429 and records nothing).
func (s *Server) FailedAuthentication(r *nethttp.Request) bool {
	return s.authFailures.Spend(ratelimit.ClientAddr(r), s.now())
}

// throttled is the 429 answer, with how long to wait.
func throttled(what string, perSecond float64) error {
	return &vdibroker.Error{Code: vdibroker.ETooManyRequests,
		Message:    what + "; slow down and try again",
		RetryAfter: time.Duration(float64(time.Second) / perSecond)}
}
