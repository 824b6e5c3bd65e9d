//go:build unix

package agent

import (
	"fmt"
	"os"
	"syscall"
)

// secureDir creates dir if need be and makes it the agent's user's alone
// (0700). It refuses a directory of another user, and a link in its
// place that another user made: whoever made either first (where she may
// create, as in /tmp) could read the credential written there, or have
// the agent make any directory 0700 (R-SEC). A link root or the agent's
// user made (the state moved to another disk) is followed to a directory
// that must be the agent's user's too.
func secureDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		if uid := ownerOf(fi); uid != 0 && uid != os.Geteuid() {
			return fmt.Errorf("state directory %s is a link uid %d made: refused (remove it, or make the link as root)", dir, uid)
		}
		if fi, err = os.Stat(dir); err != nil {
			return err
		}
	}
	if !fi.IsDir() {
		return fmt.Errorf("state directory %s is no directory: refused (remove it)", dir)
	}
	if uid := ownerOf(fi); uid != os.Geteuid() {
		return fmt.Errorf("state directory %s belongs to uid %d, not to the agent's %d: refused (remove it, or give it to the agent's user)", dir, uid, os.Geteuid())
	}
	return os.Chmod(dir, 0o700)
}

// ownerOf returns the uid that owns fi, or the agent's own where the
// system does not say.
func ownerOf(fi os.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return os.Geteuid()
}
