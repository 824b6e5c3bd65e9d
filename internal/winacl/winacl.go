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
	FileExecute     = 0x20       // FILE_EXECUTE; FILE_TRAVERSE on a directory
	FileDeleteChild = 0x40       // FILE_DELETE_CHILD: delete or rename any entry of a directory
	RightDelete     = 0x10000    // DELETE: delete or rename the object itself
	RightWriteDAC   = 0x40000    // WRITE_DAC: grant oneself anything
	RightWriteOwner = 0x80000    // WRITE_OWNER: take it, then grant oneself anything
	GenericAll      = 0x10000000 // GENERIC_ALL: FILE_ALL_ACCESS
	GenericExecute  = 0x20000000 // GENERIC_EXECUTE: FILE_GENERIC_EXECUTE
	GenericWrite    = 0x40000000 // GENERIC_WRITE: FILE_GENERIC_WRITE
	GenericRead     = 0x80000000 // GENERIC_READ: FILE_GENERIC_READ
)

// What the generic rights mean on files and directories (winnt.h, the
// file object's GENERIC_MAPPING).
const (
	fileGenericRead    = 0x120089 // READ_CONTROL, SYNCHRONIZE, FILE_READ_DATA, FILE_READ_ATTRIBUTES, FILE_READ_EA
	fileGenericWrite   = 0x120116 // READ_CONTROL, SYNCHRONIZE, FILE_WRITE_DATA, FILE_APPEND_DATA, FILE_WRITE_ATTRIBUTES, FILE_WRITE_EA
	fileGenericExecute = 0x1200A0 // READ_CONTROL, SYNCHRONIZE, FILE_EXECUTE, FILE_READ_ATTRIBUTES
	fileAllAccess      = 0x1F01FF // FILE_ALL_ACCESS
)

// FileRights is mask with its generic rights replaced by the file rights
// they stand for, as Windows maps them when it checks an access (an
// entry's GENERIC_READ grants FILE_READ_DATA).
func FileRights(mask uint32) uint32 {
	for _, g := range []struct{ generic, rights uint32 }{
		{GenericRead, fileGenericRead}, {GenericWrite, fileGenericWrite},
		{GenericExecute, fileGenericExecute}, {GenericAll, fileAllAccess},
	} {
		if mask&g.generic != 0 {
			mask = mask&^g.generic | g.rights
		}
	}
	return mask
}

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
	// ObjectInherit entries of a directory (OBJECT_INHERIT_ACE, icacls
	// (OI)) are given to the files made in it.
	ObjectInherit bool
	Mask          uint32
	SID           string // as S-1-5-32-544
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

// readRights are the rights on a file (generic ones mapped: FileRights)
// that let their holder read what it holds:
//   - FILE_READ_DATA (in icacls R, RX, M and F);
//   - FILE_EXECUTE: a server lets a client read a file it may only
//     execute (MS-CIFS 2.2.4.11.1, SMB_FLAGS2_READ_IF_EXECUTE: paging
//     in a program from a share), and the memory manager maps one for
//     execution, which x86 pages can read;
//   - WRITE_DAC and WRITE_OWNER, with which it grants itself the others.
//
// READ_CONTROL (the security descriptor), FILE_READ_ATTRIBUTES and
// FILE_READ_EA (times, size, attributes, extended attributes) read about
// the file, not what it holds.
const readRights = FileReadData | FileExecute | RightWriteDAC | RightWriteOwner

// dirRights are the rights on a directory itself that let their holder
// have the files later made in it read: FILE_ADD_FILE and
// FILE_DELETE_CHILD (make a file of a name the broker will open, as
// SQLite opens an existing -wal, with a DACL of one's own), WRITE_DAC and
// WRITE_OWNER (change what the files made in it inherit). Listing its
// names and traversing it read no secret.
const dirRights = FileWriteData | FileDeleteChild | RightWriteDAC | RightWriteOwner

// PrivateOwner reports whether a file holding a secret of the account of
// SID self ("" when unknown) may be owned by owner: self, SYSTEM or
// Administrators. Any other owner may grant itself reading, whatever the
// DACL says, as an owner may always change it.
func PrivateOwner(owner, self string) bool {
	return owner == SIDSystem || owner == SIDAdministrators || (owner != "" && owner == self)
}

