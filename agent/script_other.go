//go:build !unix

package agent

import "os/exec"

// killGroup keeps exec's default: kill the script process itself.
func killGroup(cmd *exec.Cmd) {}
