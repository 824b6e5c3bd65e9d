package placement

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vdibroker/vdibroker"
)

// fixedRand returns a Rand that always draws v (clamped to n-1) and records
// the n of each call.
func fixedRand(v int, calls *[]int) func(int) int {
	return func(n int) int {
		if calls != nil {
			*calls = append(*calls, n)
		}
		return min(v, n-1)
	}
}

func mustPlace(t *testing.T, p Placer, req Request) Decision {
	t.Helper()
	d, err := p.Place(req)
	if err != nil {
		t.Fatalf("Place(%+v): %v", req, err)
	}
	return d
}

// placeApply places and applies n times, returning the chosen hosts.
func placeApply(t *testing.T, p Placer, n int) []string {
	t.Helper()
	var got []string
	for range n {
		d := mustPlace(t, p, Request{User: "u"})
		p.Apply(d)
		got = append(got, d.Host)
	}
	return got
}

func with(h Host, f func(*Host)) Host { f(&h); return h }

func drained(h *Host)   { h.AllowNewSession = false }
func silent(h *Host)    { old := testNow.Add(-time.Hour); h.LastHeartBeat = &old }
func stopping(h *Host)  { h.ShuttingDown = true }
func nonStd(h *Host)    { h.StandardFeatures = false }
func unhealthy(h *Host) { h.HealthError = "disk 95% full" }

func pooled(algo string, limit int) Pool {
	return Pool{Name: "pool1", HostPoolType: vdibroker.Pooled, LoadBalancerType: algo, MaxSessionLimit: limit,
		HeartbeatTimeoutSeconds: 90, LoadBalancing: vdibroker.DefaultLoadBalancing()}
}

func TestBreadthFirstRanksBySessionsThenName_RBF2(t *testing.T) {
	implementations(t, func(t *testing.T, newPlacer func(Pool, []Host, Options) Placer) {
		// Ranked: b(1), c(1), a(2), d(5); n = 4, ceil(4/2) = 2; a draw of 1
		// takes the second: c.
		var calls []int
		hosts := []Host{liveHost("a", 2), liveHost("b", 1), liveHost("c", 1), liveHost("d", 5)}
		p := newPlacer(pooled(vdibroker.BreadthFirst, 10), hosts, Options{Rand: fixedRand(1, &calls), Now: func() time.Time { return testNow }})
		d := mustPlace(t, p, Request{User: "u"})
		if d.Host != "c" || d.Explain.Rank != 2 || *d.Explain.Draw != (Draw{Of: 2, Value: 1}) {
			t.Errorf("got host %s rank %d draw %+v, want c rank 2 draw {2 1}", d.Host, d.Explain.Rank, d.Explain.Draw)
		}
		if !cmp.Equal(calls, []int{2}) {
			t.Errorf("Rand called with %v, want once with 2", calls)
		}
		var order []string
		for _, c := range d.Explain.Candidates {
			order = append(order, c.Host)
		}
		if want := []string{"b", "c", "a", "d"}; !cmp.Equal(order, want) {
			t.Errorf("ranked candidates %v, want %v", order, want)
		}
	})
}

func TestBreadthFirstSingleCandidate_RBF2(t *testing.T) {
	implementations(t, func(t *testing.T, newPlacer func(Pool, []Host, Options) Placer) {
		// n = 1 gives ceil(1/2) = 1: the only host.
		hosts := []Host{liveHost("a", 9), with(liveHost("b", 0), drained)}
		p := newPlacer(pooled(vdibroker.BreadthFirst, 10), hosts, testOptions(3))
		d := mustPlace(t, p, Request{User: "u"})
		if d.Host != "a" || d.Explain.Draw.Of != 1 {
			t.Errorf("got %s draw %+v, want a of 1", d.Host, d.Explain.Draw)
		}
	})
}

func TestBreadthFirstCandidates_RBF1(t *testing.T) {
	implementations(t, func(t *testing.T, newPlacer func(Pool, []Host, Options) Placer) {
		// Only e is placeable, not drained and under the limit of 4.
		hosts := []Host{
			with(liveHost("a", 0), drained), with(liveHost("b", 0), silent), with(liveHost("c", 0), stopping),
			liveHost("d", 4), liveHost("e", 3),
		}
		p := newPlacer(pooled(vdibroker.BreadthFirst, 4), hosts, testOptions(3))
		d := mustPlace(t, p, Request{User: "u"})
		if d.Host != "e" {
			t.Fatalf("got %s, want e", d.Host)
		}
		want := []Exclusion{
			{Host: "a", Reason: ReasonDrained, Detail: "allowNewSession is false"},
			{Host: "b", Reason: ReasonUnavailable, Detail: "last heartbeat 1h0m0s ago, timeout 1m30s"},
			{Host: "c", Reason: ReasonShutdown, Detail: "the agent reported it is shutting down"},
			{Host: "d", Reason: ReasonAtLimit, Detail: "4 sessions, maxSessionLimit 4"},
		}
		if diff := cmp.Diff(want, d.Explain.Excluded); diff != "" {
			t.Errorf("excluded (-want +got):\n%s", diff)
		}
	})
}

