//go:build !windows && !unix

package agent

import "os"

// secureDir creates dir if need be and makes it the agent's user's alone
// (0700).
func secureDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.Chmod(dir, 0o700)
}
