//go:build windows

package agent

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/windows"
)

// The WTS and LSA calls of the wts provider. golang.org/x/sys/windows wraps
// WTSEnumerateSessions (level 0, no user names), WTSQueryUserToken and
// TranslateName; the rest are called through their DLLs' procs.
var (
	modwtsapi32                     = windows.NewLazySystemDLL("wtsapi32.dll")
	procWTSEnumerateSessionsExW     = modwtsapi32.NewProc("WTSEnumerateSessionsExW")
	procWTSFreeMemoryExW            = modwtsapi32.NewProc("WTSFreeMemoryExW")
	procWTSQuerySessionInformationW = modwtsapi32.NewProc("WTSQuerySessionInformationW")
	procWTSLogoffSession            = modwtsapi32.NewProc("WTSLogoffSession")
	procWTSDisconnectSession        = modwtsapi32.NewProc("WTSDisconnectSession")
	procWTSSendMessageW             = modwtsapi32.NewProc("WTSSendMessageW")

	modsecur32                 = windows.NewLazySystemDLL("secur32.dll")
	procLsaGetLogonSessionData = modsecur32.NewProc("LsaGetLogonSessionData")
	procLsaFreeReturnBuffer    = modsecur32.NewProc("LsaFreeReturnBuffer")
)

const (
	wtsCurrentServerHandle   = 0  // WTS_CURRENT_SERVER_HANDLE: this machine
	wtsTypeSessionInfoLevel1 = 2  // WTS_TYPE_CLASS for WTSFreeMemoryExW
	wtsClassClientName       = 10 // WTS_INFO_CLASS WTSClientName
	wtsClassSessionInfo      = 24 // WTS_INFO_CLASS WTSSessionInfo
	mbIconInformation        = 0x40
	errorNoneMapped          = syscall.Errno(1332) // ERROR_NONE_MAPPED: the account has no such name
)

func newWTS(f WindowsUserFormat) (SessionProvider, error) {
	if err := procWTSEnumerateSessionsExW.Find(); err != nil {
		return nil, fmt.Errorf("sessions provider wts: %w", err)
	}
	return newWTSProvider(wtsWindows{computer: computerName()}, f), nil
}

// autoProvider is wts on Windows: every Windows that runs user sessions has
// Remote Desktop Services.
func autoProvider() (SessionProvider, error) { return newWTS(UserFormatUPN) }

// computerName is this machine's NetBIOS name, the domain Windows gives
// local accounts.
func computerName() string {
	var buf [windows.MAX_COMPUTERNAME_LENGTH + 1]uint16
	n := uint32(len(buf))
	if err := windows.GetComputerNameEx(windows.ComputerNameNetBIOS, &buf[0], &n); err != nil {
		return ""
	}
	return windows.UTF16ToString(buf[:n])
}

// wtsWindows is the real wtsAPI.
type wtsWindows struct {
	computer string
}

var _ wtsAPI = wtsWindows{}

// callError is the error of a failed call: its last error, mapped to
// ErrNoSession for a session that does not exist.
func callError(name string, err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case 0:
			return fmt.Errorf("%s failed without an error code", name)
		case windows.ERROR_CTX_WINSTATION_NOT_FOUND, windows.ERROR_FILE_NOT_FOUND:
			return fmt.Errorf("%s: %w (%v)", name, ErrNoSession, errno)
		}
	}
	return fmt.Errorf("%s: %w", name, err)
}

// Enumerate implements wtsAPI with WTSEnumerateSessionsExW, level 1.
func (wtsWindows) Enumerate() ([]WTSSession, error) {
	level := uint32(1)
	var p *wtsSessionInfo1
	var n uint32
	r, _, err := procWTSEnumerateSessionsExW.Call(wtsCurrentServerHandle, uintptr(unsafe.Pointer(&level)), 0,
		uintptr(unsafe.Pointer(&p)), uintptr(unsafe.Pointer(&n)))
	if r == 0 {
		return nil, callError("WTSEnumerateSessionsExW", err)
	}
	defer procWTSFreeMemoryExW.Call(wtsTypeSessionInfoLevel1, uintptr(unsafe.Pointer(p)), uintptr(n))
	if p == nil {
		return nil, nil
	}
	out := make([]WTSSession, 0, n)
	for _, s := range unsafe.Slice(p, n) {
		out = append(out, WTSSession{
			ID:      s.SessionID,
			State:   WTSConnectState(s.State),
			Station: windows.UTF16PtrToString(s.SessionName),
			User:    windows.UTF16PtrToString(s.UserName),
			Domain:  windows.UTF16PtrToString(s.DomainName),
		})
	}
	return out, nil
}

// query is WTSQuerySessionInformationW: the answer's bytes, copied.
func query(id, class uint32) ([]byte, error) {
	var buf *byte
	var size uint32
	r, _, err := procWTSQuerySessionInformationW.Call(wtsCurrentServerHandle, uintptr(id), uintptr(class),
		uintptr(unsafe.Pointer(&buf)), uintptr(unsafe.Pointer(&size)))
	if r == 0 {
		return nil, callError(fmt.Sprintf("WTSQuerySessionInformationW(session %d, class %d)", id, class), err)
	}
	defer windows.WTSFreeMemory(uintptr(unsafe.Pointer(buf)))
	if buf == nil {
		return nil, nil
	}
	return bytes.Clone(unsafe.Slice(buf, size)), nil
}

