//go:build windows

package agent

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/vdibroker/vdibroker/internal/winacl"
)

// fileTrusted reports why the agent (LocalSystem) must not trust the
// file at path (R-SEC): CheckWindowsSecurity of the file, and of every
// directory on the way to it up to its volume's root, by the name given
// and by the name links lead to. A file that cannot be found is not
// refused: reading or running it reports that. file is the file checked,
// nil when none was found.
func fileTrusted(path string) (file os.FileInfo, err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, nil
	}
	target, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, nil
	}
	if file, err = os.Stat(target); err != nil {
		return nil, nil
	}
	if err := checkSecurityOf(target, false); err != nil {
		return nil, err
	}
	for _, p := range []string{abs, target} {
		for d := filepath.Dir(p); ; d = filepath.Dir(d) {
			if err := checkSecurityOf(d, true); err != nil {
				return nil, err
			}
			if d == filepath.Dir(d) {
				break
			}
		}
	}
	return file, nil
}

func checkSecurityOf(name string, dir bool) error {
	s, err := readFileSecurity(name, dir)
	if err != nil {
		return fmt.Errorf("%s: security descriptor: %w", name, err)
	}
	return CheckWindowsSecurity(name, s, agentSID())
}

// agentSID is the SID of the account the agent runs as, "" when the
// token does not say.
var agentSID = winacl.CurrentSID

// readFileSecurity reads name's owner and DACL into a FileSecurity.
func readFileSecurity(name string, dir bool) (FileSecurity, error) {
	return winacl.ReadFileSecurity(name, dir)
}
