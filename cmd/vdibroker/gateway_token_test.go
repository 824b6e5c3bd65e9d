package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestTokenFileReadAgain: a gateway's token file is read at start and
// again at each reload (SIGHUP): a new token is taken, a file that is
// missing, holds no token, more than one, or one under the minimum keeps
// the one in force; without a file the token given is used.
func TestTokenFileReadAgain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gateway.token")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("vdbt_first\n")
	f, err := newTokenFile("--broker-token-file", path, "", tokenSent, 0)
	if err != nil || f.get() != "vdbt_first" {
		t.Fatalf("at start: %q, %v; want vdbt_first", f.get(), err)
	}
	write("  vdbt_second \n")
	if err := f.reload(); err != nil || f.get() != "vdbt_second" {
		t.Fatalf("after a reload: %q, %v; want vdbt_second", f.get(), err)
	}
	write("\n")
	if err := f.reload(); err == nil || f.get() != "vdbt_second" {
		t.Errorf("an empty file: %q, %v; want the token kept and an error", f.get(), err)
	}
	// Two lines (the new token added under the old, as a federation
	// secret file holds two while rotating) or a space inside are no
	// token: sent, every report of the gateway would fail or be refused.
	for _, bad := range []string{"vdbt_third\nvdbt_second\n", "vdbt_third vdbt_second", "vdbt_\x00third"} {
		write(bad)
		if err := f.reload(); err == nil || f.get() != "vdbt_second" {
			t.Errorf("%q: %q, %v; want the token kept and an error", bad, f.get(), err)
		}
	}
	os.Remove(path)
	if err := f.reload(); err == nil || f.get() != "vdbt_second" {
		t.Errorf("a missing file: %q, %v; want the token kept and an error", f.get(), err)
	}
	if _, err := newTokenFile("--broker-token-file", path, "", tokenSent, 0); err == nil {
		t.Error("a missing file at start was taken")
	}
	// A minimum (serve's metrics token: 16): a shorter token is refused
	// at start and kept out by a reload.
	write("short-token")
	if _, err := newTokenFile("--metrics-token-file", path, "", tokenChecked, 16); err == nil {
		t.Error("a token under the minimum was taken at start")
	}
	write("metrics-0123456789")
	m, err := newTokenFile("--metrics-token-file", path, "", tokenChecked, 16)
	if err != nil || m.get() != "metrics-0123456789" {
		t.Fatalf("a token of the minimum: %q, %v", m.get(), err)
	}
	write("short-token")
	if err := m.reload(); err == nil || m.get() != "metrics-0123456789" {
		t.Errorf("a short token: %q, %v; want the token kept and an error", m.get(), err)
	}
	given, err := newTokenFile("--broker-token-file", "", "vdbt_given", tokenSent, 0)
	if err != nil || given.get() != "vdbt_given" || given.reload() != nil || given.get() != "vdbt_given" {
		t.Errorf("no file: %q, %v; want the token given, kept by a reload", given.get(), err)
	}
}
