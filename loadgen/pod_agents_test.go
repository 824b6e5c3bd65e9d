package loadgen

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestAgentsSendWhatIsDueBeforeStop: when the bench stops its agents, every
// heartbeat already due still goes out, however far behind the generator
// is, and none due later does. Until 5bb00f7 the ones still waiting for a
// worker were counted as skipped, which made a backlog at the end of the
// last phase look like heartbeats the broker never handled
// (docs/benchmarks-history.md, bench pod). The stand-in broker answers in 20 ms and one worker sends,
// so at 100 heartbeats a second a backlog is certain when stop is asked.
func TestAgentsSendWhatIsDueBeforeStop(t *testing.T) {
	var got atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		time.Sleep(20 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"commands":[]}`))
	}))
	t.Cleanup(srv.Close)
	hosts := make([]*podHost, 20)
	for i := range hosts {
		hosts[i] = &podHost{name: "h", credential: "c"}
	}
	client := newClient(Config{Concurrency: 1, Timeout: time.Minute})
	defer client.CloseIdleConnections()
	// 20 hosts every 200 ms: 100 a second offered, about 50 handled.
	a := startAgents(t.Context(), client, srv.URL, hosts, 200*time.Millisecond, time.Minute, time.Minute, 1)
	time.Sleep(500 * time.Millisecond)
	stopAsked := time.Now()
	a.stop()

	n := int(a.stopAt.Load())
	drained := 0
	for j, o := range a.outcomes {
		switch {
		case j < n && !o.sent:
			t.Fatalf("heartbeat %d was due before stop and not sent", j)
		case j >= n && o.sent:
			t.Fatalf("heartbeat %d was due after stop (at %d) and sent", j, n)
		case j < n && o.code != "":
			t.Fatalf("heartbeat %d: %s %s", j, o.code, o.message)
		}
		if o.sent && o.done.After(stopAsked) {
			drained++
		}
	}
	if drained == 0 {
		t.Fatal("no heartbeat went out after stop was asked: the test built no backlog")
	}
	if s := a.stats(); s.Skipped != 0 || s.OK != n || int(got.Load()) != n {
		t.Errorf("stats: %d skipped, %d ok, broker saw %d; want 0 skipped, %d ok and seen", s.Skipped, s.OK, got.Load(), n)
	}
}

// TestInterleaveSpreadsEachPool: the agents' order puts each pool's hosts
// evenly over the interval, not one pool after the other. 1,000 large
// hosts and 10 small ones: the small pool's hosts are 101 places apart
// (1,010 / 10, give or take one), where in pool order they were the last
// 10 places together.
func TestInterleaveSpreadsEachPool(t *testing.T) {
	mk := func(prefix string, n int) []*podHost {
		hs := make([]*podHost, n)
		for i := range hs {
			hs[i] = &podHost{name: fmt.Sprintf("%s%04d", prefix, i)}
		}
		return hs
	}
	large, small := mk("pl", 1000), mk("ps", 10)
	all := interleave(large, small)
	if len(all) != 1010 {
		t.Fatalf("%d hosts, want 1010", len(all))
	}
	var at []int
	seen := map[*podHost]bool{}
	for i, h := range all {
		if seen[h] {
			t.Fatalf("host %s twice", h.name)
		}
		seen[h] = true
		if strings.HasPrefix(h.name, "ps") {
			at = append(at, i)
		}
	}
	if len(at) != 10 {
		t.Fatalf("%d small hosts, want 10", len(at))
	}
	for i := 1; i < len(at); i++ {
		if gap := at[i] - at[i-1]; gap < 100 || gap > 102 {
			t.Errorf("small hosts at %v: gap %d, want 101±1", at, gap)
		}
	}
	// Each pool keeps its own order.
	for i, j := 0, 0; i < len(all); i++ {
		if strings.HasPrefix(all[i].name, "pl") {
			if all[i] != large[j] {
				t.Fatalf("large host %d is %s, want %s", j, all[i].name, large[j].name)
			}
			j++
		}
	}
}

// TestBeatP99Target: the heartbeat target passes only when every measured
// phase answered heartbeats at p99 under 250 ms, and names the slowest.
func TestBeatP99Target(t *testing.T) {
	ph := func(name string, ok int, p99 time.Duration) HeartbeatPhase {
		return HeartbeatPhase{Phase: name, OK: ok, P99: p99}
	}
	for _, tc := range []struct {
		name    string
		phases  []HeartbeatPhase
		pass    bool
		slowest string
		valueMS float64
	}{
		{"all under", []HeartbeatPhase{ph("a", 10, 80*time.Millisecond), ph("b", 10, 249*time.Millisecond)}, true, "b", 249},
		{"one at the limit", []HeartbeatPhase{ph("a", 10, 80*time.Millisecond), ph("b", 10, 250*time.Millisecond)}, false, "b", 250},
		{"one over, first", []HeartbeatPhase{ph("a", 10, 1500*time.Millisecond), ph("b", 10, 20*time.Millisecond)}, false, "a", 1500},
		{"a phase with none answered", []HeartbeatPhase{ph("a", 0, 0), ph("b", 10, 20*time.Millisecond)}, false, "b", 20},
		{"no phase", nil, false, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := beatP99Target(tc.phases)
			if got.Pass != tc.pass {
				t.Errorf("pass %v, want %v (%+v)", got.Pass, tc.pass, got)
			}
			if got.Value != tc.valueMS {
				t.Errorf("value %v ms, want %v", got.Value, tc.valueMS)
			}
			if tc.slowest != "" && !strings.Contains(got.Measured, "slowest phase: "+tc.slowest+";") {
				t.Errorf("measured %q, want the slowest phase %s named", got.Measured, tc.slowest)
			}
		})
	}
}