func TestDepthFirstTieByQueryOrder_RDF2(t *testing.T) {
	implementations(t, func(t *testing.T, newPlacer func(Pool, []Host, Options) Placer) {
		// b and c both have 4, the most under limit 6: b comes first by name.
		hosts := []Host{liveHost("a", 1), liveHost("c", 4), liveHost("b", 4)}
		p := newPlacer(pooled(vdibroker.DepthFirst, 6), hosts, testOptions(1))
		if d := mustPlace(t, p, Request{User: "u"}); d.Host != "b" {
			t.Errorf("got %s, want b", d.Host)
		}
	})
}

func TestDepthFirstFillsOneHostFirst_RDF2_RDF1(t *testing.T) {
	implementations(t, func(t *testing.T, newPlacer func(Pool, []Host, Options) Placer) {
		// Limit 3, all empty: a fills to 3 before b gets one; drained z never.
		hosts := []Host{liveHost("b", 0), liveHost("a", 0), with(liveHost("z", 2), drained)}
		p := newPlacer(pooled(vdibroker.DepthFirst, 3), hosts, testOptions(1))
		got := placeApply(t, p, 5)
		if want := []string{"a", "a", "a", "b", "b"}; !cmp.Equal(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
}

func TestReconnectFirst_RC1(t *testing.T) {
	existing := func(host string) *Existing {
		return &Existing{SessionID: "s-1", Host: host, State: vdibroker.StateDisconnected}
	}
	pool := pooled(vdibroker.LoadIndex, 2)
	pool.LoadBalancing.HostConnectingSessionThreshold = 1
	hosts := []Host{
		with(liveHost("drained", 1), drained),
		liveHost("full", 5),                                               // over the limit of 2 (lowered after it filled, R-P2)
		with(liveHost("storming", 0), func(h *Host) { h.Connecting = 3 }), // over the host connecting threshold 1
		with(liveHost("sick", 0), unhealthy),
		with(liveHost("gone", 0), silent),
		with(liveHost("stopping", 0), stopping),
		liveHost("spare", 0),
	}
	tests := []struct {
		name             string
		host             string
		wantHost         string
		reconnect, ended bool
	}{
		{"drained host keeps its user", "drained", "drained", true, false},
		{"over the limit keeps its user", "full", "full", true, false},
		{"over a host threshold keeps its user (R-LI2 exempt)", "storming", "storming", true, false},
		{"NeedsAssistance keeps its user", "sick", "sick", true, false},
		// The new placement: bucket 1 is sick and spare (index 0), round
		// robin from the start: sick.
		{"Unavailable host: end it and place anew", "gone", "sick", false, true},
		{"Shutdown host: end it and place anew", "stopping", "sick", false, true},
		{"unknown host: end it and place anew", "deleted", "sick", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			implementations(t, func(t *testing.T, newPlacer func(Pool, []Host, Options) Placer) {
				p := newPlacer(pool, hosts, testOptions(1))
				d := mustPlace(t, p, Request{User: "u", Existing: existing(tt.host)})
				if d.Host != tt.wantHost || d.Reconnect != tt.reconnect || d.EndExisting != tt.ended {
					t.Errorf("got host %s reconnect %v ended %v, want %s %v %v", d.Host, d.Reconnect, d.EndExisting, tt.wantHost, tt.reconnect, tt.ended)
				}
				before, _ := p.Host(d.Host)
				p.Apply(d)
				after, _ := p.Host(d.Host)
				if grew := after.Sessions - before.Sessions; tt.reconnect && grew != 0 || !tt.reconnect && grew != 1 {
					t.Errorf("Apply changed %s's sessions by %d", d.Host, grew)
				}
			})
		})
	}
}

func TestNeverDrained_RC2(t *testing.T) {
	for _, algo := range []string{vdibroker.BreadthFirst, vdibroker.DepthFirst, vdibroker.LoadIndex} {
		t.Run(algo, func(t *testing.T) {
			implementations(t, func(t *testing.T, newPlacer func(Pool, []Host, Options) Placer) {
				hosts := []Host{with(liveHost("a", 0), drained), liveHost("b", 8), with(liveHost("c", 3), drained)}
				p := newPlacer(pooled(algo, 10), hosts, testOptions(5))
				for _, h := range placeApply(t, p, 2) {
					if h != "b" {
						t.Fatalf("placed on %s, want only b", h)
					}
				}
			})
		})
	}
}

func TestHeartbeatExpiryWithoutEvent_RC3_RH1(t *testing.T) {
	implementations(t, func(t *testing.T, newPlacer func(Pool, []Host, Options) Placer) {
		// a's last heartbeat is 80 s old with timeout 90 s: placeable now,
		// Unavailable 11 s later although nobody told the engine anything.
		now := testNow
		old := testNow.Add(-80 * time.Second)
		hosts := []Host{with(liveHost("a", 0), func(h *Host) { h.LastHeartBeat = &old }), liveHost("b", 3)}
		p := newPlacer(pooled(vdibroker.BreadthFirst, 10), hosts, Options{Rand: fixedRand(0, nil), Now: func() time.Time { return now }})
		if d := mustPlace(t, p, Request{User: "u"}); d.Host != "a" {
			t.Fatalf("got %s, want a (fewest sessions)", d.Host)
		}
		now = now.Add(11 * time.Second)
		d := mustPlace(t, p, Request{User: "u"})
		if d.Host != "b" || d.Explain.Excluded[0] != (Exclusion{Host: "a", Reason: ReasonUnavailable, Detail: "last heartbeat 1m31s ago, timeout 1m30s"}) {
			t.Fatalf("got %s excluded %+v, want b with a Unavailable", d.Host, d.Explain.Excluded)
		}
		// A heartbeat brings it back.
		h, _ := p.Host("a")
		h.LastHeartBeat = &now
		p.Upsert(h)
		if d := mustPlace(t, p, Request{User: "u"}); d.Host != "a" {
			t.Fatalf("after a heartbeat got %s, want a", d.Host)
		}
	})
}

func TestNeedsAssistanceIsPlaceable_RC3_RH1(t *testing.T) {
	implementations(t, func(t *testing.T, newPlacer func(Pool, []Host, Options) Placer) {
		p := newPlacer(pooled(vdibroker.DepthFirst, 10), []Host{with(liveHost("a", 1), unhealthy), with(liveHost("b", 5), stopping)}, testOptions(1))
		if d := mustPlace(t, p, Request{User: "u"}); d.Host != "a" {
			t.Errorf("got %s, want a (NeedsAssistance still takes sessions)", d.Host)
		}
	})
}

func TestLimitNeverExceeded_RC4(t *testing.T) {
	for _, algo := range []string{vdibroker.BreadthFirst, vdibroker.DepthFirst, vdibroker.LoadIndex} {
		t.Run(algo, func(t *testing.T) {
			implementations(t, func(t *testing.T, newPlacer func(Pool, []Host, Options) Placer) {
				// Three hosts, limit 4, 2+0+3 sessions: exactly 4+4+4-5 = 7 more
				// fit, the 8th connect is NoCapacity.
				p := newPlacer(pooled(algo, 4), []Host{liveHost("a", 2), liveHost("b", 0), liveHost("c", 3)}, testOptions(9))
				placeApply(t, p, 7)
				for _, name := range []string{"a", "b", "c"} {
					if h, _ := p.Host(name); h.Sessions != 4 {
						t.Errorf("%s has %d sessions, want 4", name, h.Sessions)
					}
				}
				if _, err := p.Place(Request{User: "u"}); vdibroker.ErrorCode(err) != vdibroker.ENoCapacity {
					t.Errorf("8th place: err %v, want NoCapacity", err)
				}
			})
		})
	}
}

func TestNoCapacitySaysWhyAndWhatToDo_RC5(t *testing.T) {
	// The advice is the cause's own: raising maxSessionLimit helps only
	// hosts at the limit, never a drained or silent one.
	tests := []struct {
		name   string
		hosts  []Host
		want   string
		advice string
	}{
		{"empty pool", nil, "it has no session hosts", "register session hosts (vdibroker agent with a registration token of the pool)"},
		{"all drained", []Host{with(liveHost("a", 0), drained), with(liveHost("b", 0), drained)},
			"all 2 session hosts are drained (allowNewSession false)", "resume a drained host (allowNewSession true) or add session hosts"},
		{"all unavailable", []Host{with(liveHost("a", 0), silent), with(liveHost("b", 0), silent), with(liveHost("c", 0), silent)},
			"all 3 session hosts are unavailable (no heartbeat within 1m30s)",
			"bring the unavailable hosts' agents back (start their machines, with sessionhost start where the pool has a power driver; a heartbeat within heartbeatTimeoutSeconds) or add session hosts"},
		{"all at the limit", []Host{liveHost("a", 5), liveHost("b", 6)},
			"all 2 session hosts are at maxSessionLimit 5", "increase maxSessionLimit or add session hosts"},
		{"only host shut down", []Host{with(liveHost("a", 0), stopping)},
			"its only session host is shut down", "start the shut-down hosts or add session hosts"},
		{"mixed", []Host{with(liveHost("a", 0), drained), liveHost("b", 5), liveHost("c", 5), with(liveHost("d", 0), silent)},
			"no session host can take a new session: 1 unavailable (no heartbeat within 1m30s), 1 drained (allowNewSession false), 2 at maxSessionLimit 5",
			"bring the unavailable hosts' agents back (start their machines, with sessionhost start where the pool has a power driver; a heartbeat within heartbeatTimeoutSeconds), resume a drained host (allowNewSession true), increase maxSessionLimit or add session hosts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			implementations(t, func(t *testing.T, newPlacer func(Pool, []Host, Options) Placer) {
				p := newPlacer(pooled(vdibroker.BreadthFirst, 5), tt.hosts, testOptions(1))
				d, err := p.Place(Request{User: "u"})
				var e *vdibroker.Error
				if !errors.As(err, &e) || e.Code != vdibroker.ENoCapacity || vdibroker.HTTPStatus(e.Code) != 503 {
					t.Fatalf("err = %v, want a 503 NoCapacity *vdibroker.Error", err)
				}
				want := `host pool "pool1" has no capacity: ` + tt.want + "; " + tt.advice
				if e.Message != want {
					t.Errorf("message\n got %q\nwant %q", e.Message, want)
				}
				if d.Explain.NoCapacityReason != tt.want || len(d.Explain.Excluded) != len(tt.hosts) || d.Host != "" {
					t.Errorf("explain reason %q with %d excluded, host %q", d.Explain.NoCapacityReason, len(d.Explain.Excluded), d.Host)
				}
			})
		})
	}
}

