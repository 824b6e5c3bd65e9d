package winacl

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/windows"
)

// underWine reports whether Wine runs the test: its ntdll says its
// version.
func underWine() bool {
	return windows.NewLazySystemDLL("ntdll.dll").NewProc("wine_get_version").Find() == nil
}

// TestWindowsPrivate: the descriptors MkdirPrivate and the Create
// functions give, as Windows (or Wine, TestDataDirLockWine) reads them
// back, are what CheckPrivate accepts (R-SEC), and a rename keeps them.
// VDIBROKER_TEST_WINACL_DIR names where to work (t.TempDir's removal
// fails under Wine 8); the temporary directory otherwise.
func TestWindowsPrivate(t *testing.T) {
	base, err := os.MkdirTemp(os.Getenv("VDIBROKER_TEST_WINACL_DIR"), "winacl-")
	if err != nil {
		t.Fatal(err)
	}
	if CurrentSID() == "" {
		t.Fatal("CurrentSID: the process's account unknown")
	}
	d := filepath.Join(base, "data")
	if err := MkdirPrivate(d); err != nil {
		t.Fatal(err)
	}
	if err := CheckPrivateDir(d); err != nil {
		t.Errorf("the dir MkdirPrivate made: %v", err)
	}
	if err := MkdirPrivate(d); !errors.Is(err, os.ErrExist) {
		t.Errorf("MkdirPrivate of an existing dir: %v, want os.ErrExist", err)
	}
	s, err := ReadFileSecurity(d, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, sid := range []string{CurrentSID(), SIDSystem} {
		found := false
		for _, e := range s.DACL {
			found = found || e.Kind == ACEAllow && e.SID == sid && e.ObjectInherit && FileRights(e.Mask)&FileReadData != 0
		}
		if !found {
			t.Errorf("the dir MkdirPrivate made does not give %s reading to the files made in it: %+v", sid, s)
		}
	}

	// An existing directory others may read the files of (os.Mkdir's,
	// which takes its parent's entries; under Wine 0755): SetPrivateDir
	// makes it as MkdirPrivate would.
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := SetPrivateDir(open); err != nil {
		t.Fatalf("SetPrivateDir: %v", err)
	}
	// Wine 8 answers a DACL made from the Unix mode, which its
	// SetSecurityInfo sets to 0770 for a directory made on Linux (serve's,
	// TestDataDirLockWine), but not always for one it made itself.
	switch err := CheckPrivateDir(open); {
	case underWine():
		t.Logf("under Wine: %v", err)
	case err != nil:
		t.Errorf("the dir SetPrivateDir made private: %v", err)
	}
	if err := SetPrivateDir(filepath.Join(base, "missing")); err == nil {
		t.Error("SetPrivateDir of a dir that does not exist: no error")
	}

	for _, c := range []struct {
		name   string
		create func(string) (*os.File, error)
	}{
		{"CreatePrivateFile", CreatePrivateFile},
		{"CreateFileSDDL", func(name string) (*os.File, error) {
			return CreateFileSDDL(name, "O:BAD:P(A;;FA;;;SY)(A;;FA;;;BA)") // the agent's
		}},
	} {
		name := filepath.Join(d, c.name)
		f, err := c.create(name)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if _, err := f.WriteString("secret\n"); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if err := CheckPrivateFile(name); err != nil {
			t.Errorf("the file %s made: %v", c.name, err)
		}
		if _, err := c.create(name); !errors.Is(err, os.ErrExist) {
			t.Errorf("%s of an existing file: %v, want os.ErrExist", c.name, err)
		}
		// Replaced atomically by a rename: the DACL goes with the file.
		if err := os.Rename(name, name+".renamed"); err != nil {
			t.Fatal(err)
		}
		if err := CheckPrivateFile(name + ".renamed"); err != nil {
			t.Errorf("the file %s made, renamed: %v", c.name, err)
		}
	}

	// What a library makes in the dir, with no descriptor of its own
	// (SQLite's -wal and -shm), inherits the dir's entries on Windows.
	// Wine 8 gives a file none: it answers a DACL made from the file's
	// Unix mode (0644: Everyone may read).
	plain := filepath.Join(d, "vdibroker.db-wal")
	if err := os.WriteFile(plain, []byte("pages"), 0o600); err != nil {
		t.Fatal(err)
	}
	err = CheckPrivateFile(plain)
	switch {
	case underWine():
		t.Logf("under Wine, no inheritance: %v", err)
	case err != nil:
		t.Errorf("a file made in the dir MkdirPrivate made: %v", err)
	}
}
