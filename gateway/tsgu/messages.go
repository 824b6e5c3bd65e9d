package tsgu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf16"
)

// PacketType is HTTP_PACKET_TYPE (section 2.2.5.3.3).
type PacketType uint16

// The packet types of the HTTP transport.
const (
	PktHandshakeRequest     PacketType = 0x01
	PktHandshakeResponse    PacketType = 0x02
	PktExtendedAuthMsg      PacketType = 0x03
	PktTunnelCreate         PacketType = 0x04
	PktTunnelResponse       PacketType = 0x05
	PktTunnelAuth           PacketType = 0x06
	PktTunnelAuthResponse   PacketType = 0x07
	PktChannelCreate        PacketType = 0x08
	PktChannelResponse      PacketType = 0x09
	PktData                 PacketType = 0x0A
	PktServiceMessage       PacketType = 0x0B
	PktReauthMessage        PacketType = 0x0C
	PktKeepalive            PacketType = 0x0D
	PktCloseChannel         PacketType = 0x10
	PktCloseChannelResponse PacketType = 0x11
)

var packetNames = map[PacketType]string{
	PktHandshakeRequest: "HANDSHAKE_REQUEST", PktHandshakeResponse: "HANDSHAKE_RESPONSE",
	PktExtendedAuthMsg: "EXTENDED_AUTH_MSG", PktTunnelCreate: "TUNNEL_CREATE",
	PktTunnelResponse: "TUNNEL_RESPONSE", PktTunnelAuth: "TUNNEL_AUTH",
	PktTunnelAuthResponse: "TUNNEL_AUTH_RESPONSE", PktChannelCreate: "CHANNEL_CREATE",
	PktChannelResponse: "CHANNEL_RESPONSE", PktData: "DATA", PktServiceMessage: "SERVICE_MESSAGE",
	PktReauthMessage: "REAUTH_MESSAGE", PktKeepalive: "KEEPALIVE", PktCloseChannel: "CLOSE_CHANNEL",
	PktCloseChannelResponse: "CLOSE_CHANNEL_RESPONSE",
}

func (t PacketType) String() string {
	if n, ok := packetNames[t]; ok {
		return "PKT_TYPE_" + n
	}
	return fmt.Sprintf("PKT_TYPE(0x%x)", uint16(t))
}

// HTTP_EXTENDED_AUTH (section 2.2.5.3.2): the extended authentication a
// client asks for in its handshake.
const (
	ExtendedAuthNone uint16 = 0x0
	ExtendedAuthSC   uint16 = 0x1 // smart card
	ExtendedAuthPAA  uint16 = 0x2 // pluggable authentication: a cookie in the tunnel create packet
	ExtendedAuthNTLM uint16 = 0x4 // SSPI NTLM
)

// HTTP_CAPABILITY_TYPE (section 2.2.5.3.1 of the tunnel packets).
const (
	CapQuarSOH              uint32 = 0x01
	CapIdleTimeout          uint32 = 0x02
	CapMessagingConsentSign uint32 = 0x04
	CapMessagingServiceMsg  uint32 = 0x08
	CapReauth               uint32 = 0x10
	CapUDPTransport         uint32 = 0x20
)

// The fieldsPresent flags of each packet with optional fields.
const (
	TunnelFieldPAACookie uint16 = 0x1 // HTTP_TUNNEL_PACKET_FIELDS_PRESENT_FLAGS
	TunnelFieldReauth    uint16 = 0x2

	TunnelResponseFieldTunnelID   uint16 = 0x1 // HTTP_TUNNEL_RESPONSE_FIELDS_PRESENT_FLAGS
	TunnelResponseFieldCaps       uint16 = 0x2
	TunnelResponseFieldSOHReq     uint16 = 0x4
	TunnelResponseFieldConsentMsg uint16 = 0x10

	TunnelAuthFieldSOH uint16 = 0x1 // HTTP_TUNNEL_AUTH_FIELDS_PRESENT_FLAGS

	TunnelAuthResponseFieldRedirFlags  uint16 = 0x1 // HTTP_TUNNEL_AUTH_RESPONSE_FIELDS_PRESENT_FLAGS
	TunnelAuthResponseFieldIdleTimeout uint16 = 0x2
	TunnelAuthResponseFieldSOHResponse uint16 = 0x4

	ChannelResponseFieldChannelID   uint16 = 0x1 // HTTP_CHANNEL_RESPONSE_FIELDS_PRESENT_FLAGS
	ChannelResponseFieldAuthnCookie uint16 = 0x2
	ChannelResponseFieldUDPPort     uint16 = 0x4
)

