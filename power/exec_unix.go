//go:build unix

package power

import (
	"os"
	"syscall"
)

func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// killGroup kills p's process group (procAttr made p its leader).
func killGroup(p *os.Process) error { return syscall.Kill(-p.Pid, syscall.SIGKILL) }
