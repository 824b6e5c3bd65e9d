package outage

import (
	"testing"
	"time"
)

// TestEscrowLeft (R-OUT3): what a replica may place on a host during an
// outage is the smaller of its last two grants, less its own placements
// since the last renewal and this outage's, and nothing once the last
// grant is within escrowMargin of its expiry.
func TestEscrowLeft(t *testing.T) {
	now := time.Date(2026, 12, 1, 19, 0, 0, 0, time.UTC)
	h := hostKey{"p", "h1"}
	tests := []struct {
		name      string
		prev, cur int
		own, used int
		expireIn  time.Duration
		want      int
	}{
		// min(2, 3) - 0 - 0 = 2
		{name: "settled", prev: 2, cur: 3, expireIn: 30 * time.Second, want: 2},
		// The first grant is not settled: no renewal before it, min(0, 2) = 0.
		{name: "first grant", prev: 0, cur: 2, expireIn: 30 * time.Second, want: 0},
		// min(2, 2) - 1 own placement since the renewal = 1.
		{name: "own placement", prev: 2, cur: 2, own: 1, expireIn: 30 * time.Second, want: 1},
		// min(2, 2) - 2 placed in this outage = 0.
		{name: "used up", prev: 2, cur: 2, used: 2, expireIn: 30 * time.Second, want: 0},
		// 500 ms before expiry is within the 1 s margin: 0.
		{name: "expiring", prev: 2, cur: 2, expireIn: 500 * time.Millisecond, want: 0},
		{name: "expired", prev: 2, cur: 2, expireIn: -time.Second, want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := &escrowKeeper{prev: map[hostKey]int{h: tc.prev}, cur: map[hostKey]int{h: tc.cur},
				own: map[hostKey]int{h: tc.own}, used: map[hostKey]int{h: tc.used}, expire: now.Add(tc.expireIn)}
			if got := max(k.left(h, now), 0); got != tc.want {
				t.Errorf("left = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestHealthCredit (R-H1, R-OUT5): a heartbeat time before the end of
// the last outage moves forward by its length, never past its end; one
// after it, or with no outage yet, stays.
func TestHealthCredit(t *testing.T) {
	start := time.Date(2026, 12, 1, 19, 0, 0, 0, time.UTC)
	end := start.Add(60 * time.Second)
	h := &Health{lastSince: start, lastEnd: end}
	at := func(d time.Duration) *time.Time { x := start.Add(d); return &x }
	tests := []struct {
		name   string
		hb     *time.Time
		want   *time.Time
		health *Health
	}{
		// 5 s before the outage: 5 s before its end (age since the outage 5 s).
		{name: "before the outage", hb: at(-5 * time.Second), want: at(55 * time.Second), health: h},
		// 10 s into it (held by another replica): moved to the end, not past.
		{name: "during the outage", hb: at(10 * time.Second), want: at(60 * time.Second), health: h},
		{name: "after the outage", hb: at(61 * time.Second), want: at(61 * time.Second), health: h},
		{name: "no outage yet", hb: at(-5 * time.Second), want: at(-5 * time.Second), health: &Health{}},
		{name: "never heard", hb: nil, want: nil, health: h},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.health.Credit(tc.hb)
			if (got == nil) != (tc.want == nil) || got != nil && !got.Equal(*tc.want) {
				t.Errorf("credit(%v) = %v, want %v", tc.hb, got, tc.want)
			}
		})
	}
}
