package gatewaytoken

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func testClaims() Claims {
	return Claims{ID: NewID(), User: "alice", Session: "s-1", Pool: "pool-a", Host: "10.0.0.2:3389",
		NotBefore: t0.Unix(), Expiry: t0.Add(5 * time.Minute).Unix(), IdleSeconds: 600}
}

func signer(t testing.TB, kid string) *Signer {
	t.Helper()
	s, err := GenerateSigner(kid)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func keySet(t testing.TB, signers ...*Signer) *KeySet {
	t.Helper()
	keys := map[string]ed25519.PublicKey{}
	for _, s := range signers {
		keys[s.KeyID] = s.PublicKey()
	}
	ks, err := NewKeySet(keys)
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

// TestVerify: a token verifies to its claims inside its window (with the
// clock leeway at both ends) and is refused, with the reason a metric
// records, when expired, early, altered, signed by another key or naming
// an unknown key.
func TestVerify(t *testing.T) {
	cur, prev, stranger := signer(t, "k2"), signer(t, "k1"), signer(t, "k2")
	ks := keySet(t, cur, prev)
	c := testClaims()
	tok, err := cur.Sign(c)
	if err != nil {
		t.Fatal(err)
	}
	old, _ := prev.Sign(c)
	forged, _ := stranger.Sign(c) // same key id, other key

	// Altering the claims: re-encode them with another host, keep the signature.
	parts := strings.Split(tok, ".")
	other := c
	other.Host = "10.0.0.9:3389"
	otherTok, _ := cur.Sign(other)
	altered := strings.Join([]string{parts[0], parts[1], strings.Split(otherTok, ".")[2], parts[3]}, ".")
	// Flipping one signature bit.
	sig, _ := base64.RawURLEncoding.DecodeString(parts[3])
	sig[0] ^= 1
	flipped := strings.Join(append(parts[:3:3], base64.RawURLEncoding.EncodeToString(sig)), ".")

	tests := []struct {
		name   string
		tok    string
		now    time.Time
		reason string
	}{
		{"valid", tok, t0.Add(time.Minute), ""},
		{"previous key still valid", old, t0.Add(time.Minute), ""},
		{"at nbf minus leeway", tok, t0.Add(-Leeway), ""},
		{"before nbf beyond leeway", tok, t0.Add(-Leeway - time.Second), "not_yet_valid"},
		// exp is t0+5m; with 30 s leeway the last valid second is exp+29s.
		{"just before exp plus leeway", tok, t0.Add(5*time.Minute + Leeway - time.Second), ""},
		{"expired", tok, t0.Add(5*time.Minute + Leeway), "expired"},
		{"altered claims", altered, t0.Add(time.Minute), "bad_signature"},
		{"flipped signature", flipped, t0.Add(time.Minute), "bad_signature"},
		{"other key same id", forged, t0.Add(time.Minute), "bad_signature"},
		{"unknown key", strings.Replace(tok, "v1.k2.", "v1.k9.", 1), t0.Add(time.Minute), "unknown_key"},
		{"not a token", "hello", t0, "malformed"},
		{"three fields", "v1.k2.abc", t0, "malformed"},
		{"version 2", strings.Replace(tok, "v1.", "v2.", 1), t0, "malformed"},
		{"too long", tok + strings.Repeat("A", MaxTokenLen), t0, "malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ks.Verify(tt.tok, tt.now)
			if Reason(err) != tt.reason || (tt.reason != "" && !errors.Is(err, ErrRefused)) {
				t.Fatalf("Verify: %v (reason %q), want reason %q", err, Reason(err), tt.reason)
			}
			if tt.reason == "" {
				if diff := cmp.Diff(c, got); diff != "" {
					t.Errorf("claims (-signed +verified):\n%s", diff)
				}
			}
		})
	}
}

// TestSignRefuses: the signer refuses claims the gateway could not use: no
// port, a window over MaxValidity, an empty user.
func TestSignRefuses(t *testing.T) {
	s := signer(t, "k")
	for name, mut := range map[string]func(*Claims){
		"host without port": func(c *Claims) { c.Host = "10.0.0.2" },
		"port 0":            func(c *Claims) { c.Host = "10.0.0.2:0" },
		"window of a day":   func(c *Claims) { c.Expiry = c.NotBefore + 86400 },
		// Its nanoseconds over int64, and exp - nbf itself over it:
		// each once wrapped to a window of less than an hour.
		"window of 10^10 s": func(c *Claims) { c.Expiry = c.NotBefore + 10_000_000_000 },
		"window of int64's": func(c *Claims) { c.NotBefore, c.Expiry = math.MinInt64+1, math.MaxInt64 },
		"exp before nbf":    func(c *Claims) { c.Expiry = c.NotBefore - 1 },
		"no user":           func(c *Claims) { c.User = "" },
		"user of 257":       func(c *Claims) { c.User = strings.Repeat("u", MaxUser+1) },
		"user not UTF-8":    func(c *Claims) { c.User = "u\xff" },
		"host of 260":       func(c *Claims) { c.Host = strings.Repeat("h", MaxHost-4) + ":3389" },
		"negative idle":     func(c *Claims) { c.IdleSeconds = -1 },
	} {
		c := testClaims()
		mut(&c)
		if tok, err := s.Sign(c); err == nil {
			t.Errorf("%s: signed %s", name, tok)
		}
	}
}

// TestLongestNamesSignAndVerify (R-GW1, R-SEC): a user of the longest
// name the broker takes (256 characters, of 4 bytes each, or of those
// JSON escapes into six) and a host of the longest address (a 253-byte
// DNS name and a five-digit port) go through a gateway: their token is
// signed, within MaxTokenLen, and verified with the same claims.
func TestLongestNamesSignAndVerify(t *testing.T) {
	s := signer(t, strings.Repeat("k", 64))
	ks := keySet(t, s)
	for _, user := range []string{strings.Repeat("\U0001D538", MaxUser), strings.Repeat("<", MaxUser), strings.Repeat("\u2028", MaxUser)} {
		c := testClaims()
		c.User, c.Host = user, strings.Repeat("h", 253)+":65535"
		c.Pool, c.Session, c.ID = strings.Repeat("p", 256), strings.Repeat("s", 256), strings.Repeat("j", 256)
		tok, err := s.Sign(c)
		if err != nil {
			t.Fatalf("user of %d bytes: %v", len(user), err)
		}
		got, err := ks.Verify(tok, time.Unix(c.NotBefore, 0))
		if err != nil || got != c {
			t.Fatalf("user of %d bytes: verified %+v, %v", len(user), got, err)
		}
	}
}

// TestJWKSRoundTrip: the published document reads back to the same keys;
// a document with a key of another kind is refused.
func TestJWKSRoundTrip(t *testing.T) {
	a, b := signer(t, "a"), signer(t, "b")
	doc, err := MarshalJWKS(map[string]ed25519.PublicKey{"a": a.PublicKey(), "b": b.PublicKey()})
	if err != nil {
		t.Fatal(err)
	}
	ks, err := ParseJWKS(doc)
	if err != nil {
		t.Fatal(err)
	}
	if got := ks.KeyIDs(); !cmp.Equal(got, []string{"a", "b"}) {
		t.Fatalf("key ids %v", got)
	}
	tok, _ := b.Sign(testClaims())
	if _, err := ks.Verify(tok, t0); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{`{"keys":[]}`, `{"keys":[{"kty":"RSA","kid":"r","n":"x"}]}`,
		`{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"a","x":"c2hvcnQ"}]}`, `not json`} {
		if _, err := ParseJWKS([]byte(bad)); err == nil {
			t.Errorf("ParseJWKS(%s) accepted", bad)
		}
	}
	pemKey, err := MarshalPrivateKeyPEM(a.Key)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParsePrivateKeyPEM(pemKey)
	if err != nil || !back.Equal(a.Key) {
		t.Fatalf("PEM round trip: %v", err)
	}
}

// TestKeyringRotation: the keyring reloads its source on each tick of its
// clock; a token of a new key verifies after the tick, a failed reload
// keeps the keys in force, and a key removed from the source stops
// verifying.
func TestKeyringRotation(t *testing.T) {
	k1, k2 := signer(t, "k1"), signer(t, "k2")
	path := filepath.Join(t.TempDir(), "keys.json")
	write := func(signers ...*Signer) {
		keys := map[string]ed25519.PublicKey{}
		for _, s := range signers {
			keys[s.KeyID] = s.PublicKey()
		}
		doc, err := MarshalJWKS(keys)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, doc, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(k1)
	clk := clocktesting.NewFakeClock(t0)
	ring, err := NewKeyring(t.Context(), FileSource{Path: path}, time.Minute, clk, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go ring.Run(ctx)
	tick := func(wantIDs string) {
		t.Helper()
		for !clk.HasWaiters() {
			time.Sleep(time.Millisecond)
		}
		clk.Step(time.Minute)
		deadline := time.Now().Add(5 * time.Second)
		for strings.Join(ring.Current().KeyIDs(), ",") != wantIDs {
			if time.Now().After(deadline) {
				t.Fatalf("keys %v, want %s", ring.Current().KeyIDs(), wantIDs)
			}
			time.Sleep(time.Millisecond)
		}
	}
	c := testClaims()
	tok2, _ := k2.Sign(c)
	if _, err := ring.Verify(tok2, t0); Reason(err) != "unknown_key" {
		t.Fatalf("k2 before rotation: %v", err)
	}
	write(k1, k2) // the broker publishes its next key beside the current
	tick("k1,k2")
	if _, err := ring.Verify(tok2, t0); err != nil {
		t.Fatalf("k2 after rotation: %v", err)
	}
	os.WriteFile(path, []byte("garbage"), 0o644) // a bad reload keeps k1,k2
	clk.Step(time.Minute)
	write(k2) // k1 retired
	tick("k2")
	tok1, _ := k1.Sign(c)
	if _, err := ring.Verify(tok1, t0); Reason(err) != "unknown_key" {
		t.Fatalf("k1 after retirement: %v", err)
	}
}

// TestURLSource: keys fetched from a URL with the bearer credential
// (TokenFunc's answer at each fetch when set); an error status is an
// error, not an empty key set.
func TestURLSource(t *testing.T) {
	k := signer(t, "k")
	doc, _ := MarshalJWKS(map[string]ed25519.PublicKey{"k": k.PublicKey()})
	var fail atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer secret" || fail.Load() {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		w.Write(doc)
	}))
	defer srv.Close()
	ks, err := URLSource{URL: srv.URL, Token: "secret"}.Keys(t.Context())
	if err != nil || !cmp.Equal(ks.KeyIDs(), []string{"k"}) {
		t.Fatalf("keys %v, %v", ks, err)
	}
	if _, err := (URLSource{URL: srv.URL}).Keys(t.Context()); err == nil {
		t.Fatal("no credential: keys fetched")
	}
	// TokenFunc is asked at each fetch (a token file read again on
	// SIGHUP), in place of Token.
	var tok atomic.Pointer[string]
	old, cur := "old", "secret"
	tok.Store(&old)
	src := URLSource{URL: srv.URL, Token: "secret", TokenFunc: func() string { return *tok.Load() }}
	if _, err := src.Keys(t.Context()); err == nil {
		t.Fatal("TokenFunc's answer not sent: keys fetched with Token")
	}
	tok.Store(&cur)
	if ks, err := src.Keys(t.Context()); err != nil || !cmp.Equal(ks.KeyIDs(), []string{"k"}) {
		t.Fatalf("keys with TokenFunc's new answer: %v, %v", ks, err)
	}
}

