package vdibroker

import (
	"testing"
	"time"
)

// TestDurationFlag: the zero units a duration ends with are left out,
// and what is left reads back as the same duration.
func TestDurationFlag(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{720 * time.Hour, "720h"},
		{24 * time.Hour, "24h"},
		{10 * time.Minute, "10m"},
		{90 * time.Minute, "1h30m"},
		{time.Hour + 30*time.Second, "1h0m30s"},
		{time.Second, "1s"},
		{1500 * time.Millisecond, "1.5s"},
		{0, "0s"},
		// A negative one (a range's refused value) keeps its sign; a
		// sub-second part is no zero unit.
		{-time.Hour, "-1h"},
		{-90 * time.Second, "-1m30s"},
		{time.Minute + 500*time.Millisecond, "1m0.5s"},
		{500 * time.Microsecond, "500µs"},
		{10*time.Hour + 10*time.Minute, "10h10m"},
	} {
		got := DurationFlag(tc.d)
		if got != tc.want {
			t.Errorf("DurationFlag(%v) = %q, want %q", tc.d, got, tc.want)
		}
		if back, err := time.ParseDuration(got); err != nil || back != tc.d {
			t.Errorf("DurationFlag(%v) = %q reads as %v (%v)", tc.d, got, back, err)
		}
	}
}
