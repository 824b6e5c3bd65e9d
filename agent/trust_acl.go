package agent

import (
	"fmt"
	"strings"

	"github.com/vdibroker/vdibroker/internal/winacl"
)

// The Windows half of CheckFileTrusted decides on FileSecurity, what
// trust_windows.go reads of a file's or directory's security descriptor,
// here, without a build tag, so that its tests run everywhere.

// The owner and DACL types, and the reading of them on Windows, are
// internal/winacl's, which the broker's check of its secret files shares.
type (
	ACEKind      = winacl.ACEKind
	ACE          = winacl.ACE
	FileSecurity = winacl.FileSecurity
)

const (
	ACEAllow = winacl.ACEAllow
	ACEDeny  = winacl.ACEDeny
	ACEOther = winacl.ACEOther
)

// Well-known SIDs the check names.
const (
	sidSystem           = winacl.SIDSystem
	sidAdministrators   = winacl.SIDAdministrators
	sidTrustedInstaller = winacl.SIDTrustedInstaller
	// sidCreatorOwner in an ACE grants no one access to the object
	// itself: it is replaced by the creator when a child inherits it, and
	// the child's creator is checked as the child's owner.
	sidCreatorOwner = winacl.SIDCreatorOwner
	// sidOwnerRights grants the object's owner, who must be trusted.
	sidOwnerRights = winacl.SIDOwnerRights
)

// Access rights (winnt.h) that let a principal change what a file holds,
// or which file a path names.
const (
	fileWriteData   = winacl.FileWriteData
	fileAppendData  = winacl.FileAppendData
	fileDeleteChild = winacl.FileDeleteChild
	rightDelete     = winacl.RightDelete
	rightWriteDAC   = winacl.RightWriteDAC
	rightWriteOwner = winacl.RightWriteOwner
	genericAll      = winacl.GenericAll
	genericWrite    = winacl.GenericWrite
)

// fileWriteRights are the rights on the file that let its holder change
// it, or delete or rename it and put her own in its place.
const fileWriteRights = fileWriteData | fileAppendData | rightDelete | rightWriteDAC | rightWriteOwner | genericAll | genericWrite

// dirWriteRights are the rights on a directory on the way to the file
// that let their holder replace an entry: FILE_DELETE_CHILD, DELETE (move
// the directory away and make another of its name), or taking the
// directory. Adding entries (FILE_ADD_FILE, FILE_ADD_SUBDIRECTORY, what
// GENERIC_WRITE maps to) replaces none, and Windows grants it to users on
// C:\ and C:\ProgramData: refusing it would refuse every file there.
const dirWriteRights = fileDeleteChild | rightDelete | rightWriteDAC | rightWriteOwner | genericAll

// trustedSID reports whether sid may own, or hold write rights on, a
// file the agent trusts: SYSTEM, Administrators, TrustedInstaller, or
// agent, the account the agent runs as (SYSTEM for the service), who can
// do all the agent does anyway, as on Unix root or the agent's user.
func trustedSID(sid, agent string) bool {
	return sid == sidSystem || sid == sidAdministrators || sid == sidTrustedInstaller || (sid == agent && agent != "")
}

// CheckWindowsSecurity reports why the agent, running as the account of
// SID agent (LocalSystem for the service), must not trust the file or
// directory name with security s (R-SEC): its owner is not SYSTEM,
// Administrators, TrustedInstaller or agent (an owner may always change
// the DACL); it has no DACL (a NULL DACL, full control for everyone); or
// an allow entry grants anyone else a right
// to change it (fileWriteRights on the file, dirWriteRights on a
// directory on the way to it). Deny entries are not weighed against
// allow entries: an allow of such a right to another account is refused,
// whatever comes before it. Entries for CREATOR OWNER and OWNER RIGHTS,
// and inherit-only entries, grant no one else anything on the object.
func CheckWindowsSecurity(name string, s FileSecurity, agent string) error {
	if !trustedSID(s.Owner, agent) {
		return fmt.Errorf("%s belongs to %s, not to SYSTEM, Administrators or TrustedInstaller (icacls \"%s\" /setowner *%s)", name, sidName(s.Owner), name, sidAdministrators)
	}
	if s.NullDACL {
		return fmt.Errorf("%s has no DACL, which lets everyone change it", name)
	}
	rights := uint32(fileWriteRights)
	if s.Dir {
		rights = dirWriteRights
	}
	for _, e := range s.DACL {
		if e.Kind == ACEDeny || e.InheritOnly || e.Mask&rights == 0 {
			continue
		}
		if e.Kind == ACEOther {
			return fmt.Errorf("%s has an access entry the agent does not read that grants %s", name, rightNames(e.Mask&rights))
		}
		if trustedSID(e.SID, agent) || e.SID == sidCreatorOwner || e.SID == sidOwnerRights {
			continue
		}
		return fmt.Errorf("%s lets %s change it (%s)", name, sidName(e.SID), rightNames(e.Mask&rights))
	}
	return nil
}

func sidName(sid string) string { return winacl.SIDName(sid) }

// rightNames names the rights of mask that fileWriteRights and
// dirWriteRights hold.
func rightNames(mask uint32) string {
	var names []string
	for _, r := range []struct {
		bit  uint32
		name string
	}{
		{fileWriteData, "FILE_WRITE_DATA"}, {fileAppendData, "FILE_APPEND_DATA"}, {fileDeleteChild, "FILE_DELETE_CHILD"},
		{rightDelete, "DELETE"}, {rightWriteDAC, "WRITE_DAC"}, {rightWriteOwner, "WRITE_OWNER"},
		{genericAll, "GENERIC_ALL"}, {genericWrite, "GENERIC_WRITE"},
	} {
		if mask&r.bit != 0 {
			names = append(names, r.name)
		}
	}
	return strings.Join(names, ", ")
}