// HTTP_TUNNEL_REDIR_FLAGS: which device redirections the server allows.
const (
	RedirEnableAll  uint32 = 0x80000000
	RedirDisableAll uint32 = 0x40000000
)

// ProtocolRDP is the only protocol number a channel may ask for
// (HTTP_CHANNEL_PACKET.protocol "MUST be set to 3").
const ProtocolRDP uint16 = 3

// Status codes (HRESULTs, section 2.2.6) the gateway answers with. A
// client treats a code as a failure only when its high bit is set
// (FAILED()), so refusals use the 0x8007xxxx form.
const (
	StatusOK                           uint32 = 0
	EProxyInternalError                uint32 = 0x800759D8
	EProxyRAPAccessDenied              uint32 = 0x800759DA // the resource (target) is not allowed
	EProxyTSConnectFailed              uint32 = 0x800759DD // the target did not answer
	EProxyMaxConnectionsReached        uint32 = 0x800759E6
	EProxyCapabilityMismatch           uint32 = 0x800759E9
	EProxySessionTimeout               uint32 = 0x800759F6
	EProxyCookieBadPacket              uint32 = 0x800759F7
	EProxyCookieAuthenticationDenied   uint32 = 0x800759F8
	EProxyUnsupportedAuthenticationMth uint32 = 0x800759F9
	EProxyNotSupported                 uint32 = 0x800759E8
	EProxyConnectionAborted            uint32 = 0x800704D4
)

// HeaderSize is the size of HTTP_PACKET_HEADER.
const HeaderSize = 8

// MaxPacketSize bounds every packet: a data packet is the header, a 16-bit
// length and at most 65535 bytes; no control packet is larger.
const MaxPacketSize = HeaderSize + 2 + 0xFFFF

// MaxDataSize is the most one data packet carries.
const MaxDataSize = 0xFFFF

// DataHeaderSize is where a data packet's payload starts: the header and
// the payload's 16-bit length.
const DataHeaderSize = HeaderSize + 2

// PutDataHeader writes into p[:DataHeaderSize] the header of a data packet
// whose n payload bytes already stand at p[DataHeaderSize:], and returns
// the packet, p[:DataHeaderSize+n]: a relay reads a payload straight into
// its packet. n must be at most MaxDataSize.
func PutDataHeader(p []byte, n int) []byte {
	if n < 0 || n > MaxDataSize {
		panic(fmt.Sprintf("tsgu: data payload of %d bytes", n))
	}
	binary.LittleEndian.PutUint16(p, uint16(PktData))
	binary.LittleEndian.PutUint16(p[2:], 0)
	binary.LittleEndian.PutUint32(p[4:], uint32(DataHeaderSize+n))
	binary.LittleEndian.PutUint16(p[8:], uint16(n))
	return p[:DataHeaderSize+n]
}

// Header is HTTP_PACKET_HEADER (section 2.2.10.9).
type Header struct {
	Type     PacketType
	Reserved uint16
	Length   uint32 // of the whole packet, header included
}

// Errors of the decoders; every one wraps ErrMalformed.
var (
	ErrMalformed = errors.New("malformed MS-TSGU packet")
	ErrTooLarge  = fmt.Errorf("%w: packet longer than %d bytes", ErrMalformed, MaxPacketSize)
)

