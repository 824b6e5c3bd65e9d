package winacl

import (
	"strings"
	"testing"
)

// TestCheckPrivate decides on owners and DACLs as Windows and Wine give
// them (R-SEC): a file holding a secret, as the broker's admin.token, may
// be read by its owner, the broker's account, SYSTEM and Administrators
// only, as 0600 on Unix; the refusal names who else may and the icacls
// command that fixes it.
func TestCheckPrivate(t *testing.T) {
	const (
		fa       = 0x1F01FF // FILE_ALL_ACCESS (icacls F)
		modify   = 0x1301BF // icacls M: read, write, delete
		rx       = 0x1200A9 // icacls RX
		read     = 0x120089 // icacls R
		write    = 0x100116 // icacls W: write data, append, attributes and EA, no reading
		addFiles = 0x116    // FILE_ADD_FILE, FILE_ADD_SUBDIRECTORY, write EA and attributes
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
	// private is what CreatePrivateFile gives a file (PrivateSDDL).
	private := []ACE{allow(broker, fa), allow(SIDSystem, fa), allow(SIDAdministrators, fa)}
	admins := func(more ...ACE) []ACE {
		return append([]ACE{allow(SIDSystem, fa), allow(SIDAdministrators, fa), allow(broker, fa)}, more...)
	}
	const fix = `run icacls "C:\ProgramData\vdibroker\admin.token" /inheritance:r`
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
			[]string{"lets Users (S-1-5-32-545) read it (FILE_READ_DATA)",
				fix + ` /remove:g *S-1-5-32-545 /grant:r *` + broker + `:F *S-1-5-18:F *S-1-5-32-544:F`}},
		// An owner may grant itself reading: a broad group as owner is
		// refused, however private the DACL.
		{"owned by Users", FileSecurity{Owner: users, DACL: private}, broker,
			[]string{"is owned by Users (S-1-5-32-545), whose every member may read it", `/setowner *` + broker}},
		{"owned by Everyone", FileSecurity{Owner: everyone, DACL: private}, broker, []string{"is owned by Everyone (S-1-1-0)"}},
		// Domain Users (RID 513) holds every account of its domain.
		{"owned by Domain Users", FileSecurity{Owner: "S-1-5-21-1004336348-1177238915-682003330-513", DACL: private}, broker,
			[]string{"is owned by S-1-5-21-1004336348-1177238915-682003330-513, whose every member may read it"}},
		// A user whose RID ends in 513 is no group.
		{"owned by account 1513", FileSecurity{Owner: "S-1-5-21-1004336348-1177238915-682003330-1513", DACL: private}, broker, nil},
		// A user profile's folder: the user, SYSTEM and Administrators.
		{"in the broker account's profile", FileSecurity{Owner: broker, DACL: admins()}, broker, nil},
		{"read by another user", FileSecurity{Owner: broker, DACL: admins(allow(alice, read))}, broker,
			[]string{"lets " + alice + " read it", "/remove:g *" + alice + " "}},
		{"each one named once, their rights together", FileSecurity{Owner: broker, DACL: admins(allow(users, read),
			allow(everyone, GenericRead), allow(users, GenericAll))}, broker,
			[]string{"lets Users (S-1-5-32-545), Everyone (S-1-1-0) read it (FILE_READ_DATA, GENERIC_READ, GENERIC_ALL)",
				"/remove:g *S-1-5-32-545 *S-1-1-0 /grant:r"}},

		// Owners and the broker's account may read what they own or run.
		{"owned by another account than the broker's", FileSecurity{Owner: alice, DACL: []ACE{allow(alice, fa),
			allow(SIDSystem, fa)}}, broker, nil},
		{"broker's account unknown", FileSecurity{Owner: alice, DACL: admins()}, "", []string{"lets " + broker}},
		{"broker's account unknown, owner's own", FileSecurity{Owner: broker, DACL: []ACE{allow(broker, fa)}}, "", nil},
		{"no owner, an entry without a SID", FileSecurity{DACL: []ACE{allow("", fa)}}, "", []string{"lets  read it"}},
		{"the fix grants owner and broker", FileSecurity{Owner: alice, NullDACL: true}, broker,
			[]string{"/grant:r *" + alice + ":F *" + broker + ":F *S-1-5-18:F *S-1-5-32-544:F"}},

		// No DACL: everyone may do anything; an empty one grants nothing.
		{"NULL DACL", FileSecurity{Owner: broker, NullDACL: true}, broker,
			[]string{"has no DACL, which lets everyone read it", fix + " /grant:r *" + broker + ":F *S-1-5-18:F *S-1-5-32-544:F"}},
		{"empty DACL", FileSecurity{Owner: broker}, broker, nil},

		// The rights that read, or grant reading.
		{"FILE_ALL_ACCESS", FileSecurity{Owner: broker, DACL: admins(allow(authn, fa))}, broker, []string{"Authenticated Users (S-1-5-11)", "FILE_READ_DATA, WRITE_DAC, WRITE_OWNER"}},
		{"modify", FileSecurity{Owner: broker, DACL: admins(allow(users, modify))}, broker, []string{"(FILE_READ_DATA)"}},
		{"FILE_READ_DATA alone", FileSecurity{Owner: broker, DACL: admins(allow(users, FileReadData))}, broker, []string{"FILE_READ_DATA"}},
		{"GENERIC_READ", FileSecurity{Owner: broker, DACL: admins(allow(everyone, GenericRead))}, broker, []string{"Everyone (S-1-1-0) read it (GENERIC_READ)"}},
		{"GENERIC_ALL", FileSecurity{Owner: broker, DACL: admins(allow(users, GenericAll))}, broker, []string{"(GENERIC_ALL)"}},
		{"WRITE_DAC: grants itself reading", FileSecurity{Owner: broker, DACL: admins(allow(users, RightWriteDAC))}, broker, []string{"(WRITE_DAC)"}},
		{"WRITE_OWNER: takes it", FileSecurity{Owner: broker, DACL: admins(allow(users, RightWriteOwner))}, broker, []string{"(WRITE_OWNER)"}},
		{"write without reading", FileSecurity{Owner: broker, DACL: admins(allow(users, write))}, broker, nil},
		{"add files, attributes", FileSecurity{Owner: broker, DACL: admins(allow(users, addFiles|0x80 /* read attributes */))}, broker, nil},

		// Entries that grant no one else reading the file.
		{"inherit-only entry", FileSecurity{Owner: broker, DACL: admins(inheritOnly(users, fa))}, broker, nil},
		{"CREATOR OWNER and OWNER RIGHTS", FileSecurity{Owner: broker, DACL: admins(allow(SIDCreatorOwner, fa),
			allow(SIDOwnerRights, fa))}, broker, nil},
		{"deny only", FileSecurity{Owner: broker, DACL: admins(deny(everyone, fa))}, broker, nil},
		// A deny is not weighed against an allow, whatever their order.
		{"deny before allow", FileSecurity{Owner: broker, DACL: append([]ACE{deny(users, fa)}, admins(allow(users, read))...)}, broker, []string{"Users"}},
		{"entry not read, reading", FileSecurity{Owner: broker, DACL: admins(ACE{Kind: ACEOther, Mask: rx})}, broker,
			[]string{"an access entry vdibroker does not read that grants FILE_READ_DATA", fix}},
		{"entry not read, writing", FileSecurity{Owner: broker, DACL: admins(ACE{Kind: ACEOther, Mask: write})}, broker, nil},

		// As Wine 8 gives them, from the Unix owner and mode: os.OpenFile
		// makes 0644 (Everyone RX); CreatePrivateFile 0750 (the group's
		// bits are not in the DACL).
		{"Wine: 0644 file", FileSecurity{Owner: wineUser, DACL: []ACE{allow(SIDSystem, fa), allow(wineUser, fa),
			allow(everyone, rx)}}, wineUser, []string{"Everyone"}},
		{"Wine: made by CreatePrivateFile", FileSecurity{Owner: wineUser, DACL: []ACE{allow(SIDSystem, fa), allow(wineUser, fa)}}, wineUser, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckPrivate(`C:\ProgramData\vdibroker\admin.token`, tt.s, tt.self)
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
