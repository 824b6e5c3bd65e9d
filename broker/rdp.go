package broker

import "strings"

// RDPFile returns an .rdp file for addr and user that mstsc, the Microsoft
// Remote Desktop apps, FreeRDP and Remmina open: the address, the user name
// as a hint, a credential prompt, full screen and the usual redirections.
// Lines end in CRLF as Windows expects. addr and user were validated (no
// control characters), so they cannot inject lines.
func RDPFile(addr, user string) string {
	return "full address:s:" + addr + "\r\nusername:s:" + user + "\r\n" + rdpDefaults
}

// rdpDefaults are the .rdp lines every connect shares, built once.
var rdpDefaults = strings.Join([]string{
	"prompt for credentials:i:1",
	"administrative session:i:0",
	"screen mode id:i:2",
	"use multimon:i:0",
	"desktopwidth:i:1920",
	"desktopheight:i:1080",
	"session bpp:i:32",
	"smart sizing:i:1",
	"dynamic resolution:i:1",
	"compression:i:1",
	"connection type:i:7",
	"networkautodetect:i:1",
	"bandwidthautodetect:i:1",
	"displayconnectionbar:i:1",
	"autoreconnection enabled:i:1",
	"authentication level:i:2",
	"enablecredsspsupport:i:1",
	"negotiate security layer:i:1",
	"audiomode:i:0",
	"redirectclipboard:i:1",
	"redirectprinters:i:1",
	"redirectsmartcards:i:1",
	"drivestoredirect:s:",
}, "\r\n") + "\r\n"