// decodeError names the packet and field that did not decode.
type decodeError struct {
	typ    PacketType
	field  string
	reason string
}

func (e *decodeError) Error() string {
	return fmt.Sprintf("%v: %s: %s", e.typ, e.field, e.reason)
}
func (e *decodeError) Unwrap() error { return ErrMalformed }

// ParseHeader decodes the header at the start of b and checks its length
// field: at least a header, at most MaxPacketSize.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, &decodeError{0, "header", fmt.Sprintf("%d bytes, want %d", len(b), HeaderSize)}
	}
	h := Header{
		Type:     PacketType(binary.LittleEndian.Uint16(b)),
		Reserved: binary.LittleEndian.Uint16(b[2:]),
		Length:   binary.LittleEndian.Uint32(b[4:]),
	}
	if h.Length < HeaderSize {
		return h, &decodeError{h.Type, "packetLength", fmt.Sprintf("%d, shorter than the header", h.Length)}
	}
	if h.Length > MaxPacketSize {
		return h, fmt.Errorf("%v: packetLength %d: %w", h.Type, h.Length, ErrTooLarge)
	}
	return h, nil
}

// Message is one packet of the HTTP transport.
type Message interface {
	Type() PacketType
	// appendBody appends the packet's fields after its header.
	appendBody(b []byte) []byte
}

// Marshal encodes m as one packet, header included.
func Marshal(m Message) []byte { return Append(nil, m) }

// Append appends the packet of m to dst.
func Append(dst []byte, m Message) []byte {
	start := len(dst)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(m.Type()))
	dst = append(dst, 0, 0, 0, 0, 0, 0) // reserved, length
	dst = m.appendBody(dst)
	binary.LittleEndian.PutUint32(dst[start+4:], uint32(len(dst)-start))
	return dst
}

// Unmarshal decodes one whole packet: p holds exactly the bytes its header's
// length names. Byte fields of the result (a cookie, a data packet's
// payload) alias p. Bytes after the fields a packet defines are ignored, as
// fields a later version may add.
func Unmarshal(p []byte) (Message, error) {
	h, err := ParseHeader(p)
	if err != nil {
		return nil, err
	}
	if int(h.Length) != len(p) {
		return nil, &decodeError{h.Type, "packetLength", fmt.Sprintf("%d, but the packet has %d bytes", h.Length, len(p))}
	}
	d := &decoder{typ: h.Type, b: p[HeaderSize:]}
	var m Message
	switch h.Type {
	case PktHandshakeRequest:
		m = decodeHandshakeRequest(d)
	case PktHandshakeResponse:
		m = decodeHandshakeResponse(d)
	case PktExtendedAuthMsg:
		m = &ExtendedAuthMsg{Blob: d.blob("authMsg")}
	case PktTunnelCreate:
		m = decodeTunnelCreate(d)
	case PktTunnelResponse:
		m = decodeTunnelResponse(d)
	case PktTunnelAuth:
		m = decodeTunnelAuth(d)
	case PktTunnelAuthResponse:
		m = decodeTunnelAuthResponse(d)
	case PktChannelCreate:
		m = decodeChannelCreate(d)
	case PktChannelResponse:
		m = decodeChannelResponse(d)
	case PktData:
		m = &Data{Data: d.blob("data")}
	case PktServiceMessage:
		m = &ServiceMessage{Message: d.str("message")}
	case PktReauthMessage:
		m = &ReauthMessage{TunnelContext: d.u64("reauthTunnelContext")}
	case PktKeepalive:
		m = &Keepalive{}
	case PktCloseChannel, PktCloseChannelResponse:
		m = &Close{Response: h.Type == PktCloseChannelResponse, StatusCode: d.u32("statusCode")}
	default:
		return nil, &decodeError{h.Type, "packetType", "unknown"}
	}
	if d.err != nil {
		return nil, d.err
	}
	return m, nil
}

