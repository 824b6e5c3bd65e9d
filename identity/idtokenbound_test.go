package identity

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker"
)

// TestFlowIDTokenBound_RSEC (R-SEC): a web sign-in takes an ID token of
// up to MaxIDTokenBytes and refuses a larger one. A provider on loopback
// answers the code with a token signed by its published key, its size
// set to the byte (a claim of padding and the key id's length): one of
// exactly MaxIDTokenBytes signs in, its raw token whole; one a byte
// longer is refused PermissionDenied naming its size and the bound; one
// a byte longer whose signature is garbage is refused the same way, for
// its size, before its signature is checked.
func TestFlowIDTokenBound_RSEC(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	var (
		mu    sync.Mutex
		kid   string
		issue func() string // the token endpoint's id_token
	)
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	answer := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		answer(w, map[string]any{"issuer": srv.URL, "authorization_endpoint": srv.URL + "/authorize",
			"token_endpoint": srv.URL + "/token", "jwks_uri": srv.URL + "/jwks",
			"response_types_supported": []string{"code"}, "subject_types_supported": []string{"public"},
			"id_token_signing_alg_values_supported": []string{"RS256"}})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		k := kid
		mu.Unlock()
		answer(w, map[string]any{"keys": []map[string]any{{"kty": "RSA", "use": "sig", "alg": "RS256", "kid": k,
			"n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes())}}})
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		tok := issue()
		mu.Unlock()
		answer(w, map[string]any{"access_token": "at", "token_type": "Bearer", "expires_in": 3600, "id_token": tok})
	})

	clk := clocktesting.NewFakeClock(time.Now())
	// The keys are read at start: the key id's length is the one the
	// sizes below need, found first.
	const sigLen = 342 // RS256 with a 2048-bit key, base64url
	sized := func(size int, nonce string, garbage bool) (string, func() string) {
		for kl := 8; kl < 12; kl++ {
			k := strings.Repeat("k", kl)
			h, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": k})
			claims := func(pad int) []byte {
				p, _ := json.Marshal(map[string]any{"iss": srv.URL, "aud": "cid", "sub": "dave", "nonce": nonce,
					"iat": clk.Now().Unix(), "exp": clk.Now().Add(time.Hour).Unix(), "groups": []string{"g"},
					"pad": strings.Repeat("p", pad)})
				return p
			}
			base := len(b64(h)) + 1 + len(b64(claims(0))) + 1 + sigLen
			for pad := (size - base) * 3 / 4; pad >= 0 && pad < size; pad++ {
				p := claims(pad)
				n := len(b64(h)) + 1 + len(b64(p)) + 1 + sigLen
				if n > size {
					break
				}
				if n < size {
					continue
				}
				return k, func() string {
					input := b64(h) + "." + b64(p)
					if garbage {
						return input + "." + strings.Repeat("A", sigLen)
					}
					sum := sha256.Sum256([]byte(input))
					sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
					if err != nil {
						panic(err)
					}
					return input + "." + b64(sig)
				}
			}
		}
		t.Fatalf("no token of exactly %d bytes", size)
		return "", nil
	}
	// The key id is the same length for both sizes, or the provider would
	// not hold the key of one of them: sized picks the first that fits;
	// the key set is read again for a key id it does not hold.
	mu.Lock()
	kid, _ = sized(MaxIDTokenBytes, strings.Repeat("n", 43), false)
	mu.Unlock()
	p, err := New(t.Context(), Config{Issuer: srv.URL, ClientID: "cid", ClientSecret: "sec", Now: clk.Now,
		Roles: RoleMap{Groups: map[string]Grant{"g": {Role: "Reader", HostPools: []string{"pool-a"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	f := newTestFlow(t, p, clk, "vdibroker_oidc")

	for _, c := range []struct {
		size    int
		garbage bool
		ok      bool
	}{
		{MaxIDTokenBytes, false, true},
		{MaxIDTokenBytes + 1, false, false},
		{MaxIDTokenBytes + 1, true, false},
	} {
		clk.Step(2 * time.Minute) // past the key set's refresh bound, should the key id be new
		ck, auth := start(t, f, "broker", "/")
		q := auth.Query()
		k, tok := sized(c.size, q.Get("nonce"), c.garbage)
		mu.Lock()
		kid, issue = k, tok
		mu.Unlock()
		callback := testCallback + "?code=c&state=" + q.Get("state")
		id, raw, _, err, _ := finish(f, callback, ck)
		if c.ok {
			if err != nil || id == nil || id.Subject != "dave" || len(raw) != c.size {
				t.Errorf("an ID token of %d bytes: %v, raw %d bytes; want signed in with it whole", c.size, err, len(raw))
			}
			continue
		}
		want := fmt.Sprintf("ID token of %d bytes; at most %d", c.size, MaxIDTokenBytes)
		if vdibroker.ErrorCode(err) != vdibroker.EPermission || !strings.Contains(vdibroker.ErrorMessage(err), want) || id != nil || raw != "" {
			t.Errorf("an ID token of %d bytes (garbage signature %v): %v; want PermissionDenied saying %q", c.size, c.garbage, err, want)
		}
	}
}
