package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeSaysWhereTheAdminTokenIs: the start that creates admin.token
// says where it is (the absolute path), never the token; later starts,
// and starts with VDIBROKER_ADMIN_TOKEN, say nothing; the demo's "demo"
// token is the one shown.
func TestServeSaysWhereTheAdminTokenIs(t *testing.T) {
	t.Setenv("VDIBROKER_ADMIN_TOKEN", "")
	dir := t.TempDir()
	note := firstStart(dir)
	token, err := adminToken(dir) // what Main.Open does
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	note(&out, token)
	path := filepath.Join(dir, "admin.token")
	if got := out.String(); !strings.Contains(got, "created the admin token in "+path+" (mode 0600)") || strings.Contains(got, token) {
		t.Errorf("first start said %q, want the path %s and not the token", got, path)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("admin.token: %v, mode %v", err, st.Mode())
	}

	out.Reset()
	firstStart(dir)(&out, token)
	if out.Len() != 0 {
		t.Errorf("second start said %q, want nothing", out.String())
	}

	t.Setenv("VDIBROKER_ADMIN_TOKEN", "from-env")
	out.Reset()
	firstStart(t.TempDir())(&out, "from-env")
	if out.Len() != 0 {
		t.Errorf("start with VDIBROKER_ADMIN_TOKEN said %q, want nothing", out.String())
	}
	out.Reset()
	firstStart(t.TempDir())(&out, "demo")
	if got := out.String(); got != "admin token: demo\n" {
		t.Errorf("demo token: said %q", got)
	}
}
