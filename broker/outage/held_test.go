package outage

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
)

// TestHeldHeartbeatKeepsTheNewer (review): a write that failed gives back
// an older heartbeat than one held meanwhile; the newer sessions stay, and
// both heartbeats' command results are kept.
func TestHeldHeartbeatKeepsTheNewer(t *testing.T) {
	var hh heldHeartbeats
	k := hostKey{"p", "h1"}
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	newer := &vdibroker.HeartbeatRequest{Sessions: []vdibroker.AgentSession{{ID: "2", User: "bob", State: vdibroker.StateActive}},
		Results: []vdibroker.CommandResult{{ID: "c2", Success: true}}}
	older := &vdibroker.HeartbeatRequest{Sessions: []vdibroker.AgentSession{{ID: "1", User: "alice", State: vdibroker.StateActive}},
		Results: []vdibroker.CommandResult{{ID: "c1", Success: true}}}
	hh.hold(k, newer, t0.Add(10*time.Second), false)
	hh.hold(k, older, t0, true) // given back by a write that failed
	got := hh.take(k)
	if got == nil || !got.at.Equal(t0.Add(10*time.Second)) || len(got.hb.Sessions) != 1 || got.hb.Sessions[0].User != "bob" {
		t.Fatalf("held %+v, want the newer heartbeat (bob, at +10s)", got)
	}
	if len(got.hb.Results) != 2 {
		t.Errorf("held results %+v, want both c1 and c2", got.hb.Results)
	}
}

// TestHeldResultsAreBounded (R-SEC, R-OUT1): during an outage each
// heartbeat is answered and its command results kept until the store is
// back; one host's credential sending 5 heartbeats a second of 200 made-up
// results each would grow the broker's memory by megabytes a second for
// as long as the outage lasts. A host's held results are at most
// maxHeldResults, the first ones (those of the commands it ran first),
// and a result repeated is kept once.
func TestHeldResultsAreBounded(t *testing.T) {
	var hh heldHeartbeats
	k := hostKey{"p", "h1"}
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	first := &vdibroker.HeartbeatRequest{Results: []vdibroker.CommandResult{{ID: "real", Success: true}}}
	hh.hold(k, first, t0, false)
	hh.hold(k, first, t0.Add(time.Second), false) // sent again: kept once
	for i := range 100 {
		hb := &vdibroker.HeartbeatRequest{}
		for j := range vdibroker.MaxHeartbeatResults {
			hb.Results = append(hb.Results, vdibroker.CommandResult{ID: fmt.Sprintf("made-up-%d-%d", i, j), Message: strings.Repeat("x", 512)})
		}
		hh.hold(k, hb, t0.Add(time.Duration(i+2)*time.Second), false)
	}
	got := hh.take(k)
	if n := len(got.hb.Results); n != maxHeldResults {
		t.Errorf("%d results held, want at most %d", n, maxHeldResults)
	}
	if got.hb.Results[0].ID != "real" || got.hb.Results[1].ID == "real" {
		t.Errorf("held results begin %+v %+v, want the first result once", got.hb.Results[0].ID, got.hb.Results[1].ID)
	}
}

// TestReportedGoneUsersAreBounded (R-SEC): every heartbeat's users are
// kept in memory, and those a report drops are remembered as gone for a
// day (a reconnect answered from memory during an outage must not go to
// a session that ended). One host's credential reporting 2,000 new
// users in every heartbeat, 5 a second, grew that memory by 10,000 names
// a second, kept a day. A host's gone users are at most maxGone, the
// newest kept.
func TestReportedGoneUsersAreBounded(t *testing.T) {
	var r reports
	k := hostKey{"p", "h1"}
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	r.set(k, []vdibroker.AgentSession{{ID: "1", User: "alice", State: vdibroker.StateActive}}, t0)
	var last []vdibroker.AgentSession
	for i := range 20 {
		last = nil
		for j := range vdibroker.MaxHeartbeatSessions {
			last = append(last, vdibroker.AgentSession{ID: fmt.Sprint(j), User: fmt.Sprintf("u%d-%d", i, j), State: vdibroker.StateActive})
		}
		r.set(k, last, t0.Add(time.Duration(i+1)*time.Second))
	}
	r.set(k, nil, t0.Add(time.Minute))
	if n := len(r.m[k].gone); n > maxGone {
		t.Errorf("%d gone users remembered for one host, want at most %d", n, maxGone)
	}
	// The newest are kept: the users of the last report.
	if _, _, at := r.has(k, last[0].User); at.IsZero() {
		t.Errorf("%s, dropped by the newest report, is not remembered as gone", last[0].User)
	}
}
