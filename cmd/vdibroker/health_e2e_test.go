//go:build unix

package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// cuttableProxy forwards TCP connections to a server until Cut closes the
// listener and every connection: a database outage for a broker whose
// DSN names the proxy.
type cuttableProxy struct {
	ln    net.Listener
	to    string
	mu    sync.Mutex
	conns []net.Conn
}

func newCuttableProxy(tb testing.TB, to string) *cuttableProxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &cuttableProxy{ln: ln, to: to}
	go p.serve()
	tb.Cleanup(p.Cut)
	return p
}

func (p *cuttableProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.to)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go func() { io.Copy(s, c); s.Close() }()
		go func() { io.Copy(c, s); c.Close() }()
	}
}

// Cut closes the listener and every forwarded connection.
func (p *cuttableProxy) Cut() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// healthReason is /healthz's status and store reason, asked with bearer
// (none when "").
func healthReason(tb testing.TB, base, bearer string) (int, string) {
	tb.Helper()
	req, _ := http.NewRequest("GET", base+"/healthz", nil)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	var h struct {
		Store struct {
			Reason string `json:"reason"`
		} `json:"store"`
	}
	if err := json.NewDecoder(res.Body).Decode(&h); err != nil {
		tb.Fatalf("decode /healthz: %v", err)
	}
	return res.StatusCode, h.Store.Reason
}

// TestHealthzRedactsTheDatabase_RSEC: during an outage of a PostgreSQL
// store, an anonymous /healthz says the store is unavailable without the
// driver's error, which names the database's user, name and address; the
// admin token gets that error, and so does the log.
func TestHealthzRedactsTheDatabase_RSEC(t *testing.T) {
	dsn := e2ePostgresDSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newCuttableProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	t.Setenv("VDIBROKER_ADMIN_TOKEN", "")
	m := &Main{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Database: u.String(), StoreTimeout: time.Second}
	if err := m.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if status, _ := healthReason(t, m.URL(), ""); status != http.StatusOK {
		t.Fatalf("/healthz = %d before the outage, want 200", status)
	}
	proxy.Cut()
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, _ := healthReason(t, m.URL(), "")
		if status == http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz = %d 30 s into the outage, want 503", status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, full := healthReason(t, m.URL(), m.AdminToken)
	if !strings.Contains(full, u.Host) {
		t.Errorf("the admin's /healthz reason %q does not name the database's address %s", full, u.Host)
	}
	for _, bearer := range []string{"", "vdbt_not-a-token"} {
		_, public := healthReason(t, m.URL(), bearer)
		for _, secret := range []string{u.Host, u.Hostname(), u.User.Username(), strings.TrimPrefix(u.Path, "/"), "database="} {
			if strings.Contains(public, secret) {
				t.Errorf("/healthz with bearer %q tells %q: its reason %q", bearer, secret, public)
			}
		}
		if public == "" {
			t.Errorf("/healthz with bearer %q gives no reason at all", bearer)
		}
	}
}
