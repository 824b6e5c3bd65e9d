package agent

import (
	"strings"
	"testing"
)

// TestCheckWindowsSecurity decides on owners and DACLs as Windows and
// Wine give them (R-SEC): the agent, LocalSystem, trusts a file only when
// no one but SYSTEM, Administrators, TrustedInstaller or its own account
// may change it or replace it through a directory on the way.
func TestCheckWindowsSecurity(t *testing.T) {
	const (
		fa       = 0x1F01FF // FILE_ALL_ACCESS (icacls F)
		modify   = 0x1301BF // icacls M: read, write, delete
		rx       = 0x1200A9 // icacls RX
		addFiles = 0x116    // FILE_ADD_FILE, FILE_ADD_SUBDIRECTORY, write EA and attributes: ProgramData's Users entry
		users    = "S-1-5-32-545"
		authn    = "S-1-5-11"
		everyone = "S-1-1-0"
		alice    = "S-1-5-21-1004336348-1177238915-682003330-1104"
		wineUser = "S-1-5-21-0-0-0-1000" // the account Wine runs everything as
	)
	allow := func(sid string, mask uint32) ACE { return ACE{Kind: ACEAllow, SID: sid, Mask: mask} }
	inheritOnly := func(sid string, mask uint32) ACE {
		return ACE{Kind: ACEAllow, SID: sid, Mask: mask, InheritOnly: true}
	}
	admins := func(more ...ACE) []ACE {
		return append([]ACE{allow(sidSystem, fa), allow(sidAdministrators, fa)}, more...)
	}
	tests := []struct {
		name  string
		s     FileSecurity
		agent string
		want  string // in the refusal; "" trusted
	}{
		// As Windows Server sets them up.
		{"C:\\ root", FileSecurity{Dir: true, Owner: sidTrustedInstaller, DACL: admins(allow(users, rx),
			inheritOnly(authn, modify), allow(authn, 0x4) /* create folders */, inheritOnly(sidCreatorOwner, genericAll))}, sidSystem, ""},
		{"C:\\ProgramData", FileSecurity{Dir: true, Owner: sidSystem, DACL: admins(inheritOnly(sidCreatorOwner, fa),
			allow(users, rx), allow(users, addFiles))}, sidSystem, ""},
		{"a script an administrator put in C:\\ProgramData\\scripts", FileSecurity{Owner: sidAdministrators,
			DACL: admins(allow(users, rx))}, sidSystem, ""},
		{"C:\\Program Files", FileSecurity{Dir: true, Owner: sidTrustedInstaller, DACL: []ACE{allow(sidTrustedInstaller, fa),
			allow(sidSystem, modify), allow(sidAdministrators, modify), allow(users, rx)}}, sidSystem, ""},

		// Owners: an owner may always rewrite the DACL.
		{"file of a user", FileSecurity{Owner: alice, DACL: admins()}, sidSystem, "belongs to " + alice},
		{"file of the agent's own account", FileSecurity{Owner: alice, DACL: admins(allow(alice, fa))}, alice, ""},
		{"agent's account unknown", FileSecurity{Owner: alice, DACL: admins()}, "", "belongs to"},
		{"no owner", FileSecurity{DACL: admins()}, "", "belongs to"},

		// No DACL: everyone may do anything; an empty one grants nothing.
		{"NULL DACL", FileSecurity{Owner: sidAdministrators, NullDACL: true}, sidSystem, "no DACL"},
		{"empty DACL", FileSecurity{Owner: sidAdministrators}, sidSystem, ""},

		// Rights on the file.
		{"Users may modify", FileSecurity{Owner: sidAdministrators, DACL: admins(allow(users, modify))}, sidSystem, "Users (S-1-5-32-545)"},
		{"write data", FileSecurity{Owner: sidAdministrators, DACL: admins(allow(authn, fileWriteData))}, sidSystem, "FILE_WRITE_DATA"},
		{"append data", FileSecurity{Owner: sidAdministrators, DACL: admins(allow(authn, fileAppendData))}, sidSystem, "FILE_APPEND_DATA"},
		{"delete, then put another in its place", FileSecurity{Owner: sidAdministrators, DACL: admins(allow(authn, rightDelete|rx))}, sidSystem, "DELETE"},
		{"WRITE_DAC", FileSecurity{Owner: sidAdministrators, DACL: admins(allow(everyone, rightWriteDAC))}, sidSystem, "Everyone (S-1-1-0) change it (WRITE_DAC)"},
		{"WRITE_OWNER", FileSecurity{Owner: sidAdministrators, DACL: admins(allow(alice, rightWriteOwner))}, sidSystem, "WRITE_OWNER"},
		{"GENERIC_WRITE", FileSecurity{Owner: sidAdministrators, DACL: admins(allow(users, genericWrite))}, sidSystem, "GENERIC_WRITE"},
		{"GENERIC_ALL", FileSecurity{Owner: sidAdministrators, DACL: admins(allow(users, genericAll))}, sidSystem, "GENERIC_ALL"},
		{"read and execute only", FileSecurity{Owner: sidAdministrators, DACL: admins(allow(everyone, rx))}, sidSystem, ""},
		{"write attributes and EA only", FileSecurity{Owner: sidAdministrators, DACL: admins(allow(users, 0x110))}, sidSystem, ""},
		{"inherit-only entry", FileSecurity{Owner: sidAdministrators, DACL: admins(inheritOnly(users, fa))}, sidSystem, ""},
		{"CREATOR OWNER and OWNER RIGHTS", FileSecurity{Owner: sidAdministrators, DACL: admins(allow(sidCreatorOwner, fa),
			allow(sidOwnerRights, fa))}, sidSystem, ""},
		// A deny is not weighed against an allow, whatever their order.
		{"deny before allow", FileSecurity{Owner: sidAdministrators, DACL: append([]ACE{{Kind: ACEDeny, SID: users, Mask: fa}},
			admins(allow(users, modify))...)}, sidSystem, "Users"},
		{"deny only", FileSecurity{Owner: sidAdministrators, DACL: admins(ACE{Kind: ACEDeny, SID: everyone, Mask: fa})}, sidSystem, ""},
		{"entry the agent does not read", FileSecurity{Owner: sidAdministrators, DACL: admins(ACE{Kind: ACEOther, Mask: fa})}, sidSystem, "does not read"},
		{"entry the agent does not read, reading", FileSecurity{Owner: sidAdministrators, DACL: admins(ACE{Kind: ACEOther, Mask: rx})}, sidSystem, ""},

		// Rights on a directory on the way: replacing an entry, not adding one.
		{"directory: delete any entry", FileSecurity{Dir: true, Owner: sidSystem, DACL: admins(allow(users, fileDeleteChild))}, sidSystem, "FILE_DELETE_CHILD"},
		{"directory: move it away", FileSecurity{Dir: true, Owner: sidSystem, DACL: admins(allow(users, rightDelete))}, sidSystem, "DELETE"},
		{"directory: modify", FileSecurity{Dir: true, Owner: sidSystem, DACL: admins(allow(authn, modify))}, sidSystem, "Authenticated Users"},
		{"directory: add entries", FileSecurity{Dir: true, Owner: sidSystem, DACL: admins(allow(users, addFiles|genericWrite))}, sidSystem, ""},

		// As Wine 8 gives them, from the Unix owner and mode.
		{"Wine: 0644 file of Wine's user", FileSecurity{Owner: wineUser, DACL: []ACE{allow(sidSystem, fa), allow(wineUser, fa),
			allow(everyone, rx)}}, wineUser, ""},
		{"Wine: 0666 file", FileSecurity{Owner: wineUser, DACL: []ACE{allow(sidSystem, fa), allow(wineUser, fa),
			allow(everyone, 0x1301BF)}}, wineUser, "Everyone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckWindowsSecurity(`C:\x`, tt.s, tt.agent)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && err == nil:
				t.Errorf("trusted, want a refusal naming %q", tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Errorf("refusal %q does not name %q", err, tt.want)
			}
		})
	}
}
