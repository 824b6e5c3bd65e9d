package gateway

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
	"unicode/utf16"

	"github.com/coder/websocket"

	"github.com/vdibroker/vdibroker/gateway/tsgu"
)

// DialConfig says how a client reaches a host through a gateway.
type DialConfig struct {
	// Gateway is the gateway's address, host:port.
	Gateway   string
	TLSConfig *tls.Config
	// Token is the access token, sent as the PAA cookie.
	Token string
	// Target is the host's address the client asks for, host:port.
	Target string
	// WebSocket uses the WebSocket variant instead of two connections.
	WebSocket  bool
	ClientName string
}

// RefusedError is the gateway's refusal of a step of the handshake.
type RefusedError struct {
	Step tsgu.PacketType // the gateway's answer that refused
	Code uint32          // its HRESULT
	// HTTPStatus is set when the HTTP request itself was refused.
	HTTPStatus int
}

func (e *RefusedError) Error() string {
	if e.HTTPStatus != 0 {
		return fmt.Sprintf("gateway refused the HTTP request: %d %s", e.HTTPStatus, http.StatusText(e.HTTPStatus))
	}
	return fmt.Sprintf("gateway refused: %v 0x%08X", e.Step, e.Code)
}

// ClientConn is the RDP stream of a tunnel, client side: what FreeRDP's
// gateway transport does, for tests and `vdibroker bench gateway`.
type ClientConn struct {
	fr         *tsgu.Framer
	chunks     *chunkWriter // the IN channel of the HTTP transport
	closers    []io.Closer
	deadliners []interface{ SetDeadline(time.Time) error }
	rest       []byte
}

// Dial opens a tunnel through a gateway to cfg.Target, the MS-TSGU HTTP
// transport as FreeRDP 2.11 speaks it with an access token.
func Dial(ctx context.Context, cfg DialConfig) (*ClientConn, error) {
	id := make([]byte, 16)
	rand.Read(id)
	connID := "{" + hex.EncodeToString(id) + "}"
	var c *ClientConn
	var err error
	if cfg.WebSocket {
		c, err = dialWebSocket(ctx, cfg, connID)
	} else {
		c, err = dialHTTP(ctx, cfg, connID)
	}
	if err != nil {
		return nil, err
	}
	// The handshake is bounded by ctx too.
	if dl, ok := ctx.Deadline(); ok {
		for _, d := range c.deadliners {
			d.SetDeadline(dl)
		}
	}
	if err := c.handshake(cfg); err != nil {
		c.Close()
		return nil, err
	}
	for _, d := range c.deadliners {
		d.SetDeadline(time.Time{})
	}
	return c, nil
}

func dialTLS(ctx context.Context, cfg DialConfig) (net.Conn, error) {
	d := tls.Dialer{Config: cfg.TLSConfig}
	return d.DialContext(ctx, "tcp", cfg.Gateway)
}

// request writes one RD Gateway request's head.
func request(w io.Writer, method string, cfg DialConfig, connID string, chunked bool) error {
	body := "Content-Length: 0\r\n"
	if chunked {
		body = "Transfer-Encoding: chunked\r\n"
	}
	_, err := fmt.Fprintf(w, "%s %s HTTP/1.1\r\nHost: %s\r\nCache-Control: no-cache\r\nPragma: no-cache\r\nAccept: */*\r\n"+
		"User-Agent: MS-RDGateway/1.0\r\nConnection: Keep-Alive\r\nRDG-Connection-Id: %s\r\nRDG-Auth-Scheme: PAA\r\n%s\r\n",
		method, Path, cfg.Gateway, connID, body)
	return err
}

