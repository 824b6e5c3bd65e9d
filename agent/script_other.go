//go:build !unix

package agent

import "os/exec"

// killGroup keeps exec's default: kill the script process itself.
func killGroup(cmd *exec.Cmd) {}

// scriptSafe checks nothing here: on Windows the script's folder's ACL is
// the administrator's to keep (docs/agent.md).
func scriptSafe(path string) error { return nil }