// DataPayload returns the payload of a data packet p without copying it:
// the transport's hot path, equal to Unmarshal's Data.Data.
func DataPayload(p []byte) ([]byte, error) {
	h, err := ParseHeader(p)
	if err != nil {
		return nil, err
	}
	if h.Type != PktData || int(h.Length) != len(p) {
		return nil, &decodeError{h.Type, "packetType", "not a whole data packet"}
	}
	d := &decoder{typ: h.Type, b: p[HeaderSize:]}
	b := d.blob("data")
	return b, d.err
}

// HandshakeRequest is HTTP_HANDSHAKE_REQUEST_PACKET (2.2.10.10).
type HandshakeRequest struct {
	VerMajor, VerMinor uint8
	ClientVersion      uint16 // unused, zero
	ExtendedAuth       uint16
}

func (*HandshakeRequest) Type() PacketType { return PktHandshakeRequest }
func (m *HandshakeRequest) appendBody(b []byte) []byte {
	b = append(b, m.VerMajor, m.VerMinor)
	b = binary.LittleEndian.AppendUint16(b, m.ClientVersion)
	return binary.LittleEndian.AppendUint16(b, m.ExtendedAuth)
}
func decodeHandshakeRequest(d *decoder) *HandshakeRequest {
	return &HandshakeRequest{VerMajor: d.u8("verMajor"), VerMinor: d.u8("verMinor"),
		ClientVersion: d.u16("clientVersion"), ExtendedAuth: d.u16("extendedAuth")}
}

// HandshakeResponse is HTTP_HANDSHAKE_RESPONSE_PACKET (2.2.10.11).
type HandshakeResponse struct {
	ErrorCode          uint32
	VerMajor, VerMinor uint8
	ServerVersion      uint16 // unused, zero
	ExtendedAuth       uint16
}

func (*HandshakeResponse) Type() PacketType { return PktHandshakeResponse }
func (m *HandshakeResponse) appendBody(b []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, m.ErrorCode)
	b = append(b, m.VerMajor, m.VerMinor)
	b = binary.LittleEndian.AppendUint16(b, m.ServerVersion)
	return binary.LittleEndian.AppendUint16(b, m.ExtendedAuth)
}
func decodeHandshakeResponse(d *decoder) *HandshakeResponse {
	return &HandshakeResponse{ErrorCode: d.u32("errorCode"), VerMajor: d.u8("verMajor"), VerMinor: d.u8("verMinor"),
		ServerVersion: d.u16("serverVersion"), ExtendedAuth: d.u16("extendedAuth")}
}

// ExtendedAuthMsg is HTTP_EXTENDED_AUTH_PACKET (smart card or NTLM
// exchanges), which this gateway does not support but decodes to refuse.
type ExtendedAuthMsg struct{ Blob []byte }

func (*ExtendedAuthMsg) Type() PacketType             { return PktExtendedAuthMsg }
func (m *ExtendedAuthMsg) appendBody(b []byte) []byte { return appendBlob(b, m.Blob) }

// TunnelCreate is HTTP_TUNNEL_PACKET with its optional fields
// (2.2.10.18, 2.2.10.19). With PAA authentication the PAA cookie carries
// the client's access token (FreeRDP sends it as UTF-16LE with a NUL).
type TunnelCreate struct {
	Caps          uint32
	FieldsPresent uint16
	// ReauthTunnelContext is present with TunnelFieldReauth.
	ReauthTunnelContext uint64
	// PAACookie is present with TunnelFieldPAACookie.
	PAACookie []byte
}

