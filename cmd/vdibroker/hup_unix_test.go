//go:build unix

package main

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// TestOnHUPWaitsUntilReady: a SIGHUP that comes while serve opens (before
// ready) is caught, not the end of the process, and answered once ready
// closes: reload reads what the start set (the federation secrets, R-G5;
// the OIDC provider) after it was set. Run with -race: a reload answered
// at once reads started while the test writes it, which the race
// detector reports (without it, the value read tells only sometimes).
func TestOnHUPWaitsUntilReady(t *testing.T) {
	ready, read := make(chan struct{}), make(chan int, 4)
	started := 0 // what Open sets; reload reads it
	onHUP(t.Context(), ready, func() { read <- started })
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	started = 1
	close(ready)
	select {
	case got := <-read:
		if got != 1 {
			t.Errorf("reload read %d, want 1: it ran before ready", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the SIGHUP that came before ready was never answered")
	}
}
