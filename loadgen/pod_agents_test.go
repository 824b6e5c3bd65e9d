package loadgen

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// TestAgentsSendWhatIsDueBeforeStop: when the bench stops its agents, every
// heartbeat already due still goes out, however far behind the generator
// is, and none due later does. Until 5bb00f7 the ones still waiting for a
// worker were counted as skipped, which made a backlog at the end of the
// last phase look like heartbeats the broker never handled (BENCHMARKS.md,
// bench pod). The stand-in broker answers in 20 ms and one worker sends,
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