// TestNoCapacityPersonalAdvice_RC5: a personal pool's refusals advise for
// their cause too: a user whose own desktop is shut down is told to start
// it or ask for another, not to raise maxSessionLimit; a new user finding
// only others' desktops is told to add hosts.
func TestNoCapacityPersonalAdvice_RC5(t *testing.T) {
	implementations(t, func(t *testing.T, newPlacer func(Pool, []Host, Options) Placer) {
		for user, c := range map[string]struct {
			a    func(*Host)
			want string
		}{
			"ann": {stopping, "its only session host is shut down; start the shut-down hosts or ask an administrator to assign another"},
			"cy":  {func(*Host) {}, "all 2 session hosts are assigned to other users; add session hosts"},
		} {
			hosts := []Host{with(with(liveHost("a", 0), assigned("ann")), c.a), with(liveHost("b", 0), assigned("bob"))}
			p := newPlacer(personalPool(vdibroker.Persistent, vdibroker.Automatic), hosts, testOptions(1))
			want := c.want
			_, err := p.Place(Request{User: user})
			if vdibroker.ErrorCode(err) != vdibroker.ENoCapacity || !strings.HasSuffix(vdibroker.ErrorMessage(err), want) {
				t.Errorf("%s: %v, want NoCapacity ending %q", user, err, want)
			}
		}
	})
}

