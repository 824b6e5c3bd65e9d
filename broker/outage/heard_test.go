package outage

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// TestHeardSince (R-A4): since when the broker has heard its hosts is its
// start, then the end of its last store outage; during an outage, now
// (heartbeats are held, not written).
func TestHeardSince(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	fc := clocktesting.NewFakeClock(t0)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	h := NewHealth(HealthConfig{Ping: func(context.Context) error { return nil }, Timeout: time.Second, Interval: time.Hour, Clock: fc, Stop: stop})
	fc.Step(5 * time.Minute)
	if got := h.HeardSince(); !got.Equal(t0) {
		t.Fatalf("up since the start: %s, want %s", got, t0)
	}
	h.fail("connection refused")
	fc.Step(time.Minute)
	if got := h.HeardSince(); !got.Equal(fc.Now()) {
		t.Fatalf("during the outage: %s, want now (%s)", got, fc.Now())
	}
	end := fc.Now()
	h.recovered()
	fc.Step(time.Minute)
	if got := h.HeardSince(); !got.Equal(end) {
		t.Fatalf("after the outage: %s, want its end %s", got, end)
	}
}
