package rdp

import (
	"bytes"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// File returns an .rdp file for addr and user that mstsc, the Microsoft
// Remote Desktop apps, FreeRDP and Remmina open: the address with its port,
// the user name as a hint, a credential prompt, full screen and the usual
// redirections, then the admin's properties (extra, from ParseProperties),
// each replacing a default of the same name. Lines end in CRLF as Windows
// expects. addr and user were validated (no control characters), so they
// cannot inject lines; neither can extra, which was parsed.
//
// There is no loadbalanceinfo: the client connects straight to the session
// host, and a routing token it does not expect makes xrdp refuse the
// connection.
func File(addr, user string, extra []Property) string {
	var b strings.Builder
	b.WriteString("full address:s:" + withRDPPort(addr) + "\r\nusername:s:" + user + "\r\n")
	for _, d := range rdpDefaults {
		if i := slices.IndexFunc(extra, func(p Property) bool { return p.Name == d.Name }); i >= 0 {
			d = extra[i]
		}
		b.WriteString(d.String() + "\r\n")
	}
	for _, p := range extra {
		if !slices.ContainsFunc(rdpDefaults, func(d Property) bool { return d.Name == p.Name }) {
			b.WriteString(p.String() + "\r\n")
		}
	}
	return b.String()
}

// withRDPPort adds the RDP port to an address that has none: clients
// differ in what they assume, and the file should not leave it to them.
func withRDPPort(addr string) string {
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	if strings.Contains(addr, ":") { // a bare IPv6 address
		return "[" + strings.Trim(addr, "[]") + "]:3389"
	}
	return addr + ":3389"
}

// rdpDefaults are the properties every connect's file has after the address
// and user name. networkautodetect is left out on purpose: FreeRDP 2 reads
// networkautodetect:i:1 with bandwidthautodetect:i:1 as invalid (its
// networkautodetect was inverted) and FreeRDP 3 reads networkautodetect:i:0
// with it as invalid; left out, both and mstsc auto-detect the network from
// bandwidthautodetect and connection type 7.
var rdpDefaults = []Property{
	{"prompt for credentials", 'i', "1"},
	{"administrative session", 'i', "0"},
	{"screen mode id", 'i', "2"},
	{"use multimon", 'i', "0"},
	{"desktopwidth", 'i', "1920"},
	{"desktopheight", 'i', "1080"},
	{"session bpp", 'i', "32"},
	{"smart sizing", 'i', "1"},
	{"dynamic resolution", 'i', "1"},
	{"compression", 'i', "1"},
	{"connection type", 'i', "7"},
	{"bandwidthautodetect", 'i', "1"},
	{"displayconnectionbar", 'i', "1"},
	{"autoreconnection enabled", 'i', "1"},
	{"authentication level", 'i', "2"},
	{"enablecredsspsupport", 'i', "1"},
	{"negotiate security layer", 'i', "1"},
	{"audiomode", 'i', "0"},
	{"redirectclipboard", 'i', "1"},
	{"redirectprinters", 'i', "1"},
	{"redirectsmartcards", 'i', "1"},
	{"drivestoredirect", 's', ""},
}

// Property is one .rdp line, "name:type:value"; Type is 'i' (integer),
// 's' (string) or 'b' (binary, hex).
type Property struct {
	Name  string
	Type  byte
	Value string
}

// String is the property as an .rdp line without its line end.
func (p Property) String() string { return p.Name + ":" + string(p.Type) + ":" + p.Value }

// rdpKnown is a property the .rdp readers know: its type and, where the
// set is small, its allowed values (else any integer in [min, max] for
// 'i' when max > 0, any text for 's'). refused says why an admin may not
// set it.
type rdpKnown struct {
	name     string
	typ      byte
	values   []string
	min, max int
	refused  string
}

var (
	bit   = []string{"0", "1"}
	three = []string{"0", "1", "2"}
)

// rdpProperties is the known property list: the properties Microsoft
// documents for Remote Desktop clients and AVD's customRdpProperty, as
// mstsc and FreeRDP read them.
var rdpProperties = []rdpKnown{
	// Set by the broker for every connect.
	{name: "full address", typ: 's', refused: "the broker sets it to the session host's address"},
	{name: "alternate full address", typ: 's', refused: "the broker sets the session host's address, and clients may prefer this one"},
	{name: "server port", typ: 'i', refused: "the port is part of the session host's address"},
	{name: "username", typ: 's', refused: "the broker sets it to the connecting user"},
	{name: "loadbalanceinfo", typ: 's', refused: "clients connect straight to the session host, which would refuse the routing token"},
	{name: "password 51", typ: 'b', refused: "the broker puts no secrets in .rdp files"},
	{name: "gatewayaccesstoken", typ: 's', refused: "the broker signs one per connect for its own RD gateway (R-GW1)"},
	// Connection and authentication.
	{name: "domain", typ: 's'},
	{name: "prompt for credentials", typ: 'i', values: bit},
	{name: "promptcredentialonce", typ: 'i', values: bit},
	{name: "administrative session", typ: 'i', values: bit},
	{name: "authentication level", typ: 'i', values: []string{"0", "1", "2", "3"}},
	{name: "enablecredsspsupport", typ: 'i', values: bit},
	{name: "negotiate security layer", typ: 'i', values: bit},
	{name: "enablerdsaadauth", typ: 'i', values: bit},
	{name: "disableconnectionsharing", typ: 'i', values: bit},
	{name: "autoreconnection enabled", typ: 'i', values: bit},
	{name: "autoreconnect max retries", typ: 'i', min: 0, max: 1000},
	{name: "kdcproxyname", typ: 's'},
	{name: "gatewayhostname", typ: 's'},
	{name: "gatewayusagemethod", typ: 'i', values: []string{"0", "1", "2", "3", "4"}},
	{name: "gatewaycredentialssource", typ: 'i', values: []string{"0", "1", "2", "3", "4", "5"}},
	{name: "gatewayprofileusagemethod", typ: 'i', values: bit},
	{name: "use redirection server name", typ: 'i', values: bit},
	{name: "alternate shell", typ: 's'},
	{name: "shell working directory", typ: 's'},
	{name: "remoteapplicationmode", typ: 'i', values: bit},
	{name: "remoteapplicationname", typ: 's'},
	{name: "remoteapplicationprogram", typ: 's'},
	{name: "remoteapplicationcmdline", typ: 's'},
	{name: "remoteapplicationexpandcmdline", typ: 'i', values: bit},
	{name: "remoteapplicationexpandworkingdir", typ: 'i', values: bit},
	{name: "remoteapplicationfile", typ: 's'},
	{name: "remoteapplicationicon", typ: 's'},
	// Session behaviour.
	{name: "bandwidthautodetect", typ: 'i', values: bit},
	{name: "networkautodetect", typ: 'i', values: bit},
	{name: "connection type", typ: 'i', values: []string{"1", "2", "3", "4", "5", "6", "7"}},
	{name: "compression", typ: 'i', values: bit},
	{name: "videoplaybackmode", typ: 'i', values: bit},
	{name: "audiocapturemode", typ: 'i', values: bit},
	{name: "audiomode", typ: 'i', values: three},
	{name: "audioqualitymode", typ: 'i', values: three},
	{name: "encode redirected video capture", typ: 'i', values: bit},
	{name: "redirected video capture encoding quality", typ: 'i', values: three},
	{name: "keyboardhook", typ: 'i', values: three},
	// Device redirection.
	{name: "camerastoredirect", typ: 's'},
	{name: "devicestoredirect", typ: 's'},
	{name: "drivestoredirect", typ: 's'},
	{name: "usbdevicestoredirect", typ: 's'},
	{name: "redirectclipboard", typ: 'i', values: bit},
	{name: "redirectcomports", typ: 'i', values: bit},
	{name: "redirectdirectx", typ: 'i', values: bit},
	{name: "redirectlocation", typ: 'i', values: bit},
	{name: "redirectposdevices", typ: 'i', values: bit},
	{name: "redirectprinters", typ: 'i', values: bit},
	{name: "redirectsmartcards", typ: 'i', values: bit},
	{name: "redirectwebauthn", typ: 'i', values: bit},
	// Display.
	{name: "screen mode id", typ: 'i', values: []string{"1", "2"}},
	{name: "use multimon", typ: 'i', values: bit},
	{name: "selectedmonitors", typ: 's'},
	{name: "maximizetocurrentdisplays", typ: 'i', values: bit},
	{name: "singlemoninwindowedmode", typ: 'i', values: bit},
	{name: "smart sizing", typ: 'i', values: bit},
	{name: "dynamic resolution", typ: 'i', values: bit},
	{name: "desktopwidth", typ: 'i', min: 200, max: 8192},
	{name: "desktopheight", typ: 'i', min: 200, max: 8192},
	{name: "desktop size id", typ: 'i', values: []string{"0", "1", "2", "3", "4"}},
	{name: "desktopscalefactor", typ: 'i', values: []string{"100", "125", "150", "175", "200", "250", "300", "400", "500"}},
	{name: "session bpp", typ: 'i', values: []string{"8", "15", "16", "24", "32"}},
	{name: "winposstr", typ: 's'},
	{name: "displayconnectionbar", typ: 'i', values: bit},
	{name: "pinconnectionbar", typ: 'i', values: bit},
	// Performance.
	{name: "disable wallpaper", typ: 'i', values: bit},
	{name: "disable full window drag", typ: 'i', values: bit},
	{name: "disable menu anims", typ: 'i', values: bit},
	{name: "disable themes", typ: 'i', values: bit},
	{name: "disable cursor setting", typ: 'i', values: bit},
	{name: "allow font smoothing", typ: 'i', values: bit},
	{name: "allow desktop composition", typ: 'i', values: bit},
	{name: "bitmapcachepersistenable", typ: 'i', values: bit},
}

func knownRDP(name string) (rdpKnown, bool) {
	for _, k := range rdpProperties {
		if strings.EqualFold(k.name, name) {
			return k, true
		}
	}
	return rdpKnown{}, false
}

// ParseProperties reads an admin's extra .rdp properties (vdibroker
// serve --rdp-defaults FILE; AVD's customRdpProperty): one "name:type:value"
// per line, blank lines and lines starting with '#' skipped, UTF-8 or the
// UTF-16 mstsc saves files in. Each must be a known property (rdpProperties)
// of its type with an allowed value, at most once; the error names the line
// and the property. Names come back as the table spells them.
func ParseProperties(data []byte) ([]Property, error) {
	text, err := rdpText(data)
	if err != nil {
		return nil, err
	}
	var list []Property
	seen := map[string]int{}
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		p, err := parseRDPLine(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if first, ok := seen[p.Name]; ok {
			return nil, fmt.Errorf("line %d: property %q: set already on line %d", n, p.Name, first)
		}
		seen[p.Name] = n
		list = append(list, p)
	}
	return list, nil
}

// rdpText decodes a file: UTF-16 with a byte order mark, else UTF-8.
func rdpText(data []byte) (string, error) {
	var order func([]byte) uint16
	switch {
	case bytes.HasPrefix(data, []byte{0xFF, 0xFE}):
		order = func(b []byte) uint16 { return uint16(b[0]) | uint16(b[1])<<8 }
	case bytes.HasPrefix(data, []byte{0xFE, 0xFF}):
		order = func(b []byte) uint16 { return uint16(b[1]) | uint16(b[0])<<8 }
	default:
		data = bytes.TrimPrefix(data, []byte{0xEF, 0xBB, 0xBF})
		if !utf8.Valid(data) {
			return "", fmt.Errorf("not UTF-8 or UTF-16 text")
		}
		return string(data), nil
	}
	data = data[2:]
	if len(data)%2 != 0 {
		return "", fmt.Errorf("UTF-16 text of an odd number of bytes")
	}
	u := make([]uint16, len(data)/2)
	for i := range u {
		u[i] = order(data[2*i:])
	}
	return string(utf16.Decode(u)), nil
}

func parseRDPLine(line string) (Property, error) {
	name, rest, ok1 := strings.Cut(line, ":")
	typ, value, ok2 := strings.Cut(rest, ":")
	name = strings.TrimSpace(name)
	if !ok1 || !ok2 || name == "" {
		return Property{}, fmt.Errorf("%q: want name:type:value, e.g. redirectclipboard:i:0", line)
	}
	k, ok := knownRDP(name)
	if !ok {
		return Property{}, fmt.Errorf("property %q: not a known .rdp property", name)
	}
	if k.refused != "" {
		return Property{}, fmt.Errorf("property %q: cannot be set here: %s", k.name, k.refused)
	}
	if len(typ) != 1 || typ[0] != k.typ {
		return Property{}, fmt.Errorf("property %q: type %q, want %c", k.name, typ, k.typ)
	}
	for _, r := range value {
		if unicode.IsControl(r) {
			return Property{}, fmt.Errorf("property %q: value has a control character", k.name)
		}
	}
	switch {
	case k.values != nil && !slices.Contains(k.values, value):
		return Property{}, fmt.Errorf("property %q: value %q, want one of %s", k.name, value, strings.Join(k.values, ", "))
	case k.typ == 'i':
		v, err := strconv.Atoi(value)
		if err != nil {
			return Property{}, fmt.Errorf("property %q: value %q is not an integer", k.name, value)
		}
		if k.max > 0 && (v < k.min || v > k.max) {
			return Property{}, fmt.Errorf("property %q: value %d, want %d..%d", k.name, v, k.min, k.max)
		}
		value = strconv.Itoa(v)
	}
	return Property{Name: k.name, Type: k.typ, Value: value}, nil
}
