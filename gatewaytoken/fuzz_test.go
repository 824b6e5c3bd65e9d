package gatewaytoken

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"maps"
	"math"
	"math/big"
	"strings"
	"testing"
	"time"
)

// FuzzVerify feeds arbitrary text as a PAA cookie, as any client on the
// internet may: Verify must not panic, and nothing but a token of the
// test's key may verify.
func FuzzVerify(f *testing.F) {
	s, _ := GenerateSigner("k")
	ks, _ := NewKeySet(map[string]ed25519.PublicKey{"k": s.PublicKey()})
	good, _ := s.Sign(testClaims())
	// A valid token.
	f.Add(good)
	// Its fields shuffled, cut and doubled.
	f.Add(good[:len(good)/2])
	f.Add(good + "." + good)
	f.Add("v1.k..")
	f.Add("v1.k.e30.AAAA")
	f.Add("")
	// One byte over MaxTokenLen, and a key id of that length.
	f.Add(good + strings.Repeat("A", MaxTokenLen+1-len(good)))
	f.Add("v1." + strings.Repeat("k", MaxTokenLen) + ".e30.AAAA")
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := ks.Verify(tok, t0.Add(time.Minute))
		if err == nil && tok != good {
			// Ed25519 signatures are not malleable in Go's implementation:
			// a different text verifying means a forgery.
			t.Fatalf("forged token verified: %q -> %+v", tok, c)
		}
	})
}

// FuzzVerifySignedClaims signs arbitrary bytes as a token's claims with
// the test's key, so that what Verify does once a signature is good (the
// JSON of the claims, their bounds, the window) is fuzzed too, which
// FuzzVerify, unable to sign, never reaches: no panic, and claims it
// accepts are claims Sign would sign, whose window holds the time asked
// about and is at most MaxValidity, in exact arithmetic.
func FuzzVerifySignedClaims(f *testing.F) {
	s, _ := GenerateSigner("k")
	ks, _ := NewKeySet(map[string]ed25519.PublicKey{"k": s.PublicKey()})
	claims := func(nbf, exp int64) []byte {
		c := testClaims()
		c.NotBefore, c.Expiry = nbf, exp
		b, _ := json.Marshal(c)
		return b
	}
	now := t0.Unix()
	// Valid claims.
	f.Add(claims(now, now+300), int64(60))
	// A window of 10^10 s: in nanoseconds over int64, which once wrapped
	// to less than an hour and verified for three centuries.
	f.Add(claims(now, now+10_000_000_000), int64(100*365*24*3600))
	// A window of nearly 2^64 s, exp - nbf itself over int64.
	f.Add(claims(math.MinInt64+1, math.MaxInt64), int64(0))
	// Times far out, numbers JSON cannot fit, an unknown claim, a
	// claim twice, another type.
	f.Add(claims(math.MaxInt64-10, math.MaxInt64), int64(0))
	f.Add([]byte(`{"jti":"j","usr":"u","sid":"s","pool":"p","host":"h:3389","nbf":1e30,"exp":2}`), int64(0))
	f.Add([]byte(`{"jti":"j","usr":"u","sid":"s","pool":"p","host":"h:3389","nbf":1,"exp":2,"adm":true}`), int64(0))
	f.Add([]byte(`{"jti":"j","usr":"u","sid":"s","pool":"p","host":"h:3389","nbf":1,"exp":2,"exp":99999999999}`), int64(1))
	f.Add([]byte(`{"jti":"j","usr":"u","sid":"s","pool":"p","host":"[::1]:3389","nbf":1,"exp":2,"idle":-1}`), int64(1))
	f.Add([]byte(`[]`), int64(0))
	f.Fuzz(func(t *testing.T, payload []byte, at int64) {
		if at < 0 || at > 1<<40 {
			return // a gateway's clock reads now, not year 30,000
		}
		signed := "v1.k." + b64.EncodeToString(payload)
		tok := signed + "." + b64.EncodeToString(ed25519.Sign(s.Key, []byte(signed)))
		when := time.Unix(at, 0)
		c, err := ks.Verify(tok, when)
		if err != nil {
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("refusal %v does not wrap ErrRefused", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("verified claims Sign refuses: %+v: %v", c, err)
		}
		window := new(big.Int).Sub(big.NewInt(c.Expiry), big.NewInt(c.NotBefore))
		if window.Sign() <= 0 || window.Cmp(big.NewInt(int64(MaxValidity/time.Second))) > 0 {
			t.Fatalf("verified a window of %v s (nbf %d, exp %d), want 1..%d", window, c.NotBefore, c.Expiry, int64(MaxValidity/time.Second))
		}
		leeway := int64(Leeway / time.Second)
		if at+leeway < c.NotBefore || at-leeway >= c.Expiry {
			t.Fatalf("verified at %d outside nbf %d .. exp %d", at, c.NotBefore, c.Expiry)
		}
	})
}

// FuzzParseJWKS feeds arbitrary bytes as a key set document, as a
// gateway reads one from --keys-file or --keys-url (a proxy before the
// broker may answer anything): no panic, and a set it accepts holds 1 to
// MaxKeys Ed25519 keys of valid ids, which MarshalJWKS writes back to the
// same set.
func FuzzParseJWKS(f *testing.F) {
	s, _ := GenerateSigner("k1")
	doc, _ := MarshalJWKS(map[string]ed25519.PublicKey{"k1": s.PublicKey()})
	f.Add(doc)
	x := b64.EncodeToString(s.PublicKey())
	key := func(kid, x string) string {
		return `{"kty":"OKP","crv":"Ed25519","kid":"` + kid + `","x":"` + x + `"}`
	}
	// A key id twice, a key id that is no key id, an x of 31 and 33
	// bytes, another kind of key, no keys, more than MaxKeys.
	f.Add([]byte(`{"keys":[` + key("k1", x) + `,` + key("k1", x) + `]}`))
	f.Add([]byte(`{"keys":[` + key("k 1/..", x) + `]}`))
	f.Add([]byte(`{"keys":[` + key("k1", x[:41]) + `]}`))
	f.Add([]byte(`{"keys":[` + key("k1", x+"AA") + `]}`))
	f.Add([]byte(`{"keys":[{"kty":"RSA","kid":"k1","n":"AQAB","e":"AQAB","alg":"none"}]}`))
	f.Add([]byte(`{"keys":[]}`))
	many := make([]string, MaxKeys+1)
	for i := range many {
		many[i] = key("k"+strings.Repeat("x", i), x)
	}
	f.Add([]byte(`{"keys":[` + strings.Join(many, ",") + `]}`))
	f.Add([]byte(`<html>`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ks, err := ParseJWKS(data)
		if err != nil {
			return
		}
		keys := ks.Keys()
		if len(keys) < 1 || len(keys) > MaxKeys {
			t.Fatalf("accepted %d keys", len(keys))
		}
		for kid, k := range keys {
			if !keyIDPattern.MatchString(kid) || len(k) != ed25519.PublicKeySize {
				t.Fatalf("accepted key %q of %d bytes", kid, len(k))
			}
		}
		out, err := MarshalJWKS(keys)
		if err != nil {
			t.Fatalf("accepted keys do not marshal: %v", err)
		}
		again, err := ParseJWKS(out)
		if err != nil || !maps.EqualFunc(keys, again.Keys(), func(a, b ed25519.PublicKey) bool { return a.Equal(b) }) {
			t.Fatalf("accepted keys do not read back: %v", err)
		}
	})
}
