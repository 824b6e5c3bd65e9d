package gatewaytoken

import (
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// KeySet is the public keys tokens are verified with, by key id. It is
// immutable; a Keyring swaps in a new one on reload.
type KeySet struct {
	keys map[string]ed25519.PublicKey
}

// MaxKeys bounds a key set: the current key and a few previous ones.
const MaxKeys = 16

// NewKeySet makes a key set of the given keys.
func NewKeySet(keys map[string]ed25519.PublicKey) (*KeySet, error) {
	if len(keys) > MaxKeys {
		return nil, fmt.Errorf("%d keys, at most %d", len(keys), MaxKeys)
	}
	ks := &KeySet{keys: make(map[string]ed25519.PublicKey, len(keys))}
	for kid, k := range keys {
		if !keyIDPattern.MatchString(kid) {
			return nil, fmt.Errorf("key id %q: want 1..64 of A-Z a-z 0-9 _ -", cut(kid, 64))
		}
		if len(k) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("key %s: not an Ed25519 public key", kid)
		}
		ks.keys[kid] = k
	}
	return ks, nil
}

// KeyIDs lists the set's key ids, sorted.
func (ks *KeySet) KeyIDs() []string {
	ids := make([]string, 0, len(ks.keys))
	for kid := range ks.keys {
		ids = append(ids, kid)
	}
	sort.Strings(ids)
	return ids
}

// Keys returns a copy of the set's keys by key id, to make a new set of
// them and others (gateway keygen adds a key to a JWKS file).
func (ks *KeySet) Keys() map[string]ed25519.PublicKey {
	keys := make(map[string]ed25519.PublicKey, len(ks.keys))
	for kid, k := range ks.keys {
		keys[kid] = k
	}
	return keys
}

// jwk is one key of a JWKS document (RFC 7517, RFC 8037 for OKP).
type jwk struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	Kid string `json:"kid"`
	X   string `json:"x"`
	Use string `json:"use,omitempty"`
}

// MarshalJWKS encodes keys as a JWKS document: what the broker publishes
// and a gateway's key file holds.
func MarshalJWKS(keys map[string]ed25519.PublicKey) ([]byte, error) {
	ks, err := NewKeySet(keys)
	if err != nil {
		return nil, err
	}
	doc := struct {
		Keys []jwk `json:"keys"`
	}{Keys: []jwk{}}
	for _, kid := range ks.KeyIDs() {
		doc.Keys = append(doc.Keys, jwk{Kty: "OKP", Crv: "Ed25519", Kid: kid, X: b64.EncodeToString(ks.keys[kid]), Use: "sig"})
	}
	return json.MarshalIndent(doc, "", "  ")
}

// ParseJWKS decodes a JWKS document of Ed25519 keys; a key of another kind
// is an error rather than skipped, so a misconfigured broker is noticed.
func ParseJWKS(data []byte) (*KeySet, error) {
	var doc struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("key set: %w", err)
	}
	if len(doc.Keys) == 0 {
		return nil, errors.New("key set: no keys")
	}
	if len(doc.Keys) > MaxKeys {
		return nil, fmt.Errorf("key set: %d keys, at most %d", len(doc.Keys), MaxKeys)
	}
	keys := map[string]ed25519.PublicKey{}
	for i, k := range doc.Keys {
		if k.Kty != "OKP" || k.Crv != "Ed25519" {
			return nil, fmt.Errorf("key set: key %d: kty %q crv %q, want OKP Ed25519", i, cut(k.Kty, 16), cut(k.Crv, 16))
		}
		x, err := b64.DecodeString(k.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("key set: key %q: x is not a base64url Ed25519 key", cut(k.Kid, 64))
		}
		if _, dup := keys[k.Kid]; dup {
			return nil, fmt.Errorf("key set: key id %q twice", cut(k.Kid, 64))
		}
		keys[k.Kid] = x
	}
	return NewKeySet(keys)
}

// MarshalPrivateKeyPEM encodes a signer's key as PKCS #8 PEM.
func MarshalPrivateKeyPEM(key ed25519.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// ParsePrivateKeyPEM decodes an Ed25519 key in PKCS #8 PEM.
func ParsePrivateKeyPEM(data []byte) (ed25519.PrivateKey, error) {
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "PRIVATE KEY" {
		return nil, errors.New("no PEM PRIVATE KEY block")
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, err
	}
	ek, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("a %T, not an Ed25519 key", k)
	}
	return ek, nil
}

// KeySource yields the current key set: a file, or the broker's URL.
type KeySource interface {
	Keys(ctx context.Context) (*KeySet, error)
}

