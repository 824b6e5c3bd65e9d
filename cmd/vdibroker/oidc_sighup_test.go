//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/testop"
)

// TestServeRoleMapSIGHUP: a real serve process reads --oidc-role-map
// again on SIGHUP: a token of group helpdesk, a Reader, is a Contributor
// once the file says so; a file that does not load keeps the map in
// force and says why.
func TestServeRoleMapSIGHUP(t *testing.T) {
	bin := selfBin(t)
	op := testop.Start(t, "vdibroker-console", "console-secret")
	dir := t.TempDir()
	roles := filepath.Join(dir, "roles.yaml")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(roles, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("groups:\n  helpdesk: {role: Reader}\n")
	p, base := e2eServeAt(t, bin, filepath.Join(dir, "data"), "vdb_admin_role_map_test_0123456789", "127.0.0.1:0",
		"--oidc-issuer", op.Issuer, "--oidc-client-id", op.ClientID, "--oidc-role-map", roles)
	token := op.Mint(map[string]any{"sub": "hd-1", "groups": []string{"helpdesk"}})
	role := func() string {
		t.Helper()
		me, err := vhttp.NewClient(base, token).WhoAmI(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return me.Role
	}
	hup := func(want string) {
		t.Helper()
		n := strings.Count(p.stderr.String(), "OIDC role map")
		if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		e2eEventually(t, "the SIGHUP line", 10*time.Second, func() bool { return strings.Count(p.stderr.String(), "OIDC role map") > n })
		if log := p.stderr.String(); !strings.Contains(log[strings.LastIndex(log, "OIDC role map"):], want) {
			t.Fatalf("after SIGHUP, want %q in:\n%s", want, log)
		}
	}
	if r := role(); r != "Reader" {
		t.Fatalf("before: %s", r)
	}
	write("groups:\n  helpdesk: {role: Contributor}\n")
	hup("groups=1")
	if r := role(); r != "Contributor" {
		t.Errorf("after SIGHUP: %s, want Contributor", r)
	}
	write("groups:\n  helpdesk: {role: Admin}\n")
	hup("role must be")
	if r := role(); r != "Contributor" {
		t.Errorf("after a bad file: %s, want Contributor kept", r)
	}
}
