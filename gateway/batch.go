package gateway

import (
	"crypto/tls"
	"io"
	"net"
	"sync"
)

// newListener returns a TLS listener on inner (Gateway.Listener). Its
// connections let the gateway send what one packet becomes in TLS (up to
// five records for 64 KiB) in one write to the socket instead of one
// write per record: crypto/tls writes each record as it seals it.
func newListener(inner net.Listener, config *tls.Config) net.Listener {
	return tls.NewListener(batchListener{inner}, config)
}

type batchListener struct{ net.Listener }

func (l batchListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &batchConn{Conn: c}, nil
}

// batchConn is a connection under TLS that, while a batch is open, gathers
// what is written (the records TLS seals) and sends it in one write when
// the batch ends. Batches are not nested and come from one goroutine at a
// time; other writes (an alert sent by Close) may come from any goroutine.
type batchConn struct {
	net.Conn
	mu   sync.Mutex
	open bool
	buf  *[]byte // from batchBufs while a batch is open
}

// batchBufs hold a batch: a data packet of 64 KiB sealed in five records.
var batchBufs = sync.Pool{New: func() any { b := make([]byte, 0, 72<<10); return &b }}

func (c *batchConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open {
		*c.buf = append(*c.buf, p...)
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// batch runs write with a batch open and sends what it wrote at once.
func (c *batchConn) batch(write func() error) error {
	c.mu.Lock()
	c.open, c.buf = true, batchBufs.Get().(*[]byte)
	c.mu.Unlock()
	err := write()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(*c.buf) > 0 {
		if _, werr := c.Conn.Write(*c.buf); err == nil {
			err = werr
		}
	}
	*c.buf = (*c.buf)[:0]
	batchBufs.Put(c.buf)
	c.open, c.buf = false, nil
	return err
}

// batchWriter writes to w (a TLS connection, or a WebSocket over one)
// each Write in one batch of raw, the connection under the TLS.
type batchWriter struct {
	w   io.Writer
	raw *batchConn
}

func (b batchWriter) Write(p []byte) (n int, err error) {
	err = b.raw.batch(func() error {
		n, err = b.w.Write(p)
		return err
	})
	return n, err
}

// batched returns w writing in batches when conn is a TLS connection over
// a batchConn (from newListener), and w itself otherwise.
func batched(w io.Writer, conn net.Conn) io.Writer {
	if tc, ok := conn.(*tls.Conn); ok {
		if raw, ok := tc.NetConn().(*batchConn); ok {
			return batchWriter{w: w, raw: raw}
		}
	}
	return w
}
