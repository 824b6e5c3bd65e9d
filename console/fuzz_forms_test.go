package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker/console"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/testserver"
	"github.com/vdibroker/vdibroker/store"
)

// FuzzConsoleForms posts fuzzed bodies to the console's form handlers on a
// real server: the sign-in form (anonymous), and, signed in as
// the admin, a pool's settings form, a host's drain form and the
// Published to users card's forms (create a group, assign, add an
// application, remove one). Whatever the
// body, the answer is never a 500, and a redirect never leaves the site
// (the sign-in's next= is the classic open redirect).
func FuzzConsoleForms(f *testing.F) {
	ctx := context.Background()
	st, err := store.Open(ctx, "", f.TempDir(), nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	srv := testserver.New(testserver.Config{Store: st, AdminToken: adminToken})
	f.Cleanup(func() { srv.Close() })
	c := console.New(console.Config{API: srv.Handler(), Store: st, Sessions: st})
	f.Cleanup(func() { c.Close() })
	srv.Mux().Handle("/", c)
	ts := httptest.NewServer(srv.Handler())
	f.Cleanup(ts.Close)
	admin := vhttp.NewClient(ts.URL, adminToken)
	if _, err := admin.PutHostPool(ctx, "fz-pool", map[string]any{}); err != nil {
		f.Fatal(err)
	}
	if _, err := admin.PutSessionHost(ctx, "fz-pool", "fz-host", vhttp.SessionHostRequest{}); err != nil {
		f.Fatal(err)
	}
	newBrowser := func() *http.Client {
		jar, _ := cookiejar.New(nil)
		return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	csrfOf := func(b *http.Client, path string) string {
		resp, err := b.Get(ts.URL + path)
		if err != nil {
			f.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		m := csrfField.FindStringSubmatch(string(body))
		if m == nil {
			f.Fatalf("no csrf field on %s (HTTP %d)", path, resp.StatusCode)
		}
		return m[1]
	}
	anon, signed := newBrowser(), newBrowser()
	anonCSRF := csrfOf(anon, "/signin")
	resp, err := signed.PostForm(ts.URL+"/signin", url.Values{"csrf": {csrfOf(signed, "/signin")}, "token": {adminToken}, "next": {"/"}})
	if err != nil || resp.StatusCode != http.StatusSeeOther {
		f.Fatalf("sign in: %v %v", resp, err)
	}
	resp.Body.Close()
	if _, err := admin.PutApplicationGroup(ctx, "fz-apps", map[string]any{"hostPool": "fz-pool", "applicationGroupType": "RemoteApp"}); err != nil {
		f.Fatal(err)
	}
	signedCSRF := csrfOf(signed, "/pools/fz-pool")

	for _, s := range []string{
		"token=nope&next=/", "token=" + adminToken + "&next=/%09/evil.example", "next=//evil.example", "next=/\\evil.example",
		"maxSessionLimit=0", "maxSessionLimit=99999999999999999999", "loadBalancerType=Nope", "loadBalancing.cpuThreshold=NaN",
		"description=" + strings.Repeat("d", 600), "drain=maybe", "drain=true", "drain=false", "%zz", "a=1&a=2", "",
		// The card's forms: a group, an assignment, an application.
		"name=fz-desk&applicationGroupType=Desktop", "name=a/b&applicationGroupType=RemoteApp", "name=fz-apps&applicationGroupType=Desktops",
		"op=add&kind=user&principal=alice", "op=remove&kind=group&principal=Sales", "op=allUsers&allUsers=true", "op=add&kind=user&principal=%00",
		"op=add&kind=user&principal=x&etag=%22nope%22", "name=word&filePath=C:%5Cw.exe&showInPortal=on", "name=w&commandLineSetting=Require",
		"app=word&etag=%22nope%22", "app=..", "app=%2E%2E", "app=" + strings.Repeat("a", 65), "app=a/b",
	} {
		for which := range 7 {
			f.Add(which, s)
		}
	}
	f.Fuzz(func(t *testing.T, which int, form string) {
		var b *http.Client
		var path, csrf string
		switch which {
		case 0:
			b, path, csrf = anon, "/signin", anonCSRF
		case 1:
			b, path, csrf = signed, "/pools/fz-pool/settings", signedCSRF
		case 2:
			b, path, csrf = signed, "/pools/fz-pool/hosts/fz-host/drain", signedCSRF
		case 3:
			b, path, csrf = signed, "/pools/fz-pool/appgroups", signedCSRF
		case 4:
			b, path, csrf = signed, "/pools/fz-pool/appgroups/fz-apps/assignments", signedCSRF
		case 5:
			b, path, csrf = signed, "/pools/fz-pool/appgroups/fz-apps/apps", signedCSRF
		case 6:
			b, path, csrf = signed, "/pools/fz-pool/appgroups/fz-apps/apps/remove", signedCSRF
		default:
			return
		}
		if strings.Contains(form, "token=") && which != 0 {
			return // the signed-in browser keeps its sign-in
		}
		resp, err := b.Post(ts.URL+path, "application/x-www-form-urlencoded", strings.NewReader(form+"&csrf="+csrf))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			t.Fatalf("POST %s %q: %d", path, form, resp.StatusCode)
		}
		if loc := resp.Header.Get("Location"); loc != "" {
			u, err := url.Parse(loc)
			if err != nil || u.Scheme != "" || u.Host != "" || !strings.HasPrefix(loc, "/") || strings.HasPrefix(loc, "//") ||
				strings.ContainsAny(loc, "\\\t\r\n ") {
				t.Fatalf("POST %s %q redirected off the site: %q", path, form, loc)
			}
		}
	})
}
