package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
)

// TestIdempotencyKeysPerEndUser (R-C6, R-SEC): an end user's keys are
// held to idemPerUser, her oldest answered one dropped first; another
// user's and an administrator's are not pushed out by hers; one of hers
// still running is not dropped; and a user none of whose keys are kept
// any longer leaves nothing behind.
func TestIdempotencyKeysPerEndUser(t *testing.T) {
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	c := newIdempotency(func() time.Time { return now })
	runs := map[string]int{}
	connect := func(user, key string) *vdibroker.ConnectAnswer {
		return c.do(user, key, func() (*vdibroker.ConnectAnswer, bool) {
			runs[key]++
			return &vdibroker.ConnectAnswer{ConnectResponse: vdibroker.ConnectResponse{SessionID: fmt.Sprintf("%s-%d", key, runs[key])}}, true
		})
	}
	connect("carol", "carol-1")
	for i := range 150 {
		connect("", fmt.Sprintf("admin-%d", i))
	}
	// One of alice's still running while she sends idemPerUser more.
	release, started := make(chan struct{}), make(chan struct{})
	slow := make(chan *vdibroker.ConnectAnswer)
	go func() {
		slow <- c.do("alice", "alice-slow", func() (*vdibroker.ConnectAnswer, bool) {
			close(started)
			<-release
			return &vdibroker.ConnectAnswer{ConnectResponse: vdibroker.ConnectResponse{SessionID: "slow"}}, true
		})
	}()
	<-started
	for i := range idemPerUser {
		connect("alice", fmt.Sprintf("alice-%d", i))
	}
	close(release)
	if a := <-slow; a.SessionID != "slow" {
		t.Fatalf("alice's running connect answered %+v", a)
	}
	// alice-slow was kept past the bound while it ran: her next key
	// drops it (her oldest answered) and alice-0, back to idemPerUser;
	// alice-newer drops alice-1.
	connect("alice", "alice-new")
	connect("alice", "alice-newer")
	ranAgain := func(user, key string) bool {
		before := runs[key]
		connect(user, key)
		return runs[key] > before
	}
	for _, k := range []struct {
		user, key string
		again     bool
	}{
		// Kept first (one run again drops another of hers).
		{"alice", "alice-2", false}, {"alice", "alice-99", false}, {"alice", "alice-newer", false},
		{"carol", "carol-1", false}, {"", "admin-0", false}, {"", "admin-149", false},
		{"alice", "alice-slow", true}, {"alice", "alice-0", true}, {"alice", "alice-1", true},
	} {
		if got := ranAgain(k.user, k.key); got != k.again {
			t.Errorf("%s ran again: %v, want %v", k.key, got, k.again)
		}
	}
	if n := len(c.byUser["alice"]); n > idemPerUser {
		t.Errorf("alice holds %d entries, want at most %d", n, idemPerUser)
	}

	// A day on, everything expires at the next connect, and no user's
	// list is left behind.
	now = now.Add(idemTTL + time.Second)
	connect("dave", "dave-1")
	if len(c.m) != 1 || len(c.byUser) != 1 || len(c.byUser["dave"]) != 1 {
		t.Errorf("after a day: %d keys, users %d (dave's %d), want dave's one", len(c.m), len(c.byUser), len(c.byUser["dave"]))
	}
}

// TestIdempotencyFailedKeyLeavesNothing (R-C6): a connect that failed is
// not kept, and its user's entries do not keep it.
func TestIdempotencyFailedKeyLeavesNothing(t *testing.T) {
	c := newIdempotency(time.Now)
	if a := c.do("alice", "k", func() (*vdibroker.ConnectAnswer, bool) { return nil, false }); a != nil {
		t.Fatalf("a failed connect answered %+v", a)
	}
	if len(c.m) != 0 || len(c.byUser) != 0 {
		t.Errorf("after a failed connect: %d keys, %d users, want none", len(c.m), len(c.byUser))
	}
}

// TestIdempotencyEndUserDoesNotPushOthersOut (R-C6, R-SEC): an end user
// sending more keys than the whole cache holds, each answered and
// dropped in turn by her own bound, pushes out no other caller's key:
// her dropped keys no longer count toward idemMax. Nor does the expiry
// order grow with them.
func TestIdempotencyEndUserDoesNotPushOthersOut(t *testing.T) {
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	c := newIdempotency(func() time.Time { return now })
	runs := map[string]int{}
	connect := func(user, key string) {
		c.do(user, key, func() (*vdibroker.ConnectAnswer, bool) {
			runs[key]++
			return &vdibroker.ConnectAnswer{}, true
		})
	}
	connect("", "frontend-1")
	for i := range idemMax + 10 {
		connect("alice", fmt.Sprintf("alice-%d", i))
	}
	connect("", "frontend-1")
	if runs["frontend-1"] != 1 {
		t.Errorf("the front end's key ran %d times, want once: alice's dropped keys pushed it out", runs["frontend-1"])
	}
	if len(c.m) != idemPerUser+1 {
		t.Errorf("%d keys kept, want alice's %d and the front end's", len(c.m), idemPerUser)
	}
	if len(c.order) > 2*len(c.m)+idemOrderSlack {
		t.Errorf("the expiry order holds %d entries for %d keys", len(c.order), len(c.m))
	}
}

// TestIdempotencyKeyRunAgainExpiresOnTime (R-C6): a key whose entry was
// dropped (failed, or its user's bound) and then run again does not
// hold back the expiry of older keys behind its first place in the
// order, nor is the new entry expired at its old place.
func TestIdempotencyKeyRunAgainExpiresOnTime(t *testing.T) {
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	c := newIdempotency(func() time.Time { return now })
	runs := map[string]int{}
	fail := true
	connect := func(key string) {
		c.do("", key, func() (*vdibroker.ConnectAnswer, bool) {
			runs[key]++
			if key == "k" && fail {
				return nil, false
			}
			return &vdibroker.ConnectAnswer{}, true
		})
	}
	connect("first")
	connect("k") // fails: not kept
	now = now.Add(time.Minute)
	connect("old")
	now = now.Add(idemTTL - 2*time.Minute)
	fail = false
	connect("k") // kept now, a day after "old"
	now = now.Add(3 * time.Minute)
	connect("other")
	if _, ok := c.m["old"]; ok {
		t.Errorf("a key older than %s is still kept", idemTTL)
	}
	connect("k")
	if runs["k"] != 2 {
		t.Errorf("k ran %d times, want 2 (failed once, then kept)", runs["k"])
	}
}
