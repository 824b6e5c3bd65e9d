package gatewaytoken

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Claims are what a token says. Times are Unix seconds.
type Claims struct {
	// ID is the token's unique id: the broker admits one tunnel per id.
	ID      string `json:"jti"`
	User    string `json:"usr"`
	Session string `json:"sid"`
	Pool    string `json:"pool"`
	// Host is the session host's RDP address, host:port: the only target
	// the gateway opens a tunnel to.
	Host      string `json:"host"`
	NotBefore int64  `json:"nbf"`
	Expiry    int64  `json:"exp"`
	// IdleSeconds closes a tunnel without traffic for this long (0: the
	// gateway's default); LifetimeSeconds closes it this long after it
	// opened (0: the gateway's default). The broker passes the pool's
	// session settings here.
	IdleSeconds     int64 `json:"idle,omitempty"`
	LifetimeSeconds int64 `json:"life,omitempty"`
	// StartWaitSeconds, when set, says the host may still be starting: the
	// gateway retries its RDP port for up to this long (bounded by its own
	// maximum) before it gives up.
	StartWaitSeconds int64 `json:"wait,omitempty"`
}

// Bounds of a token.
const (
	// MaxTokenLen bounds the text a verifier decodes at all.
	MaxTokenLen = 4096
	// MaxValidity is the longest window from NotBefore to Expiry a signer
	// issues: tokens are for one connect, minutes long.
	MaxValidity = time.Hour
	// maxField bounds the id, session and pool claims in bytes.
	maxField = 256
	// MaxUser bounds the usr claim in characters: the broker's user
	// names (vdibroker.MaxUserLen), whose characters may take up to 4
	// bytes each. A bound of 256 bytes refused a connect through the
	// gateway for a user of a longer name in bytes that the broker took
	// (R-GW1).
	MaxUser = 256
	// MaxHost bounds the host claim in bytes: a DNS name (253), a colon
	// and a port of up to five digits, the longest address a session
	// host may have (vdibroker.ValidateAddress).
	MaxHost = 253 + 1 + 5
)

var keyIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Validate checks claims a signer is asked to sign.
func (c Claims) Validate() error {
	for name, v := range map[string]string{"jti": c.ID, "sid": c.Session, "pool": c.Pool} {
		if v == "" || len(v) > maxField {
			return fmt.Errorf("claim %s: want 1..%d bytes, got %d", name, maxField, len(v))
		}
	}
	if n := utf8.RuneCountInString(c.User); c.User == "" || n > MaxUser || !utf8.ValidString(c.User) {
		return fmt.Errorf("claim usr: want 1..%d characters of UTF-8, got %d", MaxUser, n)
	}
	if c.Host == "" || len(c.Host) > MaxHost {
		return fmt.Errorf("claim host: want 1..%d bytes, got %d", MaxHost, len(c.Host))
	}
	if _, _, err := SplitHostPort(c.Host); err != nil {
		return fmt.Errorf("claim host: %w", err)
	}
	if c.Expiry <= c.NotBefore {
		return fmt.Errorf("claim exp %d: must be after nbf %d", c.Expiry, c.NotBefore)
	}
	// In seconds, without overflow: exp - nbf may not fit an int64, nor
	// its nanoseconds a Duration, and either wrapped to a window of less
	// than MaxValidity (10^10 s did: a token for three centuries). With
	// exp > nbf, their difference fits a uint64.
	if window := uint64(c.Expiry) - uint64(c.NotBefore); window > uint64(MaxValidity/time.Second) {
		return fmt.Errorf("claims nbf..exp: %ds, at most %v", window, MaxValidity)
	}
	if c.IdleSeconds < 0 || c.LifetimeSeconds < 0 || c.StartWaitSeconds < 0 {
		return errors.New("claims idle, life, wait: must not be negative")
	}
	return nil
}

// SplitHostPort splits a host:port address with a port of 1..65535.
func SplitHostPort(addr string) (host string, port uint16, err error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || n == 0 || h == "" {
		return "", 0, fmt.Errorf("address %q: want host:port with a port of 1..65535", addr)
	}
	return h, uint16(n), nil
}

// NewID returns a random token id.
func NewID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Signer signs tokens with one Ed25519 key.
type Signer struct {
	KeyID string
	Key   ed25519.PrivateKey
}

// NewSigner checks the key id and the key.
func NewSigner(keyID string, key ed25519.PrivateKey) (*Signer, error) {
	if !keyIDPattern.MatchString(keyID) {
		return nil, fmt.Errorf("key id %q: want 1..64 of A-Z a-z 0-9 _ -", keyID)
	}
	if len(key) != ed25519.PrivateKeySize {
		return nil, errors.New("not an Ed25519 private key")
	}
	return &Signer{KeyID: keyID, Key: key}, nil
}

