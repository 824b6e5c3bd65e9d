package main

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/vdibroker/vdibroker/internal/winacl"
)

// On Windows the mode Go reports is 0666 for every file that is not
// read-only: who may read a file is its DACL's to say.

// secretFileAccess says who may read a file createSecretFile made.
const secretFileAccess = "readable by this account, SYSTEM and Administrators only"

// createSecretFile creates the file path, which must not exist, for
// writing a secret: with a protected DACL (nothing inherited: a data dir
// under C:\ProgramData lets Users read what is made in it) granting the
// process's account, SYSTEM and Administrators only.
func createSecretFile(path string) (*os.File, error) {
	return winacl.CreatePrivateFile(path)
}

// checkSecretFile reports why the file path, holding a secret, may be
// read by others than its owner, the process's account, SYSTEM and
// Administrators (R-SEC): it has no DACL, or its DACL grants someone else
// a right to read it (winacl.CheckPrivate), or it cannot be read. The
// error begins with path and says the icacls command that fixes it.
func checkSecretFile(path string) error {
	return winacl.CheckPrivateFile(path)
}

// createSecretTemp creates a new file in dir for writing a secret, named
// pattern with its last "*" a random string (os.CreateTemp's names), as
// createSecretFile makes it: with its own DACL, not one inherited from
// dir, which os.CreateTemp's file takes.
func createSecretTemp(dir, pattern string) (*os.File, error) {
	prefix, suffix := pattern, ""
	if i := strings.LastIndex(pattern, "*"); i >= 0 {
		prefix, suffix = pattern[:i], pattern[i+1:]
	}
	for range 10000 {
		f, err := createSecretFile(filepath.Join(dir, prefix+strconv.FormatUint(rand.Uint64(), 36)+suffix))
		if !errors.Is(err, os.ErrExist) {
			return f, err
		}
	}
	return nil, &os.PathError{Op: "createtemp", Path: filepath.Join(dir, pattern), Err: os.ErrExist}
}
