package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteFileAtomicPrivateWindows (R-SEC): a file writeFileAtomic
// writes for its owner alone (the .rdp file of a connect, which holds a
// gateway token; mode 0600 elsewhere) has createSecretFile's DACL, the
// account, SYSTEM and Administrators, not the one its folder hands down;
// the one it replaces too; nothing is left beside it; keygen into one
// file for both keys is refused. Run under Wine by
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
	// keygen's --private-key and --jwks naming one file are refused on
	// Windows too (its own path spelled in another case), leaving none.
	keys := filepath.Join(dir, "gateway.json")
	if err := runKeygen(t, "k1", keys, filepath.Join(dir, "GATEWAY.json")); err == nil || !strings.Contains(err.Error(), "are the same file") {
		t.Errorf("keygen into one file = %v, want refused: the same file", err)
	}
	if _, err := os.Stat(keys); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused keygen left %s: %v", keys, err)
	}
}
