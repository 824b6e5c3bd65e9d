package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestGeneratedStoreIsCurrent: intercept/store_gen.go is what storegen
// writes for today's vdibroker.Store (run `go generate ./intercept` after
// changing the interface).
func TestGeneratedStoreIsCurrent(t *testing.T) {
	want, err := generate("../..")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../intercept/store_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("intercept/store_gen.go is stale: run go generate ./intercept")
	}
}

// TestGenerateRefusesWhatItCannotWrap: a method whose last result is not
// an error cannot report the hook's refusal, and a parameter named like
// the generated code's own names would be shadowed; both are refused
// rather than written wrong.
func TestGenerateRefusesWhatItCannotWrap(t *testing.T) {
	for name, tc := range map[string]struct{ src, want string }{
		"no error result": {`type Store interface { Count(ctx context.Context) int }`, "last result is not an error"},
		"reserved name":   {`type Store interface { Get(ctx context.Context, s string) error }`, "parameter s"},
		"foreign embed":   {`type Store interface { io.Closer }`, "only interfaces of package vdibroker"},
		"unknown type":    {`type Store interface { Get(ctx context.Context) (*Nope, error) }`, "unknown type Nope"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			src := "package vdibroker\n\nimport (\n\t\"context\"\n\t\"io\"\n)\n\nvar _ io.Reader\n\n" + tc.src + "\n"
			if err := os.WriteFile(dir+"/store.go", []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := generate(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("generate: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
