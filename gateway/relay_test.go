package gateway

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker/gateway/tsgu"
	"github.com/vdibroker/vdibroker/gatewaytoken"
)

// scriptedHost is a host connection whose reads return the sizes of a
// script (at most what the reader's buffer holds), then EOF, and records
// each reader's buffer size.
type scriptedHost struct {
	net.Conn // nil: only Read and Close are used
	script   []int
	next     byte
	sent     bytes.Buffer
	bufSizes []int
}

func (h *scriptedHost) Read(p []byte) (int, error) {
	h.bufSizes = append(h.bufSizes, len(p))
	if len(h.script) == 0 {
		return 0, io.EOF
	}
	n := min(h.script[0], len(p))
	h.script = h.script[1:]
	for i := range p[:n] {
		p[i] = h.next
		h.next++
	}
	h.sent.Write(p[:n])
	return n, nil
}

func (h *scriptedHost) Close() error { return nil }

// TestRelayToClient: every read from the host goes to the client as one
// data packet carrying exactly those bytes. A quiet host is read with a
// 4 KiB buffer; a read that fills it switches to a 64 KiB one, which goes
// back after eight reads in a row that 4 KiB would have held.
func TestRelayToClient(t *testing.T) {
	ks, err := gatewaytoken.NewKeySet(nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(Config{Verifier: ks, Broker: &MemoryBroker{}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	const small, large = smallRead, largeRead
	tests := []struct {
		read, bufSize int
	}{
		{100, small},
		{small, small}, // full: the next read is large
		{large, large},
		{10, large}, {10, large}, {10, large}, {10, large}, {10, large}, {10, large}, {10, large},
		{10, large}, // the eighth quiet read: the next is small
		{10, small},
		{small, small},
		{5000, large},
		{small, large}, // 4 KiB in the large buffer is quiet too
		{0, large},     // EOF
	}
	host := &scriptedHost{}
	for _, tt := range tests[:len(tests)-1] {
		host.script = append(host.script, tt.read)
	}
	var out bytes.Buffer
	tun := &tunnel{g: g, fr: tsgu.NewFramer(nil, &out), target: host, closeConns: func() {}, done: make(chan struct{})}
	tun.relayToClient()

	var want []int
	for _, tt := range tests {
		want = append(want, tt.bufSize)
	}
	if fmt.Sprint(host.bufSizes) != fmt.Sprint(want) {
		t.Errorf("read buffer sizes\n got %v\nwant %v", host.bufSizes, want)
	}
	if tun.reason != "host_closed" {
		t.Errorf("ended %q, want host_closed", tun.reason)
	}
	fr := tsgu.NewFramer(&out, nil)
	var got []byte
	for i, tt := range tests[:len(tests)-1] {
		p, err := fr.ReadPacket()
		if err != nil {
			t.Fatalf("packet %d: %v", i, err)
		}
		d, err := tsgu.DataPayload(p)
		if err != nil || len(d) != tt.read {
			t.Fatalf("packet %d: %d bytes (%v), want one packet of the %d read", i, len(d), err, tt.read)
		}
		got = append(got, d...)
	}
	if !bytes.Equal(got, host.sent.Bytes()) || tun.toClient.Load() != int64(len(got)) {
		t.Errorf("the client got %d bytes (counted %d), not the %d the host sent", len(got), tun.toClient.Load(), host.sent.Len())
	}
}

// TestPacketsSplitAcrossChunks: data packets that the client cuts across
// HTTP chunks (and so TLS records and reads) anywhere, even inside the
// header, and several packets in one chunk, reach the host byte-exact.
func TestPacketsSplitAcrossChunks(t *testing.T) {
	e := newEnv(t, nil)
	var stream, want []byte
	for _, n := range []int{1, 7, 3000, 40000, tsgu.MaxDataSize, 5} {
		payload := bytes.Repeat([]byte{byte(n)}, n)
		payload[n/2] = 0xEE
		want = append(want, payload...)
		buf := make([]byte, tsgu.DataHeaderSize+n)
		copy(buf[tsgu.DataHeaderSize:], payload)
		stream = append(stream, tsgu.PutDataHeader(buf, n)...)
	}
	// The host records what reaches it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	received := make(chan []byte, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			received <- nil
			return
		}
		defer conn.Close()
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		b := make([]byte, len(want))
		n, _ := io.ReadFull(conn, b)
		received <- b[:n]
	}()
	e.host = ln.Addr().String()
	c, err := e.dial(e.token(nil), e.host, false)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Cuts: inside the first header, right after it, inside a payload,
	// across packet boundaries, and one chunk with several packets.
	in := c.closers[0].(io.Writer) // the IN channel, written here chunk by chunk
	prev := 0
	for _, cut := range []int{3, 10, 11, 20, 2500, 3030, 3041, 60000, len(stream) - 20, len(stream)} {
		chunk := stream[prev:cut]
		prev = cut
		if _, err := fmt.Fprintf(in, "%s\r\n%s\r\n", strconv.FormatInt(int64(len(chunk)), 16), chunk); err != nil {
			t.Fatal(err)
		}
	}
	got := <-received
	if len(got) != len(want) {
		t.Fatalf("the host received %d bytes, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("the host received byte %d = %#x, want %#x", i, got[i], want[i])
		}
	}
}
