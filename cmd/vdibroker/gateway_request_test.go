package main

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker/gateway"
	"github.com/vdibroker/vdibroker/gatewaytoken"
	"github.com/vdibroker/vdibroker/internal/echotest"
)

// TestGatewayRequestBodyBounded: on both gateways' listeners (`vdibroker
// gateway`, `serve --gateway-listen`) a request announcing a body it
// never sends, which anyone may send, is answered and its connection
// closed once the request's read time (gatewayRequestTimeout) has
// passed: net/http reads a refused request's body before it answers,
// and without a deadline on that read each such connection was held for
// ever, 1,000 an address (docs/gateway.md, "Refusals"; R-GW1). A tunnel
// on either transport carries data past that time: its connections are
// hijacked, which clears the deadline. The server's deadline is on the
// real clock, so real time passes here.
func TestGatewayRequestBodyBounded(t *testing.T) {
	const requestTimeout = time.Second
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) (addr string, roots *x509.CertPool, token func() string, host string)
	}{
		{"vdibroker gateway", func(t *testing.T) (string, *x509.CertPool, func() string, string) {
			dir := t.TempDir()
			ca := newTestCA(t, dir)
			cert, key := ca.issue(t, dir, "gateway", 2, false)
			signer, err := gatewaytoken.GenerateSigner("k1")
			if err != nil {
				t.Fatal(err)
			}
			doc, err := gatewaytoken.MarshalJWKS(map[string]ed25519.PublicKey{"k1": signer.PublicKey()})
			if err != nil {
				t.Fatal(err)
			}
			keys := filepath.Join(dir, "keys.json")
			if err := os.WriteFile(keys, doc, 0o600); err != nil {
				t.Fatal(err)
			}
			m := &GatewayMain{Listen: "127.0.0.1:0", TLSCert: cert, TLSKey: key, Name: "rdgw-req", KeysFile: keys,
				KeysRefresh: time.Minute, MaxHeaderBytes: 8 << 10, requestTimeout: requestTimeout}
			if err := m.Open(t.Context()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
			host := echotest.Listen(t)
			token := func() string {
				now := time.Now()
				tok, err := signer.Sign(gatewaytoken.Claims{ID: gatewaytoken.NewID(), User: "alice", Session: "s-1", Pool: "p",
					Host: host, NotBefore: now.Unix(), Expiry: now.Add(5 * time.Minute).Unix()})
				if err != nil {
					t.Fatal(err)
				}
				return tok
			}
			roots := x509.NewCertPool()
			roots.AddCert(ca.cert)
			return m.Addr(), roots, token, host
		}},
		{"serve --gateway-listen", func(t *testing.T) (string, *x509.CertPool, func() string, string) {
			g := startInprocGateway(t, gateway.Config{}, func(m *Main) { m.Gateway.requestTimeout = requestTimeout })
			used := false
			token := func() string { // one connect answer's token: one tunnel
				if used {
					t.Fatal("one token only")
				}
				used = true
				return g.token
			}
			return g.m.Gateway.Addr(), g.roots, token, g.addr
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, roots, token, host := tc.start(t)
			tlsConf := &tls.Config{RootCAs: roots}
			reqs := []struct{ name, head string }{
				{"a refused tunnel request", "RDG_OUT_DATA " + gateway.Path + " HTTP/1.1\r\nHost: gw\r\nContent-Length: 1000\r\n\r\n"},
				{"a chunked body to another path", "POST /other HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n"},
				{"a health probe", "GET " + gateway.HealthPath + " HTTP/1.1\r\nHost: gw\r\nContent-Length: 1000\r\n\r\n"},
			}
			conns := make([]*tls.Conn, len(reqs))
			for i, req := range reqs { // all sent first: the server's read times run together
				c, err := tls.Dial("tcp", addr, tlsConf)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if _, err := io.WriteString(c, req.head+"ab"); err != nil { // 2 bytes of the body, and no more
					t.Fatal(err)
				}
				conns[i] = c
			}
			for i, c := range conns {
				// A bound for the test only, well past requestTimeout:
				// without the server's, the connection is held for ever.
				c.SetReadDeadline(time.Now().Add(15 * time.Second))
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					t.Fatalf("%s: no answer: %v", reqs[i].name, err)
				}
				_, err = io.Copy(io.Discard, c) // the rest, up to the close
				if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
					t.Fatalf("%s: answered %d, and the connection held past the request's read time", reqs[i].name, resp.StatusCode)
				}
			}

			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			tunnels := map[string]*gateway.ClientConn{}
			for _, ws := range []bool{false, true} {
				if tc.name == "serve --gateway-listen" && ws {
					continue // one connect answer, one tunnel
				}
				conn, err := gateway.Dial(ctx, gateway.DialConfig{Gateway: addr, TLSConfig: tlsConf, Token: token(), Target: host, WebSocket: ws, ClientName: "test"})
				if err != nil {
					t.Fatalf("tunnel (WebSocket %v): %v", ws, err)
				}
				defer conn.Close()
				tunnels[fmt.Sprintf("rdp over WebSocket %v", ws)] = conn
			}
			<-time.After(2 * requestTimeout) // the requests' read time passed
			for msg, conn := range tunnels {
				go io.WriteString(conn, msg)
				buf := make([]byte, len(msg))
				if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != msg {
					t.Fatalf("%s after the request's read time: %q %v", msg, buf, err)
				}
			}
		})
	}
}
