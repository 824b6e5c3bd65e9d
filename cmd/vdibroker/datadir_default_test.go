package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestDataDirDefault_RD1: --data-dir's default on each system, decided
// with the environment and the stores it finds given (R-D1): on Windows
// %ProgramData%\vdibroker-data, not the working directory's vdibroker-data
// (C:\Windows\System32 for an elevated cmd.exe or a service), unless the
// old default holds a store and the new one does not, which is used with
// a warning that says how to move it; when both hold one, the new one's
// is used with a warning that names the old one as ignored.
func TestDataDirDefault_RD1(t *testing.T) {
	const pd = `C:\ProgramData`
	legacyAbs, err := filepath.Abs(legacyDataDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		goos        string
		programData string
		stores      []string // the dirs that hold a vdibroker.db
		dirs        []string // the other dirs that exist
		wantDefault string   // the flag's default (dir)
		wantDir     string   // resolve's
		// What the warning says, none when nil: where the store
		// in use is, the one left aside, and the ways out.
		wantWarning []string
	}{
		{name: "linux", goos: "linux", programData: pd, wantDefault: "./vdibroker-data", wantDir: "./vdibroker-data"},
		{name: "linux with a store", goos: "linux", programData: pd, stores: []string{"./vdibroker-data"},
			wantDefault: "./vdibroker-data", wantDir: "./vdibroker-data"},
		{name: "windows new install", goos: "windows", programData: pd,
			wantDefault: pd + `\vdibroker-data`, wantDir: pd + `\vdibroker-data`},
		{name: "windows ProgramData unset", goos: "windows",
			wantDefault: "./vdibroker-data", wantDir: "./vdibroker-data"},
		// An install made before the default moved: its store stays
		// where it is, and the warning says so.
		{name: "windows old store only", goos: "windows", programData: pd, stores: []string{"./vdibroker-data"},
			wantDefault: pd + `\vdibroker-data`, wantDir: "./vdibroker-data",
			wantWarning: []string{"using the store in " + legacyAbs, "the default is now " + pd + `\vdibroker-data`, `move "` + legacyAbs + `" "`, `--data-dir "` + legacyAbs + `"`}},
		// The new default exists without a store (an admin made it):
		// move of the
		// directory onto it would put it inside, where no start looks
		// (and the next would make a new store), so the files are moved.
		{name: "windows old store, new dir exists", goos: "windows", programData: pd, stores: []string{"./vdibroker-data"}, dirs: []string{pd + `\vdibroker-data`},
			wantDefault: pd + `\vdibroker-data`, wantDir: "./vdibroker-data",
			wantWarning: []string{"using the store in " + legacyAbs, "move its files into " + pd + `\vdibroker-data`, `move "` + filepath.Join(legacyAbs, "*") + `" "` + pd + `\vdibroker-data"`, `--data-dir "` + legacyAbs + `"`}},
		// Both hold one: the new default's, the one its admin moved,
		// or one a broker started in another working directory made
		// new, which the old store's broker would then serve from: the
		// old one is named as ignored.
		{name: "windows both", goos: "windows", programData: pd, stores: []string{"./vdibroker-data", pd + `\vdibroker-data`},
			wantDefault: pd + `\vdibroker-data`, wantDir: pd + `\vdibroker-data`,
			wantWarning: []string{"using the store in " + pd + `\vdibroker-data`, "the store in " + legacyAbs + ", the default before this release, is ignored", `--data-dir "` + legacyAbs + `"`, "rename or remove it"}},
		{name: "windows new store only", goos: "windows", programData: pd, stores: []string{pd + `\vdibroker-data`},
			wantDefault: pd + `\vdibroker-data`, wantDir: pd + `\vdibroker-data`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := dataDirDefault{
				goos: tc.goos,
				getenv: func(k string) string {
					if k == "ProgramData" {
						return tc.programData
					}
					return ""
				},
				hasStore: func(dir string) bool {
					for _, s := range tc.stores {
						if s == dir {
							return true
						}
					}
					return false
				},
				exists: func(dir string) bool {
					return slices.Contains(tc.stores, dir) || slices.Contains(tc.dirs, dir)
				},
			}
			if got := d.dir(); got != tc.wantDefault {
				t.Errorf("dir() = %q, want %q", got, tc.wantDefault)
			}
			// Never the agent's state directory, whose DACL `agent
			// install` sets to SYSTEM and Administrators only.
			if tc.programData != "" && d.dir() == defaultAgentStateDir(tc.goos, d.getenv) {
				t.Errorf("dir() = %q, the agent's state directory", d.dir())
			}
			got, warning := d.resolve()
			if got != tc.wantDir {
				t.Errorf("resolve() = %q, want %q", got, tc.wantDir)
			}
			if tc.wantWarning == nil && warning != "" {
				t.Errorf("resolve() warned %q, want no warning", warning)
			}
			if tc.wantWarning != nil && warning == "" {
				t.Errorf("resolve() did not warn, want a warning saying %q", tc.wantWarning)
			}
			for _, want := range tc.wantWarning {
				if !strings.Contains(warning, want) {
					t.Errorf("warning %q does not say %q", warning, want)
				}
			}
		})
	}
}

// TestDataDirFlagHelp_RD1: the help of --data-dir says the default of
// the system it is for: pflag's own on Unix; on Windows the path as
// written there, and the old default it falls back to.
func TestDataDirFlagHelp_RD1(t *testing.T) {
	unix := dataDirDefault{goos: "linux", getenv: func(string) string { return `C:\ProgramData` }}
	if def, usage := unix.flag("the dir"); def != "./vdibroker-data" || usage != "the dir" {
		t.Errorf("linux: flag() = %q, %q; want ./vdibroker-data, the dir", def, usage)
	}
	win := dataDirDefault{goos: "windows", getenv: func(string) string { return `D:\Data` }}
	def, usage := win.flag("the dir")
	want := `the dir (default D:\Data\vdibroker-data, from %ProgramData%; ./vdibroker-data instead when that holds a store and D:\Data\vdibroker-data does not)`
	if def != "" || usage != want {
		t.Errorf("windows: flag() = %q, %q; want \"\", %q", def, usage, want)
	}
}

// TestDefaultedDataDirGiven_RD1: a --data-dir given (on the command line,
// or by flagsFromEnv from VDIBROKER_DATA_DIR, which sets it the same way)
// is used as it is, with no warning: the default is only for its absence.
func TestDefaultedDataDirGiven_RD1(t *testing.T) {
	cmd := &cobra.Command{Use: "x"}
	var dir string
	addDataDirFlag(cmd, &dir, "the dir")
	if err := cmd.Flags().Set("data-dir", "/srv/vdibroker"); err != nil {
		t.Fatal(err)
	}
	if w := defaultedDataDir(cmd, &dir); dir != "/srv/vdibroker" || w != "" {
		t.Errorf("given: %q, warning %q; want /srv/vdibroker and none", dir, w)
	}
}