func dialHTTP(ctx context.Context, cfg DialConfig, connID string) (*ClientConn, error) {
	out, err := dialTLS(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		out.SetDeadline(dl)
	}
	if err := request(out, methodOut, cfg, connID, false); err != nil {
		out.Close()
		return nil, err
	}
	br := bufio.NewReaderSize(out, 64<<10)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		out.Close()
		if err == nil {
			err = &RefusedError{HTTPStatus: resp.StatusCode}
		}
		return nil, err
	}
	if _, err := io.ReadFull(br, make([]byte, 10)); err != nil { // the seed
		out.Close()
		return nil, fmt.Errorf("OUT channel seed: %w", err)
	}
	in, err := dialTLS(ctx, cfg)
	if err != nil {
		out.Close()
		return nil, err
	}
	fail := func(err error) (*ClientConn, error) { in.Close(); out.Close(); return nil, err }
	if dl, ok := ctx.Deadline(); ok {
		in.SetDeadline(dl)
	}
	if err := request(in, methodIn, cfg, connID, false); err != nil {
		return fail(err)
	}
	inr := bufio.NewReader(in)
	resp, err = http.ReadResponse(inr, nil)
	if err != nil {
		return fail(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fail(&RefusedError{HTTPStatus: resp.StatusCode})
	}
	if err := request(in, methodIn, cfg, connID, true); err != nil {
		return fail(err)
	}
	out.SetDeadline(time.Time{})
	in.SetDeadline(time.Time{})
	cw := &chunkWriter{w: in}
	return &ClientConn{fr: tsgu.NewFramer(br, cw), chunks: cw, closers: []io.Closer{in, out},
		deadliners: []interface{ SetDeadline(time.Time) error }{in, out}}, nil
}

// methodRewriter sends the WebSocket upgrade as RDG_OUT_DATA, as RD Gateway
// clients do (the library would send GET).
type methodRewriter struct{ rt http.RoundTripper }

func (m methodRewriter) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Method = methodOut
	return m.rt.RoundTrip(r)
}

func dialWebSocket(ctx context.Context, cfg DialConfig, connID string) (*ClientConn, error) {
	// Each frame goes out in one write to the socket, as FreeRDP writes
	// it, not in one per 4 KiB record the library's buffer flushes.
	var conn *tls.Conn
	tr := &http.Transport{ForceAttemptHTTP2: false, DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		raw, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tc := cfg.TLSConfig.Clone()
		if tc == nil {
			tc = &tls.Config{}
		}
		if tc.ServerName == "" {
			tc.ServerName, _, _ = net.SplitHostPort(addr)
		}
		conn = tls.Client(&batchConn{Conn: raw}, tc)
		if err := conn.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, err
		}
		return conn, nil
	}}
	u := url.URL{Scheme: "https", Host: cfg.Gateway, Path: Path}
	h := http.Header{}
	h.Set(headerConnectionID, connID)
	h.Set(headerAuthScheme, "PAA")
	ws, resp, err := websocket.Dial(ctx, u.String(), &websocket.DialOptions{HTTPClient: &http.Client{Transport: methodRewriter{tr}}, HTTPHeader: h})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, &RefusedError{HTTPStatus: resp.StatusCode}
		}
		return nil, err
	}
	nc := websocket.NetConn(context.WithoutCancel(ctx), ws, websocket.MessageBinary)
	return &ClientConn{fr: tsgu.NewFramer(nc, batched(nc, conn)), closers: []io.Closer{nc}, deadliners: []interface{ SetDeadline(time.Time) error }{nc}}, nil
}

// expect reads the next packet other than a keepalive.
func (c *ClientConn) expect() (tsgu.Message, error) {
	for {
		m, err := c.fr.ReadMessage()
		if err != nil {
			return nil, err
		}
		if m.Type() != tsgu.PktKeepalive {
			return m, nil
		}
	}
}

func (c *ClientConn) handshake(cfg DialConfig) error {
	host, portS, err := net.SplitHostPort(cfg.Target)
	if err != nil {
		return err
	}
	port, err := strconv.ParseUint(portS, 10, 16)
	if err != nil {
		return err
	}
	steps := []tsgu.Message{
		&tsgu.HandshakeRequest{VerMajor: 1, ExtendedAuth: tsgu.ExtendedAuthPAA},
		&tsgu.TunnelCreate{Caps: tsgu.CapQuarSOH | tsgu.CapMessagingConsentSign | tsgu.CapMessagingServiceMsg,
			FieldsPresent: tsgu.TunnelFieldPAACookie, PAACookie: utf16z(cfg.Token)},
		&tsgu.TunnelAuth{ClientName: cfg.ClientName},
		&tsgu.ChannelCreate{Resources: []string{host}, Port: uint16(port), Protocol: tsgu.ProtocolRDP},
	}
	for _, req := range steps {
		if err := c.fr.WriteMessage(req); err != nil {
			return err
		}
		m, err := c.expect()
		if err != nil {
			return fmt.Errorf("after %v: %w", req.Type(), err)
		}
		var code uint32
		switch m := m.(type) {
		case *tsgu.HandshakeResponse:
			code = m.ErrorCode
		case *tsgu.TunnelResponse:
			code = m.StatusCode
		case *tsgu.TunnelAuthResponse:
			code = m.ErrorCode
		case *tsgu.ChannelResponse:
			code = m.ErrorCode
		default:
			return fmt.Errorf("after %v: unexpected %v", req.Type(), m.Type())
		}
		if code&0x80000000 != 0 {
			return &RefusedError{Step: m.Type(), Code: code}
		}
	}
	return nil
}

