package tsgu

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzUnmarshal feeds arbitrary bytes to the packet decoder, which sees
// whatever a client on the internet sends. It must never panic, must refuse
// with ErrMalformed, and what it accepts must encode and decode again to
// the same message (nothing it accepts is lost in re-encoding).
func FuzzUnmarshal(f *testing.F) {
	// Every packet type as this package encodes it.
	for _, m := range allMessages() {
		f.Add(Marshal(m))
	}
	// FreeRDP 2.11's handshake request with PAA.
	f.Add([]byte{0x01, 0, 0, 0, 0x0e, 0, 0, 0, 1, 0, 0, 0, 2, 0})
	// A tunnel create whose cookie length runs past the packet.
	f.Add([]byte{0x04, 0, 0, 0, 0x12, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0xff, 0})
	// A channel create claiming 255 resources.
	f.Add([]byte{0x08, 0, 0, 0, 0x10, 0, 0, 0, 0xff, 0, 0x3d, 0x0d, 3, 0})
	// A data packet announcing more than its length.
	f.Add([]byte{0x0a, 0, 0, 0, 0x0b, 0, 0, 0, 0xff, 0xff, 1})
	// A header announcing 4 GiB.
	f.Add([]byte{0x0a, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	// A tunnel authorisation whose client name (HTTP_UNICODE_STRING) has
	// an odd byte count, and one whose name runs past the packet.
	f.Add([]byte{0x06, 0, 0, 0, 0x0f, 0, 0, 0, 0, 0, 3, 0, 'a', 0, 'b'})
	f.Add([]byte{0x06, 0, 0, 0, 0x0e, 0, 0, 0, 0, 0, 0xfe, 0xff, 'a', 0})
	// A tunnel create with the reauthentication flag and its 8-byte
	// context cut short.
	f.Add([]byte{0x04, 0, 0, 0, 0x14, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 2, 3, 4})
	// A tunnel response asking for a statement of health, its 16-byte
	// nonce cut short.
	f.Add([]byte{0x05, 0, 0, 0, 0x14, 0, 0, 0, 1, 0, 0, 0, 0, 0, 4, 0, 0, 0, 1, 2})
	// A header whose length is below its own 8 bytes, and one whose
	// length is not the packet's.
	f.Add([]byte{0x0d, 0, 0, 0, 4, 0, 0, 0})
	f.Add([]byte{0x0d, 0, 0, 0, 9, 0, 0, 0})
	// Nothing at all.
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, p []byte) {
		m, err := Unmarshal(p)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		again, err := Unmarshal(Marshal(m))
		if err != nil {
			t.Fatalf("re-encoded %#v does not decode: %v", m, err)
		}
		if diff := cmp.Diff(m, again, cmp.Comparer(func(a, b []byte) bool { return bytes.Equal(a, b) })); diff != "" {
			t.Fatalf("re-encoding changed the message (-first +again):\n%s", diff)
		}
		if d, ok := m.(*Data); ok {
			payload, err := DataPayload(p)
			if err != nil || !bytes.Equal(payload, d.Data) {
				t.Fatalf("DataPayload = %x, %v; Unmarshal said %x", payload, err, d.Data)
			}
		}
	})
}

// FuzzFramer reads packets from an arbitrary stream, as the gateway reads a
// client's IN channel: no panic, no packet over MaxPacketSize, every packet
// it returns has the length its header says and is exactly the stream's
// next bytes, whether read into the Framer's small buffer or a pooled one.
func FuzzFramer(f *testing.F) {
	// Two packets back to back.
	f.Add(append(Marshal(&Keepalive{}), Marshal(&Data{Data: []byte("rdp")})...))
	// A large packet (a pooled buffer), a small one, a large one again.
	large := Marshal(&Data{Data: bytes.Repeat([]byte{0xAB}, 3000)})
	f.Add(append(append(append([]byte{}, large...), Marshal(&Keepalive{})...), large...))
	// A packet cut short.
	f.Add(Marshal(&HandshakeRequest{VerMajor: 1})[:10])
	// A length of 0xffffffff.
	f.Add([]byte{0x0a, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0})
	// Lengths of 0 and 7, below the header's own 8 bytes.
	f.Add([]byte{0x0d, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0x0d, 0, 0, 0, 7, 0, 0, 0, 0})
	// MaxPacketSize exactly, and one more.
	f.Add(binary.LittleEndian.AppendUint32([]byte{0x0a, 0, 0, 0}, MaxPacketSize))
	f.Add(binary.LittleEndian.AppendUint32([]byte{0x0a, 0, 0, 0}, MaxPacketSize+1))
	f.Fuzz(func(t *testing.T, stream []byte) { readStream(t, stream, 0) })
}

// FuzzFramerBounded is FuzzFramer with a bound of SetMaxPacket, as the
// gateway reads a client whose token is not admitted yet (its
// maxPreauthPacket, about 9 KiB), and so the path that reads a packet
// into a buffer of its own length: no packet over the bound is returned,
// and one announcing more is refused from its header, before a byte of
// its body is read (a client trickling it holds nothing).
func FuzzFramerBounded(f *testing.F) {
	const preauth = 9244 // the gateway's maxPreauthPacket
	token := Marshal(&TunnelCreate{FieldsPresent: TunnelFieldPAACookie | TunnelFieldReauth,
		PAACookie: bytes.Repeat([]byte{'t', 0}, 4097)})
	// A tunnel create with the longest token, within the bound.
	f.Add(uint32(preauth), token)
	// A packet of the bound and one byte more.
	f.Add(uint32(preauth), Marshal(&Data{Data: make([]byte, preauth-DataHeaderSize)}))
	f.Add(uint32(preauth), Marshal(&Data{Data: make([]byte, preauth-DataHeaderSize+1)}))
	// A bound below the small buffer, one below a header, none (0), one
	// over MaxPacketSize (none either).
	f.Add(uint32(100), append(Marshal(&Keepalive{}), Marshal(&Data{Data: make([]byte, 200)})...))
	f.Add(uint32(4), Marshal(&Keepalive{}))
	f.Add(uint32(0), token)
	f.Add(uint32(MaxPacketSize+1), token)
	f.Fuzz(func(t *testing.T, max uint32, stream []byte) { readStream(t, stream, int(max)) })
}

// readStream reads packets from stream with a Framer bounded by max
// (SetMaxPacket) and checks each, and a refusal of one too long.
func readStream(t *testing.T, stream []byte, max int) {
	r := bytes.NewReader(stream)
	fr := NewFramer(r, nil)
	fr.SetMaxPacket(max)
	bound := MaxPacketSize
	if max > 0 && max <= MaxPacketSize {
		bound = max
	}
	off := 0
	for range 64 {
		p, err := fr.ReadPacket()
		if err != nil {
			if h, herr := ParseHeader(stream[off:]); herr == nil && int(h.Length) > bound {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("packet of %d bytes over %d: %v, want ErrMalformed", h.Length, bound, err)
				}
				if read := len(stream) - r.Len(); read != off+HeaderSize {
					t.Fatalf("packet of %d bytes over %d: read %d bytes of the stream, want its header's, %d", h.Length, bound, read, off+HeaderSize)
				}
			}
			return
		}
		h, err := ParseHeader(p)
		if err != nil || int(h.Length) != len(p) || len(p) > bound {
			t.Fatalf("packet of %d bytes with header %+v, %v, bound %d", len(p), h, err, bound)
		}
		if !bytes.Equal(p, stream[off:off+len(p)]) {
			t.Fatalf("packet at offset %d differs from the stream's bytes", off)
		}
		off += len(p)
		Unmarshal(p)
	}
}
