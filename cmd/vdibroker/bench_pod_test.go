package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker/loadgen"
)

// TestBenchPodRefusesBeforeStarting: a wrong --output or a data dir that
// already holds something is a usage error, found before any broker
// starts or any state is built (the whole run is loadgen's TestPodBenchTiny).
func TestBenchPodRefusesBeforeStarting(t *testing.T) {
	used := t.TempDir()
	if err := os.WriteFile(filepath.Join(used, "vdibroker.db"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opt  benchPodOptions
		want string
	}{
		{"output", benchPodOptions{output: "yaml"}, "--output"},
		{"data dir in use", benchPodOptions{output: "table", dataDir: used}, "--data-dir"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut strings.Builder
			err := runBenchPod(t.Context(), loadgen.PodConfig{}, tc.opt, &out, &errOut)
			if err == nil || !isUsageError(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("runBenchPod() = %v, want a usage error naming %s", err, tc.want)
			}
		})
	}
}
