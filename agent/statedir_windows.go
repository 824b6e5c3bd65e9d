//go:build windows

package agent

import (
	"fmt"
	"os"

	"golang.org/x/sys/windows"
)

// secureDir creates dir if need be and gives it StateDirSDDL's owner and
// protected DACL, so that only LocalSystem and Administrators can read the
// credential in it. An agent that may not set them (not running as
// LocalSystem or an elevated administrator) gets an error and does not
// write the credential there.
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
	err = windows.SetNamedSecurityInfo(dir, windows.SE_FILE_OBJECT,
		windows.OWNER_SECURITY_INFORMATION|windows.DACL_SECURITY_INFORMATION|windows.PROTECTED_DACL_SECURITY_INFORMATION,
		owner, nil, dacl, nil)
	if err != nil {
		return fmt.Errorf("secure state directory %s (run the agent as LocalSystem or an elevated administrator): %w", dir, err)
	}
	return nil
}
