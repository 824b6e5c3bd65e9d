//go:build unix

package agent

import (
	"fmt"
	"os"
	"syscall"
)

// secureDir creates dir if need be and makes it the agent's user's alone
// (0700). It refuses a link in its place and a directory of another user:
// whoever made either first (where she may create, as in /tmp) could read
// the credential written there (R-SEC).
func secureDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("state directory %s is a link or no directory: refused (remove it)", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("state directory %s belongs to uid %d, not to the agent's %d: refused (remove it)", dir, st.Uid, os.Geteuid())
	}
	return os.Chmod(dir, 0o700)
}
