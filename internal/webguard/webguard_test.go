package webguard

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestSafeNext (R-SEC): after sign-in a page redirects only to a
// path of its own. Browsers drop tabs and newlines in URLs and read a
// backslash as a slash, so each of these is another site to them.
func TestSafeNext(t *testing.T) {
	for next, want := range map[string]string{
		"/":                        "/",
		"/hostpools/p1?tab=hosts":  "/hostpools/p1?tab=hosts",
		"/sessions?user=alice%40x": "/sessions?user=alice%40x",
		"":                         "/",
		"https://evil.example/":    "/",
		"//evil.example":           "/",
		"/\\evil.example":          "/",
		"/\t/evil.example":         "/",
		"/\n/evil.example":         "/",
		"/ /evil.example":          "/",
		"/x\\y":                    "/",
		"/\x7f/evil.example":       "/",
		"/\u2028/evil.example":     "/",
		"javascript:alert(1)":      "/",
	} {
		if got := SafeNext(next); got != want {
			t.Errorf("SafeNext(%q) = %q, want %q", next, got, want)
		}
	}
}

// TestSeal: what Seal sealed opens with its secret, info and additional
// data only, and does not show the plain text.
func TestSeal(t *testing.T) {
	sealed, err := Seal("secret-1", "purpose", []byte("full address:s:h1"), []byte("owner"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(sealed), "full address") {
		t.Error("sealed holds the plain text")
	}
	if got, err := Open("secret-1", "purpose", sealed, []byte("owner")); err != nil || string(got) != "full address:s:h1" {
		t.Fatalf("open: %q, %v", got, err)
	}
	for name, try := range map[string]func() ([]byte, error){
		"another secret":    func() ([]byte, error) { return Open("secret-2", "purpose", sealed, []byte("owner")) },
		"another purpose":   func() ([]byte, error) { return Open("secret-1", "other", sealed, []byte("owner")) },
		"another owner":     func() ([]byte, error) { return Open("secret-1", "purpose", sealed, []byte("bob")) },
		"a truncated value": func() ([]byte, error) { return Open("secret-1", "purpose", sealed[:10], []byte("owner")) },
		"an altered value": func() ([]byte, error) {
			s := bytes.Clone(sealed)
			s[len(s)-1] ^= 1
			return Open("secret-1", "purpose", s, []byte("owner"))
		},
	} {
		if _, err := try(); err != ErrSealed {
			t.Errorf("%s: %v, want ErrSealed", name, err)
		}
	}
}

// TestSameOrigin (R-SEC, R-U7): a form post is from this site when the
// browser says nothing, or names this host (or the proxy's
// X-Forwarded-Host); an Origin of another host, of no host ("null", sent
// for a sandboxed frame or after a redirect across sites) or not a URL,
// or Sec-Fetch-Site cross-site, is refused.
func TestSameOrigin(t *testing.T) {
	for _, c := range []struct {
		name string
		h    []string
		want bool
	}{
		{"no word from the browser", nil, true},
		{"this host", []string{"Origin", "http://broker.example:8443"}, true},
		{"the proxy's host", []string{"Origin", "https://vdi.example", "X-Forwarded-Host", "vdi.example"}, true},
		{"same-origin fetch", []string{"Origin", "http://broker.example:8443", "Sec-Fetch-Site", "same-origin"}, true},
		{"another host", []string{"Origin", "http://evil.example"}, false},
		{"another port", []string{"Origin", "http://broker.example"}, false},
		{"null", []string{"Origin", "null"}, false},
		{"null without a proxy's host", []string{"Origin", "null", "X-Forwarded-Host", ""}, false},
		{"not a URL", []string{"Origin", "http://%zz"}, false},
		{"cross-site fetch", []string{"Sec-Fetch-Site", "cross-site"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "http://broker.example:8443/portal/launch", nil)
			for i := 0; i+1 < len(c.h); i += 2 {
				r.Header.Set(c.h[i], c.h[i+1])
			}
			if got := SameOrigin(r); got != c.want {
				t.Errorf("SameOrigin = %v, want %v", got, c.want)
			}
		})
	}
}

// TestCookieScope (R-SEC, web sessions): a Secure cookie is named with
// the __Host- prefix at "/", the only path browsers take it at; a cookie
// over plain HTTP keeps its name and path.
func TestCookieScope(t *testing.T) {
	for _, c := range []struct {
		secure             bool
		wantName, wantPath string
	}{
		{true, "__Host-vdibroker_portal", "/"},
		{false, "vdibroker_portal", "/portal/"},
	} {
		if name, path := CookieScope("vdibroker_portal", "/portal/", c.secure); name != c.wantName || path != c.wantPath {
			t.Errorf("CookieScope(secure=%v) = %s at %s, want %s at %s", c.secure, name, path, c.wantName, c.wantPath)
		}
	}
}
