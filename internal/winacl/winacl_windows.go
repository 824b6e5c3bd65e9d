//go:build windows

package winacl

import (
	"errors"
	"fmt"
	"os"
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

// CurrentSID is the SID of the account the process runs as, "" when its
// token does not say.
var CurrentSID = sync.OnceValue(func() string {
	u, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return ""
	}
	return u.User.Sid.String()
})

// ReadFileSecurity reads name's owner and DACL into a FileSecurity.
func ReadFileSecurity(name string, dir bool) (FileSecurity, error) {
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
		e := ACE{Mask: uint32(ace.Mask), InheritOnly: ace.Header.AceFlags&windows.INHERIT_ONLY_ACE != 0,
			ObjectInherit: ace.Header.AceFlags&windows.OBJECT_INHERIT_ACE != 0}
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

// CheckPrivateFile is CheckPrivate of the file name as Windows answers
// for it, for the process's account. A descriptor that cannot be read is
// refused too.
func CheckPrivateFile(name string) error {
	return checkPrivate(name, false)
}

// CheckPrivateDir is CheckPrivate of the directory name: whether the
// files made in it are the process's account's, SYSTEM's and
// Administrators' alone.
func CheckPrivateDir(name string) error {
	return checkPrivate(name, true)
}

func checkPrivate(name string, dir bool) error {
	s, err := ReadFileSecurity(name, dir)
	if err != nil {
		return fmt.Errorf("%s: security descriptor: %w", name, err)
	}
	return CheckPrivate(name, s, CurrentSID())
}

// CreatePrivateFile creates the file name, which must not exist, for
// writing, with PrivateSDDL from its first byte: no one else can open it
// between its creation and a change of its DACL. (Wine 8 keeps a DACL
// given at creation, as the Unix mode it makes from it, but turns a DACL
// set later on an existing file into a mode that lets everyone read it.)
func CreatePrivateFile(name string) (*os.File, error) {
	self := CurrentSID()
	if self == "" {
		return nil, &os.PathError{Op: "create", Path: name, Err: errors.New("the process's account is unknown")}
	}
	return CreateFileSDDL(name, PrivateSDDL(self))
}

// CreateFileSDDL creates the file name, which must not exist, for
// writing, with the security descriptor sddl from its first byte.
func CreateFileSDDL(name, sddl string) (*os.File, error) {
	sa, p, err := securityAttributes(name, sddl)
	if err != nil {
		return nil, &os.PathError{Op: "create", Path: name, Err: err}
	}
	h, err := windows.CreateFile(p, windows.GENERIC_WRITE, windows.FILE_SHARE_READ, sa, windows.CREATE_NEW, windows.FILE_ATTRIBUTE_NORMAL, 0)
	if err != nil { // ERROR_FILE_EXISTS is os.ErrExist
		return nil, &os.PathError{Op: "create", Path: name, Err: err}
	}
	return os.NewFile(uintptr(h), name), nil
}

// MkdirPrivate creates the directory name, whose parent must exist, with
// PrivateDirSDDL: the files made in it inherit its entries. An existing
// one is os.ErrExist, and keeps its DACL.
func MkdirPrivate(name string) error {
	self := CurrentSID()
	if self == "" {
		return &os.PathError{Op: "mkdir", Path: name, Err: errors.New("the process's account is unknown")}
	}
	sa, p, err := securityAttributes(name, PrivateDirSDDL(self))
	if err != nil {
		return &os.PathError{Op: "mkdir", Path: name, Err: err}
	}
	if err := windows.CreateDirectory(p, sa); err != nil { // ERROR_ALREADY_EXISTS is os.ErrExist
		return &os.PathError{Op: "mkdir", Path: name, Err: err}
	}
	return nil
}

func securityAttributes(name, sddl string) (*windows.SecurityAttributes, *uint16, error) {
	sd, err := windows.SecurityDescriptorFromString(sddl)
	if err != nil {
		return nil, nil, err
	}
	p, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return nil, nil, err
	}
	return &windows.SecurityAttributes{Length: uint32(unsafe.Sizeof(windows.SecurityAttributes{})), SecurityDescriptor: sd}, p, nil
}

// SetPrivateDir gives the existing directory name PrivateDirSDDL's
// protected DACL, which the entries it holds inherit, and, when its owner
// is not one PrivateOwner accepts (an administrator who made it in
// Explorer), the process's account as its owner. It works on the
// directory it opened, not on its name, and refuses a link or junction.
func SetPrivateDir(name string) error {
	self := CurrentSID()
	if self == "" {
		return &os.PathError{Op: "secure", Path: name, Err: errors.New("the process's account is unknown")}
	}
	sd, err := windows.SecurityDescriptorFromString("O:" + self + PrivateDirSDDL(self))
	if err != nil {
		return &os.PathError{Op: "secure", Path: name, Err: err}
	}
	owner, _, err := sd.Owner()
	if err != nil {
		return &os.PathError{Op: "secure", Path: name, Err: err}
	}
	dacl, _, err := sd.DACL()
	if err != nil {
		return &os.PathError{Op: "secure", Path: name, Err: err}
	}
	p, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return &os.PathError{Op: "secure", Path: name, Err: err}
	}
	h, err := windows.CreateFile(p, windows.READ_CONTROL|windows.WRITE_DAC|windows.WRITE_OWNER,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil, windows.OPEN_EXISTING,
		windows.FILE_FLAG_BACKUP_SEMANTICS|windows.FILE_FLAG_OPEN_REPARSE_POINT, 0)
	if err != nil {
		return &os.PathError{Op: "secure", Path: name, Err: err}
	}
	defer windows.CloseHandle(h)
	var info windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(h, &info); err != nil {
		return &os.PathError{Op: "secure", Path: name, Err: err}
	}
	if info.FileAttributes&windows.FILE_ATTRIBUTE_REPARSE_POINT != 0 || info.FileAttributes&windows.FILE_ATTRIBUTE_DIRECTORY == 0 {
		return &os.PathError{Op: "secure", Path: name, Err: errors.New("a link, a junction or no directory")}
	}
	what := windows.SECURITY_INFORMATION(windows.DACL_SECURITY_INFORMATION | windows.PROTECTED_DACL_SECURITY_INFORMATION)
	cur, err := windows.GetSecurityInfo(h, windows.SE_FILE_OBJECT, windows.OWNER_SECURITY_INFORMATION)
	if err != nil {
		return &os.PathError{Op: "secure", Path: name, Err: err}
	}
	if o, _, err := cur.Owner(); err != nil || o == nil || !PrivateOwner(o.String(), self) {
		what |= windows.OWNER_SECURITY_INFORMATION
	} else {
		owner = nil
	}
	if err := windows.SetSecurityInfo(h, windows.SE_FILE_OBJECT, what, owner, nil, dacl, nil); err != nil {
		return &os.PathError{Op: "secure", Path: name, Err: err}
	}
	return nil
}
