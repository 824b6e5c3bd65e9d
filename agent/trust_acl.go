package agent

import (
	"fmt"
	"strings"
)

// The Windows half of CheckFileTrusted decides on FileSecurity, what
// trust_windows.go reads of a file's or directory's security descriptor,
// here, without a build tag, so that its tests run everywhere.

// Well-known SIDs (MS-DTYP 2.4.2.4) the check names.
const (
	sidSystem           = "S-1-5-18"
	sidAdministrators   = "S-1-5-32-544"
	sidTrustedInstaller = "S-1-5-80-956008885-3418522649-1831038044-1853292631-2271478464"
	// sidCreatorOwner in an ACE grants no one access to the object
	// itself: it is replaced by the creator when a child inherits it, and
	// the child's creator is checked as the child's owner.
	sidCreatorOwner = "S-1-3-0"
	// sidOwnerRights grants the object's owner, who must be trusted.
	sidOwnerRights = "S-1-3-4"
)

// sidNames are the names refusals give the SIDs they name.
var sidNames = map[string]string{
	sidSystem: "SYSTEM", sidAdministrators: "Administrators", sidTrustedInstaller: "TrustedInstaller",
	"S-1-1-0": "Everyone", "S-1-5-11": "Authenticated Users", "S-1-5-32-545": "Users", "S-1-5-4": "INTERACTIVE",
}

// Access rights (winnt.h) that let a principal change what a file holds,
// or which file a path names.
const (
	fileWriteData   = 0x2        // FILE_WRITE_DATA; FILE_ADD_FILE on a directory
	fileAppendData  = 0x4        // FILE_APPEND_DATA; FILE_ADD_SUBDIRECTORY on a directory
	fileDeleteChild = 0x40       // FILE_DELETE_CHILD: delete or rename any entry of a directory
	rightDelete     = 0x10000    // DELETE: delete or rename the object itself
	rightWriteDAC   = 0x40000    // WRITE_DAC: grant oneself anything
	rightWriteOwner = 0x80000    // WRITE_OWNER: take it, then grant oneself anything
	genericAll      = 0x10000000 // GENERIC_ALL
	genericWrite    = 0x40000000 // GENERIC_WRITE: FILE_WRITE_DATA and FILE_APPEND_DATA on a file
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

// ACEKind is what an access control entry does.
type ACEKind int

const (
	// ACEAllow grants Mask (ACCESS_ALLOWED_ACE, ACCESS_ALLOWED_CALLBACK_ACE).
	ACEAllow ACEKind = iota
	// ACEDeny denies Mask (the ACCESS_DENIED_ACE types).
	ACEDeny
	// ACEOther is a type the agent does not read (object ACEs, which
	// files do not use): it may grant Mask to anyone.
	ACEOther
)

// ACE is an access control entry of a DACL.
type ACE struct {
	Kind ACEKind
	// InheritOnly entries (INHERIT_ONLY_ACE) apply to children made
	// later, not to the object.
	InheritOnly bool
	Mask        uint32
	SID         string // as S-1-5-32-544
}

// FileSecurity is a file's or a directory's owner and DACL.
type FileSecurity struct {
	Dir   bool
	Owner string // SID
	// NullDACL is a descriptor without a DACL, which gives everyone full
	// control (not an empty DACL, which gives no one anything).
	NullDACL bool
	DACL     []ACE
}

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

func sidName(sid string) string {
	if n, ok := sidNames[sid]; ok {
		return n + " (" + sid + ")"
	}
	return sid
}

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
