package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFederationReloadNamesTheSecrets_RG5: each SIGHUP's line names, by
// fingerprint, the secret the process signs with and those it takes, now
// and before: steps 1 and 2 of a rotation both leave two secrets, and
// only the fingerprints tell an operator that a replica whose file had
// not changed yet is still on step 1 (docs/federation.md, "Rotating the
// secret"). A broker that is no pod reloads nothing and logs nothing.
func TestFederationReloadNamesTheSecrets_RG5(t *testing.T) {
	// Fingerprints as federation.TestFingerprint works them out.
	const (
		oldS, oldFP = "old-federation-secret-0123456789", "bdf4fc01"
		newS, newFP = "new-federation-secret-9876543210", "f46a9c93"
	)
	file := filepath.Join(t.TempDir(), "federation.secret")
	write := func(lines ...string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	log := slog.New(slog.NewTextHandler(&out, nil))
	write(oldS, newS)
	f := FederationFlags{PodName: "fra1", SecretFile: file, PodTimeout: 1}
	if err := f.load(); err != nil {
		t.Fatal(err)
	}
	f.logSecrets(log)
	if want := "signs=" + oldFP + " takes=" + oldFP + "," + newFP; !strings.Contains(out.String(), want) {
		t.Errorf("at start: want %q in %q", want, out.String())
	}
	for _, tc := range []struct {
		name  string
		lines []string
		want  string
	}{
		{"a SIGHUP before the file changed (still step 1)", []string{oldS, newS},
			"signs=" + oldFP + " takes=" + oldFP + "," + newFP + " signed=" + oldFP + " took=" + oldFP + "," + newFP},
		{"step 2", []string{newS, oldS},
			"signs=" + newFP + " takes=" + newFP + "," + oldFP + " signed=" + oldFP + " took=" + oldFP + "," + newFP},
		{"step 3", []string{newS},
			"signs=" + newFP + " takes=" + newFP + " signed=" + newFP + " took=" + newFP + "," + oldFP},
	} {
		out.Reset()
		write(tc.lines...)
		f.reload(log)
		if line := out.String(); !strings.Contains(line, "SIGHUP: federation secrets read") || !strings.Contains(line, tc.want) {
			t.Errorf("%s: want %q in %q", tc.name, tc.want, line)
		}
	}

	out.Reset()
	notPod := FederationFlags{}
	if err := notPod.load(); err != nil {
		t.Fatal(err)
	}
	notPod.logSecrets(log)
	notPod.reload(log)
	if out.Len() != 0 {
		t.Errorf("a broker that is no pod logged on SIGHUP: %q", out.String())
	}
}
