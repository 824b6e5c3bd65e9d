package tsgu

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync"
)

// Framer reads and writes whole packets on a byte stream: the client's IN
// channel (read) and OUT channel (write) of the HTTP transport, or both
// directions of a WebSocket. Reads come from one goroutine; writes are
// serialised, so the pump of the target's data and the keepalives may
// write at once.
//
// A Framer waiting for a packet holds no large buffer: the header is read
// into the Framer, a small packet into a small buffer of its own, a large
// one into a buffer from a pool that goes back at the next read.
type Framer struct {
	r     io.Reader
	hdr   [HeaderSize]byte
	small []byte
	large *[]byte // holds the last packet read, if it was large
	max   int     // the longest packet read; 0: MaxPacketSize

	wmu  sync.Mutex
	w    io.Writer
	wbuf []byte
}

// smallPacket is the most a Framer reads without a pooled buffer: every
// control packet FreeRDP sends and the short data packets of an
// interactive session.
const smallPacket = 2048

// largePackets are the buffers of packets longer than smallPacket.
var largePackets = sync.Pool{New: func() any { b := make([]byte, MaxPacketSize); return &b }}

// NewFramer returns a Framer reading packets from r and writing to w.
func NewFramer(r io.Reader, w io.Writer) *Framer {
	return &Framer{r: r, w: w, small: make([]byte, smallPacket)}
}

// SetMaxPacket bounds the packets ReadPacket reads to n bytes, header
// included (n <= 0 or over MaxPacketSize: MaxPacketSize). Below
// MaxPacketSize a long packet is read into a buffer of its own length,
// not a pooled one of MaxPacketSize: a peer not yet authenticated that
// announces a packet and sends it slowly holds no more than n bytes.
func (f *Framer) SetMaxPacket(n int) {
	if n <= 0 || n > MaxPacketSize {
		n = 0
	}
	f.max = n
}

// ReadPacket reads the next whole packet. Its length is checked against
// MaxPacketSize (or SetMaxPacket's bound) before anything more is read.
// The slice is valid until the next ReadPacket.
func (f *Framer) ReadPacket() ([]byte, error) {
	if f.large != nil {
		largePackets.Put(f.large)
		f.large = nil
	}
	if _, err := io.ReadFull(f.r, f.hdr[:]); err != nil {
		return nil, err
	}
	h, err := ParseHeader(f.hdr[:])
	if err != nil {
		return nil, err
	}
	if f.max > 0 && int(h.Length) > f.max {
		return nil, fmt.Errorf("%v: packetLength %d over %d: %w", h.Type, h.Length, f.max, ErrMalformed)
	}
	p := f.small
	switch {
	case int(h.Length) <= len(p):
	case f.max > 0:
		p = make([]byte, h.Length)
	default:
		f.large = largePackets.Get().(*[]byte)
		p = *f.large
	}
	p = p[:h.Length]
	copy(p, f.hdr[:])
	if _, err := io.ReadFull(f.r, p[HeaderSize:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("%v of %d bytes: %w", h.Type, h.Length, err)
	}
	return p, nil
}

// ReadMessage reads and decodes the next packet; byte fields alias the
// Framer's buffer until the next read.
func (f *Framer) ReadMessage() (Message, error) {
	p, err := f.ReadPacket()
	if err != nil {
		return nil, err
	}
	return Unmarshal(p)
}

// WriteMessage writes m as one packet.
func (f *Framer) WriteMessage(m Message) error {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	f.wbuf = Append(f.wbuf[:0], m)
	_, err := f.w.Write(f.wbuf)
	return err
}

// WritePacket writes p, one whole packet (as PutDataHeader returns it), in
// one Write.
func (f *Framer) WritePacket(p []byte) error {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	_, err := f.w.Write(p)
	return err
}

// WriteData writes b as data packets of at most MaxDataSize bytes each,
// each packet in one Write.
func (f *Framer) WriteData(b []byte) error {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	for len(b) > 0 {
		n := min(len(b), MaxDataSize)
		f.wbuf = appendDataPacket(f.wbuf[:0], b[:n])
		if _, err := f.w.Write(f.wbuf); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// appendDataPacket is Append of a Data packet without the interface call.
func appendDataPacket(dst, data []byte) []byte {
	dst = binary.LittleEndian.AppendUint16(dst, uint16(PktData))
	dst = binary.LittleEndian.AppendUint16(dst, 0)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(HeaderSize+2+len(data)))
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(data)))
	return append(dst, data...)
}