// FileSource reads a JWKS file.
type FileSource struct{ Path string }

// maxKeySetBytes bounds a key set document read from a file or a URL.
const maxKeySetBytes = 1 << 20

func (s FileSource) Keys(context.Context) (*KeySet, error) {
	f, err := os.Open(s.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxKeySetBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxKeySetBytes {
		return nil, fmt.Errorf("%s: over %d bytes", s.Path, maxKeySetBytes)
	}
	ks, err := ParseJWKS(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Path, err)
	}
	return ks, nil
}

// URLSource fetches a JWKS document over HTTP(S), as the broker will
// publish it; Token, when set, is sent as a bearer credential, or
// TokenFunc's answer when that is set (a token file read again on SIGHUP).
type URLSource struct {
	URL       string
	Token     string
	TokenFunc func() string
	Client    *http.Client
}

func (s URLSource) Keys(ctx context.Context) (*KeySet, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", s.URL, nil)
	if err != nil {
		return nil, err
	}
	tok := s.Token
	if s.TokenFunc != nil {
		tok = s.TokenFunc()
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	c := s.Client
	if c == nil {
		c = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxKeySetBytes+1))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &StatusError{URL: s.URL, StatusCode: resp.StatusCode}
	}
	if len(data) > maxKeySetBytes {
		return nil, fmt.Errorf("%s: %w: over %d bytes", s.URL, ErrNotKeySet, maxKeySetBytes)
	}
	ks, err := ParseJWKS(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", s.URL, ErrNotKeySet, err)
	}
	return ks, nil
}

// ErrNotKeySet is a URLSource's 200 answer that is not a JWKS document of
// Ed25519 keys: a URL that is not the broker's keys route (a web page),
// which reading it again does not mend.
var ErrNotKeySet = errors.New("not a JWKS document of Ed25519 keys")

// ErrNoKeys is a Keyring's answer to a token while it holds no keys
// (NewPendingKeyring, its source not read yet): the gateway refuses the
// tunnel for now, not the token.
var ErrNoKeys = errors.New("the gateway holds no token keys yet")

// StatusError is a URLSource's answer other than 200, so that whoever
// started the gateway can be told what the URL is missing (a 404: not
// the broker's keys route) apart from a broker that did not answer.
type StatusError struct {
	URL        string
	StatusCode int
}

func (e *StatusError) Error() string { return fmt.Sprintf("%s: HTTP %d", e.URL, e.StatusCode) }

// StaticSource is a fixed key set (tests, and a gateway started with one
// key).
type StaticSource struct{ Set *KeySet }

func (s StaticSource) Keys(context.Context) (*KeySet, error) { return s.Set, nil }

// Keyring holds the key set in force and reloads it from its source: every
// Interval in Run, and whenever Reload is called (SIGHUP). A failed reload
// keeps the keys in force, so a broker briefly down does not stop the
// gateway; tunnels already open never depend on the keys again.
type Keyring struct {
	src      KeySource
	log      *slog.Logger
	clock    clock.WithTicker
	interval time.Duration
	cur      atomic.Pointer[KeySet]
	// loaded is closed at the first key set held; failures counts the
	// reads of the source that failed.
	loaded     chan struct{}
	loadedOnce sync.Once
	failures   atomic.Uint64

	// missMu is held while a token naming an unknown key id reads the
	// source; lastMiss is when one last did.
	missMu   sync.Mutex
	lastMiss time.Time
}

// UnknownKeyReloadEvery is how often at most a token naming a key id the
// keyring does not hold makes it read its source at once, before the
// token is refused: after a revoke the broker signs with a key gateways
// have not read yet (R-GW6), and its users need not wait for the next
// interval. The bound keeps tokens with made-up key ids, which anyone
// can send, from becoming a stream of reads.
const UnknownKeyReloadEvery = 5 * time.Second

// NewKeyring loads the first key set, which must succeed.
func NewKeyring(ctx context.Context, src KeySource, interval time.Duration, clk clock.WithTicker, log *slog.Logger) (*Keyring, error) {
	k := NewPendingKeyring(src, interval, clk, log)
	if err := k.Reload(ctx); err != nil {
		return nil, err
	}
	return k, nil
}

// NewPendingKeyring returns a keyring holding no keys yet, whose source
// could not be read at start (the broker not up yet): until a read
// succeeds, Verify answers ErrNoKeys, and Run reads the source again with
// backoff (PendingRetryFirst doubling to PendingRetryMax) on clk.
func NewPendingKeyring(src KeySource, interval time.Duration, clk clock.WithTicker, log *slog.Logger) *Keyring {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Keyring{src: src, log: log, clock: clk, interval: interval, loaded: make(chan struct{})}
}

