package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestRetentionFlag (R-SEC audit): serve's --retention, which prunes the
// audit trail with the history, is 0 (keep for ever) or a day or more: a
// value under a day ("5m" typed for five months) or below zero is a
// usage error naming the flag and its range, and nothing is served; 0
// and a day are taken (serve runs until its context ends).
func TestRetentionFlag(t *testing.T) {
	for _, v := range []string{"5m", "23h59m", "-1h"} {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		r := runCLIIn(t, ctx, "serve", "--retention", v, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0")
		cancel()
		if r.code != 2 || !strings.Contains(r.stderr, "--retention: must be 0 (keep for ever) or 24h or more, got") {
			t.Errorf("serve --retention %s: exit %d, %q; want 2 naming the flag and its range", v, r.code, r.stderr)
		}
	}
	for _, v := range []string{"0", "24h"} {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		r := runCLIIn(t, ctx, "serve", "--retention", v, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0")
		cancel()
		if strings.Contains(r.stderr, "--retention") {
			t.Errorf("serve --retention %s: exit %d, %q; want it taken", v, r.code, r.stderr)
		}
	}
}
