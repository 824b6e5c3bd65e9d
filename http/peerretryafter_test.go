package http

import (
	"strconv"
	"testing"
	"time"
)

// FuzzPeerRetryAfter: whatever a peer sends as Retry-After, the wait
// taken is none or whole seconds from 1 s to maxPeerRetryAfter, and only
// from plain digits whose number it is (no sign, no fraction, no date).
func FuzzPeerRetryAfter(f *testing.F) {
	for _, s := range []string{"2", "3600", "3601", "0", "-5", "+5", "1.5", "0x10", "007", "1_0", " 5", "Wed, 21 Oct 2015 07:28:00 GMT", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d := peerRetryAfter(v)
		if d == 0 {
			return
		}
		if d < time.Second || d > maxPeerRetryAfter || d%time.Second != 0 {
			t.Fatalf("%q: %v, want 0 or whole seconds in 1s..%v", v, d, maxPeerRetryAfter)
		}
		for _, r := range v {
			if r < '0' || r > '9' {
				t.Fatalf("%q, not only digits, taken as %v", v, d)
			}
		}
		if n, err := strconv.ParseUint(v, 10, 64); err != nil || time.Duration(n)*time.Second != d {
			t.Fatalf("%q taken as %v, not its number of seconds", v, d)
		}
	})
}
