package tsgu

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// allMessages has one packet of every type with its optional fields set.
func allMessages() []Message {
	return []Message{
		&HandshakeRequest{VerMajor: 1, VerMinor: 0, ExtendedAuth: ExtendedAuthPAA},
		&HandshakeResponse{ErrorCode: 0, VerMajor: 1, ExtendedAuth: ExtendedAuthPAA},
		&ExtendedAuthMsg{Blob: []byte{1, 2, 3}},
		&TunnelCreate{Caps: CapQuarSOH | CapMessagingServiceMsg, FieldsPresent: TunnelFieldPAACookie | TunnelFieldReauth,
			ReauthTunnelContext: 0x0102030405060708, PAACookie: []byte("c\x00o\x00")},
		&TunnelCreate{Caps: CapIdleTimeout},
		&TunnelResponse{ServerVersion: 1, StatusCode: EProxyCookieAuthenticationDenied,
			FieldsPresent: TunnelResponseFieldTunnelID | TunnelResponseFieldCaps | TunnelResponseFieldSOHReq | TunnelResponseFieldConsentMsg,
			TunnelID:      7, Caps: CapIdleTimeout, Nonce: [16]byte{1, 2}, ServerCert: "cert", ConsentMsg: "Ünïcode ✓"},
		&TunnelAuth{FieldsPresent: TunnelAuthFieldSOH, ClientName: "laptop-42", StatementOfHealth: []byte{9}},
		&TunnelAuthResponse{FieldsPresent: TunnelAuthResponseFieldRedirFlags | TunnelAuthResponseFieldIdleTimeout | TunnelAuthResponseFieldSOHResponse,
			RedirFlags: RedirEnableAll, IdleTimeout: 30, SOHResponse: []byte{4, 5}},
		&ChannelCreate{Resources: []string{"10.0.0.2", "host.example"}, AltResources: []string{"alt"}, Port: 3389, Protocol: ProtocolRDP},
		&ChannelResponse{ErrorCode: EProxyRAPAccessDenied, FieldsPresent: ChannelResponseFieldChannelID | ChannelResponseFieldUDPPort | ChannelResponseFieldAuthnCookie,
			ChannelID: 3, UDPPort: 3391, AuthnCookie: []byte{1}},
		&Data{Data: bytes.Repeat([]byte{0xAB}, 1000)},
		&ServiceMessage{Message: "maintenance at 18:00"},
		&ReauthMessage{TunnelContext: 42},
		&Keepalive{},
		&Close{StatusCode: EProxySessionTimeout},
		&Close{Response: true},
	}
}

// TestRoundTrip: every packet decodes to what was encoded, and its header
// names its type and its whole length.
func TestRoundTrip(t *testing.T) {
	for _, m := range allMessages() {
		t.Run(m.Type().String(), func(t *testing.T) {
			p := Marshal(m)
			h, err := ParseHeader(p)
			if err != nil {
				t.Fatal(err)
			}
			if h.Type != m.Type() || int(h.Length) != len(p) {
				t.Fatalf("header %+v, want type %v length %d", h, m.Type(), len(p))
			}
			got, err := Unmarshal(p)
			if err != nil {
				t.Fatalf("Unmarshal(%x): %v", p, err)
			}
			if diff := cmp.Diff(m, got); diff != "" {
				t.Errorf("round trip (-sent +decoded):\n%s", diff)
			}
		})
	}
}

// TestFreeRDPPackets decodes packets as FreeRDP 2.11 writes them
// (libfreerdp/core/gateway/rdg.c), byte for byte.
func TestFreeRDPPackets(t *testing.T) {
	tests := []struct {
		name string
		hex  string
		want Message
	}{
		// rdg_send_handshake: type 1, length 14, version 1.0, client version 0, PAA.
		{"handshake", "0100 0000 0e000000 01 00 0000 0200",
			&HandshakeRequest{VerMajor: 1, ExtendedAuth: ExtendedAuthPAA}},
		// rdg_send_tunnel_request with /gat:ab: caps QUAR_SOH|CONSENT_SIGN|SERVICE_MSG (0x0d),
		// PAA cookie "ab" as UTF-16LE with its NUL (6 bytes): 16 + 2 + 6 = 24.
		{"tunnel create with PAA cookie", "0400 0000 18000000 0d000000 0100 0000 0600 6100 6200 0000",
			&TunnelCreate{Caps: 0x0d, FieldsPresent: TunnelFieldPAACookie, PAACookie: []byte{'a', 0, 'b', 0, 0, 0}}},
		// rdg_send_tunnel_authorization: fields 0, client name "pc" with NUL.
		{"tunnel auth", "0600 0000 12000000 0000 0600 7000 6300 0000",
			&TunnelAuth{ClientName: "pc"}},
		// rdg_send_channel_create: 1 resource, 0 alternatives, port 3389, protocol 3, "h".
		{"channel create", "0800 0000 14000000 01 00 3d0d 0300 0400 6800 0000",
			&ChannelCreate{Resources: []string{"h"}, Port: 3389, Protocol: 3}},
		// rdg_write_chunked_data_packet: 3 bytes of data.
		{"data", "0a00 0000 0d000000 0300 010203", &Data{Data: []byte{1, 2, 3}}},
		// rdg_process_keep_alive_packet's answer.
		{"keepalive", "0d00 0000 08000000", &Keepalive{}},
		// rdg_process_close_packet's answer.
		{"close response", "1100 0000 0c000000 00000000", &Close{Response: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := hex.DecodeString(strings.ReplaceAll(tt.hex, " ", ""))
			if err != nil {
				t.Fatal(err)
			}
			got, err := Unmarshal(p)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("decoded (-want +got):\n%s", diff)
			}
		})
	}
	tc := &TunnelCreate{PAACookie: []byte{'a', 0, 'b', 0, 0, 0}}
	if got := tc.PAACookieString(); got != "ab" {
		t.Errorf("PAACookieString = %q, want ab", got)
	}
}