// GenerateSigner makes a signer with a fresh key.
func GenerateSigner(keyID string) (*Signer, error) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	return NewSigner(keyID, key)
}

// PublicKey is the key a gateway verifies this signer's tokens with.
func (s *Signer) PublicKey() ed25519.PublicKey { return s.Key.Public().(ed25519.PublicKey) }

// Sign returns the token of c.
func (s *Signer) Sign(c Claims) (string, error) {
	if err := c.Validate(); err != nil {
		return "", err
	}
	payload, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	signed := "v1." + s.KeyID + "." + b64.EncodeToString(payload)
	sig := ed25519.Sign(s.Key, []byte(signed))
	tok := signed + "." + b64.EncodeToString(sig)
	if len(tok) > MaxTokenLen {
		return "", fmt.Errorf("token of %d bytes, over %d", len(tok), MaxTokenLen)
	}
	return tok, nil
}

// b64 is strict, so one token has one spelling.
var b64 = base64.RawURLEncoding.Strict()

// Why a token was refused. Each error wraps ErrRefused; Reason names it
// for metrics and audit.
var (
	ErrRefused      = errors.New("access token refused")
	ErrMalformed    = fmt.Errorf("%w: malformed", ErrRefused)
	ErrUnknownKey   = fmt.Errorf("%w: unknown key id", ErrRefused)
	ErrBadSignature = fmt.Errorf("%w: bad signature", ErrRefused)
	ErrExpired      = fmt.Errorf("%w: expired", ErrRefused)
	ErrNotYetValid  = fmt.Errorf("%w: not yet valid", ErrRefused)
)

// Reason is a short fixed name of why err refused a token, for a metric's
// label: one of malformed, unknown_key, bad_signature, expired,
// not_yet_valid, or "" when err is not a refusal.
func Reason(err error) string {
	switch {
	case errors.Is(err, ErrMalformed):
		return "malformed"
	case errors.Is(err, ErrUnknownKey):
		return "unknown_key"
	case errors.Is(err, ErrBadSignature):
		return "bad_signature"
	case errors.Is(err, ErrExpired):
		return "expired"
	case errors.Is(err, ErrNotYetValid):
		return "not_yet_valid"
	}
	return ""
}

// Leeway is the clock skew allowed between the broker and a gateway at
// both ends of a token's window.
const Leeway = 30 * time.Second

// Verify checks tok against the keys at time now and returns its claims.
// It decodes nothing before the length and the key id are checked, and
// reads the claims only once the signature is good.
func (ks *KeySet) Verify(tok string, now time.Time) (Claims, error) {
	var c Claims
	if len(tok) > MaxTokenLen {
		return c, fmt.Errorf("%w: %d bytes", ErrMalformed, len(tok))
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 4 || parts[0] != "v1" {
		return c, fmt.Errorf("%w: want v1.<kid>.<claims>.<signature>", ErrMalformed)
	}
	key, ok := ks.keys[parts[1]]
	if !ok {
		return c, fmt.Errorf("%w %q", ErrUnknownKey, cut(parts[1], 64))
	}
	sig, err := b64.DecodeString(parts[3])
	if err != nil || len(sig) != ed25519.SignatureSize {
		return c, fmt.Errorf("%w: signature not base64url of %d bytes", ErrMalformed, ed25519.SignatureSize)
	}
	if !ed25519.Verify(key, []byte(tok[:len(tok)-len(parts[3])-1]), sig) {
		return c, ErrBadSignature
	}
	payload, err := b64.DecodeString(parts[2])
	if err != nil {
		return c, fmt.Errorf("%w: claims not base64url", ErrMalformed)
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Claims{}, fmt.Errorf("%w: claims: %v", ErrMalformed, err)
	}
	if err := c.Validate(); err != nil {
		return Claims{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if now.Add(Leeway).Unix() < c.NotBefore {
		return Claims{}, fmt.Errorf("%w: valid from %s", ErrNotYetValid, time.Unix(c.NotBefore, 0).UTC().Format(time.RFC3339))
	}
	if now.Add(-Leeway).Unix() >= c.Expiry {
		return Claims{}, fmt.Errorf("%w at %s", ErrExpired, time.Unix(c.Expiry, 0).UTC().Format(time.RFC3339))
	}
	return c, nil
}

// cut shortens s, which came from outside, for a message.
func cut(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