func TestExplainListsAndCounts_RC7(t *testing.T) {
	implementations(t, func(t *testing.T, newPlacer func(Pool, []Host, Options) Placer) {
		// ExplainLimit+15 drained hosts and ExplainLimit+10 live: the record
		// lists the first ExplainLimit of each and counts them all.
		var hosts []Host
		nDrained, nLive := ExplainLimit+15, ExplainLimit+10
		for i := range nDrained {
			hosts = append(hosts, with(liveHost(fmt.Sprintf("D%03d", i), 0), drained))
		}
		for i := range nLive {
			hosts = append(hosts, liveHost(fmt.Sprintf("h%03d", i), i))
		}
		p := newPlacer(pooled(vdibroker.BreadthFirst, 100), hosts, Options{Rand: fixedRand(7, nil), Now: func() time.Time { return testNow }})
		d := mustPlace(t, p, Request{User: "ann"})
		ex := d.Explain
		// 60 candidates (ExplainLimit 50), ceil(60/2) = 30, draw 7: the 8th
		// ranked, h007 (7 sessions).
		if ex.Chosen != "h007" || ex.Rank != 8 || ex.CandidateCount != nLive || len(ex.Candidates) != ExplainLimit {
			t.Errorf("chosen %s rank %d count %d listed %d", ex.Chosen, ex.Rank, ex.CandidateCount, len(ex.Candidates))
		}
		if len(ex.Excluded) != ExplainLimit || ex.Excluded[0].Host != "D000" || ex.ExcludedCounts[ReasonDrained] != nDrained {
			t.Errorf("excluded %d first %+v counts %v", len(ex.Excluded), ex.Excluded[0], ex.ExcludedCounts)
		}
		if ex.Pool != "pool1" || ex.User != "ann" || ex.Algorithm != vdibroker.BreadthFirst || !ex.Time.Equal(testNow) {
			t.Errorf("header %+v", ex)
		}
	})
}

