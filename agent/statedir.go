package agent

import "strings"

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