// CheckPrivate reports why the file or directory name, with security s,
// holding a secret, may be read by others than the account of SID self
// (the process's: "" when unknown), SYSTEM and Administrators (R-SEC), as
// the modes 0600 and 0700 do on Unix:
//   - its owner is another (PrivateOwner);
//   - it has no DACL (a NULL DACL, full control for everyone);
//   - an allow entry grants anyone else a right to read it (readRights,
//     generic rights mapped), or, on a directory, to read the files
//     made in it (an entry they inherit, ObjectInherit) or to put files
//     in it (dirRights);
//   - an entry of a type not read here grants one.
//
// Deny entries are not weighed against allow entries; inherit-only
// entries (but a directory's that its files inherit), CREATOR OWNER's and
// OWNER RIGHTS' grant no one else anything. The error says the icacls
// command that leaves it to self, SYSTEM and Administrators.
func CheckPrivate(name string, s FileSecurity, self string) error {
	if !PrivateOwner(s.Owner, self) {
		// An owner may always grant itself reading.
		to := cmp.Or(self, SIDAdministrators)
		fix := fmt.Sprintf(`run icacls "%s" /setowner *%s (or, as an administrator, takeown /F "%s" /A), then check its access again`, name, to, name)
		switch {
		case s.Owner == "":
			return fmt.Errorf("%s has no owner: %s", name, fix)
		case isBroadGroup(s.Owner):
			return fmt.Errorf("%s is owned by %s, whose every member may read it: %s", name, SIDName(s.Owner), fix)
		}
		return fmt.Errorf("%s is owned by %s, not by this account, SYSTEM or Administrators: its owner may read it, whatever its access entries say; %s",
			name, SIDName(s.Owner), fix)
	}
	if s.NullDACL {
		return fmt.Errorf("%s has no DACL, which lets everyone read it: %s", name, icaclsFix(name, s.Dir, self, nil))
	}
	var others []string // SIDs, each once
	var otherRights uint32
	for _, e := range s.DACL {
		if e.Kind == ACEDeny {
			continue
		}
		granted := grantedReading(e, s.Dir)
		if granted == 0 {
			continue
		}
		if e.Kind == ACEOther {
			return fmt.Errorf("%s has an access entry vdibroker does not read that grants %s: %s", name,
				rightNames(granted, s.Dir), icaclsFix(name, s.Dir, self, nil))
		}
		if mayRead(e.SID, self) {
			continue
		}
		otherRights |= granted
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
	what := "read it"
	if s.Dir {
		what = "read or replace the files made in it"
	}
	return fmt.Errorf("%s lets %s %s (%s): %s", name, strings.Join(named, ", "), what, rightNames(otherRights, s.Dir),
		icaclsFix(name, s.Dir, self, others))
}

// grantedReading is what of e's mask lets its holder read a file of
// (dir false) or made in (dir true) the object e is an entry of: as
// given, generic rights and all, with FILE_ALL_ACCESS and the like
// narrowed to the bits that read (rightNames names them).
func grantedReading(e ACE, dir bool) uint32 {
	var mask uint32
	if !e.InheritOnly {
		rights := uint32(readRights)
		if dir {
			rights = dirRights
		}
		mask |= given(e.Mask, rights)
	}
	if dir && e.ObjectInherit {
		mask |= given(e.Mask, readRights)
	}
	return mask
}

// given is what of mask grants one of rights, once generic rights are
// mapped (FileRights): the generic rights that do, and the specific
// rights of rights mask holds.
func given(mask, rights uint32) uint32 {
	var out uint32
	for _, g := range []uint32{GenericRead, GenericWrite, GenericExecute, GenericAll} {
		if mask&g != 0 && FileRights(g)&rights != 0 {
			out |= g
		}
	}
	return out | mask&rights
}

// mayRead reports whether the account or group of SID sid may read a
// file the account self keeps its secret in: self, SYSTEM,
// Administrators, and CREATOR OWNER and OWNER RIGHTS, which stand for the
// owner (PrivateOwner's).
func mayRead(sid, self string) bool {
	switch sid {
	case SIDSystem, SIDAdministrators, SIDCreatorOwner, SIDOwnerRights:
		return true
	}
	return sid != "" && sid == self
}

// icaclsFix is the command that makes name self's, SYSTEM's and
// Administrators' alone: no inherited entries, remove's entries gone,
// full control for the three (a directory's inherited by the files made
// in it, (OI)(CI), and given to those it holds, /reset). SIDs, not
// names, which Windows translates. It runs as written in cmd.exe and in
// PowerShell alike.
func icaclsFix(name string, dir bool, self string, remove []string) string {
	cmd := `run icacls "` + name + `" /inheritance:r`
	if len(remove) > 0 {
		cmd += " /remove:g"
		for _, sid := range remove {
			cmd += " *" + sid
		}
	}
	cmd += " /grant:r"
	var granted []string
	for _, sid := range []string{self, SIDSystem, SIDAdministrators} {
		if sid == "" || contains(granted, sid) {
			continue
		}
		granted = append(granted, sid)
		if dir {
			// Quoted: PowerShell, the shell a Windows Server console
			// opens, takes (OI) unquoted for a command to run.
			cmd += ` "*` + sid + `:(OI)(CI)F"`
		} else {
			cmd += " *" + sid + ":F"
		}
	}
	if dir {
		cmd += `, then icacls "` + strings.TrimRight(name, `\`) + `\*" /reset /T`
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

// rightNames names the rights of mask, as given or narrowed by
// grantedReading: a directory's FILE_WRITE_DATA is FILE_ADD_FILE.
func rightNames(mask uint32, dir bool) string {
	writeData := "FILE_WRITE_DATA"
	if dir {
		writeData = "FILE_ADD_FILE"
	}
	var names []string
	for _, r := range []struct {
		bit  uint32
		name string
	}{
		{FileReadData, "FILE_READ_DATA"}, {FileExecute, "FILE_EXECUTE"}, {FileWriteData, writeData},
		{FileDeleteChild, "FILE_DELETE_CHILD"}, {GenericRead, "GENERIC_READ"}, {GenericExecute, "GENERIC_EXECUTE"},
		{GenericWrite, "GENERIC_WRITE"}, {GenericAll, "GENERIC_ALL"}, {RightWriteDAC, "WRITE_DAC"}, {RightWriteOwner, "WRITE_OWNER"},
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
// accepts. The owner is the token's default, the account that made it
// or, for an elevated administrator, Administrators.
func PrivateSDDL(self string) string {
	return "D:P(A;;FA;;;" + self + ")(A;;FA;;;SY)(A;;FA;;;BA)"
}

// PrivateDirSDDL is the security descriptor a directory of secrets (the
// broker's data dir) is made with: PrivateSDDL's entries, inherited by
// the files (OI) and directories (CI) made in it, so that the files a
// library makes there (SQLite's -wal and -shm) are as private as those
// made with PrivateSDDL.
func PrivateDirSDDL(self string) string {
	return "D:P(A;OICI;FA;;;" + self + ")(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)"
}
