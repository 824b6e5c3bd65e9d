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

// TestStoppedHostLeavesTheDeadlines: a host its power driver stopped is
// Shutdown (R-H1) whatever its heartbeat's age, so the indexed placer does
// not wait for that heartbeat to expire: once it has, deciding again must
// not find it on top of the expiry heap still (a connect held for a
// starting host, R-U4, decided in a pool of stopped hosts spun forever on
// it), and the host is excluded as Shutdown, not Unavailable.
func TestStoppedHostLeavesTheDeadlines(t *testing.T) {
	now := testNow
	hosts := []Host{
		with(liveHost("a", 0), func(h *Host) { h.PowerStopped = true }),
		liveHost("b", 0),
	}
	x := New(pooled(vdibroker.BreadthFirst, 10), hosts, Options{Rand: fixedRand(0, nil), Now: func() time.Time { return now }}).(*indexed)
	if d := mustPlace(t, x, Request{User: "u"}); d.Host != "b" {
		t.Fatalf("placed on %s, want b", d.Host)
	}
	for _, it := range x.deadlines {
		if it.e.h.Name == "a" {
			t.Errorf("the stopped host a waits in the expiry heap (R-H1: it is Shutdown whatever its heartbeat)")
		}
	}
	now = testNow.Add(time.Hour) // every heartbeat expired
	x.advance(now)
	if len(x.deadlines) != 0 {
		t.Fatalf("%d hosts still wait in the expiry heap an hour after their last heartbeats", len(x.deadlines))
	}
	x.Upsert(with(liveHost("b", 0), func(h *Host) { hb := now; h.LastHeartBeat = &hb }))
	d := mustPlace(t, x, Request{User: "v"})
	if d.Host != "b" {
		t.Fatalf("placed on %s, want b (heartbeat again)", d.Host)
	}
	for _, e := range d.Explain.Excluded {
		if e.Host == "a" && e.Reason != ReasonShutdown {
			t.Errorf("a excluded as %s, want Shutdown", e.Reason)
		}
	}
}
