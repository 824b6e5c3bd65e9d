package identity

import (
	"crypto/cipher"
	"crypto/subtle"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/internal/webguard"
)

// LoginTTL is how long a started sign-in may take to come back from the
// provider.
const LoginTTL = 10 * time.Minute

// MaxReflected bounds the provider's error text a refused callback shows
// and records: the callback's query is anyone's to write.
const MaxReflected = 200

// FlowConfig configures a Flow.
type FlowConfig struct {
	Provider *Provider
	// CallbackURL is the absolute URL the provider sends the browser back
	// to, as registered there: the broker's external URL and the area's
	// callback path. It is never taken from a request, whose Host header
	// is the client's to choose.
	CallbackURL string
	// StateCookie names the cookie carrying the sign-in under way, and
	// StatePath is its Path (the callback's, or a directory above it);
	// over HTTPS the cookie is webguard.HostPrefix+StateCookie at "/"
	// (webguard.CookieScope).
	StateCookie, StatePath string
	// Key seals the state cookie: 32 bytes, the same on every replica
	// (serve keeps it in the database), so a sign-in started on one
	// replica may come back to another.
	Key []byte
	// Secure says whether a cookie set in answer to r is Secure: always
	// over TLS, and behind a TLS-terminating proxy (an https external URL).
	Secure func(r *http.Request) bool
	// Now is the clock sign-ins expire by (nil: time.Now).
	Now func() time.Time
	// EndUsers makes every identity the provider vouches for an end user
	// (Provider.VerifyUser: RoleUser, no role map): the user portal's
	// sign-in (R-U2). Else the role map decides, and refuses a user none
	// of whose groups it maps.
	EndUsers bool
}

// Flow is the browser's side of signing in with the provider (the
// authorization code flow with PKCE, state and nonce) for one area of the
// site: the admin console, the user portal. Start sends the browser to
// the provider; Finish takes it back, checks it is the browser that
// started, exchanges the code and verifies the ID token. What a verified
// identity may do there, and the session it gets, are the area's. Flow
// keeps nothing in memory: a sign-in under way is in its state cookie
// (statecookie.go), whose SameSite=Lax lets it come back on the
// provider's top-level redirect.
type Flow struct {
	cfg  FlowConfig
	aead cipher.AEAD
}

// NewFlow returns a Flow, or an error when cfg is incomplete.
func NewFlow(cfg FlowConfig) (*Flow, error) {
	if cfg.Provider == nil || cfg.StateCookie == "" || cfg.StatePath == "" || cfg.Secure == nil {
		return nil, errors.New("identity: a flow needs a provider, a state cookie, its path and the Secure rule")
	}
	u, err := url.Parse(cfg.CallbackURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("identity: a flow's callback URL must be an absolute http(s) URL, got " + cfg.CallbackURL)
	}
	aead, err := stateAEAD(cfg.Key)
	if err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Flow{cfg: cfg, aead: aead}, nil
}

// Provider returns the flow's provider.
func (f *Flow) Provider() *Provider { return f.cfg.Provider }

