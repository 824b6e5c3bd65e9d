// Package winacl reads what a Windows file's security descriptor says,
// its owner and DACL, into FileSecurity, and decides on it: whether a
// file holding a secret may be read by anyone else (CheckPrivate). The
// decisions are here without a build tag, so that their tests run on
// every system; winacl_windows.go reads and writes the descriptors.
package winacl

import (
	"cmp"
	"fmt"
	"strings"
)

// Well-known SIDs (MS-DTYP 2.4.2.4).
const (
	SIDSystem           = "S-1-5-18"
	SIDAdministrators   = "S-1-5-32-544"
	SIDTrustedInstaller = "S-1-5-80-956008885-3418522649-1831038044-1853292631-2271478464"
	// SIDCreatorOwner in an ACE grants no one access to the object
	// itself: it is replaced by the creator when a child inherits it, and
	// the child's creator is its owner.
	SIDCreatorOwner = "S-1-3-0"
	// SIDOwnerRights grants the object's owner.
	SIDOwnerRights = "S-1-3-4"
)

// broadGroups are the well-known groups that hold every account, or any
// signed-in one: Everyone, Authenticated Users, Users, INTERACTIVE,
// Guests, ANONYMOUS LOGON. A secret file owned by one of them is refused
// (CheckPrivate).
var broadGroups = map[string]bool{
	"S-1-1-0": true, "S-1-5-11": true, "S-1-5-32-545": true, "S-1-5-4": true, "S-1-5-32-546": true, "S-1-5-7": true,
}

// isBroadGroup tells whether sid is one of broadGroups or a domain's
// Domain Users (RID 513) or Domain Guests (RID 514), which hold every
// account of that domain: S-1-5-21-<domain>-513.
func isBroadGroup(sid string) bool {
	if broadGroups[sid] {
		return true
	}
	domain, ok := strings.CutPrefix(sid, "S-1-5-21-")
	return ok && strings.Count(domain, "-") == 3 && (strings.HasSuffix(domain, "-513") || strings.HasSuffix(domain, "-514"))
}

// sidNames are the names messages give the SIDs they name.
var sidNames = map[string]string{
	SIDSystem: "SYSTEM", SIDAdministrators: "Administrators", SIDTrustedInstaller: "TrustedInstaller",
	"S-1-1-0": "Everyone", "S-1-5-11": "Authenticated Users", "S-1-5-32-545": "Users", "S-1-5-4": "INTERACTIVE",
	"S-1-5-32-546": "Guests", "S-1-5-7": "ANONYMOUS LOGON",
}

// SIDName is sid with its name, as "Users (S-1-5-32-545)", for the
// well-known SIDs; sid itself otherwise.
func SIDName(sid string) string {
	if n, ok := sidNames[sid]; ok {
		return n + " (" + sid + ")"
	}
	return sid
}

// Access rights (winnt.h).
const (
	FileReadData    = 0x1        // FILE_READ_DATA; FILE_LIST_DIRECTORY on a directory
	FileWriteData   = 0x2        // FILE_WRITE_DATA; FILE_ADD_FILE on a directory
	FileAppendData  = 0x4        // FILE_APPEND_DATA; FILE_ADD_SUBDIRECTORY on a directory
	FileDeleteChild = 0x40       // FILE_DELETE_CHILD: delete or rename any entry of a directory
	RightDelete     = 0x10000    // DELETE: delete or rename the object itself
	RightWriteDAC   = 0x40000    // WRITE_DAC: grant oneself anything
	RightWriteOwner = 0x80000    // WRITE_OWNER: take it, then grant oneself anything
	GenericAll      = 0x10000000 // GENERIC_ALL
	GenericWrite    = 0x40000000 // GENERIC_WRITE: FILE_WRITE_DATA and FILE_APPEND_DATA on a file
	GenericRead     = 0x80000000 // GENERIC_READ: FILE_READ_DATA on a file
)

// ACEKind is what an access control entry does.
type ACEKind int

