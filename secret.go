package vdibroker

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
)

// NewSecret returns a bearer secret: prefix, which says what it is (vdbt_
// API token, vdbr_ registration token, vdbh_ host credential), then 256
// random bits in hex.
func NewSecret(prefix string) string {
	return prefix + RandomHex(32)
}

// HashSecret is how every secret is stored and looked up: hex SHA-256.
// Bearer secrets are 256-bit random values, so an unsalted fast hash is
// enough.
func HashSecret(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// RandomHex returns n random bytes as hex: request ids and the random part
// of secrets. Stored rows take NewID.
func RandomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