// The backoff of a pending keyring's reads (Run): the first again after
// PendingRetryFirst, doubling to PendingRetryMax, so that a gateway
// started before its broker serves within half a minute of it, and its
// log has a line a read at most, at most two a minute once settled.
const (
	PendingRetryFirst = time.Second
	PendingRetryMax   = 30 * time.Second
)

// Reload reads the source again; on error the keys in force stay.
func (k *Keyring) Reload(ctx context.Context) error {
	ks, err := k.src.Keys(ctx)
	if err != nil {
		k.failures.Add(1)
		return fmt.Errorf("load gateway token keys: %w", err)
	}
	if old := k.cur.Swap(ks); old == nil || fmt.Sprint(old.KeyIDs()) != fmt.Sprint(ks.KeyIDs()) {
		k.log.Info("gateway token keys loaded", "keys", ks.KeyIDs())
	}
	k.loadedOnce.Do(func() { close(k.loaded) })
	return nil
}

// Current returns the key set in force: nil while a pending keyring has
// read none.
func (k *Keyring) Current() *KeySet { return k.cur.Load() }

// Loaded is closed once the keyring holds keys.
func (k *Keyring) Loaded() <-chan struct{} { return k.loaded }

// KeyCount is how many keys are in force (0: none yet).
func (k *Keyring) KeyCount() int {
	if ks := k.Current(); ks != nil {
		return len(ks.keys)
	}
	return 0
}

// Failures counts the reads of the source that failed.
func (k *Keyring) Failures() uint64 { return k.failures.Load() }

// Verify checks tok with the keys in force; a token of a key id they do
// not hold has the source read again first, at most every
// UnknownKeyReloadEvery, and so does any token while the keyring holds
// no keys: that read may find a broker that just came up. With no keys
// still, it answers ErrNoKeys.
func (k *Keyring) Verify(tok string, now time.Time) (Claims, error) {
	if k.Current() == nil {
		if k.reloadForUnknownKey(); k.Current() == nil {
			return Claims{}, ErrNoKeys
		}
	}
	c, err := k.Current().Verify(tok, now)
	if !errors.Is(err, ErrUnknownKey) || !k.reloadForUnknownKey() {
		return c, err
	}
	return k.Current().Verify(tok, now)
}

// reloadForUnknownKey reads the source again unless another token does
// so now or one did within UnknownKeyReloadEvery; it reports whether the
// keys in force were read just now.
func (k *Keyring) reloadForUnknownKey() bool {
	if !k.missMu.TryLock() {
		return false
	}
	defer k.missMu.Unlock()
	at := k.clock.Now()
	if !k.lastMiss.IsZero() && at.Sub(k.lastMiss) < UnknownKeyReloadEvery {
		return false
	}
	k.lastMiss = at
	ctx, cancel := context.WithTimeout(context.Background(), UnknownKeyReloadEvery)
	defer cancel()
	had := k.Current() != nil
	if err := k.Reload(ctx); err != nil {
		if had {
			k.log.Warn("reload gateway token keys for a token of an unknown key; keeping the keys in force", "err", err)
		} else {
			k.log.Warn("read gateway token keys for a token; none held yet, so its tunnel is refused keys_unavailable", "err", err)
		}
		return false
	}
	return true
}

// Run reloads every interval until ctx ends. A keyring holding no keys
// first reads its source with backoff until it does (or a Reload, on
// SIGHUP or for a token, did), logging each failed read.
func (k *Keyring) Run(ctx context.Context) {
	for wait := PendingRetryFirst; k.Current() == nil; wait = min(2*wait, PendingRetryMax) {
		select {
		case <-ctx.Done():
			return
		case <-k.loaded:
			continue
		case <-k.clock.After(wait):
		}
		if k.Current() != nil {
			break
		}
		if err := k.Reload(ctx); err != nil && ctx.Err() == nil {
			k.log.Warn("read gateway token keys; tunnels are refused keys_unavailable until a read succeeds", "retryIn", min(2*wait, PendingRetryMax), "failures", k.Failures(), "err", err)
		}
	}
	if k.interval <= 0 {
		return
	}
	t := k.clock.NewTicker(k.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			if err := k.Reload(ctx); err != nil {
				k.log.Warn("reload gateway token keys; keeping the keys in force", "err", err)
			}
		}
	}
}
