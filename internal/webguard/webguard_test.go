package webguard

import "testing"

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
