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

// maxStateCookie bounds the cookie's value, before it is decoded and as
// Start seals it: a sealed pending sign-in is 3,000 bytes with a next
// path of maxNext that JSON writes as it is (sealState escapes no "&",
// common in a query), so 400 bytes are left for a next's escapes ("\"",
// a byte not UTF-8), and with its name and attributes the cookie stays
// well under the 4,096 bytes browsers keep of one.
const maxStateCookie = 3400

// maxNext bounds the path the browser goes to after signing in: as long
// as the user portal's (portal.maxNext), whose pages' addresses carry
// queries (R-U2).
const maxNext = 2048

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
	// Strings and an int: cannot fail. "&", "<" and ">" as they are, not
	// "\u0026": the cookie is no HTML, and a query's "&"s would make it
	// six times as long.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(p)
	plain := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
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