func (*TunnelCreate) Type() PacketType { return PktTunnelCreate }
func (m *TunnelCreate) appendBody(b []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, m.Caps)
	b = binary.LittleEndian.AppendUint16(b, m.FieldsPresent)
	b = append(b, 0, 0)
	if m.FieldsPresent&TunnelFieldReauth != 0 {
		b = binary.LittleEndian.AppendUint64(b, m.ReauthTunnelContext)
	}
	if m.FieldsPresent&TunnelFieldPAACookie != 0 {
		b = appendBlob(b, m.PAACookie)
	}
	return b
}
func decodeTunnelCreate(d *decoder) *TunnelCreate {
	m := &TunnelCreate{Caps: d.u32("capsFlags"), FieldsPresent: d.u16("fieldsPresent")}
	d.u16("reserved")
	if m.FieldsPresent&TunnelFieldReauth != 0 {
		m.ReauthTunnelContext = d.u64("reauthTunnelContext")
	}
	if m.FieldsPresent&TunnelFieldPAACookie != 0 {
		m.PAACookie = d.blob("PAACookie")
	}
	return m
}

// PAACookieString returns the cookie as text: UTF-16LE (as clients send
// it) without its NUL, or nil-safe "" when it is not whole UTF-16.
func (m *TunnelCreate) PAACookieString() string { return decodeUTF16(m.PAACookie) }

// TunnelResponse is HTTP_TUNNEL_RESPONSE with the optional fields this
// gateway sends (2.2.10.20, 2.2.10.21): the tunnel id and the negotiated
// capabilities. A statement-of-health request (nonce and certificate) and a
// consent message are decoded when present.
type TunnelResponse struct {
	ServerVersion uint16
	StatusCode    uint32
	FieldsPresent uint16
	TunnelID      uint32 // TunnelResponseFieldTunnelID
	Caps          uint32 // TunnelResponseFieldCaps
	Nonce         [16]byte
	ServerCert    string // TunnelResponseFieldSOHReq, with Nonce
	ConsentMsg    string // TunnelResponseFieldConsentMsg
}

func (*TunnelResponse) Type() PacketType { return PktTunnelResponse }
func (m *TunnelResponse) appendBody(b []byte) []byte {
	b = binary.LittleEndian.AppendUint16(b, m.ServerVersion)
	b = binary.LittleEndian.AppendUint32(b, m.StatusCode)
	b = binary.LittleEndian.AppendUint16(b, m.FieldsPresent)
	b = append(b, 0, 0)
	if m.FieldsPresent&TunnelResponseFieldTunnelID != 0 {
		b = binary.LittleEndian.AppendUint32(b, m.TunnelID)
	}
	if m.FieldsPresent&TunnelResponseFieldCaps != 0 {
		b = binary.LittleEndian.AppendUint32(b, m.Caps)
	}
	if m.FieldsPresent&TunnelResponseFieldSOHReq != 0 {
		b = append(b, m.Nonce[:]...)
		b = appendString(b, m.ServerCert)
	}
	if m.FieldsPresent&TunnelResponseFieldConsentMsg != 0 {
		b = appendString(b, m.ConsentMsg)
	}
	return b
}
func decodeTunnelResponse(d *decoder) *TunnelResponse {
	m := &TunnelResponse{ServerVersion: d.u16("serverVersion"), StatusCode: d.u32("statusCode"), FieldsPresent: d.u16("fieldsPresent")}
	d.u16("reserved")
	if m.FieldsPresent&TunnelResponseFieldTunnelID != 0 {
		m.TunnelID = d.u32("tunnelId")
	}
	if m.FieldsPresent&TunnelResponseFieldCaps != 0 {
		m.Caps = d.u32("capsFlags")
	}
	if m.FieldsPresent&TunnelResponseFieldSOHReq != 0 {
		copy(m.Nonce[:], d.bytes("nonce", 16))
		m.ServerCert = d.str("serverCert")
	}
	if m.FieldsPresent&TunnelResponseFieldConsentMsg != 0 {
		m.ConsentMsg = d.str("consentMsg")
	}
	return m
}

// TunnelAuth is HTTP_TUNNEL_AUTH_PACKET with its optional fields
// (2.2.10.14, 2.2.10.15): the client machine's name and, with
// TunnelAuthFieldSOH, a statement of health.
type TunnelAuth struct {
	FieldsPresent     uint16
	ClientName        string
	StatementOfHealth []byte
}

