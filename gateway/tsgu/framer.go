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
type Framer struct {
	r    io.Reader
	rbuf []byte

	wmu  sync.Mutex
	w    io.Writer
	wbuf []byte
}

// NewFramer returns a Framer reading packets from r and writing to w.
func NewFramer(r io.Reader, w io.Writer) *Framer {
	return &Framer{r: r, w: w, rbuf: make([]byte, 0, 1024)}
}

// ReadPacket reads the next whole packet. Its length is checked against
// MaxPacketSize before anything more is read. The slice is valid until the
// next ReadPacket.
func (f *Framer) ReadPacket() ([]byte, error) {
	buf := f.rbuf[:HeaderSize]
	if _, err := io.ReadFull(f.r, buf); err != nil {
		return nil, err
	}
	h, err := ParseHeader(buf)
	if err != nil {
		return nil, err
	}
	if cap(f.rbuf) < int(h.Length) {
		nb := make([]byte, h.Length, max(int(h.Length), 2*cap(f.rbuf)))
		copy(nb, buf)
		f.rbuf = nb[:0]
	}
	p := f.rbuf[:h.Length]
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
