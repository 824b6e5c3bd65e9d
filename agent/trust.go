package agent

import (
	"fmt"
	"os/exec"
	"path/filepath"
)

// CheckFileTrusted reports why the agent, which runs as root or
// LocalSystem, must not trust the file at path (R-SEC): whoever may
// change it, or replace it through a directory on the way to it, would
// choose what the agent runs (the custom load script), this host's
// thresholds (the policy file, R-LI5) or what it logs (the log-level
// file). On Unix the file and its directories must belong to root or the
// agent's user and be writable by neither group nor others (sshd's
// StrictModes); on Windows their owner must be SYSTEM, Administrators,
// TrustedInstaller or the agent's account and their DACL grant no one
// else a right to change them (CheckWindowsSecurity). A file that does
// not exist is not refused: reading it says so.
func CheckFileTrusted(path string) error { return fileTrusted(path) }

// checkedScript is the file exec would run for the script at path,
// absolute, once CheckFileTrusted trusts it; the agent runs that file,
// not path: path, looked up again in PATH (PATHEXT on Windows), could
// name another file by then, put in a directory earlier in PATH or where
// none was found. A script that cannot be found is not run.
func checkedScript(path string) (string, error) {
	found, err := exec.LookPath(path)
	if err != nil {
		return "", err
	}
	abs, err := filepath.Abs(found)
	if err != nil {
		return "", err
	}
	if err := fileTrusted(abs); err != nil {
		return "", fmt.Errorf("not run: %w, who could make the agent run anything", err)
	}
	return abs, nil
}
