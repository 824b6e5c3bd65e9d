// Package websession keeps the sessions of signed-in browsers for an area
// of the site (the admin console; the user portal): the cookie, the row
// in the database that every replica reads (vdibroker.WebSessionStore),
// the limits on how many there are, and the timer that sweeps expired
// ones (R-SEC, "Web sessions").
//
// The cookie holds 256 random bits and nothing else. The database holds
// their hash, who signed in, and the API token the session acts with,
// sealed (AES-256-GCM) under a key derived from the cookie's value: a
// copy of the table alone signs nobody in. The CSRF token of a session is
// derived from the cookie's value too, so it is the same on every
// replica and stored nowhere.
//
// A replica keeps a copy of the sessions it has read, used only while the
// database does not answer (an outage, R-OUT1): a signed-in administrator
// still sees the console's pages, and its header saying the database is
// away, on the replica that served them before. Only the sessions in use
// as the outage began are honoured (OutageGrace): a copy of one signed
// out on another replica hours before, which this replica cannot know,
// is not.
package websession

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/internal/webguard"
)

// Defaults of Config.
const (
	DefaultTTL           = 12 * time.Hour
	DefaultSweepInterval = 10 * time.Minute
)

// OutageGrace bounds the copies honoured while the store does not answer:
// those of sessions the store answered this replica within OutageGrace
// before it last answered (R-OUT1, R-SEC).
const OutageGrace = 10 * time.Minute

// DefaultLimits bound an area's sessions: 16 per principal (a script
// signing in again and again replaces its own, and may do so 16 times a
// minute), 10,000 in all.
var DefaultLimits = vdibroker.WebSessionLimits{PerPrincipal: 16, Window: time.Minute, PerArea: 10000}

// DefaultMaxCopies bounds the sessions a replica keeps a copy of for an
// outage: only those it read within OutageGrace are honoured, so a copy
// is for a user of the last minutes, not for each of a day's sign-ins
// (an OpenID Connect sign-in's copy holds its ID token, a kilobyte or
// two: 250,000 of them would be half a gigabyte; DefaultMaxCopyBytes
// bounds the copies of larger tokens).
const DefaultMaxCopies = 20_000

// DefaultMaxCopyBytes bounds the bytes of those copies (copySize): an
// ID token may be 64 KiB (identity.MaxIDTokenBytes), and DefaultMaxCopies
// of those would be 1.3 GB of a replica's memory; 64 MiB keeps 20,000
// copies of 3 KiB, or 1,000 of the largest tokens.
const DefaultMaxCopyBytes = 64 << 20

// copyOverhead is what a copy holds beside its strings' bytes: the
// Session's fields (seven string headers, two times: 160 bytes), its
// entry in the map and the allocator's rounding, rounded up.
const copyOverhead = 256

// copySize is the bytes a copy of s holds in memory (its Flash is not
// kept).
func copySize(s *Session) int64 {
	return int64(copyOverhead + len(s.Token) + len(s.Principal) + len(s.Role) + len(s.CSRF) + len(s.id) + len(s.idHash))
}

// Config configures a Manager.
type Config struct {
	// Store keeps the sessions (the database, shared by the replicas).
	Store vdibroker.WebSessionStore
	// Area names the part of the site ("console").
	Area string
	// Cookie is the session cookie's name, Path its path; over HTTPS
	// (Secure) the cookie is webguard.HostPrefix+Cookie at "/"
	// (webguard.CookieScope).
	Cookie, Path string
	// TTL is the longest a session lasts (0: DefaultTTL).
	TTL time.Duration
	// Limits (zero: DefaultLimits).
	Limits vdibroker.WebSessionLimits
	// MaxCopies bounds the copies kept for an outage (0:
	// DefaultMaxCopies; never more than Limits.PerArea).
	MaxCopies int
	// MaxCopyBytes bounds the bytes those copies hold (0:
	// DefaultMaxCopyBytes); a session whose copy alone is larger has
	// none.
	MaxCopyBytes int64
	// Secure says whether the cookie set in answer to r is Secure.
	Secure func(r *http.Request) bool
	// Clock is the time sessions expire by and the sweep's ticker (nil:
	// the real clock); Now, when set, overrides its Now.
	Clock clock.WithTicker
	Now   func() time.Time
	// SweepInterval is how often expired sessions are deleted (0:
	// DefaultSweepInterval).
	SweepInterval time.Duration
	// Rand makes the cookies' values (nil: crypto/rand).
	Rand   io.Reader
	Logger *slog.Logger
}

