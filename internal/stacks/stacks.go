// Package stacks lets a test wait until goroutines reached a point of
// its code under test, read from their stacks: a waiter that joined a
// shared call, a request queued behind a limit. A test so waits for
// what happened, not for a time.
package stacks

import (
	"runtime"
	"strings"
	"time"
)

// Wait reports whether n goroutines' stacks hold every one of marks
// (frames such as "pkg.(*T).Method(", or a state of the header such as
// "[select") within a guard of 10 seconds against a hang, which is not a
// measure of anything.
func Wait(n int, marks ...string) bool {
	buf := make([]byte, 1<<22)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if Count(buf, marks...) >= n {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		runtime.Gosched()
	}
}

// Count is how many goroutines' stacks hold every one of marks now; buf
// is where the stacks are written (the larger, the more are read).
func Count(buf []byte, marks ...string) int {
	got := 0
stacks:
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		for _, m := range marks {
			if !strings.Contains(g, m) {
				continue stacks
			}
		}
		got++
	}
	return got
}

// WaitParked reports whether n goroutines are parked in state (a state
// of the header, "[select") directly in frame ("pkg.(*T).Method("): the
// first frame below the runtime's is frame's, so a goroutine parked in a
// select of a function frame called is not counted. Its guard is Wait's.
func WaitParked(n int, state, frame string) bool {
	buf := make([]byte, 1<<22)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if CountParked(buf, state, frame) >= n {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		runtime.Gosched()
	}
}

// CountParked is how many goroutines are parked in state directly in
// frame now; buf is as Count's.
func CountParked(buf []byte, state, frame string) int {
	got := 0
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		header, frames, _ := strings.Cut(g, "\n")
		if !strings.Contains(header, state) {
			continue
		}
		// Frames come as a function's line, then its file's (indented).
		for _, line := range strings.Split(frames, "\n") {
			if strings.HasPrefix(line, "\t") || strings.HasPrefix(line, "runtime.") {
				continue
			}
			if strings.Contains(line, frame) {
				got++
			}
			break
		}
	}
	return got
}
