package power

import (
	"fmt"
	"math/rand/v2"
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

// TestWaitingUserAgainPastStartTimeout (R-A4): a user who connects again
// after StartTimeout, in the second before her pool's next sweep, waits
// anew from that connect, as she would had the sweep come first; she is
// not forgotten at that sweep while she waits, which would leave her out
// of the count of those who need a host.
func TestWaitingUserAgainPastStartTimeout(t *testing.T) {
	s := NewService(ServiceConfig{})
	t.Cleanup(func() { s.Close() })
	t0 := time.Date(2025, 3, 1, 8, 0, 0, 0, time.UTC)
	s.wait("p", "alice", t0)
	s.wait("p", "bob", t0.Add(500*time.Millisecond))
	// alice is due: the sweep forgets her, and the next one is a second
	// later (bob is due in half a second, the sweep at most once a second).
	t1 := t0.Add(StartTimeout + time.Nanosecond)
	if got := s.wait("p", "carol", t1); got != 2 {
		t.Fatalf("at alice's expiry: %d waiting, want 2 (bob, carol)", got)
	}
	// bob, expired a tenth of a second ago and not swept yet, connects
	// again: he waits from now.
	if got := s.wait("p", "BOB", t1.Add(600*time.Millisecond)); got != 2 {
		t.Fatalf("bob again: %d waiting, want 2 (bob, carol)", got)
	}
	// The sweep a second after the last one keeps him.
	if got := s.wait("p", "dave", t1.Add(time.Second)); got != 3 {
		t.Fatalf("after the next sweep: %d waiting, want 3 (bob, carol, dave)", got)
	}
}

// TestWaitingUsersCountedAtMostASecondLate (R-A4): against a model that
// forgets each user exactly StartTimeout after she was first answered
// HostStarting (and waits anew when she connects after it), a seeded run
// of connects and Unwaits over an injected clock: each count holds every
// user the model holds, and no user forgotten by the model more than a
// second ago (the sweep comes at most once a second).
func TestWaitingUsersCountedAtMostASecondLate(t *testing.T) {
	s := NewService(ServiceConfig{})
	t.Cleanup(func() { s.Close() })
	rng := rand.New(rand.NewPCG(7, 11))
	now := time.Date(2025, 3, 1, 8, 0, 0, 0, time.UTC)
	model := map[string]time.Time{} // user -> from when she waits
	count := func(slack time.Duration) int {
		n := 0
		for _, at := range model {
			if now.Sub(at) <= StartTimeout+slack {
				n++
			}
		}
		return n
	}
	for i := range 20000 {
		// Steps of up to a minute, or under a second to land between sweeps.
		if rng.IntN(2) == 0 {
			now = now.Add(time.Duration(rng.Int64N(int64(time.Minute))))
		} else {
			now = now.Add(time.Duration(rng.Int64N(int64(time.Second))))
		}
		user := fmt.Sprintf("user%d", rng.IntN(40))
		if rng.IntN(8) == 0 {
			s.Unwait("p", strings.ToUpper(user))
			delete(model, user)
			continue
		}
		if at, ok := model[user]; !ok || now.Sub(at) > StartTimeout {
			model[user] = now
		}
		got := s.wait("p", user, now)
		if lo, hi := count(0), count(time.Second); got < lo || got > hi {
			t.Fatalf("step %d at %s: %d waiting, want %d to %d", i, now.Format(time.RFC3339Nano), got, lo, hi)
		}
	}
}