func (*TunnelAuth) Type() PacketType { return PktTunnelAuth }
func (m *TunnelAuth) appendBody(b []byte) []byte {
	b = binary.LittleEndian.AppendUint16(b, m.FieldsPresent)
	b = appendString(b, m.ClientName)
	if m.FieldsPresent&TunnelAuthFieldSOH != 0 {
		b = appendBlob(b, m.StatementOfHealth)
	}
	return b
}
func decodeTunnelAuth(d *decoder) *TunnelAuth {
	m := &TunnelAuth{FieldsPresent: d.u16("fieldsPresent")}
	m.ClientName = d.str("clientName")
	if m.FieldsPresent&TunnelAuthFieldSOH != 0 {
		m.StatementOfHealth = d.blob("statementOfHealth")
	}
	return m
}

// TunnelAuthResponse is HTTP_TUNNEL_AUTH_RESPONSE with its optional fields
// (2.2.10.16, 2.2.10.17). IdleTimeout is in minutes.
type TunnelAuthResponse struct {
	ErrorCode     uint32
	FieldsPresent uint16
	RedirFlags    uint32 // TunnelAuthResponseFieldRedirFlags
	IdleTimeout   uint32 // TunnelAuthResponseFieldIdleTimeout, minutes
	SOHResponse   []byte // TunnelAuthResponseFieldSOHResponse
}

func (*TunnelAuthResponse) Type() PacketType { return PktTunnelAuthResponse }
func (m *TunnelAuthResponse) appendBody(b []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, m.ErrorCode)
	b = binary.LittleEndian.AppendUint16(b, m.FieldsPresent)
	b = append(b, 0, 0)
	if m.FieldsPresent&TunnelAuthResponseFieldRedirFlags != 0 {
		b = binary.LittleEndian.AppendUint32(b, m.RedirFlags)
	}
	if m.FieldsPresent&TunnelAuthResponseFieldIdleTimeout != 0 {
		b = binary.LittleEndian.AppendUint32(b, m.IdleTimeout)
	}
	if m.FieldsPresent&TunnelAuthResponseFieldSOHResponse != 0 {
		b = appendBlob(b, m.SOHResponse)
	}
	return b
}
func decodeTunnelAuthResponse(d *decoder) *TunnelAuthResponse {
	m := &TunnelAuthResponse{ErrorCode: d.u32("errorCode"), FieldsPresent: d.u16("fieldsPresent")}
	d.u16("reserved")
	if m.FieldsPresent&TunnelAuthResponseFieldRedirFlags != 0 {
		m.RedirFlags = d.u32("redirFlags")
	}
	if m.FieldsPresent&TunnelAuthResponseFieldIdleTimeout != 0 {
		m.IdleTimeout = d.u32("idleTimeout")
	}
	if m.FieldsPresent&TunnelAuthResponseFieldSOHResponse != 0 {
		m.SOHResponse = d.blob("SOHResponse")
	}
	return m
}

// ChannelCreate is HTTP_CHANNEL_PACKET with its variable part (2.2.10.2,
// 2.2.10.3): the target's names (1 to 50), alternative names (0 to 3),
// port and protocol.
type ChannelCreate struct {
	Resources    []string
	AltResources []string
	Port         uint16
	Protocol     uint16
}

// Bounds of ChannelCreate from the specification.
const (
	MaxResources    = 50
	MaxAltResources = 3
)

