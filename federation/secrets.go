package federation

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync/atomic"
)

// MaxSecrets is how many federation secrets a pod holds at once: the one
// it signs with and one more it takes, while a new secret replaces the old
// one pod by pod (R-G5). A call with a wrong signature costs one HMAC per
// secret held.
const MaxSecrets = 2

// Secrets is a pod's federation secrets: the first signs its calls, each
// verifies the calls it takes, so the secret of a federation is rotated
// pod by pod without a pod refusing another's calls (add the new one
// second everywhere, then first everywhere, then drop the old). Set
// replaces them (a reload); safe for concurrent use.
type Secrets struct {
	p atomic.Pointer[[][]byte]
}

// NewSecrets returns secrets holding list (the first signs).
func NewSecrets(list ...[]byte) *Secrets {
	s := &Secrets{}
	s.Set(list)
	return s
}

// Set replaces the secrets with list (checked by ParseSecrets, or one
// secret a test gives). An empty one is left out: a call signed with no
// key at all is never taken.
func (s *Secrets) Set(list [][]byte) {
	c := make([][]byte, 0, len(list))
	for _, b := range list {
		if len(b) > 0 {
			c = append(c, bytes.Clone(b))
		}
	}
	s.p.Store(&c)
}

// Signing is the secret this pod signs with (nil: none).
func (s *Secrets) Signing() []byte {
	if l := s.All(); len(l) > 0 {
		return l[0]
	}
	return nil
}

// All is every secret a call may be signed with, the signing one first.
// Nil or zero Secrets hold none: a Verifier without secrets refuses
// every call, and does not panic on one.
func (s *Secrets) All() [][]byte {
	if s == nil {
		return nil
	}
	if l := s.p.Load(); l != nil {
		return *l
	}
	return nil
}

// Fingerprints names the secrets in a log line without telling them, the
// signing one first (Fingerprint): an operator sees which secret each
// process signs with and which it takes, where a count would not tell
// the second step of a rotation from the first.
func (s *Secrets) Fingerprints() []string {
	all := s.All()
	out := make([]string, len(all))
	for i, b := range all {
		out[i] = Fingerprint(b)
	}
	return out
}

// fingerprintPrefix sets a fingerprint apart from any other hash of the
// secret.
const fingerprintPrefix = "vdibroker-federation-secret:"

// Fingerprint is the first 8 hex digits of the SHA-256 of
// "vdibroker-federation-secret:" and secret, which an operator computes
// with printf 'vdibroker-federation-secret:%s' "$SECRET" | sha256sum |
// cut -c1-8. 32 bits of a hash tell nothing usable about a random
// secret (openssl rand -hex 32); they would confirm a guessed one, as a
// signed call would.
func Fingerprint(secret []byte) string {
	h := sha256.Sum256(append([]byte(fingerprintPrefix), secret...))
	return hex.EncodeToString(h[:4])
}

// ParseSecrets reads a secret file's text: one secret a line (space
// around each, and empty lines, are not part of any), 1..MaxSecrets of
// them, each at least MinSecretLen bytes, none twice.
func ParseSecrets(text []byte) ([][]byte, error) {
	var out [][]byte
	for line := range strings.Lines(string(text)) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if len(line) < MinSecretLen {
			return nil, fmt.Errorf("secret %d is %d bytes; want at least %d", len(out)+1, len(line), MinSecretLen)
		}
		for i, b := range out {
			if string(b) == line {
				return nil, fmt.Errorf("secret %d is secret %d again", len(out)+1, i+1)
			}
		}
		out = append(out, []byte(line))
	}
	switch {
	case len(out) == 0:
		return nil, fmt.Errorf("no secret in it; want one line of at least %d bytes (two while rotating)", MinSecretLen)
	case len(out) > MaxSecrets:
		return nil, fmt.Errorf("%d secrets; want at most %d: the one this pod signs with, then the one it also takes while a new secret replaces the old", len(out), MaxSecrets)
	}
	return out, nil
}
