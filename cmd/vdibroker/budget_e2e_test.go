//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/testop"
)

// countingWriter counts the bytes written to it (a log's size).
type countingWriter struct{ n atomic.Int64 }

func (w *countingWriter) Write(p []byte) (int, error) { w.n.Add(int64(len(p))); return len(p), nil }

// fromAddr is an HTTP client whose connections come from the loopback
// address ip (127.0.0.2, ...: Linux routes all of 127/8 to lo), so a test
// can be several clients at once.
func fromAddr(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 4},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// anonymousWrite is one kind of request a caller without an API
// credential can send, and what each causes at most: an access log line,
// an audit entry or its count.
type anonymousWrite struct {
	name string
	// req builds the i-th request of the kind to base.
	req func(base string, i int) *http.Request
}

func mustRequest(method, url, body string) *http.Request {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r, err := http.NewRequest(method, url, rd)
	if err != nil {
		panic(err)
	}
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	return r
}

// TestAnonymousWritesAreBounded_RSEC is the budget test of every write an
// unauthenticated caller (or one holding only a registration token) can
// cause, through the real broker on loopback: thousands of refused
// requests from three addresses, of every kind below, grow the database
// by at most the refusal audit's bound (per window 2 × RefusalsPerWindow
// + 1 entries of bounded size) and the log by at most the refused-line
// budget (RefusedLogLineBurst lines, then RefusedLogLinesPerSecond a
// second) of bounded lines, however long the paths they send.
func TestAnonymousWritesAreBounded_RSEC(t *testing.T) {
	t.Setenv("VDIBROKER_ADMIN_TOKEN", "")
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "federation.secret")
	if err := os.WriteFile(secretFile, []byte("budget-federation-secret-0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Single sign-on on, so its anonymous paths (the sign-in's start and
	// the provider's callback) are in the flood too.
	op := testop.StartAt(t, "127.0.0.1", "vdibroker-console", "console-secret",
		testop.User{Subject: "carol", Password: "pw-carol", Groups: []string{"ops"}})
	roles, opSecret := filepath.Join(dir, "roles.yaml"), filepath.Join(dir, "op.secret")
	if err := os.WriteFile(roles, []byte("groups:\n  ops:\n    role: Contributor\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(opSecret, []byte("console-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs countingWriter
	var m *Main
	closed := true
	open := func() {
		t.Helper()
		m = &Main{Listen: "127.0.0.1:0", DataDir: filepath.Join(dir, "data"), MetricsToken: "budget-metrics-token",
			Logger:     slog.New(slog.NewJSONHandler(&logs, nil)),
			Federation: FederationFlags{PodName: "pod1", SecretFile: secretFile, PodTimeout: time.Second},
			OIDC:       OIDCFlags{Issuer: op.Issuer, ClientID: op.ClientID, ClientSecretFile: opSecret, RoleMapFile: roles}}
		if err := m.Open(context.Background()); err != nil {
			t.Fatal(err)
		}
		closed = false
	}
	shut := func() {
		t.Helper()
		closed = true
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if !closed {
			m.Close()
		}
	})
	open()
	ctx := context.Background()
	admin := vhttp.NewClient(m.URL(), m.AdminToken)
	if _, err := admin.PutHostPool(ctx, "pool", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	rt, err := admin.CreateRegistrationToken(ctx, "pool", vhttp.RegistrationTokenRequest{ExpiresInSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Register(ctx, &vdibroker.RegisterRequest{Token: rt.Token, HostName: "taken", Address: "taken.example.test:3389"}); err != nil {
		t.Fatal(err)
	}
	// A path of 60,000 bytes: under the request head limit (64 KiB), so
	// every handler sees it.
	long := strings.Repeat("a", 60000)
	kinds := []anonymousWrite{
		{"no credential, long pool name", func(b string, i int) *http.Request {
			return mustRequest("GET", fmt.Sprintf("%s/api/v1/hostpools/%s%d", b, long, i), "")
		}},
		{"forged token, long pool name", func(b string, i int) *http.Request {
			r := mustRequest("PATCH", fmt.Sprintf("%s/api/v1/hostpools/%s%d", b, long, i), `{}`)
			r.Header.Set("Authorization", "Bearer vdbt_forged"+long[:2000])
			return r
		}},
		{"bogus registration token", func(b string, i int) *http.Request {
			return mustRequest("POST", b+"/api/v1/agent/register", fmt.Sprintf(`{"token": "vdbr_bogus%d", "hostName": "host%d", "address": "h.example.test:3389"}`, i, i))
		}},
		{"registration token on a registered host", func(b string, i int) *http.Request {
			return mustRequest("POST", b+"/api/v1/agent/register", fmt.Sprintf(`{"token": %q, "hostName": "taken", "address": "x%d.example.test:3389"}`, rt.Token, i))
		}},
		{"bogus host credential", func(b string, i int) *http.Request {
			r := mustRequest("POST", b+"/api/v1/agent/heartbeat", `{"sessions": []}`)
			r.Header.Set("Authorization", fmt.Sprintf("Bearer vdbh_bogus%d", i))
			return r
		}},
		{"unsigned pod call", func(b string, i int) *http.Request {
			return mustRequest("GET", b+federation.LoadsPath, "")
		}},
		{"badly signed pod call", func(b string, i int) *http.Request {
			r := mustRequest("POST", b+federation.ConnectPath, `{"hostPool": "pool", "user": "u"}`)
			for k, v := range federation.Sign([]byte("not-the-federation-secret"), "POST", federation.ConnectPath, "pod1", nil, time.Now()) {
				r.Header.Set(k, v)
			}
			return r
		}},
		{"unknown API path", func(b string, i int) *http.Request {
			return mustRequest("DELETE", fmt.Sprintf("%s/api/v1/%s/%d", b, long, i), "")
		}},
		{"console sign-in with a bogus token", func(b string, i int) *http.Request {
			r := mustRequest("POST", b+"/signin", fmt.Sprintf("csrf=c&token=vdbt_bogus%d", i))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			r.AddCookie(&http.Cookie{Name: "vdibroker_signin", Value: "c"})
			return r
		}},
		{"console page, long path", func(b string, i int) *http.Request {
			return mustRequest("GET", fmt.Sprintf("%s/pools/%s%d", b, long, i), "")
		}},
		{"single sign-on start", func(b string, i int) *http.Request {
			return mustRequest("GET", fmt.Sprintf("%s/signin/oidc?next=/%s%d", b, long[:2000], i), "")
		}},
		{"single sign-on callback, the provider's long error", func(b string, i int) *http.Request {
			return mustRequest("GET", fmt.Sprintf("%s/signin/oidc/callback?error=access_denied&error_description=%s%d", b, long, i), "")
		}},
		{"single sign-on callback, forged code and state", func(b string, i int) *http.Request {
			r := mustRequest("GET", fmt.Sprintf("%s/signin/oidc/callback?code=forged%d&state=forged%d", b, i, i), "")
			r.AddCookie(&http.Cookie{Name: "vdibroker_oidc", Value: fmt.Sprintf("forged-state-%d", i)})
			return r
		}},
		{"metrics", func(b string, i int) *http.Request { return mustRequest("GET", b+"/metrics", "") }},
		{"health", func(b string, i int) *http.Request { return mustRequest("GET", b+"/healthz", "") }},
		{"head too large", func(b string, i int) *http.Request {
			return mustRequest("GET", b+"/api/v1/hostpools/"+strings.Repeat("b", 200000), "")
		}},
	}
	// The database's size with its WAL checkpointed (Close does), before
	// and after.
	shut()
	baseDB := storeBytes(t, m)
	open()
	admin = vhttp.NewClient(m.URL(), m.AdminToken)
	baseAudit := len(listAudit(t, admin))
	baseLog := logs.n.Load()
	start := time.Now()
	const perAddr = 100
	statuses := map[string]map[int]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, ip := range []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"} {
		c := fromAddr(ip)
		wg.Go(func() {
			for i := range perAddr {
				for _, k := range kinds {
					resp, err := c.Do(k.req(m.URL(), i))
					if err != nil {
						t.Errorf("%s from %s: %v", k.name, ip, err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					mu.Lock()
					if statuses[k.name] == nil {
						statuses[k.name] = map[int]int{}
					}
					statuses[k.name][resp.StatusCode]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, k := range kinds {
		t.Logf("%-40s %v", k.name, statuses[k.name])
		if k.name != "health" && statuses[k.name][200]+statuses[k.name][201] > 0 {
			t.Errorf("%s: answered 200 %d times, want refusals only", k.name, statuses[k.name][200])
		}
	}
	// Within the window: at most RefusalsPerWindow whole entries.
	if n := len(listAudit(t, admin)) - baseAudit; n > vdibroker.RefusalsPerWindow {
		t.Errorf("%d audit entries written during the flood, want at most %d (RefusalsPerWindow)", n, vdibroker.RefusalsPerWindow)
	}
	// Closing writes the window's summaries: at most RefusalsPerWindow
	// more, and one for the other addresses.
	shut()
	const maxEntryBytes = 8 << 10 // every text cut to MaxAuditField, a principal, JSON nulls, the row's own overhead
	maxEntries := int64(2*vdibroker.RefusalsPerWindow + 1)
	if grew := storeBytes(t, m) - baseDB; grew > maxEntries*maxEntryBytes+256<<10 {
		t.Errorf("the database grew by %d bytes, want at most %d entries of %d bytes (and 256 KiB of pages)", grew, maxEntries, maxEntryBytes)
	} else {
		t.Logf("the database grew by %d bytes", grew)
	}
	// Lines: the refused-line budget over the elapsed time, the audit
	// entries written, and the closing lines; each at most 4 KiB (a path
	// cut to MaxAuditField).
	const maxLineBytes = 4 << 10
	lines := int64(vhttp.RefusedLogLineBurst) + int64(elapsed.Seconds()+1)*vhttp.RefusedLogLinesPerSecond + maxEntries + 20
	if grew := logs.n.Load() - baseLog; grew > lines*maxLineBytes {
		t.Errorf("the log grew by %d bytes in %s, want at most %d lines of %d bytes", grew, elapsed.Round(time.Millisecond), lines, maxLineBytes)
	} else {
		t.Logf("the log grew by %d bytes in %s", grew, elapsed.Round(time.Millisecond))
	}
}

// listAudit returns every audit entry.
func listAudit(tb testing.TB, c *vhttp.Client) []*vdibroker.AuditEntry {
	tb.Helper()
	list, err := c.ListAudit(context.Background(), vhttp.AuditQuery{})
	if err != nil {
		tb.Fatal(err)
	}
	return list
}
