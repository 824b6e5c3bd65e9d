//go:build unix

package agent

import (
	"os/exec"
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
