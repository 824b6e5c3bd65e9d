package identity

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The sign-in state cookie (R-SEC, OpenID Connect). A sign-in under way
// is kept in the browser, not in the broker: its state, nonce, PKCE
// verifier, where to go after and when it expires, as JSON sealed with
// AES-256-GCM under a key every replica shares, the cookie's name as the
// additional data (a cookie of one area does not open in another). So an
// anonymous GET of the sign-in link stores nothing, and the callback may
// reach another replica than the one that started it.

// pending is a sign-in under way.
type pending struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Next     string `json:"x"`
	Expires  int64  `json:"e"` // Unix seconds
}

// maxStateCookie bounds the cookie's value before it is decoded: a sealed
// pending sign-in is about 300 bytes with a next path of maxNext.
const maxStateCookie = 3000

// maxNext bounds the path the browser goes to after signing in.
const maxNext = 1024

// nextPath reports whether next may be where a sign-in goes after: a
// path of this site (not "//host"), at most maxNext bytes. The area
// checks it more closely before Start.
func nextPath(next string) bool {
	return len(next) <= maxNext && strings.HasPrefix(next, "/") && !strings.HasPrefix(next, "//")
}

// stateAEAD returns the cipher sealing state cookies with key (32 bytes).
func stateAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("the state cookie key must be 32 bytes, got %d", len(key))
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// sealState returns p as a cookie value of the cookie name.
func sealState(aead cipher.AEAD, name string, p *pending) string {
	plain, _ := json.Marshal(p) // strings and an int: cannot fail
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		panic("identity: random source failed: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(aead.Seal(nonce, nonce, plain, []byte(name)))
}

// errBadState is any state cookie that does not open: forged, of another
// key or cookie, cut, or not ours at all.
var errBadState = errors.New("the sign-in state cookie is not one this broker sealed")

// openState decodes a cookie value of the cookie name, refusing one that
// was not sealed with aead for that name, is malformed, or expired at or
// before now. It is a pure function of its input (fuzzed).
func openState(aead cipher.AEAD, name, value string, now time.Time) (*pending, error) {
	if len(value) > maxStateCookie {
		return nil, errBadState
	}
	raw, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil || len(raw) < aead.NonceSize()+aead.Overhead() {
		return nil, errBadState
	}
	plain, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], []byte(name))
	if err != nil {
		return nil, errBadState
	}
	var p pending
	dec := json.NewDecoder(bytes.NewReader(plain))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil || dec.More() {
		return nil, errBadState
	}
	if p.State == "" || p.Nonce == "" || p.Verifier == "" || !nextPath(p.Next) {
		return nil, errBadState
	}
	if !now.Before(time.Unix(p.Expires, 0)) {
		return nil, errors.New("the sign-in took too long")
	}
	return &p, nil
}
