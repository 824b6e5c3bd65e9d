// Package webguardtest plays, in tests, a browser that reaches the broker
// through a TLS-terminating proxy: the broker sees plain HTTP and sets
// Secure, __Host- cookies, which Go's cookie jar would never send back
// over http, so the cookies are carried by hand.
package webguardtest

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vdibroker/vdibroker"
)

// Send sends method path to base with form (a same-origin post, as a
// browser's) and cookies, and returns the answer, its body closed.
// Redirects are not followed.
func Send(t testing.TB, base, method, path string, form url.Values, cookies ...*http.Cookie) *http.Response {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", base)
	}
	for _, ck := range cookies {
		req.AddCookie(&http.Cookie{Name: ck.Name, Value: ck.Value})
	}
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res
}

// HostCookie returns the cookie name res sets, failing t when there is
// none, and reports one that is not Secure, HttpOnly, at Path=/ without a
// Domain, as a __Host- cookie must be.
func HostCookie(t testing.TB, res *http.Response, name string) *http.Cookie {
	t.Helper()
	for _, ck := range res.Cookies() {
		if ck.Name == name {
			if !ck.Secure || ck.Path != "/" || ck.Domain != "" || !ck.HttpOnly {
				t.Errorf("cookie %s: %+v; want Secure, HttpOnly, Path=/, no Domain", name, ck)
			}
			return ck
		}
	}
	t.Fatalf("no cookie %s in %v", name, res.Header.Values("Set-Cookie"))
	return nil
}

// FailingDeletes is a web sessions' store that refuses to delete one
// while Down is set (the database away), as a sign-out then finds it.
type FailingDeletes struct {
	vdibroker.WebSessionStore
	Down atomic.Bool
}

func (f *FailingDeletes) DeleteWebSession(ctx context.Context, h string) error {
	if f.Down.Load() {
		return &vdibroker.Error{Code: vdibroker.EStoreUnavailable, Message: "store down"}
	}
	return f.WebSessionStore.DeleteWebSession(ctx, h)
}