// TestUnmarshalRefuses: each malformed packet is refused with an error that
// wraps ErrMalformed, whatever the field.
func TestUnmarshalRefuses(t *testing.T) {
	tests := []struct{ name, hex, field string }{
		{"short header", "0100 0000 0e", "header"},
		{"length below header", "0100 0000 04000000", "packetLength"},
		{"length above maximum", "0a00 0000 ffff0100", "packetLength"},
		{"length not the packet's", "0d00 0000 09000000", "packetLength"},
		{"unknown type", "ee00 0000 08000000", "packetType"},
		{"handshake cut", "0100 0000 0b000000 01 00 00", "clientVersion"},
		{"cookie longer than the packet", "0400 0000 12000000 00000000 0100 0000 ff00", "PAACookie"},
		{"no resources", "0800 0000 0e000000 00 00 3d0d 0300", "numResources"},
		{"51 resources", "0800 0000 0e000000 33 00 3d0d 0300", "numResources"},
		{"4 alternatives", "0800 0000 0e000000 01 04 3d0d 0300", "numAltResources"},
		{"odd string", "0800 0000 11000000 01 00 3d0d 0300 0100 61", "pResource"},
		{"resource missing", "0800 0000 0e000000 02 00 3d0d 0300", "pResource"},
		{"data longer than the packet", "0a00 0000 0b000000 0500 01", "data"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := hex.DecodeString(strings.ReplaceAll(tt.hex, " ", ""))
			m, err := Unmarshal(p)
			if err == nil {
				t.Fatalf("Unmarshal = %#v, want an error", m)
			}
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.field) {
				t.Errorf("error %v, want ErrMalformed naming %s", err, tt.field)
			}
		})
	}
}

// TestFramer: packets written through a Framer read back whole, long data
// is split at MaxDataSize, and a header announcing more than MaxPacketSize
// is refused before its body is read.
func TestFramer(t *testing.T) {
	var buf bytes.Buffer
	f := NewFramer(&buf, &buf)
	big := bytes.Repeat([]byte{7}, MaxDataSize+10)
	if err := f.WriteMessage(&Keepalive{}); err != nil {
		t.Fatal(err)
	}
	if err := f.WriteData(big); err != nil {
		t.Fatal(err)
	}
	if m, err := f.ReadMessage(); err != nil || m.Type() != PktKeepalive {
		t.Fatalf("first = %v, %v; want a keepalive", m, err)
	}
	var got []byte
	for range 2 {
		p, err := f.ReadPacket()
		if err != nil {
			t.Fatal(err)
		}
		d, err := DataPayload(p)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, d...)
	}
	if !bytes.Equal(got, big) {
		t.Fatalf("data: got %d bytes, want %d", len(got), len(big))
	}
	if _, err := f.ReadPacket(); err != io.EOF {
		t.Fatalf("after the last packet: %v, want EOF", err)
	}

	// A hostile header: 4 GiB announced; the framer must not wait for it.
	hostile := NewFramer(bytes.NewReader([]byte{0x0a, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}), io.Discard)
	if _, err := hostile.ReadPacket(); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("hostile length: %v, want ErrTooLarge", err)
	}
	cut := NewFramer(bytes.NewReader([]byte{0x0d, 0, 0, 0, 0x10, 0, 0, 0, 1}), io.Discard)
	if _, err := cut.ReadPacket(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("cut packet: %v, want ErrUnexpectedEOF", err)
	}
}
