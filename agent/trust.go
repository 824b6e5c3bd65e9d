package agent

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
func CheckFileTrusted(path string) error {
	_, err := fileTrusted(path)
	return err
}

// ErrUntrusted is wrapped by ReadTrustedFile's error for a file
// CheckFileTrusted refuses.
var ErrUntrusted = errors.New("file not trusted")

// untrustedError says why a file is refused, and is ErrUntrusted.
type untrustedError struct{ err error }

func (e untrustedError) Error() string   { return e.err.Error() }
func (e untrustedError) Unwrap() []error { return []error{e.err, ErrUntrusted} }

// testHookFileChecked runs between a file's check and its read, and
// between the script's check and its start: a test puts another file in
// the way there.
var testHookFileChecked = func() {}

// ReadTrustedFile reads the file at path if CheckFileTrusted trusts it;
// a refusal wraps ErrUntrusted. The file is opened first and read only if
// it is the file checked: one missing at the check, in a directory others
// may add to (a sticky one, or a folder under C:\ProgramData, which
// lets users make files), could be there for the read.
func ReadTrustedFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	opened, err := f.Stat()
	if err != nil {
		return nil, err
	}
	checked, err := fileTrusted(path)
	if err != nil {
		return nil, untrustedError{err}
	}
	if checked == nil || !os.SameFile(opened, checked) {
		return nil, untrustedError{fmt.Errorf("%s was replaced while it was checked", path)}
	}
	testHookFileChecked()
	return io.ReadAll(f)
}

// checkedScript is the file exec would run for the script at path,
// absolute, once CheckFileTrusted trusts it; the agent runs that file,
// not path: path, looked up again in PATH (PATHEXT on Windows), could
// name another file by then, put in a directory earlier in PATH or where
// none was found. A script that cannot be found is not run.
//
// A path naming a file is checked before anything follows it: the look-up
// follows its links, and a kernel protecting links in sticky directories
// (Linux's fs.protected_symlinks, on by default with systemd) refuses one
// another user owns with a bare "permission denied", where the check
// says whose link it is.
func checkedScript(path string) (string, error) {
	if strings.ContainsRune(path, filepath.Separator) || strings.ContainsRune(path, '/') {
		if abs, err := filepath.Abs(path); err == nil {
			if _, err := os.Lstat(abs); err == nil {
				if _, err := fileTrusted(abs); err != nil {
					return "", fmt.Errorf("not run: %w, who could make the agent run anything", err)
				}
			}
		}
	}
	found, err := exec.LookPath(path)
	if err != nil {
		return "", err
	}
	abs, err := filepath.Abs(found)
	if err != nil {
		return "", err
	}
	if _, err := fileTrusted(abs); err != nil {
		return "", fmt.Errorf("not run: %w, who could make the agent run anything", err)
	}
	return abs, nil
}