func (*ChannelCreate) Type() PacketType { return PktChannelCreate }
func (m *ChannelCreate) appendBody(b []byte) []byte {
	b = append(b, uint8(len(m.Resources)), uint8(len(m.AltResources)))
	b = binary.LittleEndian.AppendUint16(b, m.Port)
	b = binary.LittleEndian.AppendUint16(b, m.Protocol)
	for _, r := range m.Resources {
		b = appendString(b, r)
	}
	for _, r := range m.AltResources {
		b = appendString(b, r)
	}
	return b
}
func decodeChannelCreate(d *decoder) *ChannelCreate {
	n, alt := int(d.u8("numResources")), int(d.u8("numAltResources"))
	m := &ChannelCreate{Port: d.u16("port"), Protocol: d.u16("protocol")}
	if d.err != nil {
		return m
	}
	if n < 1 || n > MaxResources {
		d.fail("numResources", fmt.Sprintf("%d, want 1..%d", n, MaxResources))
		return m
	}
	if alt > MaxAltResources {
		d.fail("numAltResources", fmt.Sprintf("%d, want 0..%d", alt, MaxAltResources))
		return m
	}
	m.Resources = make([]string, n)
	for i := range m.Resources {
		m.Resources[i] = d.str("pResource")
	}
	if alt > 0 {
		m.AltResources = make([]string, alt)
		for i := range m.AltResources {
			m.AltResources[i] = d.str("pAltResources")
		}
	}
	return m
}

// ChannelResponse is HTTP_CHANNEL_RESPONSE with its optional fields
// (2.2.10.4, 2.2.10.5).
type ChannelResponse struct {
	ErrorCode     uint32
	FieldsPresent uint16
	ChannelID     uint32 // ChannelResponseFieldChannelID
	UDPPort       uint16 // ChannelResponseFieldUDPPort
	AuthnCookie   []byte // ChannelResponseFieldAuthnCookie
}

func (*ChannelResponse) Type() PacketType { return PktChannelResponse }
func (m *ChannelResponse) appendBody(b []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, m.ErrorCode)
	b = binary.LittleEndian.AppendUint16(b, m.FieldsPresent)
	b = append(b, 0, 0)
	if m.FieldsPresent&ChannelResponseFieldChannelID != 0 {
		b = binary.LittleEndian.AppendUint32(b, m.ChannelID)
	}
	if m.FieldsPresent&ChannelResponseFieldUDPPort != 0 {
		b = binary.LittleEndian.AppendUint16(b, m.UDPPort)
	}
	if m.FieldsPresent&ChannelResponseFieldAuthnCookie != 0 {
		b = appendBlob(b, m.AuthnCookie)
	}
	return b
}
func decodeChannelResponse(d *decoder) *ChannelResponse {
	m := &ChannelResponse{ErrorCode: d.u32("errorCode"), FieldsPresent: d.u16("fieldsPresent")}
	d.u16("reserved")
	if m.FieldsPresent&ChannelResponseFieldChannelID != 0 {
		m.ChannelID = d.u32("channelId")
	}
	if m.FieldsPresent&ChannelResponseFieldUDPPort != 0 {
		m.UDPPort = d.u16("udpPort")
	}
	if m.FieldsPresent&ChannelResponseFieldAuthnCookie != 0 {
		m.AuthnCookie = d.blob("authnCookie")
	}
	return m
}

// Data is HTTP_DATA_PACKET (2.2.10.6): at most MaxDataSize bytes of the
// tunnelled RDP stream.
type Data struct{ Data []byte }

func (*Data) Type() PacketType             { return PktData }
func (m *Data) appendBody(b []byte) []byte { return appendBlob(b, m.Data) }

// ServiceMessage is HTTP_SERVICE_MESSAGE (2.2.10.13): an administrator's
// message the client shows.
type ServiceMessage struct{ Message string }

func (*ServiceMessage) Type() PacketType             { return PktServiceMessage }
func (m *ServiceMessage) appendBody(b []byte) []byte { return appendString(b, m.Message) }

// ReauthMessage is HTTP_REAUTH_MESSAGE (2.2.10.12).
type ReauthMessage struct{ TunnelContext uint64 }

func (*ReauthMessage) Type() PacketType { return PktReauthMessage }
func (m *ReauthMessage) appendBody(b []byte) []byte {
	return binary.LittleEndian.AppendUint64(b, m.TunnelContext)
}

