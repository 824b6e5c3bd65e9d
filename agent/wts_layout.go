package agent

import (
	"unicode/utf16"
	"unsafe"
)

// Windows structures the wts provider reads from memory the system filled,
// declared without a build tag so that TestWindowsLayouts checks their
// layout against the Windows SDK headers (mingw-w64) on any 64-bit system:
// Go lays structs out as the C compiler does for windows/amd64 and arm64.

// winLUID is LUID.
type winLUID struct {
	LowPart  uint32
	HighPart int32
}

// winUnicodeString is UNICODE_STRING (LSA_UNICODE_STRING): Length bytes of
// UTF-16 at Buffer, not NUL-terminated.
type winUnicodeString struct {
	Length        uint16
	MaximumLength uint16
	Buffer        *uint16
}

// String copies the string out of the system's memory.
func (u winUnicodeString) String() string {
	if u.Buffer == nil || u.Length < 2 {
		return ""
	}
	return string(utf16.Decode(unsafe.Slice(u.Buffer, u.Length/2)))
}

// wtsSessionInfo1 is WTS_SESSION_INFO_1W (WTSEnumerateSessionsExW, level 1).
type wtsSessionInfo1 struct {
	ExecEnvID   uint32
	State       uint32
	SessionID   uint32
	SessionName *uint16
	HostName    *uint16
	UserName    *uint16
	DomainName  *uint16
	FarmName    *uint16
}

// tokenStatistics is TOKEN_STATISTICS.
type tokenStatistics struct {
	TokenID            winLUID
	AuthenticationID   winLUID
	ExpirationTime     int64
	TokenType          uint32
	ImpersonationLevel uint32
	DynamicCharged     uint32
	DynamicAvailable   uint32
	GroupCount         uint32
	PrivilegeCount     uint32
	ModifiedID         winLUID
}

// securityLogonSessionData is SECURITY_LOGON_SESSION_DATA up to Upn (Windows
// Server 2003 and later); Size says how much of it a system fills.
type securityLogonSessionData struct {
	Size                  uint32
	LogonID               winLUID
	UserName              winUnicodeString
	LogonDomain           winUnicodeString
	AuthenticationPackage winUnicodeString
	LogonType             uint32
	Session               uint32
	Sid                   uintptr
	LogonTime             int64
	LogonServer           winUnicodeString
	DNSDomainName         winUnicodeString
	Upn                   winUnicodeString
}
