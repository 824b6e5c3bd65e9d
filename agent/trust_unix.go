//go:build unix

package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// fileTrusted reports why the file at path must not be trusted by the
// agent (root): it, or a directory on the way to it (through links too),
// belongs to another user or may be written by its group or others, who
// could then change what it holds (R-SEC). As sshd's StrictModes: owned
// by root or the agent's user, no group or other write, but for sticky
// directories (/tmp), where no one replaces another's file. A file that
// cannot be found is not refused: reading or running it reports that.
// file is the file checked, nil when none was found.
func fileTrusted(path string) (file os.FileInfo, err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, nil
	}
	target, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, nil
	}
	fi, err := os.Stat(target)
	if err != nil {
		return nil, err
	}
	if err := safeOwner(target, fi); err != nil {
		return nil, err
	}
	file = fi
	for _, p := range []string{abs, target} {
		for d := filepath.Dir(p); ; d = filepath.Dir(d) {
			fi, err := os.Lstat(d)
			if err != nil {
				return nil, err
			}
			if fi.Mode()&os.ModeSymlink == 0 { // the link's own target is on target's way
				if err := safeOwner(d, fi); err != nil {
					return nil, err
				}
			}
			if d == filepath.Dir(d) {
				break
			}
		}
	}
	return file, nil
}

func safeOwner(name string, fi os.FileInfo) error {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s belongs to uid %d, neither root nor the agent's user", name, st.Uid)
	}
	if fi.Mode().Perm()&0o022 != 0 && !(fi.IsDir() && fi.Mode()&os.ModeSticky != 0) {
		return fmt.Errorf("%s may be written by its group or others (mode %v)", name, fi.Mode().Perm())
	}
	return nil
}
