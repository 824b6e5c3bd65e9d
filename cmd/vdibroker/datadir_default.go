package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker/store"
)

// legacyDataDir is --data-dir's default on Unix, and was on Windows: a
// directory of the working directory.
const legacyDataDir = "./vdibroker-data"

// dataDirDefault decides --data-dir's default (R-D1) for one system: on
// Unix ./vdibroker-data; on Windows %ProgramData%\vdibroker-data, as the
// working directory of an elevated cmd.exe and of a Windows service is
// C:\Windows\System32, where ./vdibroker-data would put the store. Not
// %ProgramData%\vdibroker: that is the agent's state directory, whose
// DACL `agent install` sets to SYSTEM and Administrators only, which
// would lock out a broker running under an account of its own on the
// same machine. Its
// fields are what it reads, so that its tests run on every system.
type dataDirDefault struct {
	goos   string
	getenv func(string) string
	// hasStore reports whether dir holds a store (vdibroker.db).
	hasStore func(dir string) bool
	// exists reports whether dir exists.
	exists func(dir string) bool
}

// systemDataDirDefault is dataDirDefault of the running system.
func systemDataDirDefault() dataDirDefault {
	return dataDirDefault{goos: runtime.GOOS, getenv: os.Getenv,
		hasStore: func(dir string) bool {
			_, err := os.Stat(filepath.Join(dir, store.SQLiteFile))
			return err == nil
		},
		exists: func(dir string) bool {
			_, err := os.Stat(dir)
			return err == nil
		},
	}
}

// dir is the default: ProgramData's vdibroker-data on Windows, or
// legacyDataDir when ProgramData is not set (or on Unix).
func (d dataDirDefault) dir() string {
	if d.goos == "windows" {
		if pd := d.getenv("ProgramData"); pd != "" {
			// Not filepath.Join, which is the running system's: the
			// tests decide for Windows on Linux too.
			return strings.TrimRight(pd, `\`) + `\vdibroker-data`
		}
	}
	return legacyDataDir
}

// resolve is the data dir to use when --data-dir is not given: dir, but
// legacyDataDir when that holds a store and dir does not (a broker
// installed before the default moved keeps its store), with a warning
// that says where the store is and how to move it. When both hold a
// store, dir's is used, with a warning that names the store left aside:
// one a broker started elsewhere (a console in another working
// directory) made new in dir would otherwise take the place of the
// broker's store without a word.
func (d dataDirDefault) resolve() (dir, warning string) {
	def := d.dir()
	if def == legacyDataDir || !d.hasStore(legacyDataDir) {
		return def, ""
	}
	legacy := legacyDataDir
	if abs, err := filepath.Abs(legacy); err == nil {
		legacy = abs
	}
	if d.hasStore(def) {
		return def, fmt.Sprintf("using the store in %s, the data dir's default now; the store in %s, the default before this release, is ignored: "+
			"if it is the broker's, stop the broker and give --data-dir \"%s\"; if not, rename or remove it",
			def, legacy, legacy)
	}
	// move of a directory onto one that exists (an admin made it, or a
	// broker started once there and was stopped before it made a store)
	// puts it inside, where no start would look: then the files are
	// moved (the data dir holds no directory).
	move := fmt.Sprintf("move the directory there (move \"%s\" \"%s\")", legacy, def)
	if d.exists(def) {
		move = fmt.Sprintf("move its files into %s, which exists (move \"%s\" \"%s\")", def, filepath.Join(legacy, "*"), def)
	}
	return legacyDataDir, fmt.Sprintf("using the store in %s, the data dir's default before this release: the default is now %s; "+
		"stop the broker and %s, or give --data-dir \"%s\" to keep it where it is",
		legacy, def, move, legacy)
}

// flag is --data-dir's default and help for a flag about what: on
// Windows the default is said in the help, as it is (pflag would quote
// it, its backslashes doubled), with the old one it falls back to, and
// the flag's own default is empty (defaultedDataDir sets it).
func (d dataDirDefault) flag(what string) (def, usage string) {
	dir := d.dir()
	if dir == legacyDataDir {
		return dir, what
	}
	return "", fmt.Sprintf("%s (default %s, from %%ProgramData%%; %s instead when that holds a store and %s does not)", what, dir, legacyDataDir, dir)
}

// addDataDirFlag adds --data-dir, with dataDirDefault's default, to cmd.
func addDataDirFlag(cmd *cobra.Command, p *string, what string) {
	def, usage := systemDataDirDefault().flag(what)
	cmd.Flags().StringVar(p, "data-dir", def, usage)
}

// defaultedDataDir is *p once cmd's flags are parsed (from the
// environment too): when --data-dir was not given, the data dir resolve
// picks, and the warning it says (R-D1).
func defaultedDataDir(cmd *cobra.Command, p *string) (warning string) {
	if cmd.Flags().Changed("data-dir") {
		return ""
	}
	*p, warning = systemDataDirDefault().resolve()
	return warning
}
