//go:build windows

package agent

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/vdibroker/vdibroker/internal/winacl"
	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/registry"
)

// The agent's calls into Windows, run on Windows and under Wine 8
// (TestAgentWine in cmd/vdibroker compiles these tests for Windows and
// runs them there). What Wine cannot do is pinned as Wine answers it, so
// that the day it answers otherwise a test says so: its WTS functions are
// stubs without sessions, it has no PhysicalDisk counters, it does not keep
// files' DACLs. Those parts are covered by the recorded answers of
// wts_test.go and metrics_pdh_test.go.
//
// These tests avoid t.TempDir: under Wine 8, os.RemoveAll fails ("Invalid
// function": Wine lacks FILE_DISPOSITION_INFORMATION_EX), which would fail
// every test at cleanup.

var recordWTS = flag.String("record-wts", "", "write this host's WTS answers to this file in testdata/windows's format (TestRecordWTS; run as SYSTEM)")

// isWine reports whether the test runs under Wine (ntdll exports
// wine_get_version there).
func isWine() bool {
	return windows.NewLazySystemDLL("ntdll.dll").NewProc("wine_get_version").Find() == nil
}

// tempDir is a directory removed file by file at the end of the test.
func tempDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "vdibroker-agent-test-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		var dirs []string
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			} else if err == nil {
				os.Remove(p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			os.Remove(dirs[i])
		}
	})
	return dir
}

// TestWindowsRegistryLive reads custom load values written to the real
// registry (Wine's has one).
func TestWindowsRegistryLive(t *testing.T) {
	key := fmt.Sprintf(`Software\vdibroker-test-%d`, rand.Uint64())
	k, _, err := registry.CreateKey(registry.LOCAL_MACHINE, key, registry.ALL_ACCESS|registry.WOW64_64KEY)
	if errors.Is(err, windows.ERROR_ACCESS_DENIED) {
		t.Skip("writing HKLM needs an administrator")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		k.Close()
		registry.DeleteKey(registry.LOCAL_MACHINE, key)
	})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(k.SetDWordValue("Dword", 42))
	must(k.SetDWordValue("Minus", 0xFFFFFFFF))
	must(k.SetStringValue("Sz", " 77 "))
	must(k.SetQWordValue("Qword", 5))
	must(k.SetBinaryValue("Big", make([]byte, 300)))
	read := func(value string) (*int, error) {
		return readRegistryLoad(t.Context(), systemRegistry, RegistryValuePath{Key: key, Value: value})
	}
	for value, want := range map[string]int{"Dword": 42, "Sz": 77, "dword": 42} {
		if v, err := read(value); err != nil || v == nil || *v != want {
			t.Errorf("%s = %v, %v; want %d", value, v, err, want)
		}
	}
	for value, because := range map[string]string{"Minus": "REG_DWORD -1", "Qword": "REG_QWORD", "Big": "REG_BINARY of 300 bytes, more than 256", "Nope": "the value does not exist"} {
		if v, err := read(value); v != nil || err == nil || !strings.Contains(err.Error(), because) {
			t.Errorf("%s = %v, %v; want no value because %q", value, v, err, because)
		}
	}
	_, err = readRegistryLoad(t.Context(), systemRegistry, RegistryValuePath{Key: key + `\missing`, Value: "x"})
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "the key does not exist") {
		t.Errorf("missing key = %v", err)
	}
}

// TestWindowsStateDir: Windows reads StateDirSDDL as meant, and the agent
// may set it on its directory. Under Wine the DACL read back is made up
// from the Unix mode (Wine keeps no DACL on these files), so only the
// call's success is checked there.
func TestWindowsStateDir(t *testing.T) {
	sd, err := windows.SecurityDescriptorFromString(StateDirSDDL)
	if err != nil {
		t.Fatal(err)
	}
	checkSD(t, "StateDirSDDL", sd)
	dir := filepath.Join(tempDir(t), "state")
	if err := secureDir(dir); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("state dir not made: %v", err)
	}
	// A link in its place is refused: whoever made it could point it
	// elsewhere once the agent has checked it.
	other := filepath.Join(tempDir(t), "elsewhere")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(filepath.Dir(dir), "link")
	switch err := os.Symlink(other, link); {
	case err != nil:
		t.Logf("no symbolic link made (%v): not checked", err)
	case isWine():
		// Wine 8 makes a Unix symbolic link and follows it: no reparse
		// point to see.
		t.Log("Wine: links are not reparse points; checked on Windows only")
	default:
		if err := secureDir(link); err == nil || !strings.Contains(err.Error(), "refused") {
			t.Errorf("secureDir(a link) = %v, want it refused", err)
		}
	}
	if isWine() {
		t.Log("Wine: the DACL set is not kept; checked on Windows only")
		return
	}
	got, err := windows.GetNamedSecurityInfo(dir, windows.SE_FILE_OBJECT, windows.OWNER_SECURITY_INFORMATION|windows.DACL_SECURITY_INFORMATION)
	if err != nil {
		t.Fatal(err)
	}
	checkSD(t, dir, got)
}

