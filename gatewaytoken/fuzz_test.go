package gatewaytoken

import (
	"crypto/ed25519"
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
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := ks.Verify(tok, t0.Add(time.Minute))
		if err == nil && tok != good {
			// Ed25519 signatures are not malleable in Go's implementation:
			// a different text verifying means a forgery.
			t.Fatalf("forged token verified: %q -> %+v", tok, c)
		}
	})
}
