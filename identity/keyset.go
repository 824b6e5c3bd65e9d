package identity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// KeyRefresh is how often, at most, the provider's signing keys are
// fetched again (R-SEC). A token naming a key id the broker does not hold
// makes it fetch them, as the provider may have rotated its keys; anyone
// can send such a token, so without this bound every one was a request
// to the provider.
const KeyRefresh = time.Minute

// maxKeySetBytes bounds the provider's answer.
const maxKeySetBytes = 1 << 20

// signingAlgs are the algorithms a key set may verify; the verifier has
// already refused a token whose algorithm the provider does not offer.
var signingAlgs = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.ES256, jose.ES384, jose.ES512,
	jose.PS256, jose.PS384, jose.PS512, jose.EdDSA}

// keySet is the provider's published keys (its jwks_uri), an oidc.KeySet.
// It fetches them at start and again when a token's key id is unknown,
// at most once per KeyRefresh whatever the outcome, and never for a
// context of CachedKeysOnly.
type keySet struct {
	url    string
	client *http.Client
	now    func() time.Time

	mu       sync.Mutex
	keys     []jose.JSONWebKey
	tried    time.Time     // when the last fetch began
	err      error         // the last fetch's error
	inflight chan struct{} // closed when the fetch under way ends
}

type cachedOnlyKey struct{}

// CachedKeysOnly returns ctx for a verification that must not fetch the
// provider's keys: the caller's address has used up its failed
// authentications (R-SEC), so its token is checked against the keys
// held, and a key id they lack is refused without asking the provider.
func CachedKeysOnly(ctx context.Context) context.Context {
	return context.WithValue(ctx, cachedOnlyKey{}, true)
}

// VerifySignature implements oidc.KeySet.
func (k *keySet) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSigned(raw, signingAlgs)
	if err != nil {
		return nil, fmt.Errorf("malformed JWT: %v", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("a JWT must have one signature")
	}
	kid := jws.Signatures[0].Header.KeyID
	k.mu.Lock()
	keys := k.keys
	k.mu.Unlock()
	if payload, ok := verifyWith(jws, keys, kid); ok {
		return payload, nil
	}
	if cached, _ := ctx.Value(cachedOnlyKey{}).(bool); cached {
		return nil, fmt.Errorf("no key of the provider's verifies the token (key id %q)", kid)
	}
	if keys, err = k.refresh(ctx); err != nil {
		return nil, fmt.Errorf("no key of the provider's verifies the token (key id %q): %w", kid, err)
	}
	if payload, ok := verifyWith(jws, keys, kid); ok {
		return payload, nil
	}
	return nil, fmt.Errorf("no key of the provider's verifies the token (key id %q)", kid)
}

// verifyWith checks jws against the keys of id kid (all of them when the
// token names none).
func verifyWith(jws *jose.JSONWebSignature, keys []jose.JSONWebKey, kid string) ([]byte, bool) {
	for i := range keys {
		if kid != "" && keys[i].KeyID != kid {
			continue
		}
		if payload, err := jws.Verify(&keys[i]); err == nil {
			return payload, true
		}
	}
	return nil, false
}

// refresh fetches the keys unless a fetch began less than KeyRefresh ago;
// concurrent callers share one fetch. It returns the keys held after.
func (k *keySet) refresh(ctx context.Context) ([]jose.JSONWebKey, error) {
	k.mu.Lock()
	if k.inflight == nil {
		if !k.tried.IsZero() && k.now().Sub(k.tried) < KeyRefresh {
			keys, err := k.keys, k.err
			k.mu.Unlock()
			if err == nil {
				err = fmt.Errorf("the keys were fetched less than %s ago", KeyRefresh)
			}
			return keys, err
		}
		k.tried = k.now()
		done := make(chan struct{})
		k.inflight = done
		go func() {
			// Not the caller's context: its end must not fail the others
			// waiting.
			fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			keys, err := k.fetch(fctx)
			k.mu.Lock()
			if err == nil {
				k.keys = keys
			}
			k.err = err
			k.inflight = nil
			k.mu.Unlock()
			close(done)
		}()
	}
	done := k.inflight
	k.mu.Unlock()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-done:
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keys, k.err
}

// fetch reads the key set: the public signing keys it holds, skipping
// keys of a kind or algorithm it does not know (RFC 7517 §5).
func (k *keySet) fetch(ctx context.Context) ([]jose.JSONWebKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, err
	}
	res, err := k.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch the provider's keys: %w", err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxKeySetBytes+1))
	if err != nil {
		return nil, fmt.Errorf("fetch the provider's keys: %w", err)
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch the provider's keys: %s", res.Status)
	}
	if len(body) > maxKeySetBytes {
		return nil, fmt.Errorf("the provider's key set is over %d bytes", maxKeySetBytes)
	}
	return parseKeySet(body)
}

// parseKeySet reads a JWKS document's public signing keys.
func parseKeySet(body []byte) ([]jose.JSONWebKey, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("the provider's key set: %v", err)
	}
	var keys []jose.JSONWebKey
	for _, raw := range doc.Keys {
		var key jose.JSONWebKey
		if err := json.Unmarshal(raw, &key); err != nil || !key.Valid() {
			continue
		}
		if key.Use != "" && key.Use != "sig" {
			continue
		}
		if pub := key.Public(); pub.Key != nil {
			keys = append(keys, pub)
		}
	}
	return keys, nil
}
