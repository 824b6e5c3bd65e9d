package ratelimit

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

// A flood of new addresses does not give a throttled address a fresh
// bucket (R-SEC): the full map keeps every bucket with tokens spent and
// the flood shares one overflow bucket.
func TestLimitersFloodKeepsThrottledAddress(t *testing.T) {
	l := New(0.001, 3)
	l.max = 100
	for range 3 {
		l.Spend("attacker", time.Now())
	}
	if l.Spend("attacker", time.Now()) {
		t.Fatal("the attacker's bucket should be empty after its burst")
	}
	for i := range 500 {
		l.Spend("flood-"+strconv.Itoa(i), time.Now())
	}
	if l.Spend("attacker", time.Now()) {
		t.Fatal("after a flood of new addresses the throttled address got a fresh bucket")
	}
	if len(l.m) > l.max {
		t.Fatalf("%d buckets, want at most %d", len(l.m), l.max)
	}
	// The flood past the map shares one bucket: three new addresses in a
	// row spend its burst, and the fourth is refused.
	refused := false
	for i := range 4 {
		if !l.Spend("late-"+strconv.Itoa(i), time.Now()) {
			refused = true
		}
	}
	if !refused {
		t.Error("new addresses past a full map were each given a bucket of their own")
	}
}

// Buckets that filled up again are forgotten when the map is full, so a
// slow stream of failed attempts from many addresses never locks out new
// ones.
func TestLimitersForgetIdleBuckets(t *testing.T) {
	l := NewBounded(1000, 3, 10) // refills within milliseconds
	t0 := time.Now()
	for i := range 10 {
		l.Spend("a"+strconv.Itoa(i), t0)
	}
	// A token a millisecond: 20 ms later every bucket is full again.
	lim := l.get("new", t0.Add(20*time.Millisecond))
	if lim == l.overflow {
		t.Fatal("a full map of idle buckets gave a new address the overflow bucket")
	}
}

// One /64 of IPv6 is one address for the limits: its other addresses do
// not get buckets of their own.
func TestClientAddrIPv6Prefix(t *testing.T) {
	for in, want := range map[string]string{
		"[2001:db8:1:2:aaaa::1]:5000": "2001:db8:1:2::/64",
		"[2001:db8:1:2:bbbb::9]:5001": "2001:db8:1:2::/64",
		"192.0.2.7:4000":              "192.0.2.7",
		"[::ffff:192.0.2.7]:4000":     "::ffff:192.0.2.7",
	} {
		if got := ClientAddr(&http.Request{RemoteAddr: in}); got != want {
			t.Errorf("ClientAddr(%s) = %s, want %s", in, got, want)
		}
	}
}

// Time refills a bucket, on the clock its caller passes (R-SEC): the
// limits' tests inject theirs, and a full map sweeps at that time too.
func TestKeyedRefillsAndWait(t *testing.T) {
	l := NewBounded(0.5, 2, 4) // a token every 2 s
	t0 := time.Unix(1_000_000, 0)
	for range 2 {
		if !l.Spend("u", t0) {
			t.Fatal("a burst of 2 refused")
		}
	}
	if l.Spend("u", t0) {
		t.Fatal("a third at once taken")
	}
	if w := l.Wait("u", t0); w != 2*time.Second {
		t.Errorf("wait %v, want 2s", w)
	}
	if w := l.Wait("other", t0); w != 0 {
		t.Errorf("a key without a bucket waits %v, want 0", w)
	}
	if !l.Spend("u", t0.Add(2*time.Second)) {
		t.Error("2 s later no token had come back")
	}
	// The map full of spent buckets: a sweep at the caller's time, once
	// they are full again, makes room for new keys of their own.
	for i := range 4 {
		l.Spend("k"+strconv.Itoa(i), t0)
	}
	if l.get("new", t0) != l.overflow {
		t.Fatal("a full map of spent buckets gave a new key one of its own")
	}
	if l.get("new", t0.Add(time.Minute)) == l.overflow {
		t.Error("a minute later, with every bucket full again, the new key still shared the overflow")
	}
}

// A full map is swept at most once a second whatever order its callers'
// times come in (R-SEC): a caller reads the time before it takes the
// map's lock, so under a flood of concurrent requests a time a little
// older than the last sweep's is the rule, and must not walk the whole
// map again. A clock set back by a second or more (an injected one) is
// swept at its time.
func TestKeyedSweepsOnceASecondOutOfOrder(t *testing.T) {
	l := NewBounded(0.001, 2, 4) // spent buckets stay spent
	t0 := time.Unix(1_000_000, 0)
	for i := range 4 {
		l.Spend("k"+strconv.Itoa(i), t0)
	}
	at := t0.Add(10 * time.Second)
	if l.get("a", at) != l.overflow {
		t.Fatal("a full map of spent buckets gave a new key one of its own")
	}
	if !l.swept.Equal(at) {
		t.Fatalf("swept at %v, want %v", l.swept, at)
	}
	for _, d := range []time.Duration{-time.Millisecond, -999 * time.Millisecond, 500 * time.Millisecond} {
		l.get("b", at.Add(d))
		if !l.swept.Equal(at) {
			t.Fatalf("a caller %v from the last sweep swept the map again (at %v)", d, l.swept)
		}
	}
	back := at.Add(-time.Hour)
	l.get("c", back)
	if !l.swept.Equal(back) {
		t.Errorf("a clock set back an hour did not sweep: last sweep %v", l.swept)
	}
}

// TestRefund (R-SEC): a refund gives back the token a Spend took, and
// never fills a bucket past its burst.
func TestRefund(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	l := New(1.0/60, 2)
	if !l.Spend("k", now) || !l.Spend("k", now) || l.Spend("k", now) {
		t.Fatal("a fresh bucket of 2 did not take exactly 2")
	}
	l.Refund("k", now)
	if !l.Spend("k", now) || l.Spend("k", now) {
		t.Fatal("a refund did not give back exactly one token")
	}
	full := New(1.0/60, 2)
	full.Refund("k", now)
	full.Refund("k", now)
	for i := range 2 {
		if !full.Spend("k", now) {
			t.Fatalf("spend %d of a full bucket refunded twice refused", i+1)
		}
	}
	if full.Spend("k", now) {
		t.Fatal("refunds filled a full bucket past its burst")
	}
}
