// Package webguard holds the rules every web page of the broker follows
// for a person's browser (R-SEC): the security headers (one
// Content-Security-Policy that allows no inline script or style, no
// framing), the same-origin check of a form post, the constant-time
// comparison of CSRF tokens, the check that keeps a post-sign-in
// redirect on this site, and the random secrets of sign-in forms. The
// admin console and the user portal share them, so a fix to one is a fix
// to both.
package webguard

import (
	"crypto/subtle"
	"encoding/hex"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
	"unicode"
)

// CSP is the Content-Security-Policy of every page: scripts, styles,
// images and fetches of this site only (images also data: URLs), forms
// posted to this site only, never framed, no <base>.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Headers sets the security headers every answer of a page carries.
func Headers(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
}

// SameOrigin refuses cross-site form posts when the browser says where
// they came from. With the session's CSRF token, which every change must
// carry, it is what protects changes: the session cookies are
// SameSite=Lax (sent on a top-level navigation from another site, such
// as the identity provider's redirect back, never on another site's form
// post), and no GET changes anything.
func SameOrigin(r *http.Request) bool {
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	// An Origin of no host ("null": a sandboxed frame, a redirect across
	// sites) is no site of ours, even when no X-Forwarded-Host names one.
	u, err := url.Parse(o)
	if err != nil || u.Host == "" {
		return false
	}
	return u.Host == r.Host || u.Host == r.Header.Get("X-Forwarded-Host")
}

// Equal compares two secrets in constant time; an empty one equals
// nothing.
func Equal(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// Secret returns 32 bytes of rnd in hex (a sign-in form's CSRF token). It
// panics when rnd fails: no page can be served safely then.
func Secret(rnd io.Reader) string {
	b := make([]byte, 32)
	if _, err := io.ReadFull(rnd, b); err != nil {
		panic("webguard: random source failed: " + err.Error())
	}
	return hex.EncodeToString(b)
}

// SafeNext keeps post-sign-in redirects on this site: next when it is a
// path of this site, with no control character, space or backslash
// anywhere (browsers drop tabs and newlines and read "\\" as "/", so
// "/\t/evil.example" is "//evil.example" to them), and no
// scheme or host once parsed; else "/".
func SafeNext(next string) string {
	if next == "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") {
		return "/"
	}
	for _, c := range next {
		if c <= ' ' || c == '\\' || c == 0x7f || unicode.IsControl(c) || unicode.IsSpace(c) {
			return "/"
		}
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || !strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") {
		return "/"
	}
	return next
}

// HostPrefix is the cookie name prefix browsers hold to a rule: a
// cookie so named is taken only with Secure, Path=/ and no Domain, and
// only from a secure origin (RFC 6265bis, "Cookie Name Prefixes").
const HostPrefix = "__Host-"

// CookieScope returns the name and path of the cookie name, scoped to
// path, in an answer whose cookies are Secure or not (R-SEC, "Web
// sessions"). Secure: HostPrefix+name at "/", so that no sibling
// subdomain (a cookie of Domain=.example.com) and no page over plain
// HTTP can set, replace or shadow it; a planted session or sign-in state
// would sign a browser in as the attacker. Not secure (the demo on
// 127.0.0.1 over plain HTTP, where a browser refuses the prefix): name
// at path, as before. A cookie of the other name is never read.
func CookieScope(name, path string, secure bool) (string, string) {
	if secure {
		return HostPrefix + name, "/"
	}
	return name, path
}

// Files serves the files of fsys (a page's styles, scripts and icons),
// never a listing of a folder: a folder's path, or any path that ends in
// "/", is notFound's. A listing shows what the binary carries and is what
// a security scan reports first.
func Files(fsys fs.FS, notFound http.Handler) http.Handler {
	files := http.FileServerFS(fsys)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
		if name == "" || strings.HasSuffix(r.URL.Path, "/") {
			notFound.ServeHTTP(w, r)
			return
		}
		if st, err := fs.Stat(fsys, name); err != nil || st.IsDir() {
			notFound.ServeHTTP(w, r)
			return
		}
		files.ServeHTTP(w, r)
	})
}
