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

// parkBelow is parked in parkHere's select, a frame below its own.
func parkBelow(release, never chan struct{}, wg *sync.WaitGroup) {
	parkHere(release, never, wg)
}

// TestWaitParkedCountsOnlyTheParkingFrame: of goroutines parked in a
// select, only those whose select is the frame's own are counted, not
// one parked in a select of a function the frame called (a scrape
// parked in a gathering's select is not one waiting for a slot).
func TestWaitParkedCountsOnlyTheParkingFrame(t *testing.T) {
	release, never := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(3)
	go parkHere(release, never, &wg)
	go parkBelow(release, never, &wg)
	go parkBelow(release, never, &wg)
	if !Wait(3, "stacks.parkHere(", "[select") {
		t.Fatal("three goroutines in parkHere not seen")
	}
	if !WaitParked(3, "[select", "stacks.parkHere(") {
		t.Fatal("goroutines parked directly in parkHere not seen")
	}
	buf := make([]byte, 1<<20)
	if n := CountParked(buf, "[select", "stacks.parkBelow("); n != 0 {
		t.Errorf("%d goroutines counted parked directly in parkBelow, whose select is parkHere's", n)
	}
	if n := CountParked(buf, "[select", "stacks.parkHere("); n != 3 {
		t.Errorf("%d goroutines parked directly in parkHere, want 3", n)
	}
	if n := CountParked(buf, "[chan receive", "stacks.parkHere("); n != 0 {
		t.Errorf("%d goroutines counted in a state none is in", n)
	}
	close(release)
	wg.Wait()
}
