package stacks

import (
	"sync"
	"testing"
)

// parkHere blocks in a select until release is closed.
func parkHere(release, never chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	select {
	case <-release:
	case <-never:
	}
}

// TestWaitCountsOnlyMatchingStacks: three goroutines parked in
// parkHere are counted by its frame and their state, and none by a
// frame no goroutine is in.
func TestWaitCountsOnlyMatchingStacks(t *testing.T) {
	release, never := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go parkHere(release, never, &wg)
	}
	if !Wait(3, "stacks.parkHere(", "[select") {
		t.Fatal("three goroutines in parkHere not seen")
	}
	if n := Count(make([]byte, 1<<20), "stacks.noSuchFunction("); n != 0 {
		t.Errorf("%d goroutines in a function that does not exist", n)
	}
	close(release)
	wg.Wait()
	// Past its select each has called Done, though it may not have left
	// parkHere's frame yet (Done is deferred): none is parked any more.
	if n := Count(make([]byte, 1<<20), "stacks.parkHere(", "[select"); n != 0 {
		t.Errorf("%d goroutines still parked in parkHere after the release", n)
	}
}
