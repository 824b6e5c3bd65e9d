package tsgu

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// TestPutDataHeader: a payload read in place behind DataHeaderSize becomes
// the same packet Marshal makes of it, for the empty, a small and the
// largest payload; a larger one is refused.
func TestPutDataHeader(t *testing.T) {
	for _, n := range []int{0, 1, 300, MaxDataSize} {
		payload := bytes.Repeat([]byte{0xA5}, n)
		buf := make([]byte, DataHeaderSize+MaxDataSize)
		copy(buf[DataHeaderSize:], payload)
		got := PutDataHeader(buf, n)
		if want := Marshal(&Data{Data: payload}); !bytes.Equal(got, want) {
			t.Errorf("n=%d: PutDataHeader = % x..., want % x...", n, got[:DataHeaderSize], want[:DataHeaderSize])
		}
		if d, err := DataPayload(got); err != nil || len(d) != n {
			t.Errorf("n=%d: DataPayload = %d bytes, %v", n, len(d), err)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("PutDataHeader of MaxDataSize+1 bytes did not panic")
		}
	}()
	PutDataHeader(make([]byte, DataHeaderSize+MaxDataSize+1), MaxDataSize+1)
}

// TestFramerReadsPacketsByteByByte: packets of every size class (control,
// small data, large data from the pool, the largest) arrive one byte per
// read, as from a slow client whose packets are cut across HTTP chunks and
// TLS records, and come out whole and byte-exact, each valid until the
// next read.
func TestFramerReadsPacketsByteByByte(t *testing.T) {
	payloads := [][]byte{nil, []byte("x"), bytes.Repeat([]byte("small"), 300), bytes.Repeat([]byte("LARGE"), 5000),
		bytes.Repeat([]byte{0xFF}, MaxDataSize), []byte("after the largest, small again")}
	var stream bytes.Buffer
	w := NewFramer(nil, &stream)
	w.WriteMessage(&Keepalive{})
	for _, p := range payloads {
		buf := make([]byte, DataHeaderSize+len(p))
		copy(buf[DataHeaderSize:], p)
		if err := w.WritePacket(PutDataHeader(buf, len(p))); err != nil {
			t.Fatal(err)
		}
	}
	r := NewFramer(iotest.OneByteReader(&stream), nil)
	if m, err := r.ReadMessage(); err != nil || m.Type() != PktKeepalive {
		t.Fatalf("first packet: %v, %v; want a keepalive", m, err)
	}
	for i, want := range payloads {
		p, err := r.ReadPacket()
		if err != nil {
			t.Fatalf("packet %d: %v", i, err)
		}
		got, err := DataPayload(p)
		if err != nil {
			t.Fatalf("packet %d: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("packet %d: %d bytes differ from the %d sent", i, len(got), len(want))
		}
	}
	if _, err := r.ReadPacket(); err != io.EOF {
		t.Fatalf("after the last packet: %v, want EOF", err)
	}
}

// readHook calls hook before every Read.
type readHook struct {
	r    io.Reader
	hook func()
}

func (h readHook) Read(p []byte) (int, error) { h.hook(); return h.r.Read(p) }

// TestFramerHoldsNoLargeBufferWhileWaiting: a large packet is read into a
// pooled buffer, which goes back before the Framer reads (and may wait
// for) the next packet, so an idle tunnel holds only its small buffer; a
// small packet never takes one.
func TestFramerHoldsNoLargeBufferWhileWaiting(t *testing.T) {
	var stream bytes.Buffer
	w := NewFramer(nil, &stream)
	w.WriteData(bytes.Repeat([]byte{1}, 40000))
	w.WriteData([]byte("tiny"))
	var r *Framer
	waiting, heldWhileWaiting := false, false
	r = NewFramer(readHook{&stream, func() {
		if waiting {
			heldWhileWaiting = heldWhileWaiting || r.large != nil
		}
	}}, nil)

	if _, err := r.ReadPacket(); err != nil {
		t.Fatal(err)
	}
	if r.large == nil {
		t.Fatal("a 40,000-byte packet was read without a pooled buffer")
	}
	waiting = true
	p, err := r.ReadPacket()
	if err != nil {
		t.Fatal(err)
	}
	if heldWhileWaiting {
		t.Error("the large buffer was held while reading the next packet")
	}
	if r.large != nil {
		t.Error("a small packet took a pooled buffer")
	}
	if d, _ := DataPayload(p); string(d) != "tiny" {
		t.Errorf("small packet = %q", d)
	}
}

// TestFramerMaxPacket: with SetMaxPacket(n) a packet of n bytes reads whole
// and one announcing n+1 is refused at its header, before its body is
// waited for; SetMaxPacket(0) lifts the bound again.
func TestFramerMaxPacket(t *testing.T) {
	const n = 4000 // over the small buffer: read into one of its own
	atMax := Marshal(&Data{Data: bytes.Repeat([]byte{1}, n-DataHeaderSize)})
	over := Marshal(&Data{Data: bytes.Repeat([]byte{2}, n+1-DataHeaderSize)})
	var stream bytes.Buffer
	stream.Write(atMax)
	stream.Write(over[:HeaderSize]) // the body never comes
	r := NewFramer(&stream, nil)
	r.SetMaxPacket(n)
	if p, err := r.ReadPacket(); err != nil || !bytes.Equal(p, atMax) {
		t.Fatalf("a packet of the bound: %d bytes, %v", len(p), err)
	}
	if _, err := r.ReadPacket(); !errors.Is(err, ErrMalformed) {
		t.Fatalf("a packet over the bound: %v, want ErrMalformed at its header", err)
	}
	r = NewFramer(bytes.NewReader(over), nil)
	r.SetMaxPacket(n)
	r.SetMaxPacket(0)
	if p, err := r.ReadPacket(); err != nil || !bytes.Equal(p, over) {
		t.Fatalf("unbounded again: %d bytes, %v", len(p), err)
	}
}
