// Package testop is a small but real OpenID provider for tests, served
// over HTTP on loopback: discovery, a JWKS of a fresh RSA key, an
// authorization endpoint with a login form, PKCE (S256) checked at the
// token endpoint, single-use codes, and RS256 ID tokens carrying nonce and
// groups. Mint signs arbitrary tokens (another audience, an expiry in the
// past) for tests of what a relying party must refuse.
//
// Like a hosted provider it remembers a browser that signed in (a
// session cookie of its own, so the next authorization request of that
// browser is answered at once, without the form) and ends that session
// at its end_session_endpoint (RP-Initiated Logout: id_token_hint and a
// registered post_logout_redirect_uri). StartAt serves it under another
// host name than the relying party's (localhost against 127.0.0.1): a
// provider on another site, as Entra ID or Okta are.
package testop

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// User is an account of the provider.
type User struct {
	Subject  string
	Password string
	Name     string
	Groups   []string
}

// OP is a running provider.
type OP struct {
	Issuer       string // its URL, http://127.0.0.1:port (or the host of StartAt)
	ClientID     string
	ClientSecret string
	Now          func() time.Time

	srv *httptest.Server

	mu    sync.Mutex
	key   *rsa.PrivateKey
	kid   string
	users map[string]User // by login name (Subject)
	codes map[string]*grant
	// sessions are the browsers signed in at the provider, by the value
	// of their session cookie.
	sessions map[string]User
	// postLogout are the post_logout_redirect_uri values registered.
	postLogout map[string]bool
	// LastRedirect is the last callback URL the provider sent a browser to.
	lastRedirect string
	jwksFetches  int
	logouts      int
}

// sessionCookie is the provider's own session cookie.
const sessionCookie = "testop_session"

type grant struct {
	user      User
	clientID  string
	redirect  string
	nonce     string
	challenge string
	expires   time.Time
}

// Start starts a provider for clientID/secret with users on 127.0.0.1;
// it stops at the test's end.
func Start(t testing.TB, clientID, secret string, users ...User) *OP {
	t.Helper()
	return StartAt(t, "127.0.0.1", clientID, secret, users...)
}

// StartAt is Start with the issuer's host name host ("localhost": a
// provider on another site than a relying party on 127.0.0.1). It
// listens on 127.0.0.1, which host must name.
func StartAt(t testing.TB, host, clientID, secret string, users ...User) *OP {
	t.Helper()
	op := &OP{ClientID: clientID, ClientSecret: secret, Now: time.Now,
		users: map[string]User{}, codes: map[string]*grant{}, sessions: map[string]User{}, postLogout: map[string]bool{}}
	op.RotateKey()
	for _, u := range users {
		op.users[u.Subject] = u
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", op.discovery)
	mux.HandleFunc("GET /jwks", op.jwks)
	mux.HandleFunc("GET /authorize", op.authorizePage)
	mux.HandleFunc("POST /authorize", op.login)
	mux.HandleFunc("POST /token", op.token)
	mux.HandleFunc("GET /logout", op.logout)
	op.srv = httptest.NewServer(mux)
	_, port, _ := net.SplitHostPort(op.srv.Listener.Addr().String())
	op.Issuer = "http://" + net.JoinHostPort(host, port)
	t.Cleanup(op.srv.Close)
	return op
}

// RotateKey replaces the signing key with a new one of a new key id; the
// JWKS publishes only the new one.
func (op *OP) RotateKey() {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	op.mu.Lock()
	op.key, op.kid = key, randomString()[:8]
	op.mu.Unlock()
}

// AllowPostLogoutRedirect registers u as a post_logout_redirect_uri of
// the client.
func (op *OP) AllowPostLogoutRedirect(u string) {
	op.mu.Lock()
	defer op.mu.Unlock()
	op.postLogout[u] = true
}

// JWKSFetches returns how many times the JWKS was fetched.
func (op *OP) JWKSFetches() int {
	op.mu.Lock()
	defer op.mu.Unlock()
	return op.jwksFetches
}

// Logouts returns how many sessions the end_session_endpoint ended.
func (op *OP) Logouts() int {
	op.mu.Lock()
	defer op.mu.Unlock()
	return op.logouts
}

// LastRedirect returns the last callback URL (with code and state) the
// provider redirected a browser to.
func (op *OP) LastRedirect() string {
	op.mu.Lock()
	defer op.mu.Unlock()
	return op.lastRedirect
}

func (op *OP) discovery(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                op.Issuer,
		"authorization_endpoint":                op.Issuer + "/authorize",
		"token_endpoint":                        op.Issuer + "/token",
		"jwks_uri":                              op.Issuer + "/jwks",
		"end_session_endpoint":                  op.Issuer + "/logout",
		"response_types_supported":              []string{"code"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
		"code_challenge_methods_supported":      []string{"S256"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post"},
		"scopes_supported":                      []string{"openid", "profile", "email"},
		"claims_supported":                      []string{"sub", "iss", "aud", "exp", "iat", "nonce", "groups", "preferred_username"},
	})
}

func (op *OP) jwks(w http.ResponseWriter, r *http.Request) {
	op.mu.Lock()
	op.jwksFetches++
	pub, kid := op.key.PublicKey, op.kid
	op.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"keys": []map[string]any{{
		"kty": "RSA", "use": "sig", "alg": "RS256", "kid": kid,
		"n": b64(pub.N.Bytes()), "e": b64(big.NewInt(int64(pub.E)).Bytes()),
	}}})
}

