package http

import (
	nethttp "net/http"
	"strings"
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
//   - Re-keys per host (ReKeysPerHost a minute, as many at once): a
//     registration that carries a host's current credential (the re-key
//     of POST /agent/register) spends its host's bucket. Each re-key is
//     an audit entry, a write of the host's row and a log line, and a
//     holder of a registration token and the credential could re-key as
//     fast as the server answers. The agent never re-keys with its
//     credential (it registers with its token alone, after an admin reset
//     its registration too), so no agent is refused for it.
//   - New hosts per registration token (NewHostsPerTokenBurst at once,
//     then NewHostsPerTokenPerMinute a minute): a registration that
//     would create a host spends its token's bucket, asked by the store
//     once the token, the name and maxHosts are checked
//     (RegisterRequest.AdmitNewHost). A token with maxHosts 0 registers
//     any number of hosts, and sits on golden images: each new host is
//     a row, an audit entry and a log line, and its holder could create
//     them as fast as the server answers. The burst takes a golden
//     image's hundreds of clones at once; past it the agent waits for
//     Retry-After and registers again. Re-keys (bounded above), claims
//     of hosts an admin created and registrations after an admin's
//     reset create no host and spend nothing. The bucket is the token's
//     id, made only once the token is found valid, so a caller without
//     one makes none. A host is admitted once its row is written, so a
//     registration that loses its name to another at once spends none.
//     A token refused once is noted (spentTokens): while its bucket is
//     empty, a registration that a read finds would create a host is
//     refused before the store opens a write transaction
//     (refuseSpentNewHost), so agents waiting on a token cost reads.
//   - Sign-ins (POST /signin) per principal (SigninsPerPrincipal a
//     minute, as many at once): each is an audit entry, and any
//     principal, a User token too, may call it.
//   - Writes of an end user (role User) per principal (UserWritesPerSecond,
//     burst UserWriteBurst): every request a User token or a portal
//     sign-in makes that is not a read (GET) and not a sign-in or
//     sign-out (bounded above) spends one: her connects (a pool's
//     desktop, an application group's, a global entitlement's; dry runs
//     too: they decide, and a global one asks other pods), logoffs and
//     disconnects of her own sessions (R-U3), and the portal's launches,
//     which connect through it (R-U7). Each was a session row, a
//     decision record, a command row and audit entries; past it the
//     write is answered 429 before anything is read or written, and not
//     audited. Contributors, Helpdesk and the admin token have no such
//     limit: theirs are an administrator's credentials, whose scripts
//     log off a host's sessions or connect users on their behalf by the
//     thousand (a logon storm through a front end), and are never
//     throttled.
//   - Logoffs and disconnects of sessions in other pods (R-U3 across the
//     federation) per principal (GlobalSessionCommandsPerPrincipal a
//     minute, as many at once): each is a pod-to-pod call, spending this
//     pod's budget of calls at the peer (R-G5), and an audit entry on
//     both pods, and an end user may ask for her own.
//   - Listings of a user's sessions in other pods (R-U3 across the
//     federation) per principal (GlobalSessionListsPerPrincipal a
//     minute, as many at once): each is a round of pod-to-pod calls (the
//     directory pod's look-up, the sessions of each pod asked), spending
//     this pod's budget of calls at its peers (R-G5), which every user's
//     global connect shares, and on PostgreSQL a nonce row at each.
//     Listings at once share one round; one after another each made its
//     own, so a User token (or a Reader's) in a loop could spend the
//     budget for everyone.
//   - Writes of the federation document by a peer (PUT
//     /api/v1/pod/federation, R-G5) per calling pod (PodDocumentsPerPod a
//     minute, as many at once): each is an audit entry (and its log
//     line) holding the document before and after, up to a megabyte,
//     and a peer's console sends one per administrator's change; a
//     holder of the federation secret writing document after document
//     (each a generation higher, a thousand a second within the nonce
//     budget) filled the audit trail at gigabytes a minute.
//   - Logoffs and disconnects of this pod's sessions by a peer (POST
//     /api/v1/pod/sessions/command, R-U3 across the federation) per
//     calling pod (PodSessionCommandsPerPod a minute, as many at once):
//     each is an audit entry here, also when it asks again for a
//     command still queued (R-S4), which changes nothing; the peer
//     bounds each of its principals, but a holder of the federation
//     secret signing as a pod asked for the disconnect of one session
//     over and over, an entry at each call, as fast as the nonce budget
//     allows (60,000 a minute).
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
	// UserWriteBurst is how many writes an end user makes at once, and
	// UserWritesPerSecond how fast they come back (one every 2 s, 30 a
	// minute): a user opens a few desktops and apps a minute at most, and
	// a logon that retries with ?wait=, a launch in the portal (one
	// connect) and the reconnects of a flaky network stay well within.
	UserWriteBurst      = 30
	UserWritesPerSecond = 0.5
	// GlobalSessionCommandsPerPrincipal is how many logoffs and
	// disconnects of sessions in other pods one principal asks for at
	// once, and how many a minute.
	GlobalSessionCommandsPerPrincipal = 60
	// GlobalSessionListsPerPrincipal is how many listings of a user's
	// sessions in other pods one principal asks for at once, and how
	// many a minute.
	GlobalSessionListsPerPrincipal = 60
	// PodDocumentsPerPod is how many writes of the federation document
	// one peer sends at once, and how many a minute: a peer's console
	// sends one per change an administrator saves there.
	PodDocumentsPerPod = 30
	// PodSessionCommandsPerPod is how many logoffs and disconnects of
	// this pod's sessions one peer asks for at once, and how many a
	// minute: ten times a principal's GlobalSessionCommandsPerPrincipal
	// at the peer, whose end users ask for their own.
	PodSessionCommandsPerPod = 600
	// ReKeysPerHost is how many re-keys of one host (a registration with
	// its current credential) are taken at once, and how many a minute.
	ReKeysPerHost = 3
	// NewHostsPerTokenBurst is how many new hosts one registration
	// token registers at once: a golden image's clones brought up
	// together, hundreds of them, are not refused.
	NewHostsPerTokenBurst = 500
	// NewHostsPerTokenPerMinute is how many new hosts one registration
	// token registers a minute past its burst (one a second): more than
	// a hypervisor clones, far fewer rows than a loop of requests writes.
	NewHostsPerTokenPerMinute = 60
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

// ownBuckets are the routes a User reaches that change something and
// have a limit of their own (SigninsPerPrincipal), not the write budget.
var ownBuckets = map[string]bool{"POST /api/v1/signin": true, "POST /api/v1/signout": true}

// spendsUserWrite reports whether a request of principal p to pattern
// spends p's write budget: an end user's (role User) request that is not
// a read, on a route without a bucket of its own. Any route a User may
// call, now or later, is bounded so.
func spendsUserWrite(p *vdibroker.Principal, pattern string) bool {
	if p == nil || p.Role != vdibroker.RoleUser || ownBuckets[pattern] {
		return false
	}
	method, _, _ := strings.Cut(pattern, " ")
	return method != nethttp.MethodGet && method != nethttp.MethodHead
}

// userWriteKey is p's bucket of the write budget: its kind and its id as
// the audit trail names it (an API token's id, an OpenID Connect subject).
func userWriteKey(p *vdibroker.Principal) string {
	a := p.Audit()
	return a.Kind + ":" + a.ID
}

// UserWriteSpend spends one of end user p's write budget now (0) or says
// how long she must wait for one, spending nothing: the user portal
// spends a launch's as it keeps the launch, and its connect, marked
// vdibroker.WithWritePaid, spends no other (R-SEC, R-U7). 0 for a
// principal without the budget.
func (s *Server) UserWriteSpend(p *vdibroker.Principal) time.Duration {
	if p == nil || p.Role != vdibroker.RoleUser {
		return 0
	}
	key, now := userWriteKey(p), s.now()
	if s.userWrites.Spend(key, now) {
		return 0
	}
	return max(s.userWrites.Wait(key, now), time.Nanosecond)
}

// throttled is the 429 answer: what was too fast, and "slow down"; how
// long to wait is its Retry-After alone, which every reader shows in its
// own form (the CLI's " (try again in 2 s)"), so a line says it once.
func throttled(what string, perSecond float64) error {
	return &vdibroker.Error{Code: vdibroker.ETooManyRequests,
		Message:    what + "; slow down",
		RetryAfter: time.Duration(float64(time.Second) / perSecond)}
}
