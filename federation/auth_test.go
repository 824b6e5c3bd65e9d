package federation

import (
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
)

func TestVerify(t *testing.T) {
	secret := []byte("0123456789abcdef-federation")
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	v := &Verifier{Secret: secret, Now: func() time.Time { return now }}
	body := []byte(`{"user":"alice"}`)
	h := Sign(secret, "POST", ConnectPath, "fra1", body, now)
	get := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if pod, err := v.Verify(t.Context(), get(h), "POST", ConnectPath, body); err != nil || pod != "fra1" {
		t.Fatalf("signed request refused: %q %v", pod, err)
	}
	for _, tc := range []struct {
		name   string
		h      map[string]string
		method string
		body   string
	}{
		{"replayed", h, "POST", string(body)},
		{"unsigned", map[string]string{}, "POST", string(body)},
		{"wrong secret", Sign([]byte("another-secret-of-16+"), "POST", ConnectPath, "fra1", body, now), "POST", string(body)},
		{"body changed", Sign(secret, "POST", ConnectPath, "fra1", body, now), "POST", `{"user":"mallory"}`},
		{"method changed", Sign(secret, "POST", ConnectPath, "fra1", body, now), "GET", string(body)},
		{"too old", Sign(secret, "POST", ConnectPath, "fra1", body, now.Add(-2*MaxSkew)), "POST", string(body)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := v.Verify(t.Context(), get(tc.h), tc.method, ConnectPath, []byte(tc.body)); vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated {
				t.Fatalf("got %v, want Unauthenticated", err)
			}
		})
	}
}

// FuzzVerify: any headers and body are verified without panicking, and
// nothing but a request signed with the secret is accepted, once.
func FuzzVerify(f *testing.F) {
	secret := []byte("0123456789abcdef-federation")
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	// A signed request, the same with a long nonce, and garbage.
	h := Sign(secret, "POST", ConnectPath, "fra1", []byte(`{}`), now)
	f.Add(h[HeaderPod], h[HeaderTimestamp], h[HeaderNonce], h[HeaderSignature], []byte(`{}`))
	f.Add("fra1", h[HeaderTimestamp], string(make([]byte, 100)), h[HeaderSignature], []byte(`{}`))
	f.Add("", "-9999999999999999999", "n", "zz", []byte(nil))
	f.Fuzz(func(t *testing.T, pod, ts, nonce, sig string, body []byte) {
		v := &Verifier{Secret: secret, Now: func() time.Time { return now }}
		m := map[string]string{HeaderPod: pod, HeaderTimestamp: ts, HeaderNonce: nonce, HeaderSignature: sig}
		get := func(k string) string { return m[k] }
		got, err := v.Verify(t.Context(), get, "POST", ConnectPath, body)
		if err != nil {
			return
		}
		if want := Signature(secret, "POST", ConnectPath, pod, ts, nonce, body); sig != want || got != pod || len(nonce) > maxNonceLen {
			t.Fatalf("accepted pod %q nonce %q signature %q (want %q)", got, nonce, sig, want)
		}
		if _, err := v.Verify(t.Context(), get, "POST", ConnectPath, body); err == nil {
			t.Fatal("accepted the same nonce twice")
		}
	})
}
