package winacl

import (
	"strings"
	"testing"
)

// TestCheckPrivate decides on owners and DACLs as Windows and Wine give
// them (R-SEC): a file holding a secret, as the broker's admin.token, may
// be read by the broker's account, SYSTEM and Administrators only, as 0600
// on Unix, and owned by one of them; a directory of them, the data dir,
// gives the files made in it to those only, as 0700; the refusal names
// who else may and the icacls command that fixes it.
func TestCheckPrivate(t *testing.T) {
	const (
		fa       = 0x1F01FF // FILE_ALL_ACCESS (icacls F)
		modify   = 0x1301BF // icacls M: read, write, delete
		rx       = 0x1200A9 // icacls RX
		read     = 0x120089 // icacls R
		write    = 0x100116 // icacls W: write data, append, attributes and EA, no reading
		addFiles = 0x116    // FILE_ADD_FILE, FILE_ADD_SUBDIRECTORY, write EA and attributes
		execute  = 0x1200A0 // icacls X: FILE_EXECUTE, read attributes, READ_CONTROL, SYNCHRONIZE
		list     = 0x1200A1 // a directory's "list folder contents", this folder only: list, traverse
		about    = 0x12008C // READ_CONTROL, SYNCHRONIZE, read attributes and EA: about the file, not in it
		users    = "S-1-5-32-545"
		authn    = "S-1-5-11"
		everyone = "S-1-1-0"
		broker   = "S-1-5-21-1004336348-1177238915-682003330-1104" // the account serve runs as
		alice    = "S-1-5-21-1004336348-1177238915-682003330-1105"
		wineUser = "S-1-5-21-0-0-0-1000" // the account Wine runs everything as
	)
	allow := func(sid string, mask uint32) ACE { return ACE{Kind: ACEAllow, SID: sid, Mask: mask} }
	deny := func(sid string, mask uint32) ACE { return ACE{Kind: ACEDeny, SID: sid, Mask: mask} }
	inheritOnly := func(sid string, mask uint32) ACE {
		return ACE{Kind: ACEAllow, SID: sid, Mask: mask, InheritOnly: true}
	}
	// A directory's entries: files (OI) and folders made in it inherit
	// them; a folder's only (CI).
	oi := func(sid string, mask uint32) ACE {
		return ACE{Kind: ACEAllow, SID: sid, Mask: mask, ObjectInherit: true}
	}
	oiOnly := func(sid string, mask uint32) ACE {
		return ACE{Kind: ACEAllow, SID: sid, Mask: mask, ObjectInherit: true, InheritOnly: true}
	}
	// privateDir is what MkdirPrivate gives the data dir (PrivateDirSDDL).
	privateDir := []ACE{oi(broker, fa), oi(SIDSystem, fa), oi(SIDAdministrators, fa)}
	dir := func(more ...ACE) FileSecurity {
		return FileSecurity{Dir: true, Owner: broker, DACL: append(append([]ACE{}, privateDir...), more...)}
	}
	// private is what CreatePrivateFile gives a file (PrivateSDDL).
	private := []ACE{allow(broker, fa), allow(SIDSystem, fa), allow(SIDAdministrators, fa)}
	admins := func(more ...ACE) []ACE {
		return append([]ACE{allow(SIDSystem, fa), allow(SIDAdministrators, fa), allow(broker, fa)}, more...)
	}
	const (
		fix    = `run icacls "C:\ProgramData\vdibroker\admin.token" /inheritance:r`
		dirFix = `run icacls "C:\ProgramData\vdibroker" /inheritance:r`
		// The owner's fix, after ": ".
		setOwner = `run icacls "C:\ProgramData\vdibroker\admin.token" /setowner *` + broker +
			` (or, as an administrator, takeown /F "C:\ProgramData\vdibroker\admin.token" /A), then check its access again`
	)
	tests := []struct {
		name string
		s    FileSecurity
		self string
		want []string // in the refusal; none: accepted
	}{
		{"made by serve", FileSecurity{Owner: broker, DACL: private}, broker, nil},
		{"made by serve as LocalSystem", FileSecurity{Owner: SIDAdministrators, DACL: []ACE{allow(SIDSystem, fa),
			allow(SIDSystem, fa), allow(SIDAdministrators, fa)}}, SIDSystem, nil},
		// A file made in C:\ProgramData\vdibroker, inheriting
		// ProgramData's DACL (Users: RX, CREATOR OWNER: F).
		{"inherited from C:\\ProgramData", FileSecurity{Owner: broker, DACL: admins(allow(users, rx))}, broker,
			[]string{"lets Users (S-1-5-32-545) read it (FILE_READ_DATA, FILE_EXECUTE)",
				fix + ` /remove:g *S-1-5-32-545 /grant:r *` + broker + `:F *S-1-5-18:F *S-1-5-32-544:F`}},
		// An owner may grant itself reading: a broad group as owner is
		// refused, however private the DACL.
		{"owned by Users", FileSecurity{Owner: users, DACL: private}, broker,
			[]string{"is owned by Users (S-1-5-32-545), whose every member may read it: " + setOwner}},
		{"owned by Everyone", FileSecurity{Owner: everyone, DACL: private}, broker, []string{"is owned by Everyone (S-1-1-0)"}},
		// Domain Users (RID 513) holds every account of its domain.
		{"owned by Domain Users", FileSecurity{Owner: "S-1-5-21-1004336348-1177238915-682003330-513", DACL: private}, broker,
			[]string{"is owned by S-1-5-21-1004336348-1177238915-682003330-513, whose every member may read it"}},
		// A user whose RID ends in 513 is no group, but another account.
		{"owned by account 1513", FileSecurity{Owner: "S-1-5-21-1004336348-1177238915-682003330-1513", DACL: private}, broker,
			[]string{"is owned by S-1-5-21-1004336348-1177238915-682003330-1513, not by this account, SYSTEM or Administrators: its owner may read it"}},
		// A user profile's folder: the user, SYSTEM and Administrators.
		{"in the broker account's profile", FileSecurity{Owner: broker, DACL: admins()}, broker, nil},
		{"read by another user", FileSecurity{Owner: broker, DACL: admins(allow(alice, read))}, broker,
			[]string{"lets " + alice + " read it", "/remove:g *" + alice + " "}},
		{"each one named once, their rights together", FileSecurity{Owner: broker, DACL: admins(allow(users, read),
			allow(everyone, GenericRead), allow(users, GenericAll))}, broker,
			[]string{"lets Users (S-1-5-32-545), Everyone (S-1-1-0) read it (FILE_READ_DATA, GENERIC_READ, GENERIC_ALL)",
				"/remove:g *S-1-5-32-545 *S-1-1-0 /grant:r"}},

		// The owner may change the DACL: the broker's account, SYSTEM or
		// Administrators only, however private the DACL.
		{"owned by Administrators", FileSecurity{Owner: SIDAdministrators, DACL: private}, broker, nil},
		{"owned by SYSTEM", FileSecurity{Owner: SIDSystem, DACL: private}, broker, nil},
		{"owned by another account than the broker's", FileSecurity{Owner: alice, DACL: []ACE{allow(SIDSystem, fa),
			allow(SIDAdministrators, fa)}}, broker,
			[]string{"is owned by " + alice + ", not by this account, SYSTEM or Administrators: its owner may read it, whatever its access entries say; " + setOwner}},
		{"owned by TrustedInstaller", FileSecurity{Owner: SIDTrustedInstaller, DACL: private}, broker,
			[]string{"is owned by TrustedInstaller (" + SIDTrustedInstaller + "), not by this account"}},
		{"no owner", FileSecurity{DACL: private}, broker, []string{"has no owner: " + setOwner}},
		// The broker's account unknown: SYSTEM and Administrators only.
		{"broker's account unknown", FileSecurity{Owner: SIDAdministrators, DACL: admins()}, "", []string{"lets " + broker}},
		{"broker's account unknown, its owner", FileSecurity{Owner: broker, DACL: []ACE{allow(broker, fa)}}, "",
			[]string{"is owned by " + broker + ", not by this account", "/setowner *S-1-5-32-544 "}},
		{"an entry without a SID", FileSecurity{Owner: broker, DACL: []ACE{allow("", fa)}}, broker, []string{"lets  read it"}},
		{"the fix grants the broker, SYSTEM and Administrators", FileSecurity{Owner: SIDAdministrators, NullDACL: true}, broker,
			[]string{"/grant:r *" + broker + ":F *S-1-5-18:F *S-1-5-32-544:F"}},

		// No DACL: everyone may do anything; an empty one grants nothing.
		{"NULL DACL", FileSecurity{Owner: broker, NullDACL: true}, broker,
			[]string{"has no DACL, which lets everyone read it", fix + " /grant:r *" + broker + ":F *S-1-5-18:F *S-1-5-32-544:F"}},
		{"empty DACL", FileSecurity{Owner: broker}, broker, nil},

		// The rights that read, or grant reading.
		{"FILE_ALL_ACCESS", FileSecurity{Owner: broker, DACL: admins(allow(authn, fa))}, broker, []string{"Authenticated Users (S-1-5-11)", "FILE_READ_DATA, FILE_EXECUTE, WRITE_DAC, WRITE_OWNER"}},
		{"modify", FileSecurity{Owner: broker, DACL: admins(allow(users, modify))}, broker, []string{"(FILE_READ_DATA, FILE_EXECUTE)"}},
		{"FILE_READ_DATA alone", FileSecurity{Owner: broker, DACL: admins(allow(users, FileReadData))}, broker, []string{"FILE_READ_DATA"}},
		{"GENERIC_READ", FileSecurity{Owner: broker, DACL: admins(allow(everyone, GenericRead))}, broker, []string{"Everyone (S-1-1-0) read it (GENERIC_READ)"}},
		{"GENERIC_ALL", FileSecurity{Owner: broker, DACL: admins(allow(users, GenericAll))}, broker, []string{"(GENERIC_ALL)"}},
		{"WRITE_DAC: grants itself reading", FileSecurity{Owner: broker, DACL: admins(allow(users, RightWriteDAC))}, broker, []string{"(WRITE_DAC)"}},
		{"WRITE_OWNER: takes it", FileSecurity{Owner: broker, DACL: admins(allow(users, RightWriteOwner))}, broker, []string{"(WRITE_OWNER)"}},
		// Execute only: a server lets a client read what it may execute
		// (MS-CIFS SMB_FLAGS2_READ_IF_EXECUTE), GENERIC_EXECUTE grants it.
		{"FILE_EXECUTE alone (icacls X)", FileSecurity{Owner: broker, DACL: admins(allow(users, execute))}, broker, []string{"(FILE_EXECUTE)"}},
		{"GENERIC_EXECUTE", FileSecurity{Owner: broker, DACL: admins(allow(users, GenericExecute))}, broker, []string{"(GENERIC_EXECUTE)"}},
		{"write without reading", FileSecurity{Owner: broker, DACL: admins(allow(users, write))}, broker, nil},
		{"GENERIC_WRITE: no reading", FileSecurity{Owner: broker, DACL: admins(allow(users, GenericWrite))}, broker, nil},
		{"descriptor, attributes and EA: about it, not in it", FileSecurity{Owner: broker, DACL: admins(allow(users, about))}, broker, nil},
		{"add files, attributes", FileSecurity{Owner: broker, DACL: admins(allow(users, addFiles|0x80 /* read attributes */))}, broker, nil},

		// Entries that grant no one else reading the file.
		{"inherit-only entry", FileSecurity{Owner: broker, DACL: admins(inheritOnly(users, fa))}, broker, nil},
		{"CREATOR OWNER and OWNER RIGHTS", FileSecurity{Owner: broker, DACL: admins(allow(SIDCreatorOwner, fa),
			allow(SIDOwnerRights, fa))}, broker, nil},
		{"deny only", FileSecurity{Owner: broker, DACL: admins(deny(everyone, fa))}, broker, nil},
		// A deny is not weighed against an allow, whatever their order.
		{"deny before allow", FileSecurity{Owner: broker, DACL: append([]ACE{deny(users, fa)}, admins(allow(users, read))...)}, broker, []string{"Users"}},
		{"entry not read, reading", FileSecurity{Owner: broker, DACL: admins(ACE{Kind: ACEOther, Mask: rx})}, broker,
			[]string{"an access entry vdibroker does not read that grants FILE_READ_DATA, FILE_EXECUTE", fix}},
		{"entry not read, writing", FileSecurity{Owner: broker, DACL: admins(ACE{Kind: ACEOther, Mask: write})}, broker, nil},

		// As Wine 8 gives them, from the Unix owner and mode: os.OpenFile
		// makes 0644 (Everyone RX); CreatePrivateFile 0750 (the group's
		// bits are not in the DACL).
		{"Wine: 0644 file", FileSecurity{Owner: wineUser, DACL: []ACE{allow(SIDSystem, fa), allow(wineUser, fa),
			allow(everyone, rx)}}, wineUser, []string{"Everyone"}},
		{"Wine: made by CreatePrivateFile", FileSecurity{Owner: wineUser, DACL: []ACE{allow(SIDSystem, fa), allow(wineUser, fa)}}, wineUser, nil},

		// A directory, the data dir: what the files made in it inherit
		// (OI), and who may put files in it or change its DACL.
		{"dir made by MkdirPrivate", dir(), broker, nil},
		{"dir inheriting C:\\ProgramData's", dir(oi(users, rx), ACE{Kind: ACEAllow, SID: users, Mask: addFiles}, oiOnly(SIDCreatorOwner, GenericAll)), broker,
			[]string{"C:\\ProgramData\\vdibroker lets Users (S-1-5-32-545) read or replace the files made in it (FILE_READ_DATA, FILE_EXECUTE, FILE_ADD_FILE): " +
				dirFix + " /remove:g *S-1-5-32-545 /grant:r \"*" + broker + ":(OI)(CI)F\" \"*S-1-5-18:(OI)(CI)F\" \"*S-1-5-32-544:(OI)(CI)F\", then icacls \"C:\\ProgramData\\vdibroker\\*\" /reset /T"}},
		{"dir: listing it, this folder only", dir(allow(users, list)), broker, nil},
		{"dir: GENERIC_READ on it, not its files", dir(allow(users, GenericRead)), broker, nil},
		{"dir: reading given to its files only", dir(oiOnly(users, read)), broker, []string{"Users (S-1-5-32-545) read or replace", "(FILE_READ_DATA)"}},
		{"dir: GENERIC_READ given to its files", dir(oiOnly(everyone, GenericRead)), broker, []string{"Everyone (S-1-1-0)", "(GENERIC_READ)"}},
		{"dir: reading given to its folders only", dir(inheritOnly(users, fa)), broker, nil},
		{"dir: CREATOR OWNER's, given to its files", dir(oiOnly(SIDCreatorOwner, GenericAll)), broker, nil},
		{"dir: adding files", dir(allow(users, FileWriteData)), broker, []string{"(FILE_ADD_FILE)"}},
		{"dir: deleting its files", dir(allow(users, FileDeleteChild)), broker, []string{"(FILE_DELETE_CHILD)"}},
		{"dir: GENERIC_WRITE", dir(allow(users, GenericWrite)), broker, []string{"(GENERIC_WRITE)"}},
		{"dir: WRITE_DAC", dir(allow(users, RightWriteDAC)), broker, []string{"(WRITE_DAC)"}},
		{"dir: traversing it", dir(allow(everyone, FileExecute)), broker, nil},
		{"dir owned by another account", FileSecurity{Dir: true, Owner: alice, DACL: privateDir}, broker, []string{"is owned by " + alice}},
		{"dir: NULL DACL", FileSecurity{Dir: true, Owner: broker, NullDACL: true}, broker, []string{"has no DACL", ` /grant:r "*` + broker + `:(OI)(CI)F" "*S-1-5-18:(OI)(CI)F"`, "/reset /T"}},
		// As Wine 8 gives them: os.MkdirAll's 0755, MkdirPrivate's 0700.
		{"Wine: 0755 dir", FileSecurity{Dir: true, Owner: wineUser, DACL: []ACE{oi(SIDSystem, fa), oi(wineUser, fa), oi(everyone, rx)}}, wineUser,
			[]string{"lets Everyone (S-1-1-0) read or replace the files made in it (FILE_READ_DATA, FILE_EXECUTE)"}},
		{"Wine: dir made by MkdirPrivate", FileSecurity{Dir: true, Owner: wineUser, DACL: []ACE{oi(SIDSystem, fa), oi(wineUser, fa)}}, wineUser, nil},
		// Day one: a folder made in Explorer under C:\ takes its entries.
		// Windows Server: Users (OI)(CI)(RX), Users (CI)(AD), Users
		// (CI)(WD), CREATOR OWNER (OI)(CI)(IO)(F), owned by the admin
		// who made it; serve runs as her in an elevated console.
		{"dir made under C:\\ on Windows Server", FileSecurity{Dir: true, Owner: broker, DACL: []ACE{oi(SIDSystem, fa), oi(SIDAdministrators, fa),
			oi(users, rx), allow(users, FileAppendData), allow(users, FileWriteData), oiOnly(SIDCreatorOwner, fa)}}, broker,
			[]string{"lets Users (S-1-5-32-545) read or replace the files made in it (FILE_READ_DATA, FILE_EXECUTE, FILE_ADD_FILE)"}},
		// Windows 10 and 11: Authenticated Users (OI)(CI)(M) as well.
		{"dir made under C:\\ on Windows 10", FileSecurity{Dir: true, Owner: broker, DACL: []ACE{oi(SIDAdministrators, fa), oi(SIDSystem, fa),
			oi(users, rx), oi(authn, modify), allow(authn, FileAppendData)}}, broker,
			[]string{"Users (S-1-5-32-545), Authenticated Users (S-1-5-11)", "/remove:g *S-1-5-32-545 *S-1-5-11 /grant:r"}},
		// The same folder, the broker a service as LocalSystem: its owner,
		// the admin, may rewrite its DACL.
		{"dir made under C:\\ by an admin, the broker LocalSystem", FileSecurity{Dir: true, Owner: alice, DACL: privateDir}, SIDSystem,
			[]string{"is owned by " + alice + ", not by this account, SYSTEM or Administrators", "/setowner *S-1-5-18"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := `C:\ProgramData\vdibroker\admin.token`
			if tt.s.Dir {
				name = `C:\ProgramData\vdibroker`
			}
			err := CheckPrivate(name, tt.s, tt.self)
			switch {
			case len(tt.want) == 0 && err != nil:
				t.Errorf("refused: %v", err)
			case len(tt.want) > 0 && err == nil:
				t.Errorf("accepted, want a refusal with %q", tt.want)
			case err != nil:
				for _, w := range tt.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("refusal %q does not say %q", err, w)
					}
				}
			}
		})
	}
}

