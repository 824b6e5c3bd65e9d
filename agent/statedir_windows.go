//go:build windows

package agent

import (
	"fmt"
	"os"

	"golang.org/x/sys/windows"
)

// secureDir creates dir if need be and gives it StateDirSDDL's owner and
// protected DACL, so that only LocalSystem and Administrators can read the
// credential in it. It works on the directory it opened, not on its name,
// and refuses a link or junction: a user who made the folder first could
// otherwise point it elsewhere between the check and the change, or after
// it. Once it is Administrators' with that DACL, no user may rename or
// replace it. An agent that may not set them (not running as LocalSystem
// or an elevated administrator) gets an error and does not write the
// credential there.
func secureDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	sd, err := windows.SecurityDescriptorFromString(StateDirSDDL)
	if err != nil {
		return fmt.Errorf("state directory security descriptor: %w", err)
	}
	owner, _, err := sd.Owner()
	if err != nil {
		return fmt.Errorf("state directory owner: %w", err)
	}
	dacl, _, err := sd.DACL()
	if err != nil {
		return fmt.Errorf("state directory DACL: %w", err)
	}
	name, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return err
	}
	h, err := windows.CreateFile(name, windows.READ_CONTROL|windows.WRITE_DAC|windows.WRITE_OWNER,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil, windows.OPEN_EXISTING,
		windows.FILE_FLAG_BACKUP_SEMANTICS|windows.FILE_FLAG_OPEN_REPARSE_POINT, 0)
	if err != nil {
		return fmt.Errorf("secure state directory %s (run the agent as LocalSystem or an elevated administrator): %w", dir, err)
	}
	defer windows.CloseHandle(h)
	var info windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(h, &info); err != nil {
		return fmt.Errorf("state directory %s: %w", dir, err)
	}
	if info.FileAttributes&windows.FILE_ATTRIBUTE_REPARSE_POINT != 0 || info.FileAttributes&windows.FILE_ATTRIBUTE_DIRECTORY == 0 {
		return fmt.Errorf("state directory %s is a link, a junction or no directory: refused (remove it)", dir)
	}
	err = windows.SetSecurityInfo(h, windows.SE_FILE_OBJECT,
		windows.OWNER_SECURITY_INFORMATION|windows.DACL_SECURITY_INFORMATION|windows.PROTECTED_DACL_SECURITY_INFORMATION,
		owner, nil, dacl, nil)
	if err != nil {
		return fmt.Errorf("secure state directory %s (run the agent as LocalSystem or an elevated administrator): %w", dir, err)
	}
	return nil
}

// CheckStateDirAccess is stateAccessError of the process's token: whether
// this agent may keep its credential in dir, and if not, what to do.
func CheckStateDirAccess(dir string) error {
	if dir == "" {
		return nil
	}
	a, err := currentStateAccess()
	if err != nil {
		return fmt.Errorf("--state-dir %s: the process's token: %w", dir, err)
	}
	return stateAccessError(dir, a)
}

// currentStateAccess reads the process's token: its account, and whether
// Administrators is in its groups enabled or for deny only.
func currentStateAccess() (stateAccess, error) {
	var a stateAccess
	t := windows.GetCurrentProcessToken()
	u, err := t.GetTokenUser()
	if err != nil {
		return a, err
	}
	a.system = u.User.Sid.String() == "S-1-5-18"
	groups, err := t.GetTokenGroups()
	if err != nil {
		return a, err
	}
	for _, g := range groups.AllGroups() {
		if g.Sid.String() != "S-1-5-32-544" {
			continue
		}
		a.admins = g.Attributes&windows.SE_GROUP_ENABLED != 0 && g.Attributes&windows.SE_GROUP_USE_FOR_DENY_ONLY == 0
		a.filtered = g.Attributes&windows.SE_GROUP_USE_FOR_DENY_ONLY != 0
	}
	return a, nil
}
