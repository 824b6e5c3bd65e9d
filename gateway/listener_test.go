package gateway

import (
	"crypto/tls"
	"io"
	"net"
	"net/http/httptest"
	"testing"
	"time"
)

// TestLimitListener: an address holds at most MaxConnsPerAddress
// connections on the gateway's listener, before any TLS handshake or
// request: one more is closed at once, as conns_per_address, and the
// slot comes back when a connection closes, tunnels alike (docs/gateway.md,
// "Refusals"; R-GW1).
func TestLimitListener(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxConnsPerAddress = 2 })
	srv := httptest.NewUnstartedServer(e.gw)
	srv.EnableHTTP2 = false
	srv.Listener = e.gw.limitListener(srv.Listener)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	e.addr = srv.Listener.Addr().String()

	idle := func() net.Conn { // a connection that sends nothing
		t.Helper()
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	first := idle()
	tunnel, err := e.dial(e.token(nil), e.host, true) // one WebSocket: one connection
	if err != nil {
		t.Fatal(err)
	}
	defer tunnel.Close()
	third := idle()
	third.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := third.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("a third connection: read %v, want it closed at once (EOF)", err)
	}
	waitFor(t, "the refusal", func() bool { return refusal(e, "conns_per_address") == 1 })
	echo(t, tunnel, 100) // the others work on

	first.Close()
	waitFor(t, "the slot given back", func() bool {
		c, err := tls.Dial("tcp", e.addr, e.tls) // a handshake needs a connection kept
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
}

// TestListenerLimitsAndBatches: the gateway's one listener
// (Gateway.Listener, what `vdibroker gateway` and `serve --gateway-listen`
// run and `bench gateway` measures) is TLS over the batching connection
// over the per-address limit: a packet leaves in one socket write
// (TestBatchedWriteIsOneSocketWrite) and the limit holds before the
// handshake (TestLimitListener). The commands once made a plain TLS
// listener, so what ran never batched.
func TestListenerLimitsAndBatches(t *testing.T) {
	e := newEnv(t, nil)
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := e.gw.Listener(tcp, &tls.Config{Certificates: []tls.Certificate{testCert(t)}})
	defer ln.Close()
	go func() {
		c, err := tls.Dial("tcp", tcp.Addr().String(), &tls.Config{InsecureSkipVerify: true}) // the test's own certificate
		if err == nil {
			c.Close()
		}
	}()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tc, ok := c.(*tls.Conn)
	if !ok {
		t.Fatalf("accepted %T, want *tls.Conn", c)
	}
	bc, ok := tc.NetConn().(*batchConn)
	if !ok {
		t.Fatalf("the TLS connection is over %T, want *batchConn", tc.NetConn())
	}
	if _, ok := bc.Conn.(*limitedConn); !ok {
		t.Fatalf("the batching connection is over %T, want *limitedConn", bc.Conn)
	}
	if _, ok := batched(tc, tc).(batchWriter); !ok {
		t.Fatal("the gateway's writer over it does not batch")
	}
}