// TestPrivateSDDL: the DACL serve makes its secret files with is
// protected (nothing inherited) and grants the account, SYSTEM and
// Administrators, no one else (R-SEC).
func TestPrivateSDDL(t *testing.T) {
	const self = "S-1-5-21-1004336348-1177238915-682003330-1104"
	if got, want := PrivateSDDL(self), "D:P(A;;FA;;;"+self+")(A;;FA;;;SY)(A;;FA;;;BA)"; got != want {
		t.Errorf("PrivateSDDL = %q, want %q", got, want)
	}
}

// TestPrivateDirSDDL: the data dir is made with PrivateSDDL's entries,
// inherited by the files and folders made in it, nothing from its parent.
func TestPrivateDirSDDL(t *testing.T) {
	const self = "S-1-5-21-1004336348-1177238915-682003330-1104"
	if got, want := PrivateDirSDDL(self), "D:P(A;OICI;FA;;;"+self+")(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)"; got != want {
		t.Errorf("PrivateDirSDDL = %q, want %q", got, want)
	}
}

// TestFileRights: the generic rights as the file object's GENERIC_MAPPING
// maps them (winnt.h FILE_GENERIC_*), the others kept.
func TestFileRights(t *testing.T) {
	tests := []struct {
		name     string
		mask     uint32
		want     uint32
		readable bool // holds FILE_READ_DATA or FILE_EXECUTE
	}{
		{"GENERIC_READ", GenericRead, 0x120089, true},
		{"GENERIC_WRITE", GenericWrite, 0x120116, false},
		{"GENERIC_EXECUTE", GenericExecute, 0x1200A0, true},
		{"GENERIC_ALL", GenericAll, 0x1F01FF, true},
		{"GENERIC_WRITE and DELETE", GenericWrite | RightDelete, 0x130116, false},
		{"specific rights kept", 0x1301BF, 0x1301BF, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FileRights(tt.mask)
			if got != tt.want {
				t.Errorf("FileRights(%#x) = %#x, want %#x", tt.mask, got, tt.want)
			}
			if r := got&(FileReadData|FileExecute) != 0; r != tt.readable {
				t.Errorf("FileRights(%#x) reads: %v, want %v", tt.mask, r, tt.readable)
			}
		})
	}
}