// Info implements wtsAPI with WTSQuerySessionInformationW(WTSSessionInfo).
func (wtsWindows) Info(id uint32) (wtsInfo, error) {
	b, err := query(id, wtsClassSessionInfo)
	if err != nil {
		return wtsInfo{}, err
	}
	return decodeWTSInfo(b)
}

// wtsClientName is WTSQuerySessionInformationW(WTSClientName): the client
// computer's name, empty for the console (recorded, not reported).
func wtsClientName(id uint32) (string, error) {
	b, err := query(id, wtsClassClientName)
	if err != nil {
		return "", err
	}
	return utf16Field(b), nil
}

// UPN implements wtsAPI: the UPN the logon session recorded at logon (no
// directory round trip; it also knows Entra ID accounts, whose domain is
// "AzureAD"), else the directory's (TranslateName). A local account has
// none.
func (w wtsWindows) UPN(id uint32, domain, user string) (string, error) {
	if upn, err := logonSessionUPN(id); err == nil && upn != "" {
		return upn, nil
	}
	if strings.EqualFold(domain, w.computer) || domain == "" {
		return "", nil // a local account
	}
	sam, err := windows.UTF16PtrFromString(domain + `\` + user)
	if err != nil {
		return "", err
	}
	var buf [512]uint16
	n := uint32(len(buf))
	err = windows.TranslateName(sam, windows.NameSamCompatible, windows.NameUserPrincipal, &buf[0], &n)
	if errors.Is(err, errorNoneMapped) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("TranslateName(%s\\%s): %w", domain, user, err)
	}
	return windows.UTF16ToString(buf[:n]), nil
}

// logonSessionUPN reads the Upn of the session's logon session: its user's
// token (WTSQueryUserToken, which needs the LocalSystem account the service
// runs as), the token's logon session id (TokenStatistics), and the logon
// session's data (LsaGetLogonSessionData).
func logonSessionUPN(id uint32) (string, error) {
	var tok windows.Token
	if err := windows.WTSQueryUserToken(id, &tok); err != nil {
		return "", fmt.Errorf("WTSQueryUserToken: %w", err)
	}
	defer tok.Close()
	var st tokenStatistics
	var n uint32
	if err := windows.GetTokenInformation(tok, windows.TokenStatistics, (*byte)(unsafe.Pointer(&st)), uint32(unsafe.Sizeof(st)), &n); err != nil {
		return "", fmt.Errorf("GetTokenInformation(TokenStatistics): %w", err)
	}
	var data *securityLogonSessionData
	if status, _, _ := procLsaGetLogonSessionData.Call(uintptr(unsafe.Pointer(&st.AuthenticationID)), uintptr(unsafe.Pointer(&data))); status != 0 {
		return "", fmt.Errorf("LsaGetLogonSessionData: %w", windows.NTStatus(status))
	}
	defer procLsaFreeReturnBuffer.Call(uintptr(unsafe.Pointer(data)))
	if data == nil || uintptr(data.Size) < unsafe.Offsetof(data.Upn)+unsafe.Sizeof(data.Upn) {
		return "", nil
	}
	return data.Upn.String(), nil
}

// Logoff implements wtsAPI with WTSLogoffSession (bWait FALSE).
func (wtsWindows) Logoff(id uint32) error {
	if r, _, err := procWTSLogoffSession.Call(wtsCurrentServerHandle, uintptr(id), 0); r == 0 {
		return callError("WTSLogoffSession", err)
	}
	return nil
}

// Disconnect implements wtsAPI with WTSDisconnectSession (bWait FALSE).
func (wtsWindows) Disconnect(id uint32) error {
	if r, _, err := procWTSDisconnectSession.Call(wtsCurrentServerHandle, uintptr(id), 0); r == 0 {
		return callError("WTSDisconnectSession", err)
	}
	return nil
}

// SendMessage implements wtsAPI with WTSSendMessageW: an information box
// with an OK button, no timeout, without waiting for the user (bWait
// FALSE). The lengths are in bytes, without the NUL.
func (wtsWindows) SendMessage(id uint32, title, message string) error {
	t, err := windows.UTF16FromString(title)
	if err != nil {
		return err
	}
	m, err := windows.UTF16FromString(message)
	if err != nil {
		return fmt.Errorf("message: %w", err)
	}
	var response uint32
	r, _, err := procWTSSendMessageW.Call(wtsCurrentServerHandle, uintptr(id),
		uintptr(unsafe.Pointer(&t[0])), uintptr(2*(len(t)-1)),
		uintptr(unsafe.Pointer(&m[0])), uintptr(2*(len(m)-1)),
		mbIconInformation, 0, uintptr(unsafe.Pointer(&response)), 0)
	if r == 0 {
		return callError("WTSSendMessageW", err)
	}
	return nil
}
