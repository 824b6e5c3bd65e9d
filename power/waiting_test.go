package power

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestWaitingUsersBounded (R-SEC, R-A4): a caller that may connect for
// any user (a federation peer, a Contributor) names a new one at each
// connect a start-on-connect pool answers HostStarting. The pool keeps
// at most MaxWaitingUsers of them, each in 32 bytes however long its
// name: past the bound a new user is counted for her own connect and
// not kept. A user kept counts once in any case (R-E5), and those kept
// longer than StartTimeout are forgotten, which makes room again.
func TestWaitingUsersBounded(t *testing.T) {
	s := NewService(ServiceConfig{})
	t.Cleanup(func() { s.Close() })
	now := time.Date(2025, 3, 1, 8, 0, 0, 0, time.UTC)
	// 256 characters of 4 bytes: the longest name a connect takes (1 KiB).
	long := func(i int) string {
		n := fmt.Sprintf("%d", i)
		return n + strings.Repeat("\U0001D538", 256-len(n))
	}
	for i := range MaxWaitingUsers {
		if got := s.wait("p", long(i), now); got != i+1 {
			t.Fatalf("user %d: %d waiting, want %d", i, got, i+1)
		}
	}
	// Past the bound: each new user counts for her connect, one more than
	// those kept, and is not kept.
	for i := MaxWaitingUsers; i < MaxWaitingUsers+50; i++ {
		if got := s.wait("p", long(i), now); got != MaxWaitingUsers+1 {
			t.Fatalf("user %d past the bound: %d waiting, want %d", i, got, MaxWaitingUsers+1)
		}
	}
	if got := len(s.waiting["p"].m); got != MaxWaitingUsers {
		t.Fatalf("the pool keeps %d waiting users, want at most %d", got, MaxWaitingUsers)
	}
	// A user kept, in another spelling, is the same user (R-E5).
	if got := s.wait("p", strings.ToUpper(long(7)), now); got != MaxWaitingUsers {
		t.Fatalf("a kept user again: %d waiting, want %d", got, MaxWaitingUsers)
	}
	// Another pool has its own bound.
	if got := s.wait("q", "alice", now); got != 1 {
		t.Fatalf("another pool: %d waiting, want 1", got)
	}
	// After StartTimeout the kept users are forgotten: room again.
	later := now.Add(StartTimeout + time.Second)
	if got := s.wait("p", "bob", later); got != 1 {
		t.Fatalf("after StartTimeout: %d waiting, want 1 (bob alone)", got)
	}
	s.Unwait("p", "BOB")
	if _, ok := s.waiting["p"]; ok {
		t.Fatal("a pool whose last waiting user was unwaited keeps its map")
	}
}
