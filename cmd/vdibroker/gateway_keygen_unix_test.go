//go:build unix

package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGatewayKeygenPrivateKeyFile_RSEC: the signing key keygen writes is
// its owner's alone, mode 0600, and an existing file
// (here one of mode 0644, whose mode os.WriteFile would keep) is refused
// and left as it was, not filled with the new key.
func TestGatewayKeygenPrivateKeyFile_RSEC(t *testing.T) {
	dir := t.TempDir()
	keygen := func(key string) error {
		cmd := newGatewayKeygenCmd()
		cmd.SetArgs([]string{"--key-id", "k1", "--private-key", key, "--jwks", filepath.Join(dir, filepath.Base(key)+".json")})
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		return cmd.Execute()
	}

	key := filepath.Join(dir, "signing.pem")
	if err := keygen(key); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(key); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the new key: %v, %v; want mode 0600", fi.Mode(), err)
	}

	open := filepath.Join(dir, "open.pem")
	if err := os.WriteFile(open, []byte("someone's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := keygen(open)
	if err == nil || !strings.Contains(err.Error(), "--private-key "+open+" exists: give a new file") {
		t.Errorf("keygen over an existing file: %v, want a refusal naming it", err)
	}
	if b, _ := os.ReadFile(open); string(b) != "someone's\n" {
		t.Errorf("the existing file was rewritten: %q", b)
	}
	if fi, err := os.Stat(open); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("the existing file: %v, %v; want it as it was", fi.Mode(), err)
	}
}