var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html><head><title>Test OP sign-in</title></head><body>
<h1>Sign in to the test provider</h1>
<form method="post" action="/authorize">
{{range $k, $v := .}}<input type="hidden" name="{{$k}}" value="{{$v}}">
{{end}}<label>User <input id="username" name="username"></label>
<label>Password <input id="password" name="password" type="password"></label>
<button id="login" type="submit">Sign in</button>
</form></body></html>`))

// authorizePage checks the request and shows the login form, or, to a
// browser signed in here already, answers at once with a code.
func (op *OP) authorizePage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if err := op.checkAuthorize(q); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if ck, err := r.Cookie(sessionCookie); err == nil {
		op.mu.Lock()
		u, ok := op.sessions[ck.Value]
		op.mu.Unlock()
		if ok {
			op.sendCode(w, r, u, q)
			return
		}
	}
	hidden := map[string]string{}
	for _, k := range []string{"client_id", "redirect_uri", "state", "nonce", "code_challenge", "code_challenge_method", "response_type", "scope"} {
		hidden[k] = q.Get(k)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = loginPage.Execute(w, hidden)
}

func (op *OP) checkAuthorize(q url.Values) error {
	switch {
	case q.Get("client_id") != op.ClientID:
		return fmt.Errorf("unknown client_id %q", q.Get("client_id"))
	case q.Get("response_type") != "code":
		return fmt.Errorf("response_type must be code")
	case q.Get("redirect_uri") == "":
		return fmt.Errorf("redirect_uri is required")
	case q.Get("code_challenge") == "" || q.Get("code_challenge_method") != "S256":
		return fmt.Errorf("PKCE with S256 is required")
	case q.Get("state") == "" || q.Get("nonce") == "":
		return fmt.Errorf("state and nonce are required")
	}
	return nil
}

// login checks the form's password and sends the browser back with a code.
func (op *OP) login(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f := r.PostForm
	if err := op.checkAuthorize(f); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	op.mu.Lock()
	u, ok := op.users[f.Get("username")]
	op.mu.Unlock()
	if !ok || subtle.ConstantTimeCompare([]byte(u.Password), []byte(f.Get("password"))) != 1 {
		http.Error(w, "wrong user or password", http.StatusUnauthorized)
		return
	}
	sid := randomString()
	op.mu.Lock()
	op.sessions[sid] = u
	op.mu.Unlock()
	// Lax, as hosted providers set theirs: sent on the relying party's
	// top-level redirect to /authorize.
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: sid, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
	op.sendCode(w, r, u, f)
}

// sendCode redirects the browser to the request's redirect_uri with a
// new code for u.
func (op *OP) sendCode(w http.ResponseWriter, r *http.Request, u User, f url.Values) {
	code := randomString()
	op.mu.Lock()
	op.codes[code] = &grant{user: u, clientID: f.Get("client_id"), redirect: f.Get("redirect_uri"), nonce: f.Get("nonce"),
		challenge: f.Get("code_challenge"), expires: op.Now().Add(time.Minute)}
	red, _ := url.Parse(f.Get("redirect_uri"))
	rq := red.Query()
	rq.Set("code", code)
	rq.Set("state", f.Get("state"))
	red.RawQuery = rq.Encode()
	op.lastRedirect = red.String()
	op.mu.Unlock()
	http.Redirect(w, r, red.String(), http.StatusFound)
}

// token exchanges a code: client authenticated, code single use, redirect
// URI as authorized, PKCE verifier matching the challenge.
func (op *OP) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		tokenError(w, "invalid_request", err.Error())
		return
	}
	id, secret, ok := r.BasicAuth()
	if ok {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if id != op.ClientID || subtle.ConstantTimeCompare([]byte(secret), []byte(op.ClientSecret)) != 1 {
		w.Header().Set("WWW-Authenticate", "Basic")
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
		return
	}
	if r.PostForm.Get("grant_type") != "authorization_code" {
		tokenError(w, "unsupported_grant_type", "")
		return
	}
	op.mu.Lock()
	g := op.codes[r.PostForm.Get("code")]
	delete(op.codes, r.PostForm.Get("code"))
	op.mu.Unlock()
	sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
	switch {
	case g == nil || !op.Now().Before(g.expires):
		tokenError(w, "invalid_grant", "unknown, used or expired code")
		return
	case g.clientID != id || g.redirect != r.PostForm.Get("redirect_uri"):
		tokenError(w, "invalid_grant", "the code was issued to another client or redirect_uri")
		return
	case b64(sum[:]) != g.challenge:
		tokenError(w, "invalid_grant", "PKCE verifier does not match the challenge")
		return
	}
	idToken := op.Mint(map[string]any{"sub": g.user.Subject, "nonce": g.nonce, "groups": g.user.Groups,
		"preferred_username": g.user.Name})
	writeJSON(w, http.StatusOK, map[string]any{"access_token": randomString(), "token_type": "Bearer",
		"expires_in": 3600, "id_token": idToken})
}

// SignIn posts a test provider's login form for the authorization
// request authURL (its /authorize with the parameters a relying party
// sent the browser with) as user, with c's cookies, and returns the
// callback URL the provider redirects to, without following it.
func SignIn(c *http.Client, authURL, user, password string) (string, error) {
	u, err := url.Parse(authURL)
	if err != nil {
		return "", err
	}
	form := u.Query()
	form.Set("username", user)
	form.Set("password", password)
	nc := *c
	nc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res, err := nc.PostForm(u.Scheme+"://"+u.Host+"/authorize", form)
	if err != nil {
		return "", err
	}
	res.Body.Close()
	if res.StatusCode != http.StatusFound {
		return "", fmt.Errorf("provider login: %s", res.Status)
	}
	return res.Header.Get("Location"), nil
}

// logout is the end_session_endpoint: id_token_hint must be a token this
// provider signed for the client, post_logout_redirect_uri one
// registered (AllowPostLogoutRedirect); the browser's session here ends
// and it is sent back.
func (op *OP) logout(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	hint := q.Get("id_token_hint")
	parts := strings.Split(hint, ".")
	if len(parts) != 3 || op.verify(parts) != nil {
		http.Error(w, "id_token_hint is not a token of this provider", http.StatusBadRequest)
		return
	}
	if q.Get("client_id") != "" && q.Get("client_id") != op.ClientID {
		http.Error(w, "unknown client_id", http.StatusBadRequest)
		return
	}
	back := q.Get("post_logout_redirect_uri")
	op.mu.Lock()
	registered := op.postLogout[back]
	op.mu.Unlock()
	if back != "" && !registered {
		http.Error(w, "post_logout_redirect_uri is not registered", http.StatusBadRequest)
		return
	}
	if ck, err := r.Cookie(sessionCookie); err == nil {
		op.mu.Lock()
		if _, ok := op.sessions[ck.Value]; ok {
			delete(op.sessions, ck.Value)
			op.logouts++
		}
		op.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1})
	if back == "" {
		w.Write([]byte("signed out"))
		return
	}
	http.Redirect(w, r, back, http.StatusFound)
}

// verify checks a JWT's signature with the current key.
func (op *OP) verify(parts []string) error {
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	op.mu.Lock()
	pub := &op.key.PublicKey
	op.mu.Unlock()
	return rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig)
}

// MintWithKeyID is Mint with the header's key id kid: a key id the JWKS
// does not publish makes a relying party fetch the JWKS again.
func (op *OP) MintWithKeyID(kid string, claims map[string]any) string {
	return op.signAs(kid, op.claims(claims))
}

// Mint signs a JWT with the provider's key: iss, aud (the client id), iat
// and exp (an hour on) filled in unless claims sets them (nil deletes).
func (op *OP) Mint(claims map[string]any) string {
	return op.sign(op.claims(claims))
}

func (op *OP) claims(claims map[string]any) map[string]any {
	now := op.Now()
	c := map[string]any{"iss": op.Issuer, "aud": op.ClientID, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	for k, v := range claims {
		if v == nil {
			delete(c, k)
			continue
		}
		c[k] = v
	}
	return c
}

func (op *OP) sign(claims map[string]any) string {
	op.mu.Lock()
	kid := op.kid
	op.mu.Unlock()
	return op.signAs(kid, claims)
}

func (op *OP) signAs(kid string, claims map[string]any) string {
	h, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": kid})
	p, _ := json.Marshal(claims)
	input := b64(h) + "." + b64(p)
	sum := sha256.Sum256([]byte(input))
	op.mu.Lock()
	key := op.key
	op.mu.Unlock()
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		panic(err)
	}
	return input + "." + b64(sig)
}

func tokenError(w http.ResponseWriter, code, desc string) {
	writeJSON(w, http.StatusBadRequest, map[string]string{"error": code, "error_description": desc})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func randomString() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return b64(b)
}
