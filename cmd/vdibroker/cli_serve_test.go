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

// TestServeListenChecked (docs/cli.md, "Errors and exit status"): a
// --listen that is not host:port, or whose port is past 65535, is a
// mistake in the command (exit 2) naming the flag, the value and the
// form it takes, found before the store is opened. It was found when
// serve bound the address, after it had made the data dir, migrated a
// new store and written an admin token there (exit 1, "missing port in
// address" for a port given alone).
func TestServeListenChecked(t *testing.T) {
	t.Setenv("VDIBROKER_ADMIN_TOKEN", "")
	for _, c := range []struct{ listen, want string }{
		{"19112", `error: --listen "19112": want host:port, e.g. 127.0.0.1:19112, or :19112 for every address`},
		{"127.0.0.1:99999", `error: --listen "127.0.0.1:99999": the port must be 0..65535, got 99999`},
		{"127.0.0.1", `error: --listen "127.0.0.1": want host:port, e.g. 127.0.0.1:8080`},
	} {
		dir := filepath.Join(t.TempDir(), "data")
		r := runCLI(t, "serve", "--data-dir", dir, "--listen", c.listen)
		if r.code != 2 || strings.TrimSpace(r.stderr) != c.want {
			t.Errorf("--listen %s: exit %d, stderr %q; want exit 2 and %q", c.listen, r.code, r.stderr, c.want)
		}
		checkCLIError(t, r)
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("--listen %s: the data dir was made before the flag was checked (%v)", c.listen, err)
		}
	}
}
