package webguard

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
)

// A secret a browser holds (a session cookie's value, a launch's id)
// keeps what the database stores for it unreadable without it: the
// database keeps the secret's hash and, sealed under a key derived from
// the secret, what the secret unlocks. The table alone opens nothing.

// DeriveKey returns a 32-byte key of secret for info (HKDF-SHA256).
func DeriveKey(secret, info string) []byte {
	k, err := hkdf.Key(sha256.New, []byte(secret), nil, info, 32)
	if err != nil {
		panic("webguard: hkdf: " + err.Error()) // only for lengths out of range
	}
	return k
}

func aead(secret, info string) cipher.AEAD {
	b, _ := aes.NewCipher(DeriveKey(secret, info)) // a 32-byte key: no error
	g, _ := cipher.NewGCM(b)
	return g
}

// Seal encrypts and authenticates plain (AES-256-GCM, a random nonce
// first) under the key of secret for info, bound to additional.
func Seal(secret, info string, plain, additional []byte) ([]byte, error) {
	g := aead(secret, info)
	nonce := make([]byte, g.NonceSize(), g.NonceSize()+len(plain)+g.Overhead())
	if _, err := io.ReadFull(rand.Reader, nonce); err != nil {
		return nil, err
	}
	return g.Seal(nonce, nonce, plain, additional), nil
}

// ErrSealed is Open's error for what was not sealed by Seal with this
// secret, info and additional data.
var ErrSealed = errors.New("the sealed value does not open with this secret")

// Open returns what Seal sealed.
func Open(secret, info string, sealed, additional []byte) ([]byte, error) {
	g := aead(secret, info)
	if len(sealed) < g.NonceSize()+g.Overhead() {
		return nil, ErrSealed
	}
	plain, err := g.Open(nil, sealed[:g.NonceSize()], sealed[g.NonceSize():], additional)
	if err != nil {
		return nil, ErrSealed
	}
	return plain, nil
}
