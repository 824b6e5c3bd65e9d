package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWriteFileAtomicPrivateWindows (R-SEC): a file writeFileAtomic
// writes for its owner alone (the .rdp file of a connect, which holds a
// gateway token; mode 0600 elsewhere) has createSecretFile's DACL, the
// account, SYSTEM and Administrators, not the one its folder hands down;
// the one it replaces too; nothing is left beside it. Run under Wine by
// TestDataDirLockWine, in a new dir in VDIBROKER_TEST_ATOMIC_DIR (Wine 8
// cannot remove a t.TempDir).
func TestWriteFileAtomicPrivateWindows(t *testing.T) {
	dir, err := os.MkdirTemp(os.Getenv("VDIBROKER_TEST_ATOMIC_DIR"), "atomic-")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "alice.rdp")
	for _, text := range []string{"first", "second"} {
		if err := writeFileAtomic(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := checkSecretFile(path); err != nil {
			t.Errorf("%s after writing %q: %v", path, text, err)
		}
		if data, _ := os.ReadFile(path); string(data) != text {
			t.Errorf("%s holds %q, want %q", path, data, text)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d files, want alice.rdp alone", len(ents))
	}
}
