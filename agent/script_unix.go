//go:build unix

package agent

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// killGroup runs the script in its own process group and kills the whole
// group on timeout, so a shell script's children die with it.
func killGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// scriptSafe reports why the script at path must not run as the agent's
// user (root): it, or a directory on the way to it (through links too),
// belongs to another user or may be written by its group or others, who
// could then run their program as root (R-IDX3). As sshd's StrictModes:
// owned by root or the agent's user, no group or other write, but for
// sticky directories (/tmp), where no one replaces another's file. A
// script that cannot be found is left to exec to report.
func scriptSafe(path string) error {
	found, err := exec.LookPath(path)
	if err != nil {
		return nil
	}
	abs, err := filepath.Abs(found)
	if err != nil {
		return nil
	}
	target, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil
	}
	fi, err := os.Stat(target)
	if err != nil {
		return err
	}
	if err := safeOwner(target, fi); err != nil {
		return err
	}
	for _, p := range []string{abs, target} {
		for d := filepath.Dir(p); ; d = filepath.Dir(d) {
			fi, err := os.Lstat(d)
			if err != nil {
				return err
			}
			if fi.Mode()&os.ModeSymlink == 0 { // the link's own target is on target's way
				if err := safeOwner(d, fi); err != nil {
					return err
				}
			}
			if d == filepath.Dir(d) {
				break
			}
		}
	}
	return nil
}

func safeOwner(name string, fi os.FileInfo) error {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("not run: %s belongs to uid %d, who could make the agent run anything", name, st.Uid)
	}
	if fi.Mode().Perm()&0o022 != 0 && !(fi.IsDir() && fi.Mode()&os.ModeSticky != 0) {
		return fmt.Errorf("not run: %s may be written by its group or others (mode %v), who could make the agent run anything", name, fi.Mode().Perm())
	}
	return nil
}
