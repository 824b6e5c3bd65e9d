package agent

import (
	"bytes"
	"fmt"
	"os/exec"
	"runtime"
	"testing"
	"unsafe"
)

// TestWindowsLayouts checks the Windows structures the agent reads from the
// system's memory against the Windows SDK headers: it writes C static
// assertions of the Go side's sizes and offsets and has mingw-w64's
// compiler check them (-fsyntax-only). It needs x86_64-w64-mingw32-gcc
// (Debian's gcc-mingw-w64-x86-64, which .ci/run installs); Go lays out
// these structs on linux/amd64 as on windows/amd64. WTS_SESSION_INFO_1W
// is not in mingw-w64's headers: its layout (three DWORDs, then five
// pointers) is checked here only as Go lays it out.
func TestWindowsLayouts(t *testing.T) {
	gcc, err := exec.LookPath("x86_64-w64-mingw32-gcc")
	if err != nil {
		t.Skip("x86_64-w64-mingw32-gcc not found (apt-get install gcc-mingw-w64-x86-64)")
	}
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skip("the layouts are those of 64-bit Windows")
	}
	var lsa securityLogonSessionData
	var tok tokenStatistics
	var pdh pdhFmtCounterValue
	var s1 wtsSessionInfo1
	asserts := []struct {
		expr string
		goes uintptr
	}{
		{"sizeof(WTSINFOW)", wtsInfoSize},
		{"offsetof(WTSINFOW, State)", wtsInfoStateOff},
		{"offsetof(WTSINFOW, SessionId)", wtsInfoSessionIDOff},
		{"offsetof(WTSINFOW, Domain)", wtsInfoDomainOff},
		{"sizeof(((WTSINFOW*)0)->Domain)", wtsInfoDomainLen},
		{"offsetof(WTSINFOW, UserName)", wtsInfoUserNameOff},
		{"sizeof(((WTSINFOW*)0)->UserName)", wtsInfoUserNameLen},
		{"offsetof(WTSINFOW, LogonTime)", wtsInfoLogonTimeOff},
		{"offsetof(SECURITY_LOGON_SESSION_DATA, LogonId)", unsafe.Offsetof(lsa.LogonID)},
		{"offsetof(SECURITY_LOGON_SESSION_DATA, UserName)", unsafe.Offsetof(lsa.UserName)},
		{"offsetof(SECURITY_LOGON_SESSION_DATA, LogonType)", unsafe.Offsetof(lsa.LogonType)},
		{"offsetof(SECURITY_LOGON_SESSION_DATA, Sid)", unsafe.Offsetof(lsa.Sid)},
		{"offsetof(SECURITY_LOGON_SESSION_DATA, LogonTime)", unsafe.Offsetof(lsa.LogonTime)},
		{"offsetof(SECURITY_LOGON_SESSION_DATA, Upn)", unsafe.Offsetof(lsa.Upn)},
		{"offsetof(SECURITY_LOGON_SESSION_DATA, Upn) + sizeof(LSA_UNICODE_STRING)", unsafe.Offsetof(lsa.Upn) + unsafe.Sizeof(lsa.Upn)},
		{"offsetof(LSA_UNICODE_STRING, Buffer)", unsafe.Offsetof(lsa.Upn.Buffer)},
		{"sizeof(TOKEN_STATISTICS)", unsafe.Sizeof(tok)},
		{"offsetof(TOKEN_STATISTICS, AuthenticationId)", unsafe.Offsetof(tok.AuthenticationID)},
		{"offsetof(TOKEN_STATISTICS, ExpirationTime)", unsafe.Offsetof(tok.ExpirationTime)},
		{"offsetof(TOKEN_STATISTICS, ModifiedId)", unsafe.Offsetof(tok.ModifiedID)},
		{"sizeof(PDH_FMT_COUNTERVALUE)", unsafe.Sizeof(pdh)},
		{"offsetof(PDH_FMT_COUNTERVALUE, doubleValue)", unsafe.Offsetof(pdh.Double)},
	}
	var src bytes.Buffer
	src.WriteString("#include <windows.h>\n#include <wtsapi32.h>\n#include <ntsecapi.h>\n#include <pdh.h>\n#include <stddef.h>\n")
	for _, a := range asserts {
		fmt.Fprintf(&src, "_Static_assert(%s == %d, \"Go says %s is %d\");\n", a.expr, a.goes, a.expr, a.goes)
	}
	cmd := exec.CommandContext(t.Context(), gcc, "-fsyntax-only", "-x", "c", "-")
	cmd.Stdin = &src
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the Go layouts differ from the Windows headers: %v\n%s", err, out)
	}
	if got := unsafe.Offsetof(s1.SessionName); got != 16 || unsafe.Sizeof(s1) != 56 {
		t.Errorf("WTS_SESSION_INFO_1W: pSessionName at %d, size %d; want 16 and 56", got, unsafe.Sizeof(s1))
	}
}
