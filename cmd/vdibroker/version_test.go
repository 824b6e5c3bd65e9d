package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestVersionCommand: the real binary says which release it is (as set
// with -ldflags -X main.version) and the newest schema version it
// migrates each database to, the newest migration file of store/: an
// admin upgrading or rolling back compares it with the version a refused
// start or restore names (docs/operations.md).
func TestVersionCommand(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found; this test builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "vdibroker")
	if out, err := exec.Command(goBin, "build", "-ldflags", "-X main.version=v9.8.7", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("vdibroker version: %v\n%s", err, out)
	}
	if !strings.HasPrefix(string(out), "vdibroker v9.8.7\n") {
		t.Errorf("first line is not the release set at build time:\n%s", out)
	}
	for _, d := range []string{"sqlite", "postgres"} {
		files, err := filepath.Glob(filepath.Join("..", "..", "store", "migrations", d, "*.sql"))
		if err != nil || len(files) == 0 {
			t.Fatalf("migrations of %s: %v", d, err)
		}
		name := filepath.Base(files[len(files)-1])
		n := strings.TrimLeft(name[:strings.IndexByte(name, '_')], "0")
		if want := "schema    " + d + " " + n + "\n"; !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q (newest migration %s):\n%s", want, name, out)
		}
	}
}
