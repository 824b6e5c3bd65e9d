package placement

import (
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
)

// TestPowerStoppedAndAutoscaleDrained: a host its power driver stopped is
// Shutdown (R-H1) though its last heartbeat is recent, and an
// autoscale-drained host is excluded like a drained one, under its own
// reason (R-A3); with both excluded the placement lands on the third.
func TestPowerStoppedAndAutoscaleDrained(t *testing.T) {
	implementations(t, func(t *testing.T, newPlacer func(Pool, []Host, Options) Placer) {
		hosts := []Host{
			with(liveHost("a", 0), func(h *Host) { h.PowerStopped = true }),
			with(liveHost("b", 0), func(h *Host) { h.AutoscaleDrain = true }),
			liveHost("c", 5),
		}
		p := newPlacer(pooled(vdibroker.BreadthFirst, 10), hosts, Options{Rand: fixedRand(0, nil), Now: func() time.Time { return testNow }})
		d := mustPlace(t, p, Request{User: "u"})
		if d.Host != "c" {
			t.Fatalf("placed on %s, want c", d.Host)
		}
		got := map[string]Exclusion{}
		for _, e := range d.Explain.Excluded {
			got[e.Host] = e
		}
		if e := got["a"]; e.Reason != ReasonShutdown || e.Detail != "its power driver stopped it" {
			t.Errorf("a: %+v, want Shutdown by its power driver", e)
		}
		if e := got["b"]; e.Reason != ReasonAutoscaleDrained {
			t.Errorf("b: %+v, want AutoscaleDrained", e)
		}
	})
}

// TestStoppedHostHeartbeatExpires: a stopped host is Shutdown whether or
// not its last heartbeat is fresh; once that heartbeat is older than
// the timeout the next placement still ends (it looped forever on the
// host, which expiry leaves Shutdown) and places on the live host. Run
// with a bound: a loop fails the test instead of hanging it.
func TestStoppedHostHeartbeatExpires(t *testing.T) {
	implementations(t, func(t *testing.T, newPlacer func(Pool, []Host, Options) Placer) {
		now := testNow
		hosts := []Host{
			with(liveHost("a", 0), func(h *Host) { h.PowerStopped = true }),
			liveHost("b", 0),
		}
		p := newPlacer(pooled(vdibroker.BreadthFirst, 10), hosts, Options{Rand: fixedRand(0, nil), Now: func() time.Time { return now }})
		mustPlace(t, p, Request{User: "u1"})
		now = now.Add(10 * time.Minute) // a's heartbeat and b's expire
		b := liveHost("b", 1)
		b.LastHeartBeat = &now
		p.Upsert(b)
		done := make(chan Decision, 1)
		go func() { d, _ := p.Place(Request{User: "u2"}); done <- d }()
		select {
		case d := <-done:
			if d.Host != "b" {
				t.Fatalf("placed on %q, want b", d.Host)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("placement did not end with a stopped host's heartbeat expired")
		}
	})
}