// Session is a signed-in browser.
type Session struct {
	// Token is the API token the session acts with (the OpenID Connect
	// ID token for an "oidc:" principal).
	Token     string
	Principal string
	Role      string
	Expires   time.Time
	// Flash is the one-shot message of the next page.
	Flash string
	// CSRF is the token every form of the session carries.
	CSRF string

	id, idHash string
	// seenAt is when the store last answered this session, size its
	// copySize (the copies).
	seenAt time.Time
	size   int64
}

// ID is the cookie's value (never stored).
func (s *Session) ID() string { return s.id }

// OIDC reports whether the session was opened by single sign-on: its
// Token is the provider's ID token.
func (s *Session) OIDC() bool { return strings.HasPrefix(s.Principal, "oidc:") }

// Manager keeps an area's sessions. Close stops its sweep.
type Manager struct {
	cfg Config
	now func() time.Time

	mu sync.Mutex
	// seen are the sessions this replica has read, by idHash: used only
	// while the store fails (bounded by MaxCopies and MaxCopyBytes);
	// seenBytes is the sum of their sizes.
	seen      map[string]*Session
	seenBytes int64
	// answered is when the store last answered a session's read.
	answered time.Time

	stop, done chan struct{}
	once       sync.Once
}

// New returns a Manager and starts its sweep. It panics without a store,
// an area or a cookie (programming errors).
func New(cfg Config) *Manager {
	if cfg.Store == nil || cfg.Area == "" || cfg.Cookie == "" {
		panic("websession: a store, an area and a cookie name are required")
	}
	if cfg.Path == "" {
		cfg.Path = "/"
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.Limits == (vdibroker.WebSessionLimits{}) {
		cfg.Limits = DefaultLimits
	}
	if cfg.MaxCopies <= 0 {
		cfg.MaxCopies = DefaultMaxCopies
	}
	if cfg.Limits.PerArea > 0 {
		cfg.MaxCopies = min(cfg.MaxCopies, cfg.Limits.PerArea)
	}
	if cfg.MaxCopyBytes <= 0 {
		cfg.MaxCopyBytes = DefaultMaxCopyBytes
	}
	if cfg.Secure == nil {
		cfg.Secure = func(r *http.Request) bool { return r.TLS != nil }
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.SweepInterval <= 0 {
		cfg.SweepInterval = DefaultSweepInterval
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Manager{cfg: cfg, now: cfg.Now, seen: map[string]*Session{}, stop: make(chan struct{}), done: make(chan struct{})}
	if m.now == nil {
		m.now = cfg.Clock.Now
	}
	go m.sweep()
	return m
}

// Close stops the sweep.
func (m *Manager) Close() {
	m.once.Do(func() {
		close(m.stop)
		<-m.done
	})
}

// TTL is the longest a session lasts.
func (m *Manager) TTL() time.Duration { return m.cfg.TTL }

// Open opens a session for a principal whose token the caller has
// checked, lasting until expires or the TTL, whichever is sooner, and
// sets its cookie on w. It fails with TooManyRequests past the limits
// (nothing is set then).
func (m *Manager) Open(ctx context.Context, w http.ResponseWriter, r *http.Request, token, principal, role string, expires time.Time) (*Session, error) {
	now := m.now()
	if max := now.Add(m.cfg.TTL); expires.IsZero() || expires.After(max) {
		expires = max
	}
	b := make([]byte, 32)
	if _, err := io.ReadFull(m.cfg.Rand, b); err != nil {
		return nil, err
	}
	s := &Session{Token: token, Principal: principal, Role: role, Expires: expires, id: hex.EncodeToString(b)}
	s.idHash, s.CSRF = vdibroker.HashSecret(s.id), derive(s.id, "csrf")
	sealed, err := m.seal(s)
	if err != nil {
		return nil, err
	}
	row := &vdibroker.WebSession{IDHash: s.idHash, Area: m.cfg.Area, Principal: principal, Role: role, Sealed: sealed,
		CreateTime: now, ExpireTime: expires}
	if err := m.cfg.Store.CreateWebSession(ctx, row, m.cfg.Limits, now); err != nil {
		return nil, err
	}
	m.remember(s)
	name, path, secure := m.cookie(r)
	http.SetCookie(w, &http.Cookie{Name: name, Value: s.id, Path: path, MaxAge: int(expires.Sub(now).Seconds()) + 1,
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode})
	// The browser's sign-in before this one, whose cookie the new one
	// replaces, ends: its row would otherwise stay good until it expires,
	// for a copy of the old cookie, and count against her sessions.
	if old, err := r.Cookie(name); err == nil && len(old.Value) == 64 && old.Value != s.id {
		m.Forget(ctx, &Session{idHash: vdibroker.HashSecret(old.Value)})
	}
	return s, nil
}

// cookie is the session cookie's name and path in answer to r, and
// whether it is Secure: over HTTPS its name has the __Host- prefix
// (webguard.CookieScope), so a sibling subdomain cannot plant one.
func (m *Manager) cookie(r *http.Request) (name, path string, secure bool) {
	secure = m.cfg.Secure(r)
	name, path = webguard.CookieScope(m.cfg.Cookie, m.cfg.Path, secure)
	return name, path, secure
}

// Get returns r's session, or nil when it has none, it ended or expired.
// While the store fails, a session this replica has read, in use as the
// outage began (OutageGrace), is still answered until it expires.
func (m *Manager) Get(r *http.Request) *Session {
	name, _, _ := m.cookie(r)
	ck, err := r.Cookie(name)
	if err != nil || len(ck.Value) != 64 {
		return nil
	}
	id, now := ck.Value, m.now()
	hash := vdibroker.HashSecret(id)
	row, err := m.cfg.Store.WebSession(r.Context(), hash, now)
	switch {
	case vdibroker.ErrorCode(err) == vdibroker.ENotFound:
		m.mu.Lock()
		defer m.mu.Unlock()
		m.drop(hash)
		m.answered = now
		return nil
	case err != nil:
		m.mu.Lock()
		defer m.mu.Unlock()
		// A copy of a session in use as the outage began: one signed out
		// on another replica earlier is no longer read here, so its
		// copy is older.
		if s := m.seen[hash]; s != nil && now.Before(s.Expires) && !s.seenAt.Before(m.answered.Add(-OutageGrace)) {
			c := *s
			return &c
		}
		// Not logged: anyone may send a cookie, and the outage is logged
		// where it begins.
		return nil
	}
	if row.Area != m.cfg.Area {
		// Another area's session (a portal sign-in's cookie sent under
		// the console's name): no session here, and nothing logged, as
		// its holder could send one at every request.
		return nil
	}
	s := &Session{Principal: row.Principal, Role: row.Role, Expires: row.ExpireTime, Flash: row.Flash,
		id: id, idHash: hash, CSRF: derive(id, "csrf")}
	if s.Token, err = m.open(id, row); err != nil {
		// The row's hash is the cookie's, yet its token does not open
		// with it: the table was written by something else than Open.
		m.cfg.Logger.Warn("web session: its token does not open", "area", m.cfg.Area, "err", err)
		return nil
	}
	m.remember(s)
	return s
}

// End ends s (no longer valid on any replica) and clears its cookie.
// Over HTTPS a session cookie of the name without the __Host- prefix,
// which a replica of an older version set during a rolling upgrade, is
// ended and cleared too: signing out ends every sign-in of the browser.
// When the store does not delete s, End changes nothing and returns the
// error: the cookie and this replica's copy stay, so that the user, told
// she is still signed in, may sign out again (clearing the cookie alone
// would leave a copy of it, stolen before, good until it expires).
func (m *Manager) End(ctx context.Context, w http.ResponseWriter, r *http.Request, s *Session) error {
	if err := m.cfg.Store.DeleteWebSession(ctx, s.idHash); err != nil {
		m.cfg.Logger.Warn("web session: cannot end", "area", m.cfg.Area, "err", err)
		return err
	}
	m.forget(s.idHash)
	name, path, secure := m.cookie(r)
	http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: path, MaxAge: -1,
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode})
	if !secure {
		return nil
	}
	if old, err := r.Cookie(m.cfg.Cookie); err == nil {
		if len(old.Value) == 64 {
			m.Forget(ctx, &Session{idHash: vdibroker.HashSecret(old.Value)})
		}
		http.SetCookie(w, &http.Cookie{Name: m.cfg.Cookie, Value: "", Path: m.cfg.Path, MaxAge: -1,
			HttpOnly: true, Secure: true, SameSite: http.SameSiteLaxMode})
	}
	return nil
}

// Forget ends s without touching the cookie (its token was revoked).
func (m *Manager) Forget(ctx context.Context, s *Session) {
	m.forget(s.idHash)
	if err := m.cfg.Store.DeleteWebSession(ctx, s.idHash); err != nil {
		m.cfg.Logger.Warn("web session: cannot end", "area", m.cfg.Area, "err", err)
	}
}

// SetFlash sets s's one-shot message (lost if the store fails).
func (m *Manager) SetFlash(ctx context.Context, s *Session, msg string) {
	s.Flash = msg
	if err := m.cfg.Store.SetWebSessionFlash(ctx, s.idHash, msg); err != nil {
		m.cfg.Logger.Warn("web session: cannot keep a message", "area", m.cfg.Area, "err", err)
	}
}

// TakeFlash returns s's one-shot message and clears it.
func (m *Manager) TakeFlash(ctx context.Context, s *Session) string {
	msg := s.Flash
	if msg != "" {
		m.SetFlash(ctx, s, "")
	}
	return msg
}

// Sweep deletes the expired sessions (the store's and the copies).
func (m *Manager) Sweep(ctx context.Context) {
	now := m.now()
	n, err := m.cfg.Store.DeleteExpiredWebSessions(ctx, now)
	if err != nil {
		m.cfg.Logger.Warn("web session: sweep", "area", m.cfg.Area, "err", err)
	} else if n > 0 {
		m.cfg.Logger.Debug("web session: swept", "area", m.cfg.Area, "expired", n)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dropExpired(now)
}

func (m *Manager) sweep() {
	defer close(m.done)
	t := m.cfg.Clock.NewTicker(m.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C():
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			m.Sweep(ctx)
			cancel()
		}
	}
}

// remember keeps a copy of s for an outage, within MaxCopies and
// MaxCopyBytes. A copy larger than MaxCopyBytes alone is not kept, and
// no other goes for it.
func (m *Manager) remember(s *Session) {
	c := *s
	c.Flash = ""
	c.size = copySize(&c)
	m.mu.Lock()
	defer m.mu.Unlock()
	c.seenAt = m.now()
	m.answered = c.seenAt
	// The session's copy before this one is replaced (or, this one too
	// large, dropped: it would be honoured as read before).
	m.drop(s.idHash)
	if c.size > m.cfg.MaxCopyBytes {
		return
	}
	full := func() bool { return len(m.seen) >= m.cfg.MaxCopies || m.seenBytes+c.size > m.cfg.MaxCopyBytes }
	if full() {
		// Those an outage would not honour first, then the ones read
		// longest ago: the database still has them all.
		m.dropExpired(c.seenAt)
		for full() {
			var oldest *Session
			for _, o := range m.seen {
				if oldest == nil || o.seenAt.Before(oldest.seenAt) {
					oldest = o
				}
			}
			m.drop(oldest.idHash)
		}
	}
	m.seen[s.idHash] = &c
	m.seenBytes += c.size
}

// drop deletes the copy of the session whose idHash is hash, if any;
// m.mu is held.
func (m *Manager) drop(hash string) {
	if s, ok := m.seen[hash]; ok {
		delete(m.seen, hash)
		m.seenBytes -= s.size
	}
}

func (m *Manager) forget(hash string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.drop(hash)
}

// dropExpired deletes the copies an outage would not honour: expired,
// or read longer than OutageGrace before the store last answered; m.mu
// is held.
func (m *Manager) dropExpired(now time.Time) {
	stale := m.answered.Add(-OutageGrace)
	for h, s := range m.seen {
		if !now.Before(s.Expires) || s.seenAt.Before(stale) {
			m.drop(h)
		}
	}
}

// derive returns a 32-byte value of the cookie's value id for purpose, in
// hex: the session's CSRF token; its sealing key (raw).
func derive(id, purpose string) string {
	return hex.EncodeToString(deriveKey(id, purpose))
}

func deriveKey(id, purpose string) []byte {
	return webguard.DeriveKey(id, "vdibroker web session "+purpose)
}

// additional binds a sealed token to its row's area and principal.
func (m *Manager) additional(principal string) []byte {
	return []byte(m.cfg.Area + "\x00" + principal)
}

// seal seals a session's token under its cookie's key.
func (m *Manager) seal(s *Session) ([]byte, error) {
	return webguard.Seal(s.id, "vdibroker web session token", []byte(s.Token), m.additional(s.Principal))
}

var errSealed = errors.New("the sealed token does not open with this cookie")

func (m *Manager) open(id string, row *vdibroker.WebSession) (string, error) {
	if row.Area != m.cfg.Area {
		return "", errSealed
	}
	plain, err := webguard.Open(id, "vdibroker web session token", row.Sealed, m.additional(row.Principal))
	if err != nil {
		return "", errSealed
	}
	return string(plain), nil
}