// flipSource answers set until next is stored, then next; it counts its
// reads.
type flipSource struct {
	set   *KeySet
	next  atomic.Pointer[KeySet]
	reads atomic.Int32
}

func (s *flipSource) Keys(context.Context) (*KeySet, error) {
	s.reads.Add(1)
	if n := s.next.Load(); n != nil {
		return n, nil
	}
	return s.set, nil
}

// TestKeyringReloadsForUnknownKey_RGW6: a token of a key the keyring does
// not hold has the source read at once (after a revoke the broker signs
// with a key gateways have not read yet), and verifies if the source
// has it; tokens of made-up key ids read the source at most every
// UnknownKeyReloadEvery.
func TestKeyringReloadsForUnknownKey_RGW6(t *testing.T) {
	k1, k2, k3 := signer(t, "k1"), signer(t, "k2"), signer(t, "k3")
	src := &flipSource{set: keySet(t, k1)}
	clk := clocktesting.NewFakeClock(t0)
	ring, err := NewKeyring(t.Context(), src, time.Hour, clk, nil)
	if err != nil {
		t.Fatal(err)
	}
	src.next.Store(keySet(t, k2)) // the broker revoked k1
	tok2, _ := k2.Sign(testClaims())
	if _, err := ring.Verify(tok2, t0); err != nil {
		t.Fatalf("a token of the new key: %v, want it verified after a read", err)
	}
	if n := src.reads.Load(); n != 2 {
		t.Fatalf("%d reads, want 2 (the first and the unknown key's)", n)
	}
	tok3, _ := k3.Sign(testClaims())
	for range 3 {
		if _, err := ring.Verify(tok3, t0); Reason(err) != "unknown_key" {
			t.Fatalf("a token of a key never published: %v", err)
		}
	}
	if n := src.reads.Load(); n != 2 {
		t.Errorf("%d reads after three made-up key ids within %v, want still 2", n, UnknownKeyReloadEvery)
	}
	clk.Step(UnknownKeyReloadEvery)
	ring.Verify(tok3, t0)
	if n := src.reads.Load(); n != 3 {
		t.Errorf("%d reads after %v, want 3", n, UnknownKeyReloadEvery)
	}
}

