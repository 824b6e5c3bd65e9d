package federation

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"sync"
	"time"

	"github.com/vdibroker/vdibroker"
)

// Headers of a signed pod-to-pod request (R-G5).
const (
	HeaderPod       = "X-Vdibroker-Pod"
	HeaderTimestamp = "X-Vdibroker-Timestamp"
	HeaderNonce     = "X-Vdibroker-Nonce"
	HeaderSignature = "X-Vdibroker-Signature"
)

// MaxSkew is how far a request's timestamp may be from the receiver's
// clock. A nonce is remembered for twice as long, so a request replayed
// within the window is refused by its nonce and after it by its time.
const MaxSkew = 60 * time.Second

// MinSecretLen is the shortest federation secret accepted (bytes).
const MinSecretLen = 16

// Signature is the HMAC-SHA256, with the federation secret, of a request's
// method, path (with query), sending pod, timestamp (Unix seconds), nonce
// and the SHA-256 of its body, one per line, as hex.
func Signature(secret []byte, method, path, pod, timestamp, nonce string, body []byte) string {
	bh := sha256.Sum256(body)
	m := hmac.New(sha256.New, secret)
	for _, s := range []string{method, path, pod, timestamp, nonce, hex.EncodeToString(bh[:])} {
		m.Write([]byte(s))
		m.Write([]byte{'\n'})
	}
	return hex.EncodeToString(m.Sum(nil))
}

// Sign returns the headers of a request from pod at now.
func Sign(secret []byte, method, path, pod string, body []byte, now time.Time) map[string]string {
	b := make([]byte, 16)
	rand.Read(b)
	nonce := hex.EncodeToString(b)
	ts := strconv.FormatInt(now.Unix(), 10)
	return map[string]string{
		HeaderPod: pod, HeaderTimestamp: ts, HeaderNonce: nonce,
		HeaderSignature: Signature(secret, method, path, pod, ts, nonce, body),
	}
}

// Verifier checks signed requests and refuses replays. It is safe for
// concurrent use.
type Verifier struct {
	Secret []byte
	Now    func() time.Time // nil: time.Now

	mu     sync.Mutex
	nonces map[string]time.Time // nonce -> when it may be forgotten
	swept  time.Time
}

// Verify checks a request's headers (get returns one by name) against its
// method, path and body. A missing, wrong, stale or replayed signature is
// Unauthenticated; it returns the sending pod.
func (v *Verifier) Verify(get func(string) string, method, path string, body []byte) (string, error) {
	now := time.Now()
	if v.Now != nil {
		now = v.Now()
	}
	pod, ts, nonce, sig := get(HeaderPod), get(HeaderTimestamp), get(HeaderNonce), get(HeaderSignature)
	if sig == "" || ts == "" || nonce == "" || pod == "" {
		return "", vdibroker.Errorf(vdibroker.EUnauthenticated, "pod-to-pod call without a federation signature")
	}
	want := Signature(v.Secret, method, path, pod, ts, nonce, body)
	if !hmac.Equal([]byte(sig), []byte(want)) {
		return "", vdibroker.Errorf(vdibroker.EUnauthenticated, "pod-to-pod call with a wrong federation signature (is the federation secret the same on every pod?)")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "", vdibroker.Errorf(vdibroker.EUnauthenticated, "pod-to-pod call with a malformed timestamp")
	}
	at := time.Unix(sec, 0)
	if d := now.Sub(at); d > MaxSkew || d < -MaxSkew {
		return "", vdibroker.Errorf(vdibroker.EUnauthenticated, "pod-to-pod call signed at %s, more than %s from this pod's clock", at.UTC().Format(time.RFC3339), MaxSkew)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.nonces == nil {
		v.nonces = map[string]time.Time{}
	}
	if now.Sub(v.swept) > MaxSkew {
		for n, until := range v.nonces {
			if now.After(until) {
				delete(v.nonces, n)
			}
		}
		v.swept = now
	}
	if _, seen := v.nonces[nonce]; seen {
		return "", vdibroker.Errorf(vdibroker.EUnauthenticated, "pod-to-pod call replayed (nonce seen before)")
	}
	v.nonces[nonce] = now.Add(2 * MaxSkew)
	return pod, nil
}