const (
	// ACEAllow grants Mask (ACCESS_ALLOWED_ACE, ACCESS_ALLOWED_CALLBACK_ACE).
	ACEAllow ACEKind = iota
	// ACEDeny denies Mask (the ACCESS_DENIED_ACE types).
	ACEDeny
	// ACEOther is a type not read here (object ACEs, which files do not
	// use): it may grant Mask to anyone.
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

// readRights are the rights on a file that let their holder read it:
// FILE_READ_DATA (in FILE_ALL_ACCESS and icacls R, RX, M and F),
// GENERIC_READ, GENERIC_ALL, and WRITE_DAC and WRITE_OWNER, with which
// it grants itself the others.
const readRights = FileReadData | GenericRead | GenericAll | RightWriteDAC | RightWriteOwner

// CheckPrivate reports why the file name, with security s, holding a
// secret, may be read by others than the account of SID self (the
// process's: "" when unknown), the file's owner, SYSTEM and
// Administrators (R-SEC), as the mode check 0600 does on Unix: it has no
// DACL (a NULL DACL, full control for everyone), an allow entry grants
// anyone else a right to read it (readRights), or an entry of a type not
// read here grants one. Deny entries are not weighed against allow
// entries, and inherit-only entries, CREATOR OWNER's and OWNER RIGHTS'
// grant no one else anything on the file. The error says the icacls
// command that leaves the file to the owner, self, SYSTEM and
// Administrators.
func CheckPrivate(name string, s FileSecurity, self string) error {
	if isBroadGroup(s.Owner) {
		// An owner may always grant itself reading: a group every
		// account is in owns a file any of them may read.
		return fmt.Errorf("%s is owned by %s, whose every member may read it: run icacls \"%s\" /setowner *%s, then check it again",
			name, SIDName(s.Owner), name, cmp.Or(self, SIDAdministrators))
	}
	if s.NullDACL {
		return fmt.Errorf("%s has no DACL, which lets everyone read it: %s", name, icaclsFix(name, s.Owner, self, nil))
	}
	var others []string // SIDs, each once
	var otherRights uint32
	for _, e := range s.DACL {
		if e.Kind == ACEDeny || e.InheritOnly || e.Mask&readRights == 0 {
			continue
		}
		if e.Kind == ACEOther {
			return fmt.Errorf("%s has an access entry vdibroker does not read that grants %s: %s", name,
				rightNames(e.Mask&readRights), icaclsFix(name, s.Owner, self, nil))
		}
		if mayRead(e.SID, s.Owner, self) {
			continue
		}
		otherRights |= e.Mask & readRights
		if !contains(others, e.SID) {
			others = append(others, e.SID)
		}
	}
	if len(others) == 0 {
		return nil
	}
	named := make([]string, len(others))
	for i, sid := range others {
		named[i] = SIDName(sid)
	}
	return fmt.Errorf("%s lets %s read it (%s): %s", name, strings.Join(named, ", "), rightNames(otherRights),
		icaclsFix(name, s.Owner, self, others))
}

// mayRead reports whether the account or group of SID sid may read a
// file of owner that the account self keeps its secret in.
func mayRead(sid, owner, self string) bool {
	switch sid {
	case SIDSystem, SIDAdministrators, SIDCreatorOwner, SIDOwnerRights:
		return true
	}
	return sid != "" && (sid == owner || sid == self)
}

// icaclsFix is the command that makes name the owner's, self's,
// SYSTEM's and Administrators' alone: no inherited entries, remove's
// entries gone, full control for the four. SIDs, not names, which
// Windows translates.
func icaclsFix(name, owner, self string, remove []string) string {
	cmd := `run icacls "` + name + `" /inheritance:r`
	if len(remove) > 0 {
		cmd += " /remove:g"
		for _, sid := range remove {
			cmd += " *" + sid
		}
	}
	cmd += " /grant:r"
	var granted []string
	for _, sid := range []string{owner, self, SIDSystem, SIDAdministrators} {
		if sid != "" && !contains(granted, sid) {
			granted = append(granted, sid)
			cmd += " *" + sid + ":F"
		}
	}
	return cmd
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// rightNames names the rights of mask that readRights holds.
func rightNames(mask uint32) string {
	var names []string
	for _, r := range []struct {
		bit  uint32
		name string
	}{
		{FileReadData, "FILE_READ_DATA"}, {GenericRead, "GENERIC_READ"}, {GenericAll, "GENERIC_ALL"},
		{RightWriteDAC, "WRITE_DAC"}, {RightWriteOwner, "WRITE_OWNER"},
	} {
		if mask&r.bit != 0 {
			names = append(names, r.name)
		}
	}
	return strings.Join(names, ", ")
}

// PrivateSDDL is the security descriptor a file holding a secret is made
// with on Windows: a protected DACL (D:P, nothing inherited from its
// directory: C:\ProgramData's lets Users read) granting full control to
// the account of SID self, SYSTEM and Administrators, what CheckPrivate
// accepts. The owner is the token's default, the account that made it.
func PrivateSDDL(self string) string {
	return "D:P(A;;FA;;;" + self + ")(A;;FA;;;SY)(A;;FA;;;BA)"
}