// Start begins a sign-in: a fresh state, nonce and PKCE verifier sealed
// into the state cookie, and a 303 to the provider's authorization
// endpoint. next is where Finish sends the browser afterwards, a path of
// this site the caller has checked ("/" if it is longer than 2 KiB,
// names another host, or would make a state cookie Finish refuses:
// longer than maxStateCookie once escaped, or opening as a next over
// 2 KiB once its bytes not UTF-8 are U+FFFD).
func (f *Flow) Start(w http.ResponseWriter, r *http.Request, next string) {
	if !nextPath(next) {
		next = "/"
	}
	p := &pending{State: randomString(), Nonce: randomString(), Verifier: oauth2.GenerateVerifier(), Next: next,
		Expires: f.cfg.Now().Add(LoginTTL).Unix()}
	sealed := sealState(f.aead, f.cfg.StateCookie, p)
	if _, err := openState(f.aead, f.cfg.StateCookie, sealed, f.cfg.Now()); err != nil {
		// A next of quotes or bytes not UTF-8, which JSON writes longer
		// (a cookie over maxStateCookie), or which opens as another,
		// longer next (a byte not UTF-8 is U+FFFD, 3 bytes: over maxNext):
		// a cookie a browser might drop, or Finish refuse, is no sign-in.
		p.Next = "/"
		sealed = sealState(f.aead, f.cfg.StateCookie, p)
	}
	oc := f.cfg.Provider.oauth
	oc.RedirectURL = f.cfg.CallbackURL
	authURL := oc.AuthCodeURL(p.State, oidc.Nonce(p.Nonce), oauth2.S256ChallengeOption(p.Verifier))
	name, path, secure := f.cookie(r)
	http.SetCookie(w, &http.Cookie{Name: name, Value: sealed, Path: path,
		MaxAge: int(LoginTTL.Seconds()), HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, authURL, http.StatusSeeOther)
}

// Finish completes the sign-in the provider sent the browser back with
// (GET of the callback URL): the state must be the one sealed in this
// browser's state cookie, unexpired (the provider's error response too,
// before its text is shown); the code is exchanged with the PKCE
// verifier and the ID token verified, its nonce included. It returns the
// identity, the raw ID token and where to go next. The state cookie is
// cleared whatever the outcome. Where to go next is also returned with an
// error found once the state is this browser's (the provider's refusal, a
// code or token that did not verify): a sign-in tried again may return
// there; it is what Start sealed, which the caller checks again as it
// checks any next. An error is a *vdibroker.Error whose message may be
// shown to the person (Unauthenticated: the provider refused, or the
// token did not verify; PermissionDenied: not this browser's sign-in, or
// no role is mapped to the user's groups); what it quotes of the request
// is cut to MaxReflected bytes of printable ASCII.
func (f *Flow) Finish(w http.ResponseWriter, r *http.Request) (*Identity, string, string, error) {
	name, path, secure := f.cookie(r)
	http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: path, MaxAge: -1,
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode})
	w.Header().Set("Cache-Control", "no-store")
	q := r.URL.Query()
	ck, err := r.Cookie(name)
	if err != nil {
		return nil, "", "", vdibroker.Errorf(vdibroker.EPermission, "This sign-in was not started in this browser (state mismatch). Sign in again.")
	}
	p, err := openState(f.aead, f.cfg.StateCookie, ck.Value, f.cfg.Now())
	switch {
	case err != nil && !errors.Is(err, errBadState):
		return nil, "", "", vdibroker.Errorf(vdibroker.EPermission, "This sign-in took longer than %s. Sign in again.", LoginTTL)
	case err != nil || !equalString(q.Get("state"), p.State):
		return nil, "", "", vdibroker.Errorf(vdibroker.EPermission, "This sign-in was not started in this browser (state mismatch). Sign in again.")
	}
	// The provider's error is shown only for this browser's sign-in (its
	// error response carries the state, RFC 6749 4.1.2.1): anyone can
	// write a callback URL, and the text would be shown on this site's
	// page as the provider's.
	if e := q.Get("error"); e != "" {
		msg := "The identity provider did not sign you in: " + Printable(e, 64)
		if d := q.Get("error_description"); d != "" {
			msg += ": " + Printable(d, MaxReflected)
		}
		return nil, "", p.Next, vdibroker.Errorf(vdibroker.EUnauthenticated, "%s", msg)
	}
	id, raw, err := f.cfg.Provider.exchange(r.Context(), f.cfg.CallbackURL, q.Get("code"), p.Verifier, p.Nonce, f.cfg.EndUsers)
	if err != nil {
		return nil, "", p.Next, &vdibroker.Error{Code: vdibroker.ErrorCode(err), Message: Printable(vdibroker.ErrorMessage(err), 2*MaxReflected)}
	}
	return id, raw, p.Next, nil
}

// cookie is the state cookie's name and path in answer to r, and whether
// it is Secure: over HTTPS webguard.HostPrefix+StateCookie at "/"
// (webguard.CookieScope), so that a sibling subdomain cannot plant the
// state of its own sign-in in a browser and have the callback sign the
// browser in as the attacker. The sealed value is bound to StateCookie
// whatever the name.
func (f *Flow) cookie(r *http.Request) (name, path string, secure bool) {
	secure = f.cfg.Secure(r)
	name, path = webguard.CookieScope(f.cfg.StateCookie, f.cfg.StatePath, secure)
	return name, path, secure
}

// Printable returns s with every byte that is not printable ASCII
// dropped, cut to max bytes (an ellipsis marks a cut): text from a
// request, fit for a page, a log line and an audit row.
func Printable(s string, max int) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if b.Len() == max {
			return b.String() + "…"
		}
		if c := s[i]; c >= 0x20 && c < 0x7f {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// equalString compares two non-empty strings in constant time.
func equalString(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
