package tsgu

import (
	"bytes"
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
	f.Fuzz(func(t *testing.T, stream []byte) {
		fr := NewFramer(bytes.NewReader(stream), nil)
		off := 0
		for range 64 {
			p, err := fr.ReadPacket()
			if err != nil {
				return
			}
			h, err := ParseHeader(p)
			if err != nil || int(h.Length) != len(p) || len(p) > MaxPacketSize {
				t.Fatalf("packet of %d bytes with header %+v, %v", len(p), h, err)
			}
			if !bytes.Equal(p, stream[off:off+len(p)]) {
				t.Fatalf("packet at offset %d differs from the stream's bytes", off)
			}
			off += len(p)
			Unmarshal(p)
		}
	})
}