func TestDryRunChangesNothing_RC8(t *testing.T) {
	implementations(t, func(t *testing.T, newPlacer func(Pool, []Host, Options) Placer) {
		pool := pooled(vdibroker.LoadIndex, 10)
		p := newPlacer(pool, []Host{liveHost("a", 0), liveHost("b", 0), liveHost("c", 0)}, testOptions(1))
		first := mustPlace(t, p, Request{User: "u"})
		second := mustPlace(t, p, Request{User: "u"}) // no Apply between: a dry run
		if first.Host != second.Host || second.Explain.RoundRobinAfter != "" {
			t.Errorf("dry runs answered %s then %s (round robin after %q)", first.Host, second.Host, second.Explain.RoundRobinAfter)
		}
		if h, _ := p.Host(first.Host); h.Sessions != 0 || h.Connecting != 0 {
			t.Errorf("dry run changed counts: %+v", h)
		}
	})
}

func TestAlgorithmChangeAppliesToNextPlacement_RP1(t *testing.T) {
	implementations(t, func(t *testing.T, newPlacer func(Pool, []Host, Options) Placer) {
		hosts := []Host{liveHost("a", 1), liveHost("b", 4)}
		p := newPlacer(pooled(vdibroker.BreadthFirst, 10), hosts, Options{Rand: fixedRand(0, nil), Now: func() time.Time { return testNow }})
		if d := mustPlace(t, p, Request{User: "u"}); d.Host != "a" {
			t.Fatalf("BreadthFirst chose %s, want a", d.Host)
		}
		p.SetPool(pooled(vdibroker.DepthFirst, 10))
		if d := mustPlace(t, p, Request{User: "u"}); d.Host != "b" || d.Explain.Algorithm != vdibroker.DepthFirst {
			t.Fatalf("DepthFirst chose %s (%s), want b", d.Host, d.Explain.Algorithm)
		}
	})
}

func TestLoweredLimitEndsNothing_RP2(t *testing.T) {
	implementations(t, func(t *testing.T, newPlacer func(Pool, []Host, Options) Placer) {
		p := newPlacer(pooled(vdibroker.DepthFirst, 10), []Host{liveHost("a", 5), liveHost("b", 1)}, testOptions(1))
		p.SetPool(pooled(vdibroker.DepthFirst, 3))
		d := mustPlace(t, p, Request{User: "u"})
		if h, _ := p.Host("a"); d.Host != "b" || h.Sessions != 5 || d.Explain.Excluded[0].Reason != ReasonAtLimit {
			t.Errorf("got %s, a keeps %d sessions, excluded %+v", d.Host, h.Sessions, d.Explain.Excluded)
		}
	})
}

// loadPool is a LoadIndex pool whose index is the session factor only:
// limit 10, so each session is 10 points.
func loadPool() Pool {
	p := pooled(vdibroker.LoadIndex, 10)
	p.LoadBalancing.IncludeSessionCount = true
	return p
}

func TestLoadIndexFromMetrics_RLI1(t *testing.T) {
	implementations(t, func(t *testing.T, newPlacer func(Pool, []Host, Options) Placer) {
		pool := loadPool()
		pool.LoadBalancing.CPUThreshold = 80
		pool.LoadBalancing.MinServersInQueue = 1
		// a: cpu 72/80 → 90, sessions 10; b: cpu 8/80 → 10, sessions 30 → 30;
		// T = 20: only... none below 20, raise to admit M = 1: T' = 31, b.
		hosts := []Host{
			with(liveHost("a", 1), func(h *Host) { h.Metrics = &vdibroker.Metrics{CPUPercent: 72}; h.MetricsSessions = 1 }),
			with(liveHost("b", 3), func(h *Host) { h.Metrics = &vdibroker.Metrics{CPUPercent: 8}; h.MetricsSessions = 3 }),
		}
		d := mustPlace(t, newPlacer(pool, hosts, testOptions(1)), Request{User: "u"})
		if d.Host != "b" || d.Explain.Candidates[0].LoadIndex != 30 || d.Explain.RaisedThreshold != 31 {
			t.Errorf("got %s candidates %+v raised %d", d.Host, d.Explain.Candidates, d.Explain.RaisedThreshold)
		}
	})
}

func TestHostSideRejection_RLI2_RLI5(t *testing.T) {
	pol := func(load, conn *int) func(*Host) {
		return func(h *Host) {
			h.Policy = vdibroker.HostPolicy{HostLoadIndexThreshold: load, HostConnectingSessionThreshold: conn}
		}
	}
	n := func(v int) *int { return &v }
	tests := []struct {
		name   string
		host   Host
		reason string
	}{
		// Pool: hostLoadIndexThreshold 50, hostConnectingSessionThreshold 2.
		{"load index 50 >= 50 is rejected", liveHost("x", 5), ReasonHostThreshold},
		{"load index 40 < 50 is taken", liveHost("x", 4), ""},
		{"2 connecting >= 2 is rejected", with(liveHost("x", 2), func(h *Host) { h.Connecting = 2 }), ReasonHostThreshold},
		{"host policy 90 wins over pool 50 (R-LI5)", with(liveHost("x", 6), pol(n(90), nil)), ""},
		{"host policy 0 switches the check off (R-LI5)", with(liveHost("x", 7), pol(n(0), nil)), ""},
		{"host policy 1 connecting is stricter (R-LI5)", with(liveHost("x", 1), func(h *Host) { pol(nil, n(1))(h); h.Connecting = 1 }), ReasonHostThreshold},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			implementations(t, func(t *testing.T, newPlacer func(Pool, []Host, Options) Placer) {
				pool := loadPool()
				pool.LoadBalancing.HostLoadIndexThreshold = 50
				pool.LoadBalancing.HostConnectingSessionThreshold = 2
				d, err := newPlacer(pool, []Host{tt.host}, testOptions(1)).Place(Request{User: "u"})
				if tt.reason == "" {
					if err != nil {
						t.Fatalf("want placed, got %v", err)
					}
					return
				}
				if err == nil || d.Explain.Excluded[0].Reason != tt.reason {
					t.Fatalf("want excluded %s, got %v %+v", tt.reason, err, d.Explain.Excluded)
				}
			})
		})
	}
}