// utf16z encodes s as UTF-16LE with a NUL, as FreeRDP sends its cookie.
func utf16z(s string) []byte {
	u := utf16.Encode([]rune(s))
	b := make([]byte, 0, 2*len(u)+2)
	for _, c := range u {
		b = append(b, byte(c), byte(c>>8))
	}
	return append(b, 0, 0)
}

// Read reads the RDP stream: the payloads of data packets. A keepalive is
// answered; the gateway's close packet is answered and ends the stream.
func (c *ClientConn) Read(p []byte) (int, error) {
	for len(c.rest) == 0 {
		pkt, err := c.fr.ReadPacket()
		if err != nil {
			return 0, err
		}
		h, _ := tsgu.ParseHeader(pkt)
		switch h.Type {
		case tsgu.PktData:
			d, err := tsgu.DataPayload(pkt)
			if err != nil {
				return 0, err
			}
			c.rest = d
		case tsgu.PktKeepalive:
			c.fr.WriteMessage(&tsgu.Keepalive{})
		case tsgu.PktCloseChannel:
			m, _ := tsgu.Unmarshal(pkt)
			c.fr.WriteMessage(&tsgu.Close{Response: true})
			if cl, ok := m.(*tsgu.Close); ok && cl.StatusCode != 0 {
				return 0, &RefusedError{Step: tsgu.PktCloseChannel, Code: cl.StatusCode}
			}
			return 0, io.EOF
		default:
			return 0, fmt.Errorf("unexpected %v in the data phase", h.Type)
		}
	}
	n := copy(p, c.rest)
	c.rest = c.rest[n:]
	return n, nil
}

// Write sends p as data packets.
func (c *ClientConn) Write(p []byte) (int, error) {
	write := c.fr.WriteData
	if c.chunks != nil {
		write = c.chunks.writeData
	}
	if err := write(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// CloseChannel asks the gateway to close the channel, as a client ending
// its session does.
func (c *ClientConn) CloseChannel() error { return c.fr.WriteMessage(&tsgu.Close{}) }

// Close closes the client's connections.
func (c *ClientConn) Close() error {
	var errs []error
	for _, cl := range c.closers {
		errs = append(errs, cl.Close())
	}
	return errors.Join(errs...)
}

// chunkWriter writes each Write as one HTTP/1.1 chunk in one write to the
// connection (one TLS write, where httputil's writer makes three).
type chunkWriter struct {
	w   io.Writer
	mu  sync.Mutex
	buf []byte
}

func (c *chunkWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf = strconv.AppendInt(c.buf[:0], int64(len(p)), 16)
	c.buf = append(c.buf, '\r', '\n')
	c.buf = append(c.buf, p...)
	c.buf = append(c.buf, '\r', '\n')
	if _, err := c.w.Write(c.buf); err != nil {
		return 0, err
	}
	return len(p), nil
}

// writeData writes b as data packets, each its own chunk built around the
// payload in one copy (as FreeRDP builds it) and written at once.
func (c *chunkWriter) writeData(b []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var header [tsgu.DataHeaderSize]byte
	for len(b) > 0 {
		n := min(len(b), tsgu.MaxDataSize)
		c.buf = strconv.AppendInt(c.buf[:0], int64(tsgu.DataHeaderSize+n), 16)
		c.buf = append(c.buf, '\r', '\n')
		start := len(c.buf)
		c.buf = append(c.buf, header[:]...)
		c.buf = append(c.buf, b[:n]...)
		tsgu.PutDataHeader(c.buf[start:], n)
		c.buf = append(c.buf, '\r', '\n')
		if _, err := c.w.Write(c.buf); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}
