//go:build windows

package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"unsafe"

	"golang.org/x/sys/windows"
)

// ACE types (winnt.h) x/sys/windows does not name.
const (
	aceAllowedCallback      = 0x9
	aceDeniedObject         = 0x6
	aceDeniedCallback       = 0xA
	aceDeniedCallbackObject = 0xC
)

// fileTrusted reports why the agent (LocalSystem) must not trust the
// file at path (R-SEC): CheckWindowsSecurity of the file, and of every
// directory on the way to it up to its volume's root, by the name given
// and by the name links lead to. A file that cannot be found is not
// refused: reading or running it reports that. file is the file checked,
// nil when none was found.
func fileTrusted(path string) (file os.FileInfo, err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, nil
	}
	target, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, nil
	}
	if file, err = os.Stat(target); err != nil {
		return nil, nil
	}
	if err := checkSecurityOf(target, false); err != nil {
		return nil, err
	}
	for _, p := range []string{abs, target} {
		for d := filepath.Dir(p); ; d = filepath.Dir(d) {
			if err := checkSecurityOf(d, true); err != nil {
				return nil, err
			}
			if d == filepath.Dir(d) {
				break
			}
		}
	}
	return file, nil
}

func checkSecurityOf(name string, dir bool) error {
	s, err := readFileSecurity(name, dir)
	if err != nil {
		return fmt.Errorf("%s: security descriptor: %w", name, err)
	}
	return CheckWindowsSecurity(name, s, agentSID())
}

// agentSID is the SID of the account the agent runs as, "" when the
// token does not say.
var agentSID = sync.OnceValue(func() string {
	u, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return ""
	}
	return u.User.Sid.String()
})

// readFileSecurity reads name's owner and DACL into a FileSecurity.
func readFileSecurity(name string, dir bool) (FileSecurity, error) {
	s := FileSecurity{Dir: dir}
	sd, err := windows.GetNamedSecurityInfo(name, windows.SE_FILE_OBJECT, windows.OWNER_SECURITY_INFORMATION|windows.DACL_SECURITY_INFORMATION)
	if err != nil {
		return s, err
	}
	owner, _, err := sd.Owner()
	if err != nil {
		return s, fmt.Errorf("owner: %w", err)
	}
	if owner != nil {
		s.Owner = owner.String()
	}
	dacl, _, err := sd.DACL()
	switch {
	case errors.Is(err, windows.ERROR_OBJECT_NOT_FOUND), err == nil && dacl == nil:
		// Not present, or present and NULL: everyone has full control.
		s.NullDACL = true
		return s, nil
	case err != nil:
		return s, fmt.Errorf("DACL: %w", err)
	}
	for i := range uint32(dacl.AceCount) {
		var ace *windows.ACCESS_ALLOWED_ACE
		if err := windows.GetAce(dacl, i, &ace); err != nil {
			return s, fmt.Errorf("DACL entry %d: %w", i, err)
		}
		e := ACE{Mask: uint32(ace.Mask), InheritOnly: ace.Header.AceFlags&windows.INHERIT_ONLY_ACE != 0}
		switch ace.Header.AceType {
		case windows.ACCESS_ALLOWED_ACE_TYPE, aceAllowedCallback:
			// Both hold the SID where ACCESS_ALLOWED_ACE does.
			e.Kind = ACEAllow
			e.SID = (*windows.SID)(unsafe.Pointer(&ace.SidStart)).String()
		case windows.ACCESS_DENIED_ACE_TYPE, aceDeniedObject, aceDeniedCallback, aceDeniedCallbackObject:
			e.Kind = ACEDeny
		default:
			e.Kind = ACEOther
		}
		s.DACL = append(s.DACL, e)
	}
	return s, nil
}