func TestBucketsAndRaisedThreshold_RLI3(t *testing.T) {
	implementations(t, func(t *testing.T, newPlacer func(Pool, []Host, Options) Placer) {
		// Load indexes a 60, b 10, c 30, d 40, e 50, n 0 (non-standard).
		// T = 20 admits only b, fewer than M = 4, so T is raised to one above
		// the 4th lowest standard index (50): T' = 51, bucket 1 = b, c, d, e.
		hosts := []Host{liveHost("a", 6), liveHost("b", 1), liveHost("c", 3), liveHost("d", 4), liveHost("e", 5), with(liveHost("n", 0), nonStd)}
		p := newPlacer(loadPool(), hosts, testOptions(1))
		d := mustPlace(t, p, Request{User: "u"})
		// The record lists every candidate of this small pool: bucket 1 in
		// round robin order, then n (non-standard, 0 < 51: bucket 2), then
		// a (60 ≥ 51: bucket 3).
		var order []string
		var buckets []int
		for _, c := range d.Explain.Candidates {
			order = append(order, c.Host)
			buckets = append(buckets, c.Bucket)
		}
		if d.Host != "b" || d.Explain.Bucket != 1 || d.Explain.RaisedThreshold != 51 ||
			!cmp.Equal(order, []string{"b", "c", "d", "e", "n", "a"}) || !cmp.Equal(buckets, []int{1, 1, 1, 1, 2, 3}) {
			t.Errorf("got %s bucket %d raised %d order %v buckets %v", d.Host, d.Explain.Bucket, d.Explain.RaisedThreshold, order, buckets)
		}
	})
}

func TestRoundRobinInBucketOne_RLI4(t *testing.T) {
	implementations(t, func(t *testing.T, newPlacer func(Pool, []Host, Options) Placer) {
		// Limit 100 so one session is 1 point; T = 20: all three stay in
		// bucket 1 and each gets the same share in query order.
		pool := loadPool()
		pool.MaxSessionLimit = 100
		hosts := []Host{liveHost("c", 5), liveHost("a", 0), liveHost("b", 9)}
		p := newPlacer(pool, hosts, testOptions(1))
		got := placeApply(t, p, 7)
		if want := []string{"a", "b", "c", "a", "b", "c", "a"}; !cmp.Equal(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
		d := mustPlace(t, p, Request{User: "u"})
		if d.Explain.RoundRobinAfter != "a" || d.Host != "b" {
			t.Errorf("explain says round robin after %q chose %s, want after a: b", d.Explain.RoundRobinAfter, d.Host)
		}
	})
}

func TestBucketsTwoAndThree_RLI4(t *testing.T) {
	busy := func(h *Host) { h.Connecting = 2 }
	tests := []struct {
		name       string
		hosts      []Host
		want       string
		wantBucket int
	}{
		{
			// Standard hosts all have 2 connecting ≥ C = 2: no bucket 1.
			// Non-standard m (30) and n (10) are below T = 40: bucket 2,
			// lowest index first: n.
			"bucket 2 lowest load index", []Host{with(liveHost("s", 0), busy), with(liveHost("m", 3), nonStd), with(liveHost("n", 1), nonStd)},
			"n", 2,
		},
		{
			// Equal index 10: fewer connecting first (p 0 < o 1).
			"bucket 2 then fewest connecting", []Host{with(liveHost("o", 1), func(h *Host) { nonStd(h); h.Connecting = 1 }), with(liveHost("p", 1), nonStd)},
			"p", 2,
		},
		{
			// Everything at or over T = 40 or connecting ≥ C: bucket 3 by
			// index: standard s (busy, 0) beats non-standard q (50).
			"bucket 3 everything else", []Host{with(liveHost("q", 5), nonStd), with(liveHost("s", 0), busy)},
			"s", 3,
		},
		{
			// Bucket 3 ties on index 50: fewest connecting, then name.
			"bucket 3 ties", []Host{with(liveHost("v", 5), func(h *Host) { nonStd(h); h.Connecting = 3 }), with(liveHost("w", 5), nonStd), with(liveHost("u", 5), func(h *Host) { nonStd(h); h.Connecting = 3 })},
			"w", 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			implementations(t, func(t *testing.T, newPlacer func(Pool, []Host, Options) Placer) {
				pool := loadPool()
				pool.LoadBalancing.LoadIndexThreshold = 40
				pool.LoadBalancing.ConnectingSessionThreshold = 2
				d := mustPlace(t, newPlacer(pool, tt.hosts, testOptions(1)), Request{User: "u"})
				if d.Host != tt.want || d.Explain.Bucket != tt.wantBucket {
					t.Errorf("got %s bucket %d, want %s bucket %d", d.Host, d.Explain.Bucket, tt.want, tt.wantBucket)
				}
			})
		})
	}
}

