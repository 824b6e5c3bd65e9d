//go:build unix

package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestGatewayKeygenKeepsJWKSOwner_RGW6 (R-GW6): keygen run as root on a
// JWKS file of another owner and group, mode 0640 (the gateway reads it
// through its group), keeps the file's owner and group: a file of
// root's own would be read by no gateway, which would refuse the new
// key's tokens.
func TestGatewayKeygenKeepsJWKSOwner_RGW6(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving a file to another owner takes root")
	}
	dir := t.TempDir()
	jwks := filepath.Join(dir, "gateway-keys.json")
	if err := runKeygen(t, "k1", filepath.Join(dir, "k1.pem"), jwks); err != nil {
		t.Fatal(err)
	}
	const uid, gid = 54321, 54322
	if err := os.Chown(jwks, uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(jwks, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := runKeygen(t, "k2", filepath.Join(dir, "k2.pem"), jwks); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(jwks)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != uid || st.Gid != gid || fi.Mode().Perm() != 0o640 {
		t.Errorf("the JWKS file after keygen: owner %d group %d mode %04o; want %d %d 0640 as it was", st.Uid, st.Gid, fi.Mode().Perm(), uid, gid)
	}
	if got := jwksKeys(t, jwks); len(got) != 2 {
		t.Errorf("keys %v, want k1 and k2", got)
	}
}
