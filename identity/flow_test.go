package identity

import (
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/internal/testop"
)

const testCallback = "https://broker.example.test/signin/oidc/callback"

var testKey = []byte("0123456789abcdef0123456789abcdef")

// newTestProvider is a provider on op whose group g is a Reader of
// pool-a, on clk.
func newTestProvider(t *testing.T, op *testop.OP, clk *clocktesting.FakeClock) *Provider {
	t.Helper()
	p, err := New(t.Context(), Config{Issuer: op.Issuer, ClientID: op.ClientID, ClientSecret: op.ClientSecret, Now: clk.Now,
		Roles: RoleMap{Groups: map[string]Grant{"g": {Role: "Reader", HostPools: []string{"pool-a"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newTestFlow(t *testing.T, p *Provider, clk *clocktesting.FakeClock, cookie string) *Flow {
	t.Helper()
	f, err := NewFlow(FlowConfig{Provider: p, CallbackURL: testCallback, StateCookie: cookie, StatePath: "/signin/oidc", Key: testKey,
		Secure: func(r *http.Request) bool { return true }, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// start runs Start for a request to host and returns the state cookie and
// where the browser is sent.
func start(t *testing.T, f *Flow, host, next string) (*http.Cookie, *url.URL) {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "http://"+host+"/signin/oidc", nil)
	w := httptest.NewRecorder()
	f.Start(w, r, next)
	res := w.Result()
	if res.StatusCode != http.StatusSeeOther || len(res.Cookies()) != 1 {
		t.Fatalf("start: %d, cookies %v", res.StatusCode, res.Cookies())
	}
	loc, err := url.Parse(res.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	return res.Cookies()[0], loc
}

// signInAt signs in at the provider for the authorization request auth
// and returns the callback URL the provider sends the browser to.
func signInAt(t *testing.T, op *testop.OP, auth *url.URL, user, password string) string {
	t.Helper()
	cb, err := testop.SignIn(&http.Client{}, auth.String(), user, password)
	if err != nil {
		t.Fatal(err)
	}
	return cb
}

// finish runs Finish for the callback URL with the cookie (nil: none).
func finish(f *Flow, callback string, ck *http.Cookie) (*Identity, string, string, error, *http.Response) {
	r := httptest.NewRequest(http.MethodGet, callback, nil)
	r.TLS = &tls.ConnectionState{}
	if ck != nil {
		r.AddCookie(ck)
	}
	w := httptest.NewRecorder()
	id, raw, next, err := f.Finish(w, r)
	return id, raw, next, err, w.Result()
}

// TestFlowSignIn (R-SEC, OpenID Connect): Start sends the browser to the
// provider with PKCE, a nonce, a state and the configured callback as
// redirect_uri whatever the request's Host says, the sign-in sealed in a
// Secure, HttpOnly, SameSite=Lax cookie; Finish gives the mapped identity
// and next, and clears the cookie. The same callback again is refused
// (the provider's code is single-use), and so is a callback of another
// sign-in, of another area's cookie, one with no cookie, one that took
// longer than LoginTTL, one whose cookie carries another PKCE verifier or
// nonce, and the provider's error, whose text is cut, and shown only for
// this browser's sign-in (its state).
func TestFlowSignIn(t *testing.T) {
	op := testop.Start(t, "cid", "sec", testop.User{Subject: "dave", Password: "pw", Name: "dave@example.test", Groups: []string{"g"}})
	clk := clocktesting.NewFakeClock(time.Now())
	p := newTestProvider(t, op, clk)
	f := newTestFlow(t, p, clk, "vdibroker_oidc")

	ck, auth := start(t, f, "evil.example", "/pools/pool-a")
	q := auth.Query()
	if got := q.Get("redirect_uri"); got != testCallback {
		t.Errorf("redirect_uri %q, want the configured %q (never the Host header's)", got, testCallback)
	}
	if q.Get("code_challenge_method") != "S256" || q.Get("nonce") == "" || q.Get("state") == "" {
		t.Errorf("authorization request without PKCE, nonce or state: %s", auth)
	}
	if ck.Name != "__Host-vdibroker_oidc" || !ck.Secure || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.Path != "/" || ck.Domain != "" {
		t.Errorf("state cookie %+v: want __Host-vdibroker_oidc, Secure, HttpOnly, SameSite=Lax, Path=/, no Domain", ck)
	}
	if strings.Contains(ck.Value, q.Get("state")) || strings.Contains(ck.Value, q.Get("nonce")) {
		t.Error("the state cookie shows its state or nonce: it must be sealed")
	}
	callback := signInAt(t, op, auth, "dave", "pw")
	id, raw, next, err, res := finish(f, callback, ck)
	if err != nil {
		t.Fatal(err)
	}
	if id.Subject != "dave" || id.Role != "Reader" || !cmp.Equal(id.HostPools, []string{"pool-a"}) || raw == "" || next != "/pools/pool-a" {
		t.Errorf("identity %+v, next %q", id, next)
	}
	if cs := res.Cookies(); len(cs) != 1 || cs[0].Name != "__Host-vdibroker_oidc" || cs[0].Path != "/" || !cs[0].Secure || cs[0].MaxAge >= 0 {
		t.Errorf("Finish did not clear the state cookie: %v", cs)
	}
	if _, _, _, err, _ := finish(f, callback, ck); vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated || !strings.Contains(err.Error(), "refused the code") {
		t.Errorf("the same callback again: %v, want the provider's refusal of a used code", err)
	}

	// Another sign-in's callback with the first's cookie.
	ck1, _ := start(t, f, "broker", "/")
	_, auth2 := start(t, f, "broker", "/")
	cb2 := signInAt(t, op, auth2, "dave", "pw")
	for name, c := range map[string]*http.Cookie{"another sign-in's cookie": ck1, "no cookie": nil} {
		if _, _, _, err, _ := finish(f, cb2, c); vdibroker.ErrorCode(err) != vdibroker.EPermission || !strings.Contains(err.Error(), "state mismatch") {
			t.Errorf("%s: %v, want PermissionDenied (state mismatch)", name, err)
		}
	}
	// Another area's cookie, sealed with the same key, does not open.
	other := newTestFlow(t, p, clk, "vdibroker_portal_oidc")
	ckOther, auth3 := start(t, other, "broker", "/")
	ckOther.Name = ck.Name
	cb3 := signInAt(t, op, auth3, "dave", "pw")
	if _, _, _, err, _ := finish(f, cb3, ckOther); vdibroker.ErrorCode(err) != vdibroker.EPermission {
		t.Errorf("another area's state cookie: %v, want PermissionDenied", err)
	}

	// A sign-in that took longer than LoginTTL.
	ck4, auth4 := start(t, f, "broker", "/")
	cb4 := signInAt(t, op, auth4, "dave", "pw")
	clk.Step(LoginTTL)
	if _, _, _, err, _ := finish(f, cb4, ck4); vdibroker.ErrorCode(err) != vdibroker.EPermission || !strings.Contains(err.Error(), "took longer") {
		t.Errorf("a sign-in of %s: %v", LoginTTL, err)
	}

	// The cookie resealed with another verifier, another nonce.
	for name, change := range map[string]func(*pending){
		"another PKCE verifier": func(p *pending) { p.Verifier = "not-the-verifier-of-this-login-0123456789abcdefghij" },
		"another nonce":         func(p *pending) { p.Nonce = "another-nonce" },
	} {
		ck5, auth5 := start(t, f, "broker", "/")
		cb5 := signInAt(t, op, auth5, "dave", "pw")
		pl, err := openState(f.aead, "vdibroker_oidc", ck5.Value, clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		change(pl)
		ck5.Value = sealState(f.aead, "vdibroker_oidc", pl)
		if _, _, _, err, _ := finish(f, cb5, ck5); vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated {
			t.Errorf("%s: %v, want Unauthenticated", name, err)
		}
	}

	// The provider's error for this browser's sign-in, with a description
	// of 700 KB and control characters: shown cut.
	long := "a\x1b[31mb\n" + strings.Repeat("x", 700<<10)
	ck6, auth6 := start(t, f, "broker", "/")
	errorURL := testCallback + "?error=access_denied&error_description=" + url.QueryEscape(long)
	_, _, _, err, _ = finish(f, errorURL+"&state="+url.QueryEscape(auth6.Query().Get("state")), ck6)
	msg := vdibroker.ErrorMessage(err)
	if vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated || !strings.Contains(msg, "access_denied: a[31mbxxx") || len(msg) > 300 {
		t.Errorf("the provider's error: %d bytes %.120q", len(msg), msg)
	}
	// An error of no sign-in of this browser (anyone can write the URL,
	// to have this site show its words as the provider's): not shown.
	ck7, _ := start(t, f, "broker", "/")
	for name, c := range map[string]*http.Cookie{"no cookie": nil, "another sign-in's cookie": ck7} {
		_, _, _, err, _ := finish(f, testCallback+"?error=access_denied&error_description=Call+555-0100+to+unlock&state=forged", c)
		if msg := vdibroker.ErrorMessage(err); vdibroker.ErrorCode(err) != vdibroker.EPermission || strings.Contains(msg, "555") || strings.Contains(msg, "access_denied") {
			t.Errorf("a forged error, %s: %v; want PermissionDenied (state mismatch) without its text", name, err)
		}
	}
}

// TestFlowStateCookieName (R-SEC, OpenID Connect): over HTTPS the state
// cookie is __Host-<name> at "/" (a browser takes it only Secure, with no
// Domain, so a sibling subdomain cannot plant its own sign-in's state);
// the callback reads that name only, so a valid state planted under the
// plain name, as a sibling can, is no sign-in of this browser. Over plain
// HTTP (the demo on 127.0.0.1), where browsers refuse the prefix, it is
// <name> at the configured path, not Secure, and signs in.
func TestFlowStateCookieName(t *testing.T) {
	op := testop.Start(t, "cid", "sec", testop.User{Subject: "dave", Password: "pw", Groups: []string{"g"}})
	clk := clocktesting.NewFakeClock(time.Now())
	p := newTestProvider(t, op, clk)
	f := newTestFlow(t, p, clk, "vdibroker_oidc")

	// The attacker's own sign-in, its state planted under the plain name.
	ck, auth := start(t, f, "broker", "/")
	planted := &http.Cookie{Name: "vdibroker_oidc", Value: ck.Value}
	if _, _, _, err, _ := finish(f, signInAt(t, op, auth, "dave", "pw"), planted); vdibroker.ErrorCode(err) != vdibroker.EPermission || !strings.Contains(err.Error(), "state mismatch") {
		t.Errorf("a state cookie without the __Host- prefix over HTTPS: %v, want PermissionDenied (state mismatch)", err)
	}

	plain, err := NewFlow(FlowConfig{Provider: p, CallbackURL: testCallback, StateCookie: "vdibroker_oidc", StatePath: "/signin/oidc", Key: testKey,
		Secure: func(r *http.Request) bool { return false }, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	ck, auth = start(t, plain, "127.0.0.1", "/")
	if ck.Name != "vdibroker_oidc" || ck.Path != "/signin/oidc" || ck.Secure || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode {
		t.Errorf("state cookie over plain HTTP %+v: want vdibroker_oidc at /signin/oidc, HttpOnly, SameSite=Lax, not Secure", ck)
	}
	if id, _, _, err, _ := finish(plain, signInAt(t, op, auth, "dave", "pw"), ck); err != nil || id.Subject != "dave" {
		t.Errorf("a sign-in over plain HTTP: %+v, %v", id, err)
	}
}

// TestFlowNextIsBounded (R-U2): a next path of up to 2 KiB, as long as
// the user portal keeps (its pages' addresses with their queries, "&"s
// included), is kept; a longer one, one not of this site, or one JSON
// writes so much longer that the state cookie would pass maxStateCookie
// (quotes, bytes not UTF-8), or that would open as a next over 2 KiB (a
// byte not UTF-8 opens as U+FFFD), is "/": the sign-in goes through, not
// refused at the callback. Every state cookie is at most maxStateCookie
// bytes, well under the 4,096 browsers keep.
func TestFlowNextIsBounded(t *testing.T) {
	op := testop.Start(t, "cid", "sec", testop.User{Subject: "dave", Password: "pw", Groups: []string{"g"}})
	clk := clocktesting.NewFakeClock(time.Now())
	f := newTestFlow(t, newTestProvider(t, op, clk), clk, "vdibroker_oidc")
	a2047, amps := "/"+strings.Repeat("a", 2047), "/portal/?"+strings.Repeat("&<>", 679)
	// A byte not UTF-8 is U+FFFD (3 bytes) once sealed: at 2,048 bytes,
	// the next Finish opens would be 2,050, over maxNext.
	invalidAtEnd := "/" + strings.Repeat("a", 2046) + "\xff"
	for next, want := range map[string]string{a2047: a2047, amps: amps,
		"/" + strings.Repeat("a", 2048): "/", "/" + strings.Repeat(`"`, 2047): "/", "/" + strings.Repeat("\xff", 2047): "/",
		invalidAtEnd: "/", "https://evil.example/": "/", "//evil.example/": "/"} {
		ck, _ := start(t, f, "broker", next)
		if len(ck.Value) > maxStateCookie || maxStateCookie > 3500 {
			t.Errorf("a state cookie of %d bytes, over %d (at most 3,500)", len(ck.Value), maxStateCookie)
		}
		p, err := openState(f.aead, "vdibroker_oidc", ck.Value, clk.Now())
		if err != nil {
			t.Errorf("next %.20q...: the state cookie Start set does not open: %v", next, err)
		} else if p.Next != want {
			t.Errorf("next %.20q...: sealed %.20q; want %.20q", next, p.Next, want)
		}
	}
	// The sign-in itself, to the callback: not refused as a state
	// mismatch for where it was to return to.
	ck, auth := start(t, f, "broker", invalidAtEnd)
	if id, _, next, err, _ := finish(f, signInAt(t, op, auth, "dave", "pw"), ck); err != nil || id.Subject != "dave" || next != "/" {
		t.Errorf("a sign-in with a next of a byte not UTF-8 at 2,048 bytes: %+v, next %.20q, %v; want dave, next /", id, next, err)
	}
}

// TestKeySetRefresh (R-SEC): tokens naming an unknown key id make the
// provider's keys be fetched at most once per KeyRefresh, however many
// arrive; a verification of CachedKeysOnly never fetches; once the
// provider has rotated its key, a token of the new key verifies after the
// next fetch, and a token of a key held never fetches.
func TestKeySetRefresh(t *testing.T) {
	op := testop.Start(t, "cid", "sec")
	clk := clocktesting.NewFakeClock(time.Now())
	op.Now = clk.Now
	p := newTestProvider(t, op, clk)
	ctx := t.Context()
	claims := map[string]any{"sub": "eve", "groups": []string{"g"}}
	if n := op.JWKSFetches(); n != 1 {
		t.Fatalf("%d fetches at start, want 1", n)
	}
	for range 300 {
		if _, err := p.Verify(ctx, op.MintWithKeyID("unknown-kid", claims)); vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated {
			t.Fatalf("a token of an unknown key: %v", err)
		}
	}
	if n := op.JWKSFetches(); n != 1 {
		t.Errorf("300 tokens of an unknown key within a minute of the start: %d fetches, want still 1", n)
	}
	clk.Step(KeyRefresh)
	for range 300 {
		p.Verify(ctx, op.MintWithKeyID("unknown-kid", claims))
	}
	if n := op.JWKSFetches(); n != 2 {
		t.Errorf("a minute later, 300 more: %d fetches, want 2", n)
	}
	clk.Step(KeyRefresh)
	op.RotateKey()
	fresh := op.Mint(claims)
	if _, err := p.Verify(CachedKeysOnly(ctx), fresh); vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated || op.JWKSFetches() != 2 {
		t.Errorf("CachedKeysOnly with a new key: %v, %d fetches; want refused without a fetch", err, op.JWKSFetches())
	}
	if id, err := p.Verify(ctx, fresh); err != nil || id.Subject != "eve" || op.JWKSFetches() != 3 {
		t.Errorf("the rotated key: %+v, %v, %d fetches; want eve after a third fetch", id, err, op.JWKSFetches())
	}
	for range 10 {
		if _, err := p.Verify(ctx, op.Mint(claims)); err != nil {
			t.Fatal(err)
		}
	}
	if n := op.JWKSFetches(); n != 3 {
		t.Errorf("tokens of a key held: %d fetches, want 3", n)
	}
}

// TestSetRoles: a new role map applies to the next verification.
func TestSetRoles(t *testing.T) {
	op := testop.Start(t, "cid", "sec")
	clk := clocktesting.NewFakeClock(time.Now())
	p := newTestProvider(t, op, clk)
	tok := op.Mint(map[string]any{"sub": "eve", "groups": []string{"g"}})
	if id, err := p.Verify(t.Context(), tok); err != nil || id.Role != "Reader" {
		t.Fatalf("before: %+v, %v", id, err)
	}
	p.SetRoles(RoleMap{Groups: map[string]Grant{"g": {Role: "Contributor"}}})
	if id, err := p.Verify(t.Context(), tok); err != nil || id.Role != "Contributor" || id.HostPools != nil {
		t.Errorf("after SetRoles: %+v, %v", id, err)
	}
	p.SetRoles(RoleMap{})
	if _, err := p.Verify(t.Context(), tok); vdibroker.ErrorCode(err) != vdibroker.EPermission {
		t.Errorf("unmapped after SetRoles: %v", err)
	}
}

// TestEndSessionURL: the provider's end_session_endpoint with the ID
// token as hint, the client id and where to come back; none without it.
func TestEndSessionURL(t *testing.T) {
	op := testop.Start(t, "cid", "sec")
	p := newTestProvider(t, op, clocktesting.NewFakeClock(time.Now()))
	u, err := url.Parse(p.EndSessionURL("the.id.token", "https://broker.example.test/signin"))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	if u.String()[:len(op.Issuer+"/logout")] != op.Issuer+"/logout" || q.Get("id_token_hint") != "the.id.token" ||
		q.Get("post_logout_redirect_uri") != "https://broker.example.test/signin" || q.Get("client_id") != "cid" {
		t.Errorf("end-session URL %s", u)
	}
	if got := (&Provider{}).EndSessionURL("x", "y"); got != "" {
		t.Errorf("without an end_session_endpoint: %q", got)
	}
}

// FuzzOpenState: the state cookie decoder takes any cookie value without
// panicking; what it accepts is a well-formed sign-in that seals and
// opens again to the same. Besides the value as sent, the fuzzer's
// plaintext is sealed with the key, so the decoding behind the seal (JSON
// with unknown fields, trailing data, empty or long fields, a next that is
// not a path) is reached too. Seeds: a cookie this key sealed, one cut
// short, one of another area's name (same bytes), base64 of garbage, not
// base64; plaintexts of a good sign-in, one with an unknown field, one
// with a second document after it, one with next "//evil".
func FuzzOpenState(f *testing.F) {
	aead, err := stateAEAD(testKey)
	if err != nil {
		f.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	good := sealState(aead, "vdibroker_oidc", &pending{State: "s", Nonce: "n", Verifier: "v", Next: "/", Expires: now.Unix() + 600})
	exp := fmt.Sprint(now.Unix() + 600)
	f.Add("vdibroker_oidc", good, []byte(`{"s":"s","n":"n","v":"v","x":"/","e":`+exp+`}`))
	f.Add("vdibroker_oidc", good[:len(good)-3], []byte(`{"s":"s","n":"n","v":"v","x":"/","e":`+exp+`,"admin":true}`))
	f.Add("vdibroker_portal_oidc", good, []byte(`{"s":"s","n":"n","v":"v","x":"/","e":`+exp+`}{}`))
	f.Add("vdibroker_oidc", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", []byte(`{"s":"s","n":"n","v":"v","x":"//evil","e":`+exp+`}`))
	f.Add("vdibroker_oidc", "%%%not base64%%%", []byte{})
	check := func(t *testing.T, name, value string) {
		p, err := openState(aead, name, value, now)
		if err != nil {
			return
		}
		if p.State == "" || p.Nonce == "" || p.Verifier == "" || !strings.HasPrefix(p.Next, "/") || strings.HasPrefix(p.Next, "//") || len(p.Next) > maxNext {
			t.Fatalf("accepted a malformed sign-in %+v", p)
		}
		again, err := openState(aead, name, sealState(aead, name, p), now)
		if err != nil || *again != *p {
			t.Fatalf("resealed: %+v, %v; want %+v", again, err, p)
		}
	}
	f.Fuzz(func(t *testing.T, name, value string, plain []byte) {
		check(t, name, value)
		nonce := make([]byte, aead.NonceSize())
		check(t, name, base64.RawURLEncoding.EncodeToString(aead.Seal(nonce, nonce, plain, []byte(name))))
	})
}

// TestFlowEndUsers (R-U2): a flow with EndUsers (the user portal's) signs
// in an identity the role map does not know as an end user, unscoped,
// its groups carried; the same identity at a flow without it (the
// console's) and at Verify (the API's) is refused, and VerifyUser takes
// its token, a mapped user's too, as a User.
func TestFlowEndUsers(t *testing.T) {
	op := testop.Start(t, "cid", "sec", testop.User{Subject: "erin", Password: "pw", Groups: []string{"sales"}},
		testop.User{Subject: "dave", Password: "pw", Groups: []string{"g"}})
	clk := clocktesting.NewFakeClock(time.Now())
	p := newTestProvider(t, op, clk)
	portal, err := NewFlow(FlowConfig{Provider: p, CallbackURL: testCallback, StateCookie: "portal", StatePath: "/portal/signin/oidc", Key: testKey,
		Secure: func(r *http.Request) bool { return true }, Now: clk.Now, EndUsers: true})
	if err != nil {
		t.Fatal(err)
	}
	ck, auth := start(t, portal, "broker.example.test", "/portal/")
	id, raw, _, err, _ := finish(portal, signInAt(t, op, auth, "erin", "pw"), ck)
	if err != nil || id.Subject != "erin" || id.Role != vdibroker.RoleUser || id.HostPools != nil || !cmp.Equal(id.Groups, []string{"sales"}) {
		t.Fatalf("erin at the portal: %+v, %v", id, err)
	}
	console := newTestFlow(t, p, clk, "console")
	ck, auth = start(t, console, "broker.example.test", "/")
	if _, _, _, err, _ := finish(console, signInAt(t, op, auth, "erin", "pw"), ck); vdibroker.ErrorCode(err) != vdibroker.EPermission {
		t.Errorf("erin at the console: %v, want PermissionDenied", err)
	}
	if _, err := p.Verify(t.Context(), raw); vdibroker.ErrorCode(err) != vdibroker.EPermission {
		t.Errorf("erin's token at Verify: %v, want PermissionDenied", err)
	}
	dave := op.Mint(map[string]any{"sub": "dave", "groups": []string{"g"}})
	if id, err := p.VerifyUser(t.Context(), dave); err != nil || id.Role != vdibroker.RoleUser || id.HostPools != nil {
		t.Errorf("dave (a Reader of the map) at VerifyUser: %+v, %v; want a User", id, err)
	}
	if _, err := p.VerifyUser(t.Context(), raw+"x"); vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated {
		t.Errorf("a forged token at VerifyUser: %v", err)
	}
}