// Keepalive is HTTP_KEEPALIVE_PACKET (2.2.10.7): the header alone.
type Keepalive struct{}

func (*Keepalive) Type() PacketType           { return PktKeepalive }
func (*Keepalive) appendBody(b []byte) []byte { return b }

// Close is HTTP_CLOSE_PACKET (2.2.10.23): PKT_TYPE_CLOSE_CHANNEL, or with
// Response PKT_TYPE_CLOSE_CHANNEL_RESPONSE.
type Close struct {
	Response   bool
	StatusCode uint32
}

func (m *Close) Type() PacketType {
	if m.Response {
		return PktCloseChannelResponse
	}
	return PktCloseChannel
}
func (m *Close) appendBody(b []byte) []byte { return binary.LittleEndian.AppendUint32(b, m.StatusCode) }

// appendBlob appends an HTTP_BYTE_BLOB: a 16-bit length and the bytes. The
// encoders are called with at most 65535 bytes; more is cut, which no
// caller does.
func appendBlob(b, blob []byte) []byte {
	if len(blob) > 0xFFFF {
		blob = blob[:0xFFFF]
	}
	b = binary.LittleEndian.AppendUint16(b, uint16(len(blob)))
	return append(b, blob...)
}

// appendString appends an HTTP_UNICODE_STRING: UTF-16LE ending in a NUL,
// as Microsoft's and FreeRDP's clients write them.
func appendString(b []byte, s string) []byte {
	u := utf16.Encode([]rune(s))
	if len(u) > 0x7FFE {
		u = u[:0x7FFE]
	}
	b = binary.LittleEndian.AppendUint16(b, uint16(2*(len(u)+1)))
	for _, c := range u {
		b = binary.LittleEndian.AppendUint16(b, c)
	}
	return append(b, 0, 0)
}

// decodeUTF16 decodes UTF-16LE and drops the trailing NULs; an odd length
// decodes as "".
func decodeUTF16(b []byte) string {
	if len(b)%2 != 0 {
		return ""
	}
	u := make([]uint16, len(b)/2)
	for i := range u {
		u[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	for len(u) > 0 && u[len(u)-1] == 0 {
		u = u[:len(u)-1]
	}
	return string(utf16.Decode(u))
}

// decoder reads fields in order; the first field that does not fit sets err
// and every later read returns zero values.
type decoder struct {
	typ PacketType
	b   []byte
	err error
}

func (d *decoder) fail(field, reason string) {
	if d.err == nil {
		d.err = &decodeError{d.typ, field, reason}
	}
}

func (d *decoder) bytes(field string, n int) []byte {
	if d.err != nil {
		return nil
	}
	if n > len(d.b) {
		d.fail(field, fmt.Sprintf("needs %d bytes, %d left", n, len(d.b)))
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u8(field string) uint8 {
	if b := d.bytes(field, 1); b != nil {
		return b[0]
	}
	return 0
}

func (d *decoder) u16(field string) uint16 {
	if b := d.bytes(field, 2); b != nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}

func (d *decoder) u32(field string) uint32 {
	if b := d.bytes(field, 4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (d *decoder) u64(field string) uint64 {
	if b := d.bytes(field, 8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// blob reads an HTTP_BYTE_BLOB; the result aliases the packet.
func (d *decoder) blob(field string) []byte {
	n := d.u16(field)
	if d.err != nil {
		return nil
	}
	return d.bytes(field, int(n))
}

// str reads an HTTP_UNICODE_STRING, whose byte count must be even.
func (d *decoder) str(field string) string {
	b := d.blob(field)
	if d.err != nil {
		return ""
	}
	if len(b)%2 != 0 {
		d.fail(field, fmt.Sprintf("odd byte count %d for UTF-16", len(b)))
		return ""
	}
	return decodeUTF16(b)
}
