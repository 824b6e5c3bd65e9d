package agent

import (
	"fmt"
	"strings"
)

// The security of the state directory on Windows, built here without a build
// tag so that it is tested on every system; statedir_windows.go applies it.

// sddlACE is one access-control entry in SDDL (ace_type;ace_flags;rights;
// object_guid;inherit_object_guid;account_sid), without the GUIDs.
type sddlACE struct {
	Type    string // "A": allow
	Flags   string // "OICI": inherited by files (OI) and folders (CI) below
	Rights  string // "FA": FILE_ALL_ACCESS
	Account string // an SDDL SID string: "SY" LocalSystem, "BA" BUILTIN\Administrators
}

// buildSDDL writes a security descriptor: its owner and a protected DACL
// (D:P, nothing inherited from the parent) of aces.
func buildSDDL(owner string, aces []sddlACE) string {
	var b strings.Builder
	b.WriteString("O:" + owner + "D:P")
	for _, a := range aces {
		b.WriteString("(" + a.Type + ";" + a.Flags + ";" + a.Rights + ";;;" + a.Account + ")")
	}
	return b.String()
}

// StateDirSDDL is the security descriptor the agent gives its state
// directory on Windows (%ProgramData%\vdibroker), which holds the host
// credential and the registration token: owned by the Administrators group
// and readable and writable by LocalSystem (the service) and Administrators
// only, the files in it inheriting that. The DACL is protected because
// %ProgramData%'s own lets every user create folders there and read them,
// and the owner is set too: a user who made the folder first would
// otherwise keep, as its owner, the right to change its DACL.
var StateDirSDDL = buildSDDL("BA", []sddlACE{
	{Type: "A", Flags: "OICI", Rights: "FA", Account: "SY"},
	{Type: "A", Flags: "OICI", Rights: "FA", Account: "BA"},
})

// StateFileSDDL is the security descriptor the agent's secret files (the
// host credential, the registration token) are made with on Windows:
// StateDirSDDL's owner and entries, given to the file itself at its
// creation (winacl.CreateFileSDDL), protected, so that a file does not
// rely on what it inherits from a directory an administrator may have
// changed, and what CheckSecretFile accepts.
var StateFileSDDL = buildSDDL("BA", []sddlACE{
	{Type: "A", Rights: "FA", Account: "SY"},
	{Type: "A", Rights: "FA", Account: "BA"},
})

// SecureStateDir creates dir as the agent keeps its state directory: 0700 on
// Unix, StateDirSDDL on Windows (`vdibroker agent install` makes it so).
func SecureStateDir(dir string) error { return secureDir(dir) }

// stateAccess is what the process's token says of the accounts
// StateFileSDDL lets read the agent's files on Windows.
type stateAccess struct {
	system bool // the account is LocalSystem: the service
	admins bool // Administrators is enabled: an elevated console
	// filtered: Administrators is in the token for deny only, as User
	// Account Control starts a console of an administrator that was not
	// opened with "Run as administrator".
	filtered bool
}

// stateAccessError is why an agent whose token is a cannot keep its
// credential in the state directory dir on Windows, nil when it can. The
// directory (secureDir) and the files in it (StateFileSDDL) are SYSTEM's
// and Administrators' alone, whoever runs the agent: one started in a
// console that is not elevated could neither secure the directory nor
// read the credential it saved, and would register again at every start,
// each time using the registration token once more. It is refused at
// start, with the two ways that work (R-SEC).
func stateAccessError(dir string, a stateAccess) error {
	if dir == "" || a.system || a.admins {
		return nil
	}
	why := "this account is not an administrator"
	if a.filtered {
		why = "this console is not elevated (User Account Control runs it without Administrators)"
	}
	return fmt.Errorf("--state-dir %s: the agent keeps the host credential there, which only SYSTEM and Administrators may read, and %s: "+
		"run the agent as an administrator from a console opened with \"Run as administrator\", or install it as a service (vdibroker agent install), which runs it as LocalSystem",
		dir, why)
}
