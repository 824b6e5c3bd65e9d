package gateway

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"io"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"
)

// countingConn counts the writes that reach the socket.
type countingConn struct {
	net.Conn
	mu     sync.Mutex
	writes int
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.writes++
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *countingConn) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes
}

func testCert(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// tlsPair is a TLS server connection over a batchConn over a counting
// connection, and its client, over loopback TCP, handshake done.
func tlsPair(t *testing.T) (server *tls.Conn, raw *countingConn, client *tls.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	bl := newListener(ln, &tls.Config{Certificates: []tls.Certificate{testCert(t)}})
	accepted := make(chan *tls.Conn, 1)
	go func() {
		c, err := bl.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		c.(*tls.Conn).Handshake() // the client's Dial reports a failure
		c.SetDeadline(time.Time{})
		accepted <- c.(*tls.Conn)
	}()
	d := &tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}} // the test's own certificate
	c, err := d.DialContext(t.Context(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cc := c.(*tls.Conn)
	t.Cleanup(func() { cc.Close() })
	sc := <-accepted
	if sc == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { sc.Close() })
	// Count from here on: the batchConn's own connection is swapped for a
	// counting one.
	bc, ok := sc.NetConn().(*batchConn)
	if !ok {
		t.Fatalf("newListener's connection is over %T, want *batchConn", sc.NetConn())
	}
	raw = &countingConn{Conn: bc.Conn}
	bc.Conn = raw
	return sc, raw, cc
}

// TestBatchedWriteIsOneSocketWrite: a 64 KiB packet written through the
// gateway's writer leaves as one write to the socket (crypto/tls seals it
// in five records and would write each), and the peer reads exactly the
// bytes written; a write outside a batch still goes out at once.
func TestBatchedWriteIsOneSocketWrite(t *testing.T) {
	sc, raw, cc := tlsPair(t)
	w := batched(sc, sc)
	if _, ok := w.(batchWriter); !ok {
		t.Fatalf("batched over a newListener connection = %T, want batchWriter", w)
	}
	packet := make([]byte, 64<<10)
	rand.Read(packet)
	got := make(chan []byte)
	go func() {
		b := make([]byte, len(packet)+5)
		n, _ := io.ReadFull(cc, b[:len(packet)])
		cc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		m, _ := cc.Read(b[n:]) // nothing more may come
		got <- b[:n+m]
	}()
	if n, err := w.Write(packet); err != nil || n != len(packet) {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if n := raw.count(); n != 1 {
		t.Errorf("socket writes for one packet = %d, want 1", n)
	}
	if b := <-got; !bytes.Equal(b, packet) {
		t.Fatalf("the peer read %d bytes, not the %d written", len(b), len(packet))
	}

	// Unbatched, crypto/tls writes record by record: what batching saves.
	go io.Copy(io.Discard, cc)
	before := raw.count()
	if _, err := sc.Write(packet); err != nil {
		t.Fatal(err)
	}
	if n := raw.count() - before; n < 4 {
		t.Errorf("socket writes for 64 KiB unbatched = %d, want at least 4", n)
	}
}

// TestBatchedNeedsNewListener: over a connection not made by newListener
// the writer is the connection itself.
func TestBatchedNeedsNewListener(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if w := batched(a, a); w != io.Writer(a) {
		t.Errorf("batched(plain conn) = %T, want the conn", w)
	}
	tc := tls.Client(a, &tls.Config{})
	if w := batched(tc, tc); w != io.Writer(tc) {
		t.Errorf("batched(TLS over a plain conn) = %T, want the conn", w)
	}
}
