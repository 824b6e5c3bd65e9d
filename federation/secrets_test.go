package federation

import (
	"strings"
	"testing"
	"time"
)

// TestParseSecrets: a secret file holds one secret, or two while a new
// one replaces the old (R-G5); each line is one, space around it and
// empty lines are none; anything else is refused saying why.
func TestParseSecrets(t *testing.T) {
	const a, b = "0123456789abcdef-one", "0123456789abcdef-two"
	for _, tc := range []struct {
		name, text string
		want       []string
		err        string
	}{
		{"one", a + "\n", []string{a}, ""},
		{"one without a line break", a, []string{a}, ""},
		{"two, the first signs", a + "\n" + b + "\n", []string{a, b}, ""},
		{"space and empty lines", "\n  " + a + " \r\n\n\t" + b + "\n\n", []string{a, b}, ""},
		{"empty", "\n \n", nil, "no secret in it"},
		{"too short", "short\n", nil, "secret 1 is 5 bytes; want at least 16"},
		{"second too short", a + "\nshort", nil, "secret 2 is 5 bytes"},
		{"three", a + "\n" + b + "\n0123456789abcdef-three", nil, "3 secrets; want at most 2"},
		{"twice", a + "\n" + a, nil, "secret 2 is secret 1 again"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSecrets([]byte(tc.text))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil || len(got) != len(tc.want) {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
			for i := range got {
				if string(got[i]) != tc.want[i] {
					t.Errorf("secret %d = %q, want %q", i+1, got[i], tc.want[i])
				}
			}
		})
	}
}

// TestVerifierTakesEverySecret: a Verifier takes a call signed with any
// of its secrets and no other; Set replaces them at once, and an empty
// secret is never one (a call signed with no key is refused), nor are
// Secrets never set.
func TestVerifierTakesEverySecret(t *testing.T) {
	oldS, newS := []byte("old-federation-secret-0"), []byte("new-federation-secret-0")
	now := time.Unix(1_700_000_000, 0)
	secrets := NewSecrets(oldS, newS)
	v := &Verifier{Secrets: secrets, Now: func() time.Time { return now }}
	call := func(secret []byte) error {
		h := Sign(secret, "GET", LoadsPath, "fra1", nil, now)
		_, err := v.Verify(t.Context(), func(k string) string { return h[k] }, "GET", LoadsPath, nil)
		return err
	}
	if err := call(oldS); err != nil {
		t.Errorf("old (signing) secret refused: %v", err)
	}
	if err := call(newS); err != nil {
		t.Errorf("second secret refused: %v", err)
	}
	if err := call([]byte("another-federation-secret")); err == nil {
		t.Error("a secret it does not hold was taken")
	}
	if string(secrets.Signing()) != string(oldS) {
		t.Errorf("signs with %q, want the first", secrets.Signing())
	}
	secrets.Set([][]byte{newS})
	if err := call(oldS); err == nil {
		t.Error("the dropped secret is still taken")
	}
	if err := call(newS); err != nil {
		t.Errorf("the kept secret refused: %v", err)
	}
	secrets.Set([][]byte{nil, {}})
	if err := call(nil); err == nil {
		t.Error("a call signed with no key was taken")
	}
	// Secrets never set, or none at all, are no secret: every call is
	// refused, none panics the verifier.
	for name, none := range map[string]*Secrets{"zero": {}, "nil": nil} {
		v.Secrets = none
		if err := call(nil); err == nil {
			t.Errorf("%s secrets: a call signed with no key was taken", name)
		}
		if none.Signing() != nil || len(none.Fingerprints()) != 0 {
			t.Errorf("%s secrets: signs with %q", name, none.Signing())
		}
	}
}

// TestFingerprint: a secret is named in logs by the first 8 hex digits
// of the SHA-256 of "vdibroker-federation-secret:" and it, which the
// operator computes as docs/federation.md shows (R-G5); Fingerprints are
// the signing one's first.
func TestFingerprint(t *testing.T) {
	// printf 'vdibroker-federation-secret:%s' "$S" | sha256sum | cut -c1-8
	const oldS, newS = "old-federation-secret-0123456789", "new-federation-secret-9876543210"
	if got, want := Fingerprint([]byte(oldS)), "bdf4fc01"; got != want {
		t.Errorf("Fingerprint(old) = %s, want %s", got, want)
	}
	got := strings.Join(NewSecrets([]byte(newS), []byte(oldS)).Fingerprints(), ",")
	if want := "f46a9c93,bdf4fc01"; got != want {
		t.Errorf("Fingerprints = %s, want %s", got, want)
	}
}
