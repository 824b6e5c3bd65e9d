//go:build !unix

package power

import (
	"os"
	"syscall"
)

func procAttr() *syscall.SysProcAttr { return nil }

// killGroup kills p (no process groups here).
func killGroup(p *os.Process) error { return p.Kill() }