// TestWindowsSecretFile: the host credential and the registration token
// file are written with StateFileSDDL from their first byte, which
// CheckSecretFile accepts, across a replacement; a file Everyone may read
// is refused, naming Everyone and the icacls command (R-SEC). Under Wine 8
// the DACLs are those it makes from the Unix modes: CreateFileSDDL's
// 0750, Everyone's reading o+r.
func TestWindowsSecretFile(t *testing.T) {
	dir := filepath.Join(tempDir(t), "state")
	if err := secureDir(dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "registration-token")
	for _, token := range []string{"vdbr_first\n", "vdbr_second\n"} {
		if err := WriteSecretFile(path, []byte(token)); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(path); err != nil || string(got) != token {
			t.Errorf("read %q, %v; want %q", got, err, token)
		}
		if err := CheckSecretFile(path); err != nil {
			t.Errorf("the file WriteSecretFile made: %v", err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the state dir holds %v, want the token file alone (no temporary file left)", entries)
	}
	if err := saveCredential(dir, &savedCredential{Server: "https://b", HostName: "h", Credential: "vdbh_x"}); err != nil {
		t.Fatal(err)
	}
	if c, err := loadCredential(dir); err != nil || c == nil || c.Credential != "vdbh_x" {
		t.Errorf("loadCredential = %+v, %v; want the saved one", c, err)
	}
	// Everyone may read it: refused, the credential too.
	open := filepath.Join(dir, credentialFile)
	os.Remove(open)
	f, err := winacl.CreateFileSDDL(open, "D:P(A;;FA;;;SY)(A;;FA;;;BA)(A;;FR;;;WD)")
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"server": "https://b", "hostName": "h", "credential": "vdbh_x"}`)
	f.Close()
	err = CheckSecretFile(open)
	if err == nil || !strings.Contains(err.Error(), "lets Everyone (S-1-1-0) read it") || !strings.Contains(err.Error(), `run icacls "`+open+`"`) {
		t.Errorf("a credential Everyone may read: %v, want it refused naming Everyone and icacls", err)
	}
	if c, err := loadCredential(dir); c != nil || err == nil {
		t.Errorf("loadCredential of a credential Everyone may read = %+v, %v; want it unusable", c, err)
	}
}

// TestWindowsStateAccess: the token is read as stateAccessError wants it.
// Wine runs its programs as an administrator with Administrators enabled,
// as an elevated console has them, so the agent may keep its credential;
// the filtered token of a console User Account Control starts, which Wine
// does not make, is TestStateAccessError's (R-SEC).
func TestWindowsStateAccess(t *testing.T) {
	a, err := currentStateAccess()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("token: %+v", a)
	if a.filtered && a.admins {
		t.Errorf("Administrators both enabled and for deny only: %+v", a)
	}
	const dir = `C:\ProgramData\vdibroker`
	if got, want := CheckStateDirAccess(dir), stateAccessError(dir, a); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("CheckStateDirAccess = %v, want %v", got, want)
	}
	if isWine() && (!a.admins || CheckStateDirAccess(dir) != nil) {
		t.Errorf("under Wine, an administrator's token: %+v, %v; want Administrators enabled and the state dir usable", a, CheckStateDirAccess(dir))
	}
}

// fileAllAccess is FILE_ALL_ACCESS (winnt.h), SDDL's FA.
const fileAllAccess = windows.STANDARD_RIGHTS_REQUIRED | windows.SYNCHRONIZE | 0x1FF

// checkSD: owner Administrators, a protected DACL of full access for
// LocalSystem and Administrators, inherited below, and nothing else.
func checkSD(t *testing.T, what string, sd *windows.SECURITY_DESCRIPTOR) {
	t.Helper()
	owner, _, err := sd.Owner()
	if err != nil || !owner.IsWellKnown(windows.WinBuiltinAdministratorsSid) {
		t.Errorf("%s: owner %v, %v; want BUILTIN\\Administrators", what, owner, err)
	}
	control, _, err := sd.Control()
	if err != nil || control&windows.SE_DACL_PROTECTED == 0 {
		t.Errorf("%s: control %#x, %v; want SE_DACL_PROTECTED", what, control, err)
	}
	dacl, _, err := sd.DACL()
	if err != nil || dacl == nil {
		t.Fatalf("%s: DACL %v, %v", what, dacl, err)
	}
	seen := map[windows.WELL_KNOWN_SID_TYPE]bool{}
	for i := range uint32(dacl.AceCount) {
		var ace *windows.ACCESS_ALLOWED_ACE
		if err := windows.GetAce(dacl, i, &ace); err != nil {
			t.Fatal(err)
		}
		sid := (*windows.SID)(unsafe.Pointer(&ace.SidStart))
		switch {
		case ace.Header.AceType != windows.ACCESS_ALLOWED_ACE_TYPE || ace.Mask != fileAllAccess ||
			ace.Header.AceFlags&(windows.OBJECT_INHERIT_ACE|windows.CONTAINER_INHERIT_ACE) != windows.OBJECT_INHERIT_ACE|windows.CONTAINER_INHERIT_ACE:
			t.Errorf("%s: ACE %d type %d flags %#x mask %#x for %v", what, i, ace.Header.AceType, ace.Header.AceFlags, ace.Mask, sid)
		case sid.IsWellKnown(windows.WinLocalSystemSid):
			seen[windows.WinLocalSystemSid] = true
		case sid.IsWellKnown(windows.WinBuiltinAdministratorsSid):
			seen[windows.WinBuiltinAdministratorsSid] = true
		default:
			t.Errorf("%s: ACE %d for %v, want only SYSTEM and Administrators", what, i, sid)
		}
	}
	if len(seen) != 2 {
		t.Errorf("%s: accounts %v, want SYSTEM and Administrators", what, seen)
	}
}

// TestWindowsWTSLive calls the WTS API. On Windows it lists this host's
// sessions as the broker would take them; under Wine it pins Wine's stubs.
func TestWindowsWTSLive(t *testing.T) {
	p, err := NewSessionProvider("auto")
	if err != nil {
		t.Fatalf("auto on Windows: %v", err)
	}
	if _, ok := p.(*WTSProvider); !ok {
		t.Fatalf("auto on Windows = %T, want the wts provider", p)
	}
	api := wtsWindows{computer: computerName()}
	sessions, err := p.Sessions(t.Context())
	if isWine() {
		// Wine 8: WTSEnumerateSessionsExW returns FALSE without an error
		// code; WTSQuerySessionInformationW has no WTSSessionInfo;
		// WTSLogoffSession answers ERROR_CALL_NOT_IMPLEMENTED,
		// WTSSendMessageW FALSE; WTSDisconnectSession TRUE for any id.
		if err == nil || !strings.Contains(err.Error(), "WTSEnumerateSessionsExW failed without an error code") {
			t.Errorf("Wine: Sessions = %v, %v; Wine's WTSEnumerateSessionsExW answers now: update this test and docs/agent.md", sessions, err)
		}
		if _, err := api.Info(1); err == nil {
			t.Error("Wine answers WTSSessionInfo now: update this test")
		}
		if err := api.Logoff(77); !errors.Is(err, windows.ERROR_CALL_NOT_IMPLEMENTED) {
			t.Errorf("Wine: WTSLogoffSession = %v", err)
		}
		if err := api.SendMessage(1, "t", "m"); err == nil {
			t.Error("Wine: WTSSendMessageW succeeded")
		}
		if err := api.Disconnect(77); err != nil {
			t.Errorf("Wine: WTSDisconnectSession = %v (its stub succeeds)", err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, dropped := acceptable(sessions); len(dropped) > 0 {
		t.Errorf("sessions the broker would refuse: %v", dropped)
	}
	// This process's own session is queried as the provider queries them.
	var self uint32
	if err := windows.ProcessIdToSessionId(windows.GetCurrentProcessId(), &self); err != nil {
		t.Fatal(err)
	}
	info, err := api.Info(self)
	if err != nil || info.SessionID != self {
		t.Errorf("Info(own session %d) = %+v, %v", self, info, err)
	}
	if _, err := api.Info(0xFFFFFFF0); !errors.Is(err, ErrNoSession) {
		t.Errorf("Info of no session = %v, want ErrNoSession", err)
	}
}

// TestWindowsMetricsLive samples the real counters twice.
func TestWindowsMetricsLive(t *testing.T) {
	m := &SystemMetrics{}
	for i := range 2 {
		got, err := m.Sample(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if got.CPUPercent < 0 || got.CPUPercent > 100 || got.MemoryPercent <= 0 || got.MemoryPercent > 100 {
			t.Errorf("sample %d = %+v, want CPU and memory in range", i, got)
		}
		if got.DiskQueueLength < 0 || got.DiskReadLatencyMs < 0 || got.DiskWriteLatencyMs < 0 {
			t.Errorf("sample %d disk figures %+v", i, got)
		}
	}
	noted := m.plat.noted
	if isWine() {
		// Wine 8's pdh.dll knows \Processor and \System, no \PhysicalDisk.
		if strings.Count(noted, "PDH_CSTATUS_NO_COUNTER") != 3 {
			t.Errorf("Wine: disk counters %q; Wine has PhysicalDisk counters now: update this test and docs/agent.md", noted)
		}
		return
	}
	if strings.Contains(noted, "NO_OBJECT") || strings.Contains(noted, "NO_COUNTER") || strings.Contains(noted, "BAD_COUNTERNAME") {
		t.Errorf("disk counters missing on Windows: %s", noted)
	}
}

// TestRecordWTS writes this host's WTS answers in testdata/windows's format,
// when -record-wts names a file: run it on a real session host as SYSTEM
// (psexec -s), with users logged on, to replace a transcribed recording.
func TestRecordWTS(t *testing.T) {
	if *recordWTS == "" {
		t.Skip("-record-wts=FILE records this host's answers")
	}
	api := wtsWindows{computer: computerName()}
	list, err := api.Enumerate()
	if err != nil {
		t.Fatal(err)
	}
	rec := wtsRecording{Source: "Recorded by TestRecordWTS on " + api.computer, ComputerName: api.computer, UPNErrors: map[uint32]string{}}
	for _, s := range list {
		if info, err := api.Info(s.ID); err == nil {
			s.LogonTime = info.LogonTime
		}
		s.ClientName, _ = wtsClientName(s.ID)
		if s.User != "" {
			upn, err := api.UPN(s.ID, s.Domain, s.User)
			if err != nil {
				rec.UPNErrors[s.ID] = err.Error()
			}
			s.UPN = upn
		}
		rec.Sessions = append(rec.Sessions, s)
	}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(*recordWTS, append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %d sessions to %s", len(rec.Sessions), *recordWTS)
}

// TestWindowsFileTrust reads real security descriptors (R-SEC): a file of
// the test's own account in its temporary folder is trusted, as the
// agent's account's are; once its DACL lets Everyone change it, it is
// refused, and the policy file is not read. Wine 8 makes the DACL it
// answers from the Unix owner and mode (owner: the account it runs
// everything as; Everyone: the mode's other bits) and turns a DACL set
// into a mode, so the same holds there.
func TestWindowsFileTrust(t *testing.T) {
	dir := tempDir(t)
	policy := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(policy, []byte(`{"hostLoadIndexThreshold": 80}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckFileTrusted(policy); err != nil {
		s, _ := readFileSecurity(policy, false)
		t.Fatalf("a file of the test's own account (%s): %v\n%+v", agentSID(), err, s)
	}
	if p, err := ReadPolicyFile(policy); err != nil || p.HostLoadIndexThreshold == nil || *p.HostLoadIndexThreshold != 80 {
		t.Fatalf("ReadPolicyFile = %+v, %v", p, err)
	}
	sd, err := windows.SecurityDescriptorFromString("D:P(A;;FA;;;SY)(A;;FA;;;BA)(A;;FA;;;WD)")
	if err != nil {
		t.Fatal(err)
	}
	dacl, _, err := sd.DACL()
	if err != nil {
		t.Fatal(err)
	}
	if err := windows.SetNamedSecurityInfo(policy, windows.SE_FILE_OBJECT,
		windows.DACL_SECURITY_INFORMATION|windows.PROTECTED_DACL_SECURITY_INFORMATION, nil, nil, dacl, nil); err != nil {
		t.Fatal(err)
	}
	if err := CheckFileTrusted(policy); err == nil || !strings.Contains(err.Error(), "Everyone (S-1-1-0) change it") {
		s, _ := readFileSecurity(policy, false)
		t.Errorf("a file Everyone may change: %v, want it refused\n%+v", err, s)
	}
	if _, err := ReadPolicyFile(policy); err == nil || !strings.Contains(err.Error(), "not read") {
		t.Errorf("ReadPolicyFile of a file Everyone may change = %v, want it not read", err)
	}
}