// downSource fails until up is set, then answers set; it counts its
// reads.
type downSource struct {
	set   *KeySet
	up    atomic.Bool
	reads atomic.Int32
}

func (s *downSource) Keys(context.Context) (*KeySet, error) {
	s.reads.Add(1)
	if !s.up.Load() {
		return nil, errors.New("connection refused")
	}
	return s.set, nil
}

// TestPendingKeyringBacksOff_RGW6: a keyring that could not read its
// source at start holds no keys: a token is refused ErrNoKeys (after one
// read for it, which may find the broker up), and Run reads the source
// again after 1 s, 2 s, 4 s ... and at most every 30 s, on its clock,
// until a read succeeds; the keyring then verifies and Loaded is closed.
func TestPendingKeyringBacksOff_RGW6(t *testing.T) {
	k := signer(t, "k")
	src := &downSource{set: keySet(t, k)}
	clk := clocktesting.NewFakeClock(t0)
	ring := NewPendingKeyring(src, time.Hour, clk, nil)
	tok, _ := k.Sign(testClaims())
	if _, err := ring.Verify(tok, t0); !errors.Is(err, ErrNoKeys) {
		t.Fatalf("a token without keys: %v, want ErrNoKeys", err)
	}
	if ring.KeyCount() != 0 || ring.Failures() != 1 {
		t.Fatalf("%d keys, %d failed reads, want 0 and the token's 1", ring.KeyCount(), ring.Failures())
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan struct{})
	go func() { ring.Run(ctx); close(done) }()
	// waits steps the clock by d once Run waits on it, and checks that
	// d less a nanosecond reads nothing and d reads once.
	waits := func(d time.Duration) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !clk.HasWaiters(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("Run waits on no timer")
			}
		}
		before := src.reads.Load()
		clk.Step(d - time.Nanosecond)
		if n := src.reads.Load(); n != before {
			t.Fatalf("a read %v into a wait of %v", d-time.Nanosecond, d)
		}
		clk.Step(time.Nanosecond)
		for deadline := time.Now().Add(5 * time.Second); src.reads.Load() == before; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no read after a wait of %v", d)
			}
		}
	}
	for _, d := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second} {
		waits(d)
	}
	src.up.Store(true)
	waits(30 * time.Second)
	select {
	case <-ring.Loaded():
	case <-time.After(5 * time.Second):
		t.Fatal("Loaded not closed once a read succeeded")
	}
	if _, err := ring.Verify(tok, t0); err != nil {
		t.Errorf("a token once the keys are read: %v", err)
	}
	if ring.Failures() != 7 {
		t.Errorf("%d failed reads, want 7 (the token's and six of Run's)", ring.Failures())
	}
	cancel()
	<-done
}
