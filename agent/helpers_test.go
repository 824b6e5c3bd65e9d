package agent

import (
	"io"
	"strings"
	"testing"
	"time"
)

func stringsReader(s string) io.Reader { return strings.NewReader(s) }

// waitFor polls cond until it holds; the deadline only bounds a hung test.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