func TestStormDoesNotPileOnStaleHost_RLI6(t *testing.T) {
	implementations(t, func(t *testing.T, newPlacer func(Pool, []Host, Options) Placer) {
		// cpu only (threshold 100), T = 50, M = 1. Both hosts were sampled at
		// 40 % with 4 sessions (10 % each). a got 2 sessions since: 40 + 10 ×
		// 2 = 60 ≥ 50, so b (40) takes the next connects until b has had 3
		// more (40 + 10 × 3 = 70 > a's 60, and with M = 1 the raised T admits
		// the lower: a).
		pool := pooled(vdibroker.LoadIndex, 100)
		pool.LoadBalancing.IncludeSessionCount = false
		pool.LoadBalancing.CPUThreshold = 100
		pool.LoadBalancing.LoadIndexThreshold = 50
		pool.LoadBalancing.MinServersInQueue = 1
		sample := func(n int) func(*Host) {
			return func(h *Host) { h.Metrics = &vdibroker.Metrics{CPUPercent: 40}; h.MetricsSessions = 4; h.Sessions = n }
		}
		hosts := []Host{with(liveHost("a", 0), sample(6)), with(liveHost("b", 0), sample(4))}
		p := newPlacer(pool, hosts, testOptions(1))
		got := placeApply(t, p, 3)
		// b: 40 → 50 after one: both ≥ 50, raise to the lowest +1: T' = 51 → b
		// (50) again; b 60 vs a 60: T' = 61 admits both, round robin after b:
		// a.
		if want := []string{"b", "b", "a"}; !cmp.Equal(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
}

func TestLoadBalancingOffIsRoundRobin_RIDX3(t *testing.T) {
	implementations(t, func(t *testing.T, newPlacer func(Pool, []Host, Options) Placer) {
		// useCustomScript and no host reports a value: every index is -1 and
		// placement is round robin over all candidates, non-standard included.
		pool := loadPool()
		pool.LoadBalancing.UseCustomScript = true
		hosts := []Host{liveHost("b", 5), with(liveHost("a", 3), nonStd), liveHost("c", 0)}
		p := newPlacer(pool, hosts, testOptions(1))
		if got := placeApply(t, p, 4); !cmp.Equal(got, []string{"a", "b", "c", "a"}) {
			t.Errorf("got %v, want a b c a", got)
		}
		// Once c reports 80, the silent a and b count 25. Bucket 1 material
		// is the standard b (25) and c (80); T = 20 admits none, fewer than
		// M = 4, so T' = 80 + 1 = 81 admits both; round robin after a: b.
		h, _ := p.Host("c")
		v := 80
		h.Metrics = &vdibroker.Metrics{CustomLoadValue: &v}
		p.Upsert(h)
		d := mustPlace(t, p, Request{User: "u"})
		if d.Host != "b" || d.Explain.Candidates[0].LoadIndex != 25 {
			t.Errorf("got %s with candidates %+v", d.Host, d.Explain.Candidates)
		}
	})
}

func personalPool(algo, assignment string) Pool {
	return Pool{Name: "desk", HostPoolType: vdibroker.Personal, LoadBalancerType: algo, AssignmentType: assignment,
		MaxSessionLimit: vdibroker.NoSessionLimit, HeartbeatTimeoutSeconds: 90}
}

func assigned(users ...string) func(*Host) { return func(h *Host) { h.AssignedUsers = users } }

func TestPersistentAutomaticAssignsFirstFree_RPE1(t *testing.T) {
	implementations(t, func(t *testing.T, newPlacer func(Pool, []Host, Options) Placer) {
		// a is ann's, b drained, c silent: d is the first unassigned
		// placeable host in query order.
		hosts := []Host{with(liveHost("a", 0), assigned("ann")), with(liveHost("b", 0), drained), with(liveHost("c", 0), silent), liveHost("d", 0), liveHost("e", 0)}
		p := newPlacer(personalPool(vdibroker.Persistent, vdibroker.Automatic), hosts, testOptions(1))
		d := mustPlace(t, p, Request{User: "bob"})
		if d.Host != "d" || !d.Assign {
			t.Fatalf("got %s assign %v, want d assign", d.Host, d.Assign)
		}
		p.Apply(d)
		if h, _ := p.Host("d"); !cmp.Equal(h.AssignedUsers, []string{"bob"}) {
			t.Fatalf("d assigned to %v after Apply", h.AssignedUsers)
		}
		again := mustPlace(t, p, Request{User: "bob"})
		if again.Host != "d" || again.Assign {
			t.Errorf("later connect got %s assign %v, want d without assign", again.Host, again.Assign)
		}
		if d := mustPlace(t, p, Request{User: "ann"}); d.Host != "a" || d.Assign {
			t.Errorf("ann got %s, want her a", d.Host)
		}
		p.Apply(mustPlace(t, p, Request{User: "cy"})) // takes e
		_, err := p.Place(Request{User: "dee"})
		if vdibroker.ErrorCode(err) != vdibroker.ENoCapacity || !strings.Contains(err.Error(), "add session hosts") {
			t.Errorf("no unassigned host: err %v, want NoCapacity", err)
		}
	})
}

func TestDirectNeedsAnAdmin_RPE2(t *testing.T) {
	implementations(t, func(t *testing.T, newPlacer func(Pool, []Host, Options) Placer) {
		hosts := []Host{liveHost("a", 0), with(liveHost("b", 0), assigned("ann"))}
		p := newPlacer(personalPool(vdibroker.Persistent, vdibroker.Direct), hosts, testOptions(1))
		_, err := p.Place(Request{User: "bob"})
		if vdibroker.ErrorCode(err) != vdibroker.ENotAssigned || vdibroker.HTTPStatus(vdibroker.ErrorCode(err)) != 403 {
			t.Fatalf("unassigned user: err %v, want 403 NotAssigned", err)
		}
		if d := mustPlace(t, p, Request{User: "ann"}); d.Host != "b" || d.Assign {
			t.Errorf("ann got %s assign %v, want b", d.Host, d.Assign)
		}
	})
}

func TestMultiplePersistent_RPE3(t *testing.T) {
	hosts := []Host{liveHost("a", 0), with(liveHost("c", 0), assigned("ann", "bob")), with(liveHost("b", 0), assigned("ann"))}
	tests := []struct {
		name, user, sessionHost, want, code string
	}{
		{"first assigned in query order", "ann", "", "b", ""},
		{"named host", "ann", "c", "c", ""},
		{"named host not assigned", "ann", "a", "", vdibroker.ENotAssigned},
		{"named host unknown", "ann", "zz", "", vdibroker.ENotAssigned},
		{"shared host", "bob", "", "c", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			implementations(t, func(t *testing.T, newPlacer func(Pool, []Host, Options) Placer) {
				p := newPlacer(personalPool(vdibroker.MultiplePersistent, vdibroker.Direct), hosts, testOptions(1))
				d, err := p.Place(Request{User: tt.user, SessionHost: tt.sessionHost})
				if vdibroker.ErrorCode(err) != tt.code || d.Host != tt.want {
					t.Errorf("got %s err %v, want %s code %q", d.Host, err, tt.want, tt.code)
				}
			})
		})
	}
}

func TestPersonalHostOnlyForItsUsers_RPE4(t *testing.T) {
	implementations(t, func(t *testing.T, newPlacer func(Pool, []Host, Options) Placer) {
		// a is ann's and drained: ann still gets it; bob may not.
		hosts := []Host{with(liveHost("a", 0), func(h *Host) { assigned("ann")(h); drained(h) })}
		p := newPlacer(personalPool(vdibroker.Persistent, vdibroker.Automatic), hosts, testOptions(1))
		if d := mustPlace(t, p, Request{User: "ann"}); d.Host != "a" {
			t.Errorf("ann got %q, want a despite drain", d.Host)
		}
		d, err := p.Place(Request{User: "bob"})
		if vdibroker.ErrorCode(err) != vdibroker.ENoCapacity || d.Explain.Excluded[0].Reason != ReasonAssignedToOthers {
			t.Errorf("bob: err %v excluded %+v, want NoCapacity with a AssignedToOthers", err, d.Explain.Excluded)
		}
		// ann's host unavailable: no other place, NoCapacity naming it.
		h, _ := p.Host("a")
		silent(&h)
		p.Upsert(h)
		d, err = p.Place(Request{User: "ann"})
		if vdibroker.ErrorCode(err) != vdibroker.ENoCapacity || d.Explain.Excluded[0] != (Exclusion{Host: "a", Reason: ReasonUnavailable, Detail: "last heartbeat 1h0m0s ago, timeout 1m30s"}) {
			t.Errorf("unavailable assigned host: err %v excluded %+v", err, d.Explain.Excluded)
		}
	})
}
